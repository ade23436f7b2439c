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
