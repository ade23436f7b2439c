-- The coupons operators offer. kind: 1 percent (value 1-99), 2 fixed (value in minor units).
-- valid_from/valid_until NULL: no bound. uses_per_product / uses_per_buyer 0: no limit; both
-- count per product, in that product's stock gate (docs/COUPONS.md says why). A coupon is never
-- deleted, only disabled: orders name it.
CREATE TABLE IF NOT EXISTS coupons (
    code             VARCHAR(32) NOT NULL,
    kind             TINYINT     NOT NULL,
    value            BIGINT      NOT NULL,
    min_amount       BIGINT      NOT NULL DEFAULT 0,
    valid_from       DATETIME(6) NULL,
    valid_until      DATETIME(6) NULL,
    uses_per_product BIGINT      NOT NULL DEFAULT 0,
    uses_per_buyer   BIGINT      NOT NULL DEFAULT 0,
    disabled         TINYINT(1)  NOT NULL DEFAULT 0,
    created_at       DATETIME(6) NOT NULL,
    PRIMARY KEY (code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split
-- The products each coupon applies to.
CREATE TABLE IF NOT EXISTS coupon_products (
    code       VARCHAR(32) NOT NULL,
    product_id BIGINT      NOT NULL,
    PRIMARY KEY (code, product_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
