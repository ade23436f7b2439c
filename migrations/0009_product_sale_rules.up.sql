-- A product's sale window, per-buyer holding limit and stock events.
--
-- starts_at / ends_at bound the sale (NULL: no bound), millisecond precision like the gate's
-- clock that judges them. buyer_limit is the most units one buyer may hold in PENDING and
-- PAID orders of the product (0: none); refund_releases_limit says whether a refund gives them
-- back. low_stock_threshold is where product.low_stock fires (0: never); stock_state is the
-- state the last stock event left ('' before the first), changed by a conditional UPDATE so
-- that exactly one instance records each crossing.
ALTER TABLE products ADD COLUMN IF NOT EXISTS starts_at DATETIME(3) NULL DEFAULT NULL AFTER stock_display;
--bun:split
ALTER TABLE products ADD COLUMN IF NOT EXISTS ends_at DATETIME(3) NULL DEFAULT NULL AFTER starts_at;
--bun:split
ALTER TABLE products ADD COLUMN IF NOT EXISTS buyer_limit INT NOT NULL DEFAULT 0 AFTER ends_at;
--bun:split
ALTER TABLE products ADD COLUMN IF NOT EXISTS refund_releases_limit BOOLEAN NOT NULL DEFAULT FALSE AFTER buyer_limit;
--bun:split
ALTER TABLE products ADD COLUMN IF NOT EXISTS low_stock_threshold INT NOT NULL DEFAULT 0 AFTER refund_releases_limit;
--bun:split
ALTER TABLE products ADD COLUMN IF NOT EXISTS stock_state VARCHAR(16) NOT NULL DEFAULT '' AFTER low_stock_threshold;
