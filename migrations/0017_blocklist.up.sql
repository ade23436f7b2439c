-- The blocklists: IP addresses and ranges, e-mail addresses and e-mail domains that may not
-- place orders. Each instance keeps a compiled copy in memory (read again every few seconds),
-- so the table is read whole and rarely; it is small (operators add entries by hand).
-- value is the entry's normal form (domain.NormaliseBlockValue: a masked CIDR prefix or one
-- address, a lower-case address or domain); uk_kind_value refuses a second entry of one kind
-- and value, whichever instance adds it. added_by is the operator's name, kept after the
-- operator is removed, as in the audit log.
CREATE TABLE IF NOT EXISTS blocklist (
    id       BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    kind     VARCHAR(16)     NOT NULL,
    value    VARCHAR(254)    NOT NULL,
    note     VARCHAR(500)    NOT NULL DEFAULT '',
    added_by VARCHAR(64)     NOT NULL DEFAULT '',
    added_at DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_kind_value (kind, value)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
