-- The coupon an order carries and what it took off: amount = unit_price × qty − discount,
-- fixed when the order is placed. coupon is '' for an order without one (every order stored
-- before coupons existed). No index: the only query by coupon (the coupon counts a
-- reconciliation or a gate rebuild reads) reads one product's orders, as the holding counts do.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS coupon VARCHAR(32) NOT NULL DEFAULT '' AFTER amount;
--bun:split
ALTER TABLE orders ADD COLUMN IF NOT EXISTS discount BIGINT NOT NULL DEFAULT 0 AFTER coupon;
