-- Outbox retries with a backoff: a failed message is due again at retry_at, not on the next
-- relay run. idx_due serves Pending (sent_at IS NULL AND retry_at <= now ORDER BY retry_at, id)
-- as one index range, however many messages wait for a later retry, and Backlog (sent_at IS
-- NULL) by its prefix, so idx_unsent goes.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS retry_at DATETIME(6) NULL AFTER attempts;
--bun:split

UPDATE outbox SET retry_at = created_at WHERE retry_at IS NULL;
--bun:split

ALTER TABLE outbox MODIFY COLUMN retry_at DATETIME(6) NOT NULL;
--bun:split

ALTER TABLE outbox ADD KEY IF NOT EXISTS idx_due (sent_at, retry_at, id);
--bun:split

ALTER TABLE outbox DROP KEY IF EXISTS idx_unsent;
