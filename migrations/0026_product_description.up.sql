-- A product's description: plain text shown to buyers on the storefront and in the public
-- catalogue, never HTML (every page escapes it). The domain keeps it trimmed, at most 2000
-- characters, with "\n" between lines and no other control character but tab; '' for every
-- product stored before it existed, which then shows none.
ALTER TABLE products ADD COLUMN IF NOT EXISTS description VARCHAR(2000) NOT NULL DEFAULT '' AFTER name;
