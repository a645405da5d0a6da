"""A distributed release with a part on a node lost for good: deid.drop_release refuses
(08006, a HINT naming force) and drops nothing; a deid_admin's
deid.drop_release(name, force => true) drops every part it reaches, the coordinator's views
and log row, and logs which nodes' parts it could not reach (deid.distributed_forced_drop).
No other role may force, nor drive the new definers by hand."""
import psycopg
import pytest

from .conftest import NODES, member_url, orphan_runs, shard, wait_ready
from .test_cluster_release_admin import ANATOMY, state

FORCE = "SELECT deid.drop_release(%s, force => true)"


def superuser(who):
    return psycopg.connect(member_url(who), autocommit=True)


@pytest.fixture
def node1_down(wh):
    shard("member", "node1", "stop")
    yield wh
    shard("member", "node1", "start")
    wait_ready("node1")


def run_of(name):
    with superuser("coord") as c:
        return c.execute("SELECT run FROM deid.distributed_release WHERE name = %s",
                         [name]).fetchone()[0]


def forced_log(name):
    with superuser("coord") as c:
        return c.execute("SELECT dropped_by::text, lost FROM deid.distributed_forced_drop"
                         " WHERE name = %s", [name]).fetchall()


def test_a_lost_node_refuses_the_drop_without_force_and_nothing_goes(wh):
    wh.connect("coord", "deid_t_analyst").execute(ANATOMY, ["fd_refused"])
    before = state("fd_refused")
    shard("member", "node1", "stop")
    try:
        for who in ("deid_t_analyst", "deid_t_admin"):
            with pytest.raises(psycopg.Error) as e:
                wh.connect("coord", who).execute("SELECT deid.drop_release('fd_refused')")
            assert e.value.diag.sqlstate == "08006"
            assert "force" in e.value.diag.message_hint
        for who in ("deid_t_analyst", "deid_t_attacker", "deid_t_reader"):   # not a deid_admin
            with pytest.raises(psycopg.Error) as e:
                wh.connect("coord", who).execute(FORCE, ["fd_refused"])
            assert e.value.diag.sqlstate == "42501", who
            assert e.value.diag.message_hint
    finally:
        shard("member", "node1", "start")
        wait_ready("node1")
    assert state("fd_refused") == before
    assert forced_log("fd_refused") == []
    wh.connect("coord", "deid_t_analyst").execute("SELECT deid.drop_release('fd_refused')")


def test_an_admins_force_drops_what_it_reaches_and_logs_the_lost_part(wh):
    wh.connect("coord", "deid_t_analyst").execute(ANATOMY, ["fd_forced"])
    run = run_of("fd_forced")
    shard("member", "node1", "stop")
    try:
        out = wh.connect("coord", "deid_t_admin").execute(FORCE, ["fd_forced"]).fetchone()[0]
        assert "fd_forced" in out and "1" in out
        with superuser("coord") as c:
            assert c.execute("SELECT count(*) FROM deid.distributed_release WHERE name ="
                             " 'fd_forced'").fetchone()[0] == 0
            assert c.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'fd_forced%'"
                             " AND relnamespace = 'release'::regnamespace").fetchone()[0] == 0
        with superuser("node0") as c:      # the reachable part went as in a plain drop
            assert c.execute("SELECT status FROM deid.release WHERE name = 'fd_forced'"
                             ).fetchall() == [("dropped",)]
            assert c.execute("SELECT count(*) FROM deid.distributed_part WHERE run = %s",
                             [run]).fetchone()[0] == 0
        [(who, lost)] = forced_log("fd_forced")
        assert who == "deid_t_admin"
        assert [p["node"].split(":")[0] for p in lost] == ["deid_cluster_test"]
        assert len(lost) == 1 and lost[0]["release_id"]
    finally:
        shard("member", "node1", "start")
        wait_ready("node1")
    # the lost node came back: its part's run is no longer logged, so the cleanup removes it
    assert orphan_runs()["node1"] == [run]
    wh.connect("coord", "deid_t_admin").execute("SELECT deid.cleanup_distributed()")
    assert orphan_runs() == {n: [] for n in NODES}
    with superuser("node1") as c:
        assert c.execute("SELECT status FROM deid.release WHERE name = 'fd_forced'"
                         ).fetchall() == [("dropped",)]


def test_force_with_every_node_up_is_a_plain_drop(wh):
    wh.connect("coord", "deid_t_analyst").execute(ANATOMY, ["fd_up"])
    wh.connect("coord", "deid_t_admin").execute(FORCE, ["fd_up"])
    assert state("fd_up") == {m: (0, 0, 0, 0) for m in ("coord", *NODES)}
    assert forced_log("fd_up") == []


def test_the_forced_drops_definers_refuse_every_role_but_an_admin(wh):
    """deid._dist_drop_forced (coordinator, SECURITY DEFINER) and deid._dist_drop_on (one
    node's part, through PL/Proxy) driven by hand: the requester and an attacker, naming
    themselves or an admin, are refused and nothing goes."""
    wh.connect("coord", "deid_t_analyst").execute(ANATOMY, ["fd_hand"])
    run = run_of("fd_hand")
    before = state("fd_hand")
    for who in ("deid_t_analyst", "deid_t_attacker"):
        for caller in (who, "deid_t_admin"):
            with pytest.raises(psycopg.Error) as e:
                wh.connect("coord", who).execute(
                    "SELECT deid._dist_drop_forced('fd_hand', %s, '[]')", [caller])
            assert e.value.diag.sqlstate == "42501", (who, caller)
    with pytest.raises(psycopg.Error) as e:
        wh.connect("coord", "deid_t_attacker").execute(
            "SELECT deid._dist_drop_on('deid_shards', 0, %s)", [run])
    assert e.value.diag.sqlstate == "42501"
    assert state("fd_hand") == before
    wh.connect("coord", "deid_t_analyst").execute("SELECT deid.drop_release('fd_hand')")
