-- 1.1.0: deid.composition_state, the composition rule's cells kept between releases
-- (sql/00_catalog.sql, python_udfs/deid/log/cellstore.py). Empty after the update: the first
-- request of each source folds its earlier releases and stores them. Grants and comment are
-- re-run from sql/00_catalog.sql after the fragments.
CREATE TABLE IF NOT EXISTS deid.composition_state (
    identity  text     NOT NULL,
    kind      text     NOT NULL,
    covers    bigint[] NOT NULL,
    body      bytea    NOT NULL,
    PRIMARY KEY (identity, kind)
);
ALTER TABLE deid.composition_state ALTER body SET STORAGE EXTERNAL;
