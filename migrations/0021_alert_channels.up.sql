-- The alert channels: where alerts are pushed (a Telegram chat, a WeCom group robot, an
-- e-mail address, a signed webhook), as admins configure them in the console.

-- One channel: its unique name, type and target (chat id, address or URL; empty for WeCom);
-- its secret (bot token, robot key, webhook signing secret) sealed with the code keyring's
-- active key (AES-256-GCM, the channel's name as additional data; secret_kid names the key,
-- so a rotation keeps old secrets readable), empty when the type has none; the alert kinds it
-- takes (a JSON array of strings, empty: every kind) and whether stock events go; enabled;
-- and the outcome of its newest push. Its pushes wait in the outbox (topic alert.push).
CREATE TABLE IF NOT EXISTS alert_channels (
    id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    name          VARCHAR(64)     NOT NULL,
    type          VARCHAR(16)     NOT NULL,
    target        VARCHAR(512)    NOT NULL DEFAULT '',
    secret_sealed VARBINARY(512)  NULL,
    secret_kid    VARCHAR(32)     NOT NULL DEFAULT '',
    kinds         VARCHAR(2200)   NOT NULL DEFAULT '[]',
    stock         TINYINT         NOT NULL DEFAULT 0,
    enabled       TINYINT         NOT NULL DEFAULT 0,
    updated_at    DATETIME(6)     NOT NULL,
    last_ok_at    DATETIME(6)     NULL,
    last_error_at DATETIME(6)     NULL,
    last_error    VARCHAR(500)    NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    UNIQUE KEY uk_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
