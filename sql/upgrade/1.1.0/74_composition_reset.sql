-- 1.1.0: deid.composition_reset, the composition rule's history resets (sql/00_catalog.sql,
-- python_udfs/deid/log/composition.py). Grants, comment and pg_extension_config_dump are
-- re-run from sql/00_catalog.sql after the fragments.
CREATE TABLE IF NOT EXISTS deid.composition_reset (
    source         oid,
    after_release  bigint NOT NULL,
    reset_by       name NOT NULL DEFAULT session_user,
    reset_at       timestamptz NOT NULL DEFAULT now()
);
