"""Anatomy's (K,L) pre-check (docs/sharding.md): before any node stores a part, every node, as
the caller, runs the request's own access and code checks and decides whether its selected rows
can satisfy (K,L); one node that cannot refuses the whole request with its own error (a policy
requester: the uniform DE001), and no node ever wrote a part -- not even one later removed."""
import threading
import time

import psycopg
import pytest
from psycopg import sql

from .conftest import MEMBERS, NODES, member_url

REFUSAL = "the request cannot be released under its privacy model"
SOURCE = "elig.t"
REQUEST = ("SELECT * FROM deid.anonymize_request('elig.t', 'anatomy', k => %s, l => %s,"
           " columns => '{age,dx}', options => '{\"row_id\": \"id\", \"seed\": 1}',"
           " release => %s)")
# node0: 200 rows of 8 diagnoses (10 of them aged 100 or more); node1: 40 rows of one diagnosis (no L = 2 group there) and
# 3 rows of another age band (the selection age >= 100: fewer than K rows there)
ROWS = {"node0": ("SELECT g, g % 110, 'd' || (g % 8) FROM generate_series(1, 200) g", ),
        "node1": ("SELECT g, g % 90, 'd0' FROM generate_series(1001, 1040) g",
                  "SELECT g, 100 + g % 3, 'd0' FROM generate_series(1041, 1043) g")}


def superuser(who):
    return psycopg.connect(member_url(who), autocommit=True)


@pytest.fixture(scope="module")
def elig(warehouse):
    for m in MEMBERS:
        with superuser(m) as c:
            c.execute("DROP SCHEMA IF EXISTS elig CASCADE")
            c.execute("CREATE SCHEMA elig")
            c.execute("CREATE TABLE elig.t (id int PRIMARY KEY, age int NOT NULL, dx text NOT NULL)")
            for statement in ROWS.get(m, ()):
                c.execute(sql.SQL("INSERT INTO elig.t ") + sql.SQL(statement))
            c.execute("GRANT USAGE ON SCHEMA elig TO PUBLIC")
            c.execute("GRANT SELECT ON elig.t TO deid_t_analyst")
            c.execute("SELECT deid.set_role('elig.t', 'age', 'quasi_identifier'),"
                      " deid.set_role('elig.t', 'dx', 'sensitive')")
            c.execute("SELECT deid.allow_requests('deid_t_researcher', 'elig.t', 2, 2)")
    with superuser("coord") as c:
        c.execute("SELECT deid.register_distributed_source('elig.t', 'deid_shards', 'id')")
    yield warehouse


def written(name):
    """{member: what of release `name` was ever written there}: a release log row (any status,
    removed parts included), a part row, a relation."""
    out = {}
    for m in MEMBERS:
        with superuser(m) as c:
            found = []
            if c.execute("SELECT 1 FROM deid.release WHERE name = %s", [name]).fetchone():
                found.append("release")
            if c.execute("SELECT 1 FROM deid.distributed_part p JOIN deid.release r"
                         " USING (release_id) WHERE r.name = %s", [name]).fetchone():
                found.append("part")
            if c.execute("SELECT 1 FROM deid.distributed_release WHERE name = %s", [name]).fetchone():
                found.append("log")
            if c.execute("SELECT 1 FROM pg_class WHERE relname LIKE %s AND relnamespace IN"
                         " ('release'::regnamespace, 'deid_release'::regnamespace)",
                         [name + "%"]).fetchone():
                found.append("relation")
            out[m] = found
    return out


def releases(who):
    with superuser(who) as c:
        return c.execute("SELECT count(*) FROM deid.release").fetchone()[0]


def parts_count():
    out = {}
    for m in NODES:
        with superuser(m) as c:
            out[m] = c.execute("SELECT count(*) FROM deid.distributed_part").fetchone()[0]
    return out


def run_held(role, request, params, timeout=120):
    """Run `request` on the coordinator as `role` while node1's source is locked (ACCESS
    EXCLUSIVE): node1 waits at its first touch of the rows; node0 goes on. Once node0 is done
    with its first call that reads rows (a pre-check, or -- without one -- its whole stored
    part) and node1 waits on the lock, the lock goes and node1 refuses. The request's error."""
    holder = superuser("node1")
    holder.execute("BEGIN")
    holder.execute("LOCK TABLE elig.t IN ACCESS EXCLUSIVE MODE")
    out = {}

    def go():
        try:
            with psycopg.connect(member_url("coord"), user=role, autocommit=True) as c:
                c.execute(request, params)
        except psycopg.Error as e:
            out["error"] = e

    thread = threading.Thread(target=go)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        with superuser("node0") as n0, superuser("node1") as n1:   # (the holder's own
            while True:                                 # transaction sees one snapshot of it)
                waiting = n1.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE usename = %s AND wait_event_type ="
                    " 'Lock'", [role]).fetchone()
                done = n0.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE usename = %s AND state = 'idle'"
                    " AND (query LIKE '%%_dist_node_store%%' OR query LIKE '%%_dist_node_eligible%%')",
                    [role]).fetchone()
                if waiting and done:
                    break
                assert thread.is_alive(), f"the request ended early: {out.get('error')}"
                assert time.monotonic() < deadline, "node0 never finished its first call"
                time.sleep(0.05)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        thread.join(timeout=300)
    assert not thread.is_alive()
    return out.get("error")


