"""Attack: the distributed run's liveness, and deid._dist_runs, against a plain login.

A run's coordinator used to hold an advisory lock keyed by the run's release id while the run
lasted, and deid.cleanup_distributed removed the nodes' pending parts of every run whose lock
was free. Any login could take that key (the release ids are a sequence: guessable): holding
the key of a dead run kept its parts pending for every cleanup, holding the keys of the next
release ids stalled the next distributed requests. A run's token now names its coordinator's
transaction; nothing a role outside deid holds changes what cleanup decides.
"""
import time

import psycopg
import pytest

from .conftest import member_url, orphan_runs, shard, wait_ready
from .test_cluster_commit import Paused, kill_node

ATTACKER = "deid_t_attacker"
ANATOMY = ("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 10, l => 2,"
           " columns => '{age,sex,race,zip,diagnosis}', options => '{\"seed\": 9}', release => %s)")


def old_run_key(release_id):
    return f"SELECT pg_advisory_lock(hashtext('deid.distributed'), {int(release_id)})"


def coordinator_release(node, run):
    with psycopg.connect(member_url(node), autocommit=True) as c:
        return c.execute("SELECT coordinator_release FROM deid.distributed_part WHERE run = %s",
                         [run]).fetchone()[0]


def test_a_login_holding_a_dead_runs_key_does_not_keep_it_alive(wh):
    p = Paused("lk_dead")
    try:
        runs = orphan_runs()
        kill_node("node1")                      # node1 keeps its part pending: a dead run
    finally:
        p.release()
    assert p.join() is not None
    shard("member", "node1", "start")
    wait_ready("node1")
    (run,) = runs["node1"]
    attacker = wh.connect("coord", ATTACKER)
    attacker.execute(old_run_key(coordinator_release("node1", run)))
    analyst = wh.connect("coord", "deid_t_analyst")
    assert analyst.execute("SELECT deid.cleanup_distributed()").fetchone()[0] == 1
    assert orphan_runs() == {"node0": [], "node1": []}


def test_a_login_holding_the_next_runs_keys_delays_no_distributed_request(wh):
    analyst = wh.connect("coord", "deid_t_analyst")
    start = time.monotonic()
    analyst.execute(ANATOMY, ["lk_base"])
    own = time.monotonic() - start
    with psycopg.connect(member_url("coord"), autocommit=True) as c:
        last = c.execute("SELECT last_value FROM deid.release_release_id_seq").fetchone()[0]
    attacker = wh.connect("coord", ATTACKER)
    for rid in range(last + 1, last + 40):      # the next release ids of the sequence
        attacker.execute(old_run_key(rid))
    attacker.execute("SELECT pg_advisory_lock(hashtext('deid.release'), hashtext('lk_next'))")
    analyst.execute("SELECT set_config('statement_timeout', %s, false)",
                    [f"{int(max(20.0, 5 * own) * 1000)}ms"])
    start = time.monotonic()
    row = analyst.execute(ANATOMY, ["lk_next"]).fetchone()
    assert row[-1] is True
    assert time.monotonic() - start < 2 * own + 5.0


def test_dist_runs_refuses_a_caller_who_names_another_role(wh):
    attacker = wh.connect("coord", ATTACKER)
    with pytest.raises(psycopg.Error) as e:
        attacker.execute("SELECT * FROM deid._dist_runs(%s, %s)", [["x"], "deid_t_admin"])
    assert e.value.diag.sqlstate == "42501" and e.value.diag.message_hint
    with pytest.raises(psycopg.Error) as e:
        attacker.execute("SELECT * FROM deid._dist_runs(%s, NULL)", [["x"]])
    assert e.value.diag.sqlstate == "42501"


def test_dist_runs_tells_a_live_run_and_holds_no_lock(wh):
    """A paused run's slot is locked: running; once it committed: committed. Asking, inside an
    open transaction, leaves no slot locked (it would make a dead run look alive)."""
    p = Paused("lk_live")
    try:
        (run,) = orphan_runs()["node0"]
        asker = psycopg.connect(member_url("coord"), user="deid_t_analyst")     # one transaction
        try:
            rows = asker.execute("SELECT run, committed, running FROM deid._dist_runs(%s, current_user)",
                                 [[run, "slot7-" + "0" * 32, "slot99999-" + "0" * 32, "x"]]).fetchall()
            assert [tuple(r[1:]) for r in rows] == [(False, True)] + [(False, False)] * 3
            with psycopg.connect(member_url("coord"), autocommit=True) as su:
                assert su.execute("SELECT slot FROM deid.run_slot WHERE slot = 7"
                                  " FOR UPDATE NOWAIT").fetchone() == (7,)
        finally:
            asker.rollback()
            asker.close()
    finally:
        p.release()
    assert p.join() is None
    row = wh.connect("coord", "deid_t_analyst").execute(
        "SELECT committed, running FROM deid._dist_runs(%s, current_user)", [[run]]).fetchone()
    assert row == (True, False)


def test_no_login_may_lock_a_run_slot(wh):
    attacker = wh.connect("coord", ATTACKER)
    for statement in ("SELECT slot FROM deid.run_slot FOR UPDATE",
                      "LOCK TABLE deid.run_slot IN ACCESS SHARE MODE",
                      "DELETE FROM deid.run_slot"):
        with pytest.raises(psycopg.Error) as e:
            with attacker.transaction():
                attacker.execute(statement)
        assert e.value.diag.sqlstate == "42501", statement
