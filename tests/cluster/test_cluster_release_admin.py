"""deid.drop_release and deid.verify_release on the coordinator for a distributed release:
drop removes every node's part (as the caller: its requester or a deid_admin, as on one node)
and the coordinator's log row and views, refused before anything goes when a node is down;
verify runs every node's verifier on its stored part (and, for generalization, the merged k
check), for a deid_admin only, as on one node."""
import psycopg
import psycopg.sql
import pytest

from .conftest import MEMBERS, NODES, member_url, orphan_runs, shard, wait_ready
from .test_cluster_generalization import GEN, GEN_REQUEST, gen_warehouse  # noqa: F401 (fixture)

ANATOMY = ("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 10, l => 2,"
           " columns => '{age,sex,race,zip,diagnosis}', options => '{\"seed\": 9}', release => %s)")


def superuser(who):
    return psycopg.connect(member_url(who), autocommit=True)


def state(name):
    """{member: (log rows, committed node releases, part rows, relations)} of release `name`."""
    out = {}
    for m in MEMBERS:
        with superuser(m) as c:
            out[m] = (
                c.execute("SELECT count(*) FROM deid.distributed_release WHERE name = %s",
                          [name]).fetchone()[0],
                c.execute("SELECT count(*) FROM deid.release WHERE name = %s AND status ="
                          " 'committed'", [name]).fetchone()[0],
                c.execute("SELECT count(*) FROM deid.distributed_part p JOIN deid.release r"
                          " USING (release_id) WHERE r.name = %s", [name]).fetchone()[0],
                c.execute("SELECT count(*) FROM pg_class WHERE relname LIKE %s AND relnamespace"
                          " IN ('release'::regnamespace, 'deid_release'::regnamespace)",
                          [name + "%"]).fetchone()[0])
    return out


def test_another_role_cannot_drop_a_distributed_release(wh):
    wh.connect("coord", "deid_t_analyst").execute(ANATOMY, ["ra_keep"])
    wh.connect("node0", "deid_t_analyst").execute(ANATOMY, ["ra_single"])
    before = state("ra_keep")
    with pytest.raises(psycopg.Error) as one:
        wh.connect("node0", "deid_t_attacker").execute("SELECT deid.drop_release('ra_single')")
    for who in ("deid_t_attacker", "deid_t_reader"):
        with pytest.raises(psycopg.Error) as dist:
            wh.connect("coord", who).execute("SELECT deid.drop_release('ra_keep')")
        assert dist.value.diag.sqlstate == one.value.diag.sqlstate == "42501"
        assert dist.value.diag.message_primary == one.value.diag.message_primary.replace(
            "ra_single", "ra_keep")
        assert dist.value.diag.message_hint == one.value.diag.message_hint
    for statement in ["SELECT deid._dist_drop('deid_shards', %s)",
                      "SELECT deid._dist_drop_finish('ra_keep', 'deid_t_analyst')",
                      "SELECT deid._dist_drop_finish('ra_keep', 'deid_t_attacker')",
                      "SELECT deid._dist_release_of('ra_keep', 'deid_t_analyst', 'drop')",
                      "SELECT deid._dist_release_of('ra_keep', 'deid_t_attacker', 'drop')",
                      "SELECT deid._dist_release_of('ra_keep', 'deid_t_attacker', 'verify')"]:
        with superuser("coord") as c:
            run = c.execute("SELECT run FROM deid.distributed_release WHERE name = 'ra_keep'"
                            ).fetchone()[0]
        with pytest.raises(psycopg.Error) as e:
            wh.connect("coord", "deid_t_attacker").execute(
                statement, [run] if "%s" in statement else None)
        assert e.value.diag.sqlstate == "42501", statement
    assert state("ra_keep") == before
    assert wh.connect("coord", "deid_t_reader").execute(
        "SELECT count(*) FROM release.ra_keep_qit").fetchone()[0] > 0


def test_the_requester_drops_every_part_the_log_row_and_the_views(wh):
    analyst = wh.connect("coord", "deid_t_analyst")
    analyst.execute(ANATOMY, ["ra_drop"])
    assert analyst.execute("SELECT deid.drop_release('ra_drop')").fetchone()[0] == \
        "release ra_drop dropped"
    assert state("ra_drop") == {m: (0, 0, 0, 0) for m in MEMBERS}
    for m in NODES:       # the parts stay in the nodes' logs as dropped (their selections kept)
        with superuser(m) as c:
            assert c.execute("SELECT status FROM deid.release WHERE name = 'ra_drop'"
                             ).fetchall() == [("dropped",)]
    assert orphan_runs() == {n: [] for n in NODES}
    with pytest.raises(psycopg.Error) as e:
        analyst.execute("SELECT deid.drop_release('ra_drop')")
    assert e.value.diag.sqlstate == "42704"
    admin = wh.connect("coord", "deid_t_admin")
    analyst.execute(ANATOMY, ["ra_drop_admin"])
    assert admin.execute("SELECT deid.drop_release('ra_drop_admin')").fetchone()[0]
    assert state("ra_drop_admin") == {m: (0, 0, 0, 0) for m in MEMBERS}


