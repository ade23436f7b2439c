-- When an order's codes first left the service in plain text (the buyer's read of a PAID
-- order, or an operator's read with codes). A refund voids revealed codes instead of
-- returning them to the pool, because the buyer may keep working copies. NULL: never shown.
-- Orders paid before this column existed read as never shown: their codes may have been
-- seen, so refund those with "void": true when in doubt.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS revealed_at DATETIME(6) NULL AFTER ended_at;
