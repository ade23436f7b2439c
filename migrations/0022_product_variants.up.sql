-- The fewest units one order of a product may buy, and variant groups.
--
-- min_per_order is between 1 and max_per_order (the domain checks it); 1 for every product
-- stored before it existed, which is what they allowed.
-- variant_group names the group a product is shown in ("Steam card"), variant_label its label
-- there ("50"); both '' for a product on its own. A group is only a label for the catalogue:
-- each variant keeps its own pool, gate and rules, so no query joins or counts by group.
ALTER TABLE products ADD COLUMN IF NOT EXISTS min_per_order INT NOT NULL DEFAULT 1 AFTER price;
--bun:split
ALTER TABLE products ADD COLUMN IF NOT EXISTS variant_group VARCHAR(64) NOT NULL DEFAULT '' AFTER max_per_order;
--bun:split
ALTER TABLE products ADD COLUMN IF NOT EXISTS variant_label VARCHAR(64) NOT NULL DEFAULT '' AFTER variant_group;