@pytest.mark.parametrize("k, l, selection", [(5, 2, None), (5, None, "age >= 100")])
def test_a_node_that_cannot_reach_kl_refuses_before_any_part_is_stored(elig, k, l, selection):
    request = REQUEST if selection is None else REQUEST.replace(
        "release => %s", "selection => %s, release => %s")
    single_args = [k, l] + ([selection] if selection else []) + ["el_single"]
    with pytest.raises(psycopg.Error) as one:          # the single-node request on node1
        elig.connect("node1", "deid_t_analyst").execute(request, single_args)
    before = parts_count()
    name = f"el_refused_{k}_{l or 0}"
    dist = run_held("deid_t_analyst", request,
                    [k, l] + ([selection] if selection else []) + [name])
    assert dist is not None
    assert dist.diag.sqlstate == one.value.diag.sqlstate is not None
    assert dist.diag.message_primary == one.value.diag.message_primary
    assert dist.diag.message_hint == one.value.diag.message_hint
    assert written(name) == {m: [] for m in MEMBERS}
    assert parts_count() == before


def test_a_policy_requester_gets_the_uniform_refusal_and_nothing_is_stored(elig):
    e = run_held("deid_t_researcher", REQUEST, [5, 2, "el_policy"])
    assert e is not None
    assert e.diag.sqlstate == "DE001" and e.diag.message_primary == REFUSAL
    assert e.diag.message_detail is None
    assert written("el_policy") == {m: [] for m in MEMBERS}


def test_every_node_eligible_releases_as_before(elig):
    row = elig.connect("coord", "deid_t_analyst").execute(
        REQUEST.replace("release => %s", "selection => 'age < 100', release => %s"),
        [2, None, "el_ok"]).fetchone()
    assert row[-1] is True and row[2] == 230
    assert set(written("el_ok")) == set(MEMBERS)


BEGIN = ("SELECT deid._dist_eligibility_begin(jsonb_build_object('relid', 'elig.t'::regclass::oid"
         "::bigint, 'method', 'anatomy', 'k', 5, 'l', 2, 'columns', '{age,dx}'::text[],"
         " 'selection', %s::text, 'options', '{\"row_id\": \"id\"}'), %s)")


def test_the_pre_checks_definers_refuse_another_role_and_release_nothing(elig):
    """deid._dist_eligibility_begin and _check (SECURITY DEFINER) check the caller as the
    single-node definers do; a pre-check's token -- its narrowed snapshot read by the policy's
    grantor -- is never released by deid._request_finish, nor checked for another role."""
    before = releases("node0")
    attacker = elig.connect("node0", "deid_t_attacker")
    with pytest.raises(psycopg.Error) as e:
        attacker.execute(BEGIN, [None, "deid_t_analyst"])
    assert e.value.diag.sqlstate == "42501"
    researcher = elig.connect("node0", "deid_t_researcher")
    token = researcher.execute(BEGIN, [None, "deid_t_researcher"]).fetchone()[0]
    for statement, params in [
            ("SELECT * FROM deid._request_finish(%s, 'deid_t_researcher')", [token]),
            ("SELECT deid._dist_eligibility_check(%s, 'deid_t_analyst')", [token])]:
        with pytest.raises(psycopg.Error) as e:
            researcher.execute(statement, params)
        assert e.value.diag.sqlstate == "42501", statement
    token = researcher.execute(BEGIN, [None, "deid_t_researcher"]).fetchone()[0]
    assert researcher.execute("SELECT deid._dist_eligibility_check(%s, 'deid_t_researcher')",
                              [token]).fetchone()[0] == "eligible"
    assert releases("node0") == before


NODE_CHECK = ("SELECT deid._dist_node_eligible('elig.t', jsonb_build_object('method', 'anatomy',"
              " 'k', 5, 'l', 2, 'columns', '{age,dx}'::text[], 'selection', %s::text,"
              " 'options', '{\"row_id\": \"id\"}', 'name', %s::text))")


def test_a_policy_requesters_pre_check_is_no_oracle_for_near_duplicate_selections(elig):
    """Called by hand on a node, the pre-check refuses what the single-node request refuses:
    a selection a few rows off an earlier release's is refused (the overlap control) with the
    uniform DE001, not answered 'eligible'."""
    researcher = elig.connect("node0", "deid_t_researcher")
    single = ("SELECT * FROM deid.anonymize_request('elig.t', 'anatomy', k => 5, l => 2,"
              " columns => '{age,dx}', selection => %s, options => '{\"row_id\": \"id\"}',"
              " release => %s)")
    researcher.execute(single, ["age < 100", "el_oracle_base"])
    with pytest.raises(psycopg.Error) as one:
        researcher.execute(single, ["age < 99", "el_oracle_near"])
    with pytest.raises(psycopg.Error) as pre:
        researcher.execute(NODE_CHECK, ["age < 99", "el_oracle_pre"])
    assert pre.value.diag.sqlstate == one.value.diag.sqlstate == "DE001"
    assert one.value.diag.message_primary == REFUSAL     # (called by hand: PL/Python's prefix)
    assert pre.value.diag.message_primary.endswith(REFUSAL) and not pre.value.diag.message_detail
    assert researcher.execute(NODE_CHECK, ["age < 100", "el_oracle_same"]).fetchone()[0] == "eligible"
