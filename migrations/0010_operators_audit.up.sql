-- Named operators of the admin API and the console, and the audit log of their writes.

-- One operator: its role, and the SHA-256 of its token's secret part (never the token itself,
-- so a copy of the database lets nobody in). rotated_at is when the token was last replaced,
-- created_at at first. The name is the primary key: it is what a token names and what the
-- audit log records, and the key refuses a second operator of the name however creates race.
CREATE TABLE IF NOT EXISTS operators (
    name       VARCHAR(64)   NOT NULL,
    role       ENUM('viewer','operator','admin') NOT NULL,
    token_hash VARBINARY(32) NOT NULL,
    created_at DATETIME(6)   NOT NULL,
    rotated_at DATETIME(6)   NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--bun:split

-- Every write through the admin API, the CLI or the console: who with what role, what to
-- what, with which parameters (JSON, secrets and codes left out), how it ended, when and from
-- where. Append-only: the service never changes or deletes a row; id is the order of appends
-- and pages the log (id < ? ORDER BY id DESC). operator and role are plain text, not a key of
-- operators: an entry outlives its operator, and the shared admin token has no row. The texts
-- come from requests: the store clips each to its column rather than lose the entry.
-- idx_operator (operator, id) and idx_action (action, id) serve one operator's or one action's
-- entries, newest first, as one index range; idx_at serves a time window and pruning by age.
CREATE TABLE IF NOT EXISTS audit_log (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    at          DATETIME(6)     NOT NULL,
    operator    VARCHAR(64)     NOT NULL,
    role        VARCHAR(16)     NOT NULL DEFAULT '',
    action      VARCHAR(64)     NOT NULL,
    target      VARCHAR(128)    NOT NULL DEFAULT '',
    params      VARCHAR(4096)   NOT NULL DEFAULT '',
    result      VARCHAR(128)    NOT NULL DEFAULT '',
    client_addr VARCHAR(64)     NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    KEY idx_operator (operator, id),
    KEY idx_action (action, id),
    KEY idx_at (at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
