-- 1.1.0: deid.distributed_forced_drop, the log of a deid_admin's drops of distributed releases
-- with a part on a node lost for good (sql/47_distributed_releases.sql). Its comment, grants
-- and dump registration are re-run from sql/*.sql after the fragments.
CREATE TABLE IF NOT EXISTS deid.distributed_forced_drop (
    release_id    bigint PRIMARY KEY,
    name          text NOT NULL,
    run           text NOT NULL,
    cluster       name NOT NULL,
    requested_by  name NOT NULL,
    lost          jsonb NOT NULL,
    dropped_by    name NOT NULL,
    dropped_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
