-- A code is unique across the whole pool (every product), not only within its product: a code
-- imported into two products would be sold twice.
--
-- pool_hash is code_hash, computed by the server for every row, whoever writes it (an instance
-- of the previous version during a rolling upgrade included), and uk_pool_code makes it unique.
-- The only rows left out (pool_hash NULL, which a unique key allows any number of times) are
-- the codes that already sat in several products before this migration: of each such code the
-- oldest row stays the code's row in the pool and the later ones are marked pool_duplicate.
-- Nothing is deleted or voided here (a sold duplicate belongs to an order; voiding an unsold
-- one would need a flow row and a gate change): an operator lists them with
--   SELECT id, product_id, status, order_no FROM card_stock WHERE pool_duplicate;
-- and refunds or takes them out through the service.
--
-- Re-runnable: a duplicate written between the UPDATE and the unique key makes the last ALTER
-- fail; the next Migrate runs the file again and marks it.
ALTER TABLE card_stock ADD COLUMN IF NOT EXISTS pool_duplicate BOOL NOT NULL DEFAULT FALSE;
--bun:split

UPDATE card_stock c
    JOIN (SELECT code_hash, MIN(id) AS first_id FROM card_stock GROUP BY code_hash HAVING COUNT(*) > 1) d
    ON c.code_hash = d.code_hash AND c.id > d.first_id
SET c.pool_duplicate = TRUE;
--bun:split

ALTER TABLE card_stock ADD COLUMN IF NOT EXISTS pool_hash BINARY(32) AS (IF(pool_duplicate, NULL, code_hash)) STORED;
--bun:split

ALTER TABLE card_stock ADD UNIQUE KEY IF NOT EXISTS uk_pool_code (pool_hash);
--bun:split

-- The additional data a row's code_cipher was sealed with (see mysqlstore.Keyring): 1 = the
-- product id (rows written before this migration, or by the previous version during a rolling
-- upgrade: the default keeps them readable), 2 = the product id and code_hash.
ALTER TABLE card_stock ADD COLUMN IF NOT EXISTS aad_version TINYINT NOT NULL DEFAULT 1;
