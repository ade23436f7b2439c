-- A row written without retry_at is due at once: an instance of the previous version (during a
-- rolling upgrade) or an operator's INSERT does not know the column, and 0002 left it NOT NULL
-- without a default, which refused such rows.
ALTER TABLE outbox MODIFY COLUMN retry_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00';
