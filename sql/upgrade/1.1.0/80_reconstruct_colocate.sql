-- deid 1.1.0, disassociation: deid.reconstruct takes `colocate` (a reconstruction
-- that follows the release's utility policy), and deid.reconstruction records it. The old
-- signatures go; the update re-creates the functions and their grants from sql/*.sql.
DROP FUNCTION IF EXISTS deid.reconstruct(text, text, integer);
DROP FUNCTION IF EXISTS deid._reconstruct(text, text, integer, name);
ALTER TABLE deid.reconstruction ADD COLUMN IF NOT EXISTS colocate double precision NOT NULL DEFAULT 0;
