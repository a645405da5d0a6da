"""Anatomy's pre-check over shards refuses a NULL quasi-identifier as a node's store would:
before any node stores a part, with that node's own error (SQLSTATE, message, hint; a policy
requester: the uniform DE001), unless options.nulls makes NULL a value of its own."""
import threading
import time

import psycopg
import pytest
from psycopg import sql

from .conftest import MEMBERS, member_url

REFUSAL = "the request cannot be released under its privacy model"
REQUEST = ("SELECT * FROM deid.anonymize_request('nullq.t', 'anatomy', k => 5, l => 2,"
           " columns => '{age,dx}', options => %s, release => %s)")
OPTIONS = '{"row_id": "id", "seed": 1}'
PLAIN = '{"row_id": "id"}'
# node0: 200 rows of 8 diagnoses; node1: 80 rows of 8 diagnoses, one of them without an age
ROWS = {"node0": ("SELECT g, g % 110, 'd' || (g % 8) FROM generate_series(1, 200) g",),
        "node1": ("SELECT g, CASE WHEN g = 1040 THEN NULL ELSE g % 90 END, 'd' || (g % 8)"
                  " FROM generate_series(1001, 1080) g",)}


def superuser(who):
    return psycopg.connect(member_url(who), autocommit=True)


@pytest.fixture(scope="module")
def nullq(warehouse):
    for m in MEMBERS:
        with superuser(m) as c:
            c.execute("DROP SCHEMA IF EXISTS nullq CASCADE")
            c.execute("CREATE SCHEMA nullq")
            c.execute("CREATE TABLE nullq.t (id int PRIMARY KEY, age int, dx text NOT NULL)")
            for statement in ROWS.get(m, ()):
                c.execute(sql.SQL("INSERT INTO nullq.t ") + sql.SQL(statement))
            c.execute("GRANT USAGE ON SCHEMA nullq TO PUBLIC")
            c.execute("GRANT SELECT ON nullq.t TO deid_t_analyst")
            c.execute("SELECT deid.set_role('nullq.t', 'age', 'quasi_identifier'),"
                      " deid.set_role('nullq.t', 'dx', 'sensitive')")
            c.execute("SELECT deid.allow_requests('deid_t_researcher', 'nullq.t', 2, 2)")
    with superuser("coord") as c:
        c.execute("SELECT deid.register_distributed_source('nullq.t', 'deid_shards', 'id')")
    yield warehouse


def written(name):
    """{member: what of release `name` was ever written there (a log row of any status,
    a removed part's included; a relation)}."""
    out = {}
    for m in MEMBERS:
        with superuser(m) as c:
            found = []
            if c.execute("SELECT 1 FROM deid.release WHERE name = %s", [name]).fetchone():
                found.append("release")
            if c.execute("SELECT 1 FROM deid.distributed_release WHERE name = %s", [name]).fetchone():
                found.append("log")
            if c.execute("SELECT 1 FROM pg_class WHERE relname LIKE %s AND relnamespace IN"
                         " ('release'::regnamespace, 'deid_release'::regnamespace)",
                         [name + "%"]).fetchone():
                found.append("relation")
            out[m] = found
    return out


def run_held(role, params, timeout=120):
    """The request on the coordinator as `role` while node1's source is locked: node0 finishes
    its first call that reads rows (the pre-check, or without one its whole stored part) while
    node1 waits; then the lock goes. The request's error, or None."""
    holder = superuser("node1")
    holder.execute("BEGIN")
    holder.execute("LOCK TABLE nullq.t IN ACCESS EXCLUSIVE MODE")
    out = {}

    def go():
        try:
            with psycopg.connect(member_url("coord"), user=role, autocommit=True) as c:
                c.execute(REQUEST, params)
        except psycopg.Error as e:
            out["error"] = e

    thread = threading.Thread(target=go)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        with superuser("node0") as n0, superuser("node1") as n1:
            while True:
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


def test_a_null_quasi_identifier_on_one_node_refuses_before_any_part_is_stored(nullq):
    with pytest.raises(psycopg.Error) as one:          # the single-node request on node1
        nullq.connect("node1", "deid_t_analyst").execute(REQUEST, [OPTIONS, "nq_single"])
    assert one.value.diag.sqlstate == "22004"
    dist = run_held("deid_t_analyst", [OPTIONS, "nq_refused"])
    assert dist is not None
    assert dist.diag.sqlstate == one.value.diag.sqlstate
    assert dist.diag.message_primary == one.value.diag.message_primary
    assert dist.diag.message_hint == one.value.diag.message_hint
    assert written("nq_refused") == {m: [] for m in MEMBERS}


def test_a_policy_requester_gets_the_uniform_refusal_and_nothing_is_stored(nullq):
    e = run_held("deid_t_researcher", [PLAIN, "nq_policy"])
    assert e is not None
    assert e.diag.sqlstate == "DE001" and e.diag.message_primary == REFUSAL
    assert e.diag.message_detail is None
    assert written("nq_policy") == {m: [] for m in MEMBERS}


def test_null_as_a_value_of_its_own_releases(nullq):
    row = nullq.connect("coord", "deid_t_analyst").execute(
        REQUEST, ['{"row_id": "id", "seed": 1, "nulls": "value"}', "nq_value"]).fetchone()
    assert row[-1] is True and row[2] == 280


PRECHECK = ("SELECT deid._dist_node_eligible('nullq.t', jsonb_build_object('method', 'anatomy',"
            " 'k', 5, 'l', 2, 'columns', '{age,dx}'::text[], 'options', %s::text,"
            " 'name', %s::text))")


@pytest.mark.parametrize("role, state", [("deid_t_analyst", "22004"), ("deid_t_researcher", "DE001")])
def test_the_nodes_pre_check_itself_refuses_a_null_quasi_identifier(nullq, role, state):
    """The pre-check, not the store, refuses: node0 stores nothing in any interleaving."""
    c = nullq.connect("node1", role)
    with pytest.raises(psycopg.Error) as one:
        c.execute(REQUEST, [PLAIN, f"nq_one_{state.lower()}"])
    with pytest.raises(psycopg.Error) as pre:
        c.execute(PRECHECK, [PLAIN, f"nq_pre_{state.lower()}"])
    assert pre.value.diag.sqlstate == one.value.diag.sqlstate == state, pre.value.diag.message_primary
    assert pre.value.diag.message_primary.endswith(one.value.diag.message_primary)
    assert pre.value.diag.message_hint == one.value.diag.message_hint
    assert c.execute(PRECHECK, ['{"row_id": "id", "nulls": "value"}', "nq_pre_value"]
                     ).fetchone()[0] == "eligible"
