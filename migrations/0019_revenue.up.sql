-- The dashboard's money and the orders' export (SalesReport).
--
-- Revenue: revenue sums orders by paid time, refunds sum
-- REFUNDED orders by refund (end) time, grouped by time bucket, product and provider in one
-- aggregate query each. Both indexes cover their query (InnoDB appends the primary key
-- order_no, which finds the order's payments), so a month's sums read index ranges only:
--   idx_paid (paid_at, product_id, amount): the orders paid in a time range;
--   idx_refunded (status, ended_at, product_id, amount): the orders refunded in a time range.
-- An export pages oldest first by (created_at, order_no): idx_created serves it without a
-- filter, and idx_product_created (product_id, created_at) one product's orders, so that each
-- page is an index range after the last page's key, never a sort of the product's orders.
ALTER TABLE orders ADD KEY IF NOT EXISTS idx_paid (paid_at, product_id, amount);
--bun:split

ALTER TABLE orders ADD KEY IF NOT EXISTS idx_refunded (status, ended_at, product_id, amount);
--bun:split

ALTER TABLE orders ADD KEY IF NOT EXISTS idx_product_created (product_id, created_at);
