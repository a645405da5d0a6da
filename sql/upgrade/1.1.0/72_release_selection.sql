-- 1.1.0: deid.release_selection, the selected row ids of each release, for the overlap control
-- (sql/00_catalog.sql, python_udfs/deid/overlap.py). Its grants, comment, storage and
-- pg_extension_config_dump are re-run from sql/00_catalog.sql after the fragments.
--
-- Releases logged before the update get no row: a generalization release of 1.0.0 stored no
-- row ids at all, and the row-id column of an old release is not recorded, so no selection
-- can be rebuilt exactly. The overlap control therefore compares a new release only with
-- releases made since the update (a documented gap; a DBA who must close it drops the old
-- releases' relations, or re-requests them).
CREATE TABLE IF NOT EXISTS deid.release_selection (
    release_id  bigint PRIMARY KEY,
    row_id      name   NOT NULL,
    n           bigint NOT NULL CHECK (n >= 0),
    rids        bytea  NOT NULL,
    CONSTRAINT release_selection_rids_check CHECK (length(rids) = 8 * n)
);
