-- The notification log's retention and its aggregates of refused notifications.
--
-- count: how many notifications a row stands for. A verified notification has a row of its own
-- (1). Notifications refused before verification (a bad signature, an unparsable body) are
-- aggregated: one row per provider, sender address (remote) and window, refused_window being
-- the window's start and NULL for verified rows. uk_refused (provider, remote, refused_window)
-- makes that one row however many instances add to it at once (INSERT … ON DUPLICATE KEY
-- UPDATE count = count + …); NULL never collides, so verified rows are never folded together.
-- Existing rows, verified or not, stand for one notification each.
-- idx_verified_received (verified, received_at) serves the retention job, which deletes
-- verified rows and refused aggregates past their own ages in bounded batches;
-- idx_verified_id (verified, id) serves the operators' list of verified (or refused) rows
-- only, newest first.
ALTER TABLE payment_notifications
    ADD COLUMN IF NOT EXISTS count          BIGINT      NOT NULL DEFAULT 1,
    ADD COLUMN IF NOT EXISTS refused_window DATETIME(6) NULL DEFAULT NULL;
--bun:split

ALTER TABLE payment_notifications ADD UNIQUE KEY IF NOT EXISTS uk_refused (provider, remote, refused_window);
--bun:split

ALTER TABLE payment_notifications ADD KEY IF NOT EXISTS idx_verified_received (verified, received_at);
--bun:split

ALTER TABLE payment_notifications ADD KEY IF NOT EXISTS idx_verified_id (verified, id);
