-- Refunds at the provider. A PAID payment moves to REFUNDING when the operator's refund is
-- sent to its provider, then REFUNDED, or REFUND_FAILED when the provider refused; each move is
-- the same conditional UPDATE as the others, so of two racing refunds one sends it. refund_no
-- is cardshop's number of the refund, the provider's idempotency reference: every attempt sends
-- the same one, so a retry after a timeout never pays out twice. refund_ref is the provider's
-- id of the refund; refund_reason its words on a refusal.
ALTER TABLE payments MODIFY COLUMN status
    ENUM('OPEN','PAID','FAILED','EXPIRED','REFUNDING','REFUNDED','REFUND_FAILED') NOT NULL;
--bun:split

ALTER TABLE payments ADD COLUMN IF NOT EXISTS refund_no VARCHAR(64) NOT NULL DEFAULT '' AFTER qr_code;
--bun:split

ALTER TABLE payments ADD COLUMN IF NOT EXISTS refund_ref VARCHAR(255) NOT NULL DEFAULT '' AFTER refund_no;
--bun:split

ALTER TABLE payments ADD COLUMN IF NOT EXISTS refund_reason VARCHAR(255) NOT NULL DEFAULT '' AFTER refund_ref;
