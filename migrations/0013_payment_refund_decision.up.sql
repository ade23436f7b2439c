-- The operator's decision about an order's codes, stored with its payment's refund when the
-- refund is sent to the provider (PAID → REFUNDING): a refund the provider finishes later is
-- completed by whoever learns of it first (the provider's notification, the operator's next
-- refund), and each applies this decision instead of the defaults. refund_void keeps the codes
-- out of the pool, refund_recycle returns revealed ones (never both); refund_note is the
-- operator's reason (refund_reason stays the provider's words on a refusal). Refunds sent
-- before this column existed read as "no choice": revealed codes voided, others recycled.
ALTER TABLE payments ADD COLUMN IF NOT EXISTS refund_void BOOL NOT NULL DEFAULT FALSE AFTER refund_reason;
--bun:split

ALTER TABLE payments ADD COLUMN IF NOT EXISTS refund_recycle BOOL NOT NULL DEFAULT FALSE AFTER refund_void;
--bun:split

ALTER TABLE payments ADD COLUMN IF NOT EXISTS refund_note VARCHAR(255) NOT NULL DEFAULT '' AFTER refund_recycle;
