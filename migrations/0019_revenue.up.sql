-- The dashboard's money (SalesReport.Revenue): revenue sums orders by paid time, refunds sum
-- REFUNDED orders by refund (end) time, grouped by time bucket, product and provider in one
-- aggregate query each. Both indexes cover their query (InnoDB appends the primary key
-- order_no, which finds the order's payments), so a month's sums read index ranges only:
--   idx_paid (paid_at, product_id, amount): the orders paid in a time range;
--   idx_refunded (status, ended_at, product_id, amount): the orders refunded in a time range.
ALTER TABLE orders ADD KEY IF NOT EXISTS idx_paid (paid_at, product_id, amount);
--bun:split

ALTER TABLE orders ADD KEY IF NOT EXISTS idx_refunded (status, ended_at, product_id, amount);
