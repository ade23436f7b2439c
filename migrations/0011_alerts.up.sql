-- The alert log: every alert the service raised, and operators' acknowledgements of them.

-- One alert: its condition (kind, product, order; 0 and '' when the alert names none), the
-- newest raise's message, when it was first and last raised and how many raises it folds
-- together. is_open is 1 while no operator has acknowledged the alert and NULL after:
-- uk_open (kind, product_id, order_no, is_open) lets one open alert exist per condition, so a
-- raise of an open condition becomes INSERT … ON DUPLICATE KEY UPDATE of that row (count + 1)
-- however many instances raise it at once, while acknowledged alerts (NULL never collides)
-- may repeat. Acknowledging is UPDATE … WHERE id = ? AND is_open = 1: of two, one wins.
-- idx_open_id (is_open, id) serves the open list newest first; idx_kind and idx_product one
-- kind's or one product's alerts.
CREATE TABLE IF NOT EXISTS alerts (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    kind       VARCHAR(64)     NOT NULL,
    product_id BIGINT          NOT NULL DEFAULT 0,
    order_no   VARCHAR(64)     NOT NULL DEFAULT '',
    message    VARCHAR(1024)   NOT NULL DEFAULT '',
    raised_at  DATETIME(6)     NOT NULL,
    last_at    DATETIME(6)     NOT NULL,
    count      BIGINT UNSIGNED NOT NULL DEFAULT 1,
    is_open    TINYINT         NULL DEFAULT 1,
    acked_by   VARCHAR(64)     NOT NULL DEFAULT '',
    acked_at   DATETIME(6)     NULL,
    ack_note   VARCHAR(500)    NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    UNIQUE KEY uk_open (kind, product_id, order_no, is_open),
    KEY idx_open_id (is_open, id),
    KEY idx_kind (kind, id),
    KEY idx_product (product_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
