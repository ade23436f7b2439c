-- Guest orders of the storefront (issue 31): the buyer's e-mail address (normalised: trimmed,
-- the domain lower-cased; at most 254 characters), the buyer's language ('zh-CN' or 'en') and
-- SHA-256 of the order's access secret (the secret itself is never stored: it is derived from
-- a key and the order number, and checked against this hash). NULL for API orders, placed
-- with buyer tokens. No index: a guest order is only ever read by its number.
ALTER TABLE orders
    ADD COLUMN IF NOT EXISTS buyer_email VARCHAR(254) NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS buyer_lang  VARCHAR(8)   NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS access_hash BINARY(32)   NULL DEFAULT NULL;
