-- 1.1.0: nothing of deid's catalog stays keyed by an OID that no longer names its object.
-- deid 1.0.0 removes these as DDL happens (sql/15_ddl.sql), but event triggers do not fire in
-- single-user mode or with session_replication_role = replica, and databases that were
-- classified before the triggers existed still hold such rows (README, "What happens on DDL").
-- A dead OID can be handed to another relation by a restore, so it is never kept.

-- Roles of dropped tables and of dropped columns.
DELETE FROM deid.column_role r
 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = r.relation::oid AND a.attname = r.column_name
                      AND a.attnum > 0 AND NOT a.attisdropped);

-- Policies on dropped tables, or for dropped roles.
DELETE FROM deid.policy p
 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = p.relation::oid)
    OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles g WHERE g.oid = p.grantee::oid);

-- Releases of dropped sources stay (they are snapshots); their source becomes NULL, the one
-- change the append-only trigger allows (source_name keeps the name).
UPDATE deid.release r SET source = NULL
 WHERE r.source IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = r.source::oid);
