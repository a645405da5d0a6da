-- Releases over a sharded warehouse (sql/40_distributed.sql, docs/sharding.md): the
-- coordinator's registered sources and log, the nodes' parts, the warehouse's secret key.
-- Grants, owners, comments and the dump registration are re-run from sql/*.sql.
CREATE TABLE IF NOT EXISTS deid.distributed_source (
    source        oid  PRIMARY KEY,
    source_name   text NOT NULL,
    cluster       name NOT NULL,
    key_column    name NOT NULL,
    registered_by name NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS deid.distributed_release (
    release_id    bigint PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    method        text NOT NULL,
    source        oid,
    source_name   text NOT NULL,
    cluster       name NOT NULL,
    run           text NOT NULL UNIQUE,
    requested_by  name NOT NULL,
    parameters    jsonb NOT NULL,
    parts         jsonb NOT NULL,
    relations     text[] NOT NULL,
    columns       jsonb NOT NULL,
    metrics       jsonb NOT NULL,
    finished_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS deid.distributed_part (
    run                 text PRIMARY KEY,
    coordinator_release bigint NOT NULL,
    release_id          bigint NOT NULL,
    requested_by        name NOT NULL,
    status              text NOT NULL CHECK (status IN ('pending', 'committed')),
    stored_at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS deid.distributed_key (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    key  text NOT NULL CHECK (length(key) >= 32)
);