def test_a_node_down_refuses_the_drop_before_anything_goes(wh):
    wh.connect("coord", "deid_t_analyst").execute(ANATOMY, ["ra_down"])
    before = state("ra_down")
    shard("member", "node1", "stop")
    try:
        with pytest.raises(psycopg.Error) as e:
            wh.connect("coord", "deid_t_analyst").execute("SELECT deid.drop_release('ra_down')")
        assert e.value.diag.sqlstate == "08006" and e.value.diag.message_hint
    finally:
        shard("member", "node1", "start")
        wait_ready("node1")
    assert state("ra_down") == before
    assert wh.connect("coord", "deid_t_analyst").execute(
        "SELECT deid.drop_release('ra_down')").fetchone()[0]


def test_verify_is_for_a_deid_admin_and_checks_every_part(wh):
    wh.connect("coord", "deid_t_analyst").execute(ANATOMY, ["ra_verify"])
    wh.connect("node0", "deid_t_analyst").execute(ANATOMY, ["ra_verify_single"])
    with pytest.raises(psycopg.Error) as one:
        wh.connect("node0", "deid_t_analyst").execute(
            "SELECT deid.verify_release('ra_verify_single')")
    for who in ("deid_t_analyst", "deid_t_attacker"):
        with pytest.raises(psycopg.Error) as dist:
            wh.connect("coord", who).execute("SELECT deid.verify_release('ra_verify')")
        assert dist.value.diag.sqlstate == one.value.diag.sqlstate == "42501"
        assert dist.value.diag.message_primary == one.value.diag.message_primary
    with superuser("coord") as c:
        run = c.execute("SELECT run FROM deid.distributed_release WHERE name = 'ra_verify'"
                        ).fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        wh.connect("coord", "deid_t_analyst").execute("SELECT deid._dist_verify('deid_shards', %s)",
                                                      [run])
    assert e.value.diag.sqlstate == "42501"
    admin = wh.connect("coord", "deid_t_admin")
    report = admin.execute("SELECT deid.verify_release('ra_verify')").fetchone()[0]
    assert report["verified"] is True and report["release"] == "ra_verify"
    assert len(report["parts"]) == len(NODES)
    assert all(p["report"]["verified"] for p in report["parts"])
    with superuser("node1") as c:          # a part changed on a node: DE002
        table = c.execute("SELECT relations[1] FROM deid.release WHERE name = 'ra_verify'"
                          " AND status = 'committed'").fetchone()[0].split(".", 1)[1]
        c.execute(psycopg.sql.SQL("UPDATE deid_release.{} SET age = age + 1 WHERE ctid ="
                                  " (SELECT min(ctid) FROM deid_release.{})").format(
            psycopg.sql.Identifier(table.strip('"')), psycopg.sql.Identifier(table.strip('"'))))
    with pytest.raises(psycopg.Error) as e:
        admin.execute("SELECT deid.verify_release('ra_verify')")
    assert e.value.diag.sqlstate == "DE002"


@pytest.fixture(scope="module")
def gen_ready(warehouse, request):
    """The distributed generalization source of test_cluster_generalization.py (its fixture,
    unless that module already made it in this session: its hierarchies exist then)."""
    with superuser("coord") as c:
        ready = c.execute("SELECT 1 FROM deid.distributed_source"
                          " WHERE source = to_regclass(%s)", [GEN]).fetchone()
    return warehouse if ready else request.getfixturevalue("gen_warehouse")


def test_verify_of_a_distributed_generalization_checks_k_over_every_part(gen_ready):
    wh = gen_ready
    wh.connect("coord", "deid_t_analyst").execute(GEN_REQUEST, [GEN, 5, '{"seed": 1}', "ra_gen"])
    report = wh.connect("coord", "deid_t_admin").execute(
        "SELECT deid.verify_release('ra_gen')").fetchone()[0]
    assert report["verified"] is True
    assert report["merged"]["nodes"] == len(NODES)


def test_the_node_side_drop_and_verify_refuse_another_roles_part(wh):
    """deid._dist_node_drop / _dist_node_verify (SECURITY DEFINER on every node), called on a
    node by hand with the run of another role's release: naming the requester as the caller or
    naming oneself, the attacker is refused and the part stays."""
    wh.connect("coord", "deid_t_analyst").execute(ANATOMY, ["ra_node_side"])
    with superuser("coord") as c:
        run = c.execute("SELECT run FROM deid.distributed_release WHERE name = 'ra_node_side'"
                        ).fetchone()[0]
    before = state("ra_node_side")
    for fn in ("_dist_node_drop", "_dist_node_verify"):
        for caller in ("deid_t_analyst", "deid_t_attacker"):
            with pytest.raises(psycopg.Error) as e:
                wh.connect("node0", "deid_t_attacker").execute(
                    psycopg.sql.SQL("SELECT deid.{}(%s, %s)").format(psycopg.sql.Identifier(fn)),
                    [run, caller])
            assert e.value.diag.sqlstate == "42501", (fn, caller)
    assert state("ra_node_side") == before
    assert wh.connect("coord", "deid_t_reader").execute(
        "SELECT count(*) FROM release.ra_node_side_qit").fetchone()[0] > 0
