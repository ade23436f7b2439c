-- cardshop ledger schema, version 1.
--
-- Every time is DATETIME(6) in UTC (the connection sets time_zone '+00:00'; the application
-- always writes UTC). Text columns use utf8mb4_bin: buyer ids, idempotency keys and order
-- numbers are case-sensitive tokens, so 'Key-A' and 'key-a' must not collide.

-- Products: price in minor units; the frozen flag mirrors the gate's (the gate is what stops
-- reservations; this is the durable copy the gate is rebuilt from).
CREATE TABLE IF NOT EXISTS products (
    id            BIGINT       NOT NULL AUTO_INCREMENT,
    name          VARCHAR(128) NOT NULL,
    price         BIGINT       NOT NULL,
    max_per_order INT          NOT NULL,
    frozen        BOOL         NOT NULL DEFAULT FALSE,
    frozen_reason TEXT         NOT NULL,
    created_at    DATETIME(6)  NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split

-- The card pool: one row per code. The code is stored encrypted (AES-256-GCM, nonce ||
-- ciphertext, additional data = product id) under the key named by key_id; code_hash is an
-- HMAC-SHA256 of the code under a separate key that does not rotate, so a code is unique per
-- product whatever key encrypted it.
-- idx_alloc serves the allocation (product, sellable status, id order) and the counts;
-- idx_order serves an order's codes and the reclaim of a refund.
CREATE TABLE IF NOT EXISTS card_stock (
    id          BIGINT         NOT NULL AUTO_INCREMENT,
    product_id  BIGINT         NOT NULL,
    code_cipher VARBINARY(255) NOT NULL,
    key_id      VARCHAR(32)    NOT NULL,
    code_hash   BINARY(32)     NOT NULL,
    status      ENUM('UNSOLD','SOLD','RECYCLED','VOID') NOT NULL DEFAULT 'UNSOLD',
    order_no    VARCHAR(32)    NULL,
    created_at  DATETIME(6)    NOT NULL,
    updated_at  DATETIME(6)    NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_product_code (product_id, code_hash),
    KEY idx_alloc (product_id, status, id),
    KEY idx_order (order_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split

-- Orders. Every status change is a conditional UPDATE ... WHERE order_no=? AND status=?.
-- idem_key is NULL for an order without a key, so such orders never collide in uk_buyer_idem.
-- idx_expiry serves the sweeper (PENDING orders by expiry); idx_product_status the totals.
CREATE TABLE IF NOT EXISTS orders (
    order_no    VARCHAR(32)  NOT NULL,
    buyer_id    VARCHAR(64)  NOT NULL,
    product_id  BIGINT       NOT NULL,
    qty         INT          NOT NULL,
    unit_price  BIGINT       NOT NULL,
    amount      BIGINT       NOT NULL,
    idem_key    VARCHAR(64)  NULL,
    status      ENUM('PENDING','PAID','CLOSED','FAILED','REFUNDED','UNFULFILLED') NOT NULL,
    reason      TEXT         NOT NULL,
    payment_ref VARCHAR(128) NOT NULL DEFAULT '',
    created_at  DATETIME(6)  NOT NULL,
    expires_at  DATETIME(6)  NOT NULL,
    paid_at     DATETIME(6)  NULL,
    ended_at    DATETIME(6)  NULL,
    updated_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (order_no),
    UNIQUE KEY uk_buyer_idem (buyer_id, idem_key),
    KEY idx_expiry (status, expires_at),
    KEY idx_product_status (product_id, status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split

-- The append-only stock flow. order_no is the flow's reference: the order number, or the
-- import batch id for stock-in. (order_no, change_type) is unique, which makes
-- every flow write idempotent. change_type: 1 reserve, 2 pay, 3 timeout-restore,
-- 4 refund-restore, 5 payment-failed-restore, 6 stock-in, 7 adjust, 8 late-reserve,
-- 9 refund-void, 10 unfulfilled-restore.
CREATE TABLE IF NOT EXISTS stock_flow (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    product_id  BIGINT          NOT NULL,
    order_no    VARCHAR(64)     NOT NULL,
    change_type TINYINT         NOT NULL,
    qty         INT             NOT NULL,
    created_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    KEY idx_product (product_id, created_at),
    UNIQUE KEY uk_ref_type (order_no, change_type)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split

-- The transactional outbox: written in the transaction that causes the side effect, relayed
-- after commit. idx_unsent serves Pending (sent_at IS NULL ORDER BY id) and Backlog.
CREATE TABLE IF NOT EXISTS outbox (
    id         BIGINT       NOT NULL AUTO_INCREMENT,
    topic      VARCHAR(64)  NOT NULL,
    msg_key    VARCHAR(128) NOT NULL DEFAULT '',
    payload    BLOB         NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    sent_at    DATETIME(6)  NULL,
    attempts   INT          NOT NULL DEFAULT 0,
    PRIMARY KEY (id),
    KEY idx_unsent (sent_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
