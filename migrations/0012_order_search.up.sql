-- The operators' order search (OrderRepo.Search) and an order's delivery status
-- (Outbox.ByKey). A search lists orders newest first, (created_at, order_no) descending, and
-- pages with the last order's (created_at, order_no); InnoDB appends the primary key order_no
-- to every secondary index, so an index ending in created_at walked backwards gives exactly
-- that order with no sort:
--   idx_buyer_created (buyer_id, created_at): a buyer's orders;
--   idx_product_status (product_id, status, created_at): a product's orders in one status
--     (and, by its prefix, the totals and holdings it served before); replaced in one statement,
--     so no moment lacks it;
--   idx_created (created_at): a time window alone, or no filter at all.
-- idx_key (msg_key, id) on the outbox: an order's messages (its delivery to the broker and to
-- the storefront's webhook), where the outbox holds every message of every order.
-- Each is one more index every insert writes; a search by status alone walks idx_created.
ALTER TABLE orders ADD KEY IF NOT EXISTS idx_buyer_created (buyer_id, created_at);
--bun:split

ALTER TABLE orders DROP KEY IF EXISTS idx_product_status, ADD KEY idx_product_status (product_id, status, created_at);
--bun:split

ALTER TABLE orders ADD KEY IF NOT EXISTS idx_created (created_at);
--bun:split

ALTER TABLE outbox ADD KEY IF NOT EXISTS idx_key (msg_key, id);
