-- 1.1.0: deid.release_selection, the selected row ids of each release, for the overlap control
-- (sql/00_catalog.sql, python_udfs/deid/overlap.py). Its grants, comment, storage and
-- pg_extension_config_dump are re-run from sql/00_catalog.sql after the fragments.
CREATE TABLE IF NOT EXISTS deid.release_selection (
    release_id  bigint PRIMARY KEY,
    row_id      name   NOT NULL,
    n           bigint NOT NULL CHECK (n >= 0),
    rids        bytea  NOT NULL,
    CONSTRAINT release_selection_rids_check CHECK (length(rids) = 8 * n)
);

-- Releases logged before the update, rebuilt from what they stored (committed, replaced and
-- dropped alike, as the control counts them): an anatomy release's RID sets (001 Theorem 3:
-- every selected row once per sensitive attribute; one attribute suffices, packed since
-- 60_rid_set_packed.sql), a condensation or disassociation release's membership
-- (deid.cluster_member since 50_one_membership_catalog.sql). Its row-id column: the request's
-- options.record (disassociation) or options.row_id, else the source's single-column primary
-- key now. Not rebuilt, a documented gap: generalization releases (1.0.0 stored no row ids),
-- releases whose source is gone (source IS NULL) or has no such key.
INSERT INTO deid.release_selection (release_id, row_id, n, rids)
SELECT r.release_id, c.row_id, count(*), string_agg(int8send(x.id), ''::bytea ORDER BY x.id)
  FROM deid.release r
 CROSS JOIN LATERAL (
        SELECT coalesce(CASE WHEN r.method = 'disassociation' THEN r.parameters->'options'->>'record' END,
                        r.parameters->'options'->>'row_id',
                        (SELECT a.attname::text FROM pg_catalog.pg_index i
                           JOIN pg_catalog.pg_attribute a
                             ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                          WHERE i.indrelid = r.source AND i.indisprimary AND i.indnatts = 1))
               AS row_id) c
 CROSS JOIN LATERAL (
        SELECT DISTINCT u.id FROM (
            SELECT ('x' || encode(substring(s.rids FROM 8 * g + 1 FOR 8), 'hex'))::bit(64)::bigint
              FROM deid.rid_set s, generate_series(0, length(s.rids) / 8 - 1) g
             WHERE s.release_id = r.release_id
               AND s.attribute = (SELECT min(t.attribute) FROM deid.rid_set t
                                   WHERE t.release_id = r.release_id)
            UNION ALL
            SELECT unnest(m.rids) FROM deid.cluster_member m WHERE m.release_id = r.release_id
        ) u(id)) x
 WHERE r.source IS NOT NULL AND r.method <> 'generalization' AND c.row_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM deid.release_selection e WHERE e.release_id = r.release_id)
 GROUP BY r.release_id, c.row_id;
