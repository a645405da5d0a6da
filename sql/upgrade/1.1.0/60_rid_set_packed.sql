-- 1.1.0: deid.rid_set's numeric arrays become packed bytea (sql/00_catalog.sql): group_ids
-- int[] -> int4 big-endian per entry, rid_counts int[] -> int4 big-endian per entry, rids
-- bigint[] -> int8 big-endian per RID, each back to back in the array's order (the bytes of
-- int4send / int8send of each element); value_list stays text[]. Existing rows are converted
-- in place: deid.rid_sets shows the same rows as before. The view and its helper depend on
-- the old column types: they are dropped first and re-created for the new ones (the update
-- re-creates the helper from sql/00_catalog.sql afterwards, and re-runs its grants).
DROP VIEW IF EXISTS deid.rid_sets;
DROP FUNCTION IF EXISTS deid._rid_set_entries(int[], text[], int[], bigint[]);

DO $packed$
BEGIN
    IF (SELECT atttypid FROM pg_catalog.pg_attribute WHERE attrelid = 'deid.rid_set'::regclass
         AND attname = 'rids' AND NOT attisdropped) = 'bigint[]'::regtype THEN
        -- ALTER COLUMN ... TYPE ... USING takes no subquery: two helpers, gone at the end
        CREATE FUNCTION deid._rid_set_pack4(a int[]) RETURNS bytea
        LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS
        $fn$ SELECT coalesce(string_agg(int4send(x), ''::bytea ORDER BY o), ''::bytea)
               FROM unnest(a) WITH ORDINALITY AS u(x, o) $fn$;
        CREATE FUNCTION deid._rid_set_pack8(a bigint[]) RETURNS bytea
        LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS
        $fn$ SELECT coalesce(string_agg(int8send(x), ''::bytea ORDER BY o), ''::bytea)
               FROM unnest(a) WITH ORDINALITY AS u(x, o) $fn$;
        -- 1.0.0's CHECK compares the arrays' cardinalities; the new ones follow below
        ALTER TABLE deid.rid_set DROP CONSTRAINT IF EXISTS rid_set_check;
        IF EXISTS (SELECT 1 FROM deid.rid_set WHERE array_position(group_ids, NULL) IS NOT NULL
                      OR array_position(rid_counts, NULL) IS NOT NULL
                      OR array_position(rids, NULL) IS NOT NULL) THEN
            RAISE EXCEPTION 'deid.rid_set holds NULL group ids, counts or RIDs'
                USING ERRCODE = 'data_corrupted',
                      HINT = 'deid never writes them: restore deid.rid_set from a backup, then update.';
        END IF;
        ALTER TABLE deid.rid_set
            ALTER group_ids TYPE bytea USING deid._rid_set_pack4(group_ids),
            ALTER rid_counts TYPE bytea USING deid._rid_set_pack4(rid_counts),
            ALTER rids TYPE bytea USING deid._rid_set_pack8(rids);
        DROP FUNCTION deid._rid_set_pack4(int[]);
        DROP FUNCTION deid._rid_set_pack8(bigint[]);
    END IF;
END
$packed$;

ALTER TABLE deid.rid_set DROP CONSTRAINT IF EXISTS rid_set_entries_check,
    DROP CONSTRAINT IF EXISTS rid_set_rids_check;
ALTER TABLE deid.rid_set
    ADD CONSTRAINT rid_set_entries_check CHECK (length(group_ids) = 4 * cardinality(value_list)
                                                AND length(rid_counts) = 4 * cardinality(value_list)),
    ADD CONSTRAINT rid_set_rids_check CHECK (length(rids) % 8 = 0);

-- A column's new type resets its storage: lz4 where the server has it, else uncompressed
-- (as 20_rid_set_storage.sql; never pglz). Idempotent.
DO $storage$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_settings WHERE name = 'default_toast_compression'
                                                       AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE deid.rid_set
            ALTER group_ids SET STORAGE EXTENDED, ALTER group_ids SET COMPRESSION lz4,
            ALTER value_list SET STORAGE EXTENDED, ALTER value_list SET COMPRESSION lz4,
            ALTER rid_counts SET STORAGE EXTENDED, ALTER rid_counts SET COMPRESSION lz4,
            ALTER rids SET STORAGE EXTENDED, ALTER rids SET COMPRESSION lz4;
    ELSE
        ALTER TABLE deid.rid_set ALTER group_ids SET STORAGE EXTERNAL,
            ALTER value_list SET STORAGE EXTERNAL, ALTER rid_counts SET STORAGE EXTERNAL,
            ALTER rids SET STORAGE EXTERNAL;
    END IF;
END $storage$;

-- The helper and the view for the packed columns, as in sql/00_catalog.sql (the helper's body
-- is re-created from there after the fragments).
CREATE OR REPLACE FUNCTION deid._rid_set_entries(group_ids bytea, value_list text[], rid_counts bytea,
                                                 all_rids bytea)
RETURNS TABLE (group_id int, value text, rids bigint[])
LANGUAGE plpython3u IMMUTABLE STRICT AS $fn$
import struct
n = len(value_list)
if len(group_ids) != 4 * n or len(rid_counts) != 4 * n or len(all_rids) % 8:
    plpy.error("deid.rid_set holds a malformed chunk", sqlstate="XX001")
sizes = struct.unpack(f">{n}i", rid_counts)
rids = list(struct.unpack(f">{len(all_rids) // 8}q", all_rids))
if sum(sizes) != len(rids) or min(sizes, default=0) < 0:
    plpy.error("deid.rid_set holds a malformed chunk", sqlstate="XX001")
stop, out = 0, []
for group, value, size in zip(struct.unpack(f">{n}i", group_ids), value_list, sizes):
    out.append((group, value, rids[stop:stop + size]))
    stop += size
return out
$fn$;
CREATE VIEW deid.rid_sets AS
SELECT r.release_id, e.group_id, r.attribute, e.value, e.rids
  FROM deid.rid_set r
 CROSS JOIN LATERAL deid._rid_set_entries(r.group_ids, r.value_list, r.rid_counts, r.rids) e;
