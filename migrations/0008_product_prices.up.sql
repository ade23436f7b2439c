-- Quantity prices and the public catalogue's stock display of a product.
--
-- price_tiers holds the tiers as a JSON array of {"min_qty":N,"unit_price":M} by increasing
-- min_qty ('[]' when none). The tiers are read and written only with their product, whole,
-- never queried one by one, and are at most 10: one column keeps a product one row, read
-- without a join and changed by one UPDATE. VARCHAR rather than JSON/TEXT so that a literal
-- default works on every supported MySQL and MariaDB.
-- stock_display is how the public catalogue shows the stock: 'exact' (the number) or
-- 'level' (plenty / few / none).
ALTER TABLE products ADD COLUMN IF NOT EXISTS price_tiers VARCHAR(1024) NOT NULL DEFAULT '[]' AFTER max_per_order;
--bun:split
ALTER TABLE products ADD COLUMN IF NOT EXISTS stock_display ENUM('exact','level') NOT NULL DEFAULT 'exact' AFTER price_tiers;
