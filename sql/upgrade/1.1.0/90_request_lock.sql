-- 1.1.0: deid.request_lock, the rows whose locks serialize concurrent requests of one source or
-- one release name (sql/00_catalog.sql, python_udfs/deid/locks.py); 1.0.0 serialized on
-- advisory locks, whose keys any login may take. Its comment and privileges (none) are re-run
-- from sql/00_catalog.sql after the fragments.
CREATE TABLE IF NOT EXISTS deid.request_lock (
    kind   text NOT NULL CHECK (kind IN ('source', 'release_name')),
    key    text NOT NULL,
    taken  bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (kind, key)
);
