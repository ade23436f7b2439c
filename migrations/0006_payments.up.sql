-- Payments at providers and the log of their notifications.

-- One order's payment at one provider: the amount (in the currency's minor units, as
-- orders.amount) and the currency are the order's, fixed at creation, and every notification
-- must match them exactly. Every status change is a conditional UPDATE ... WHERE order_no=?
-- AND provider=? AND status=?, so of racing notifications of one payment exactly one applies.
-- PRIMARY KEY (order_no, provider): at most one payment per order and provider, so a retried
-- create never opens a second payment the buyer could pay as well; it also serves an order's
-- payments (its prefix). idx_provider_ref serves the look-up by the provider's own id of the
-- payment; it is not unique, as provider_ref is empty until the provider has answered.
CREATE TABLE IF NOT EXISTS payments (
    order_no     VARCHAR(32)   NOT NULL,
    provider     VARCHAR(32)   NOT NULL,
    provider_ref VARCHAR(255)  NOT NULL DEFAULT '',
    amount       BIGINT        NOT NULL,
    currency     CHAR(3)       NOT NULL,
    status       ENUM('OPEN','PAID','FAILED','EXPIRED') NOT NULL,
    pay_url      VARCHAR(2048) NOT NULL DEFAULT '',
    qr_code      TEXT          NOT NULL,
    created_at   DATETIME(6)   NOT NULL,
    updated_at   DATETIME(6)   NOT NULL,
    PRIMARY KEY (order_no, provider),
    KEY idx_provider_ref (provider, provider_ref)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split

-- Every provider notification as received and judged, verified or not: what an operator reads
-- when a buyer says "I paid". It never holds a secret, a signature or the body (only its
-- size). Append-only; id is the order of arrival. The texts come from outside: the store
-- clips each to its column. order_no is '' when the notification named no order.
-- idx_order (order_no, id) serves one order's notifications, newest first, as one index range;
-- idx_received serves pruning old rows by age.
CREATE TABLE IF NOT EXISTS payment_notifications (
    id           BIGINT       NOT NULL AUTO_INCREMENT,
    provider     VARCHAR(32)  NOT NULL,
    received_at  DATETIME(6)  NOT NULL,
    method       VARCHAR(16)  NOT NULL DEFAULT '',
    remote       VARCHAR(64)  NOT NULL DEFAULT '',
    verified     BOOL         NOT NULL,
    accepted     BOOL         NOT NULL,
    result       VARCHAR(255) NOT NULL DEFAULT '',
    order_no     VARCHAR(64)  NOT NULL DEFAULT '',
    event_id     VARCHAR(255) NOT NULL DEFAULT '',
    provider_ref VARCHAR(255) NOT NULL DEFAULT '',
    outcome      VARCHAR(16)  NOT NULL DEFAULT '',
    amount       BIGINT       NOT NULL DEFAULT 0,
    currency     VARCHAR(8)   NOT NULL DEFAULT '',
    body_bytes   INT          NOT NULL DEFAULT 0,
    PRIMARY KEY (id),
    KEY idx_order (order_no, id),
    KEY idx_received (received_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
