-- Multi-use codes: a product's code_uses says how many times each of its codes may be sold.
--
-- code_uses: 1 = one sale per code (every product stored before this migration), N >= 2 = up
-- to N sales, 0 = a shared key (unlimited: every import of the key adds a batch of uses, see
-- docs/DESIGN.md "Multi-use codes"). It is set when the product is created and never changes.
--
-- A code of N uses is N rows of card_stock, one per use, numbered by use_no (0, 1, ...): each
-- row is sold to one order, refunded, recycled or voided exactly as a single-use code's row
-- is, so every count of rows (the gate, the flow, the reconcile) counts uses. The code's row
-- of use 0 holds its place in uk_pool_code (a code stays unique across the pool); the other
-- uses are kept unique within their product by uk_product_code.
ALTER TABLE products ADD COLUMN IF NOT EXISTS code_uses INT NOT NULL DEFAULT 1 AFTER max_per_order;
--bun:split

ALTER TABLE card_stock ADD COLUMN IF NOT EXISTS use_no INT NOT NULL DEFAULT 0 AFTER code_hash;
--bun:split

ALTER TABLE card_stock DROP KEY IF EXISTS uk_product_code, ADD UNIQUE KEY uk_product_code (product_id, code_hash, use_no);
--bun:split

ALTER TABLE card_stock MODIFY COLUMN IF EXISTS pool_hash BINARY(32) AS (IF(pool_duplicate OR use_no > 0, NULL, code_hash)) STORED;
--bun:split

-- The allocation takes the lowest use first (every code's first use before any code's second),
-- so a multi-use product's uses stay spread over as many codes as possible and an order of
-- several distinct codes finds them for as long as the pool can.
ALTER TABLE card_stock DROP KEY IF EXISTS idx_alloc, ADD KEY idx_alloc (product_id, status, use_no, id);
