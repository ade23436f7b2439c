-- A disabled operator (issue 32): its token is refused and its console sessions end, but the
-- row stays, so its name is not taken again and the audit log still reads it. NULL: enabled.
ALTER TABLE operators ADD COLUMN IF NOT EXISTS disabled_at DATETIME(6) NULL DEFAULT NULL;
--bun:split

-- Manual confirmations of payments (补单): an operator marks an order paid under the provider's
-- transaction reference. uk_reference (provider, reference) is what makes "one reference pays
-- one order" hold whichever instances race to claim it: the claim is this row's INSERT. The
-- texts are the operator's (note, the admin's override reason) and the provider query's answer.
-- idx_order serves an order's confirmations on its console page.
CREATE TABLE IF NOT EXISTS manual_payments (
    provider     VARCHAR(32)  NOT NULL,
    reference    VARCHAR(128) NOT NULL,
    order_no     VARCHAR(32)  NOT NULL,
    operator     VARCHAR(64)  NOT NULL,
    note         VARCHAR(255) NOT NULL DEFAULT '',
    queried      VARCHAR(255) NOT NULL DEFAULT '',
    override     VARCHAR(255) NOT NULL DEFAULT '',
    confirmed_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (provider, reference),
    KEY idx_order (order_no, confirmed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split

-- The operators' order search by a guest's e-mail (idx_email_created: the guest's orders,
-- newest first, as idx_buyer_created serves a buyer's) and by a provider's reference
-- (payments.idx_ref; manual_payments.idx_reference): an operator has only the reference the
-- buyer's bank statement shows, not the provider, so the look-up is by the reference alone.
ALTER TABLE orders ADD KEY IF NOT EXISTS idx_email_created (buyer_email, created_at);
--bun:split

ALTER TABLE payments ADD KEY IF NOT EXISTS idx_ref (provider_ref);
--bun:split

ALTER TABLE manual_payments ADD KEY IF NOT EXISTS idx_reference (reference);
