-- 1.1.0: deid.run_slot, the rows whose locks tell that a distributed run's coordinator still
-- runs (sql/40_distributed.sql, python_udfs/deid/distributed/protocol.py), where an advisory
-- lock keyed by the run's release id was used, a key any login could take. Its comment,
-- privileges (none) and its slots (a DO block) are re-run from sql/40_distributed.sql after the
-- fragments.
CREATE TABLE IF NOT EXISTS deid.run_slot (
    slot  int PRIMARY KEY CHECK (slot >= 0)
);
