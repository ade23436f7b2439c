-- The payment channels configured in the console: one row per provider. fields is a JSON
-- object of the provider's plain settings (a gateway URL, a merchant id); secrets is a JSON
-- object of its keys, sealed with AES-256-GCM by the code keyring's key key_id (nonce ||
-- ciphertext+tag, additional data binding it to the provider), so that a rotation of the
-- keyring leaves old rows readable and a row copied to another provider does not decrypt.
-- version counts the saves: a save updates only the version it read, whichever instance
-- writes. updated_by is the operator's name, kept after the operator is removed.
CREATE TABLE IF NOT EXISTS payment_channels (
    provider   VARCHAR(32)     NOT NULL,
    enabled    TINYINT(1)      NOT NULL,
    fields     MEDIUMTEXT      NOT NULL,
    secrets    MEDIUMBLOB      NOT NULL,
    key_id     VARCHAR(32)     NOT NULL,
    version    BIGINT UNSIGNED NOT NULL,
    updated_at DATETIME(6)     NOT NULL,
    updated_by VARCHAR(64)     NOT NULL DEFAULT '',
    PRIMARY KEY (provider)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
