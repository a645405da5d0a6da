"""Attack: stalling another role's requests through the locks deid serializes them with.

deid serializes the requests of one source (the overlap control compares a release's selection
with every earlier one) and of one release name. Advisory locks are a global namespace: any login
may take any key, and deid's keys are guessable (a hash of a constant and the source's oid or
the release name). A plain login holding them made every request of the source wait until
statement_timeout, or forever. deid now serializes on row locks of its own table
(deid.request_lock), which no role but deid_owner may touch: the attacker's locks delay nobody.

A request that does hold the lock (an entitled requester who leaves its transaction open) makes
another request of the same source wait at most deid.lock_wait, then fail with 55P03 and a hint;
a caller whose snapshot predates the holder's commit gets 40001, never a decision on stale data.
"""
import threading
import time

import psycopg
import pytest
from psycopg import sql

from dbfixtures import hint_of, sqlstate_of

ATTACKER = "deid_t_attacker"
ANALYST = "deid_t_analyst"         # SELECT on the source
RESEARCHER = "deid_t_researcher"   # a policy, no SELECT
SOURCE = "public.lock_src"
REQUEST = ("SELECT release_id FROM deid.anonymize_request(%s, 'generalization', k => 5,"
           " columns => '{age,dx}', release => %s)")


@pytest.fixture(scope="module")
def source(admin):
    admin.execute("SELECT deid.interval_hierarchy('lock_age', 0, 120, '{5,10,20,40}')"
                  " WHERE NOT EXISTS (SELECT 1 FROM deid.hierarchy WHERE name = 'lock_age')")
    admin.execute(f"DROP TABLE IF EXISTS {SOURCE}")
    admin.execute(f"CREATE TABLE {SOURCE} (id int PRIMARY KEY, age int NOT NULL, dx text NOT NULL)")
    admin.execute(f"INSERT INTO {SOURCE} SELECT i, 20 + i % 40, 'D' || (i % 4)"
                  " FROM generate_series(1, 200) i")
    admin.execute(f"GRANT SELECT ON {SOURCE} TO {ANALYST}")
    admin.execute("SELECT deid.set_role(%s, 'age', 'quasi_identifier', 'lock_age')", [SOURCE])
    admin.execute("SELECT deid.set_role(%s, 'dx', 'sensitive')", [SOURCE])
    admin.execute("SELECT deid.allow_requests(%s, %s, 5)", [RESEARCHER, SOURCE])
    yield SOURCE
    admin.execute("DELETE FROM deid.policy WHERE relation = %s::regclass", [SOURCE])


def timed(conn, name, source=SOURCE):
    start = time.monotonic()
    conn.execute(REQUEST, [source, name])
    return time.monotonic() - start


def old_keys(conn, source, names):
    """Every advisory key deid used to serialize a request of `source` named `names`: the
    source's overlap-control lock and each release name's lock (the distributed run's lock:
    tests/cluster/test_cluster_locks.py)."""
    oid = conn.execute("SELECT %s::regclass::oid::text", [source]).fetchone()[0]
    keys = [("deid.release_selection", oid)] + [("deid.release", n) for n in names]
    return [sql.SQL("SELECT pg_advisory_lock(hashtext({}), hashtext({}))").format(
        sql.Literal(c), sql.Literal(k)) for c, k in keys]


@pytest.fixture
def attacker(connect, source):
    """A plain login that holds, in an idle session, every lock key it can guess."""
    conn = connect(ATTACKER)

    def hold(names):
        for statement in old_keys(conn, source, names):
            conn.execute(statement)
    yield hold
    conn.execute("SELECT pg_advisory_unlock_all()")


@pytest.mark.parametrize("role", [ANALYST, RESEARCHER])
def test_a_login_holding_every_advisory_key_delays_no_request(connect, source, attacker, role):
    conn = connect(role)
    own = timed(conn, f"lock_base_{role[-5:]}")                 # the request's own time
    attacker([f"lock_name_{role[-5:]}"])
    limit = max(10.0, 5 * own)
    conn.execute("SELECT set_config('statement_timeout', %s, false)", [f"{int(limit * 1000)}ms"])
    took = timed(conn, f"lock_name_{role[-5:]}")
    assert took < 2 * own + 2.0, (own, took)



