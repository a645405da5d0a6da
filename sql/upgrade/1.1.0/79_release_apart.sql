-- 1.1.0: releases of one source the composition rule did not compare (their audiences met no
-- role), python_udfs/deid/log/audience.py record_apart. Releases of earlier versions were all
-- deid_reader's: none is apart from another. Grants, comments and pg_extension_config_dump are
-- re-run from sql/00_catalog.sql after the fragments.
CREATE TABLE IF NOT EXISTS deid.release_apart (
    release_id  bigint NOT NULL,
    apart_from  bigint NOT NULL,
    PRIMARY KEY (release_id, apart_from)
);