def test_the_lock_table_is_no_roles_but_deids(connect, source):
    """The rows deid locks: no login may read, insert, update, lock or truncate them."""
    conn = connect(ATTACKER)
    for statement in ("SELECT * FROM deid.request_lock FOR UPDATE",
                      "INSERT INTO deid.request_lock (kind, key) VALUES ('source', '1')",
                      "LOCK TABLE deid.request_lock IN ACCESS SHARE MODE",
                      "TRUNCATE deid.request_lock"):
        with pytest.raises(psycopg.Error) as e:
            with conn.transaction():
                conn.execute(statement)
        assert sqlstate_of(e) == "42501", statement


@pytest.fixture
def holder(connect, source):
    """The analyst's request of the source, in a transaction left open: the lock is held."""
    conn = psycopg.connect(connect(ANALYST).info.dsn)
    conn.execute(REQUEST, [SOURCE, "lock_open_tx"])
    yield conn
    conn.rollback()
    conn.close()


def test_an_open_transaction_holds_up_another_request_only_until_lock_wait(connect, holder):
    conn = connect(RESEARCHER)
    conn.execute("SET deid.lock_wait = '1s'")
    conn.execute("SET statement_timeout = '20s'")       # an old build waited without bound
    start = time.monotonic()
    with pytest.raises(psycopg.Error) as e:
        conn.execute(REQUEST, [SOURCE, "lock_waiter"])
    assert time.monotonic() - start < 8
    assert sqlstate_of(e) == "55P03" and "deid.lock_wait" in hint_of(e)
    assert "Error" not in e.value.diag.message_primary
    assert conn.execute("SHOW lock_timeout").fetchone()[0] == "0"   # the caller's own, unchanged


def test_a_bad_lock_wait_is_a_clean_error(connect, source):
    conn = connect(ANALYST)
    conn.execute("SET deid.lock_wait = 'soon'")
    with pytest.raises(psycopg.Error) as e:
        conn.execute(REQUEST, [SOURCE, "lock_bad_wait"])
    assert sqlstate_of(e) == "22023" and hint_of(e)


def test_the_wait_ends_when_the_holder_commits(connect, holder, admin):
    """A waiting request goes on once the holder commits, and sees its release (the name is
    taken: 42P07, not a duplicate)."""
    conn = connect(ANALYST)
    conn.execute("SET statement_timeout = '20s'")
    outcome = {}

    def wait():
        try:
            conn.execute(REQUEST, [SOURCE, "lock_open_tx"])
        except psycopg.Error as e:
            outcome["e"] = e
    t = threading.Thread(target=wait)
    t.start()
    waiting = ("SELECT 1 FROM pg_catalog.pg_stat_activity WHERE pid = %s"
               " AND wait_event_type = 'Lock'")
    deadline = time.monotonic() + 20
    while not admin.execute(waiting, [conn.info.backend_pid]).fetchone():
        assert t.is_alive() and time.monotonic() < deadline, outcome
        time.sleep(0.05)
    assert t.is_alive()                      # it waits for the holder ...
    holder.commit()
    t.join(timeout=30)
    assert not t.is_alive() and outcome["e"].diag.sqlstate == "42P07"   # ... then sees its release
    conn.execute("SELECT deid.drop_release('lock_open_tx')")


@pytest.mark.parametrize("level", ["REPEATABLE READ", "SERIALIZABLE"])
def test_a_snapshot_older_than_the_holders_commit_gets_40001(connect, source, level):
    """The caller's snapshot is taken before another request of the source commits; its own
    request of the source must not decide the overlap control on that snapshot."""
    late = psycopg.connect(connect(ANALYST).info.dsn)
    try:
        late.execute(f"BEGIN ISOLATION LEVEL {level}")
        late.execute(f"SELECT count(*) FROM {SOURCE}")               # the snapshot is taken
        connect(RESEARCHER).execute(REQUEST, [SOURCE, f"lock_rr_{level[:3].lower()}"])
        with pytest.raises(psycopg.Error) as e:
            late.execute(REQUEST, [SOURCE, f"lock_rr2_{level[:3].lower()}"])
        assert sqlstate_of(e) == "40001" and "new transaction" in hint_of(e)
    finally:
        late.rollback()
        late.close()
