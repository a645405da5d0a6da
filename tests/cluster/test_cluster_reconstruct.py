"""deid.reconstruct on the coordinator for a distributed disassociation release (003 Fig. 5):
every node draws a reconstruction of its own part, as the caller, and the coordinator's view
reads their union (each record with its node). Who may reconstruct is decided on every node as
on one node (the release's requester or a deid_admin there): a role that may not reconstruct
on one node may not through the coordinator, and a refusal on any node leaves nothing on any
member. A part the coordinator never logged is no release, through the coordinator or by hand."""
from collections import Counter

import psycopg
import pytest

from .conftest import MEMBERS, NODES, member_url

DISASSOCIATION = ("SELECT * FROM deid.anonymize_request('registry.diagnoses', 'disassociation',"
                  " k => 5, options => '{\"m\": 2, \"record\": \"patient_id\", \"item\": \"icd9\","
                  " \"seed\": 7}', release => %s)")
RECONSTRUCT = "SELECT deid.reconstruct(%s, %s, seed => 3)"


def superuser(who):
    return psycopg.connect(member_url(who), autocommit=True)


def reconstructions(target):
    """{member: (relations named target in release/deid_release, reconstruction log rows)}."""
    out = {}
    for m in MEMBERS:
        with superuser(m) as c:
            out[m] = (
                c.execute("SELECT count(*) FROM pg_class WHERE relname = %s AND relnamespace IN"
                          " ('release'::regnamespace, 'deid_release'::regnamespace)",
                          [target]).fetchone()[0],
                c.execute("SELECT count(*) FROM deid.reconstruction WHERE relation = %s",
                          ["release." + target]).fetchone()[0])
    return out


NOTHING = {m: (0, 0) for m in MEMBERS}


def run_of(name):
    with superuser("coord") as c:
        return c.execute("SELECT release_id, run FROM deid.distributed_release WHERE name = %s",
                         [name]).fetchone()


def test_a_role_that_may_not_reconstruct_on_a_node_may_not_through_the_coordinator(wh):
    wh.connect("coord", "deid_t_analyst").execute(DISASSOCIATION, ["rc_deny"])
    wh.connect("node0", "deid_t_analyst").execute(DISASSOCIATION, ["rc_deny_single"])
    with pytest.raises(psycopg.Error) as one:
        wh.connect("node0", "deid_t_attacker").execute(RECONSTRUCT, ["rc_deny_single", "rc_x"])
    assert one.value.diag.sqlstate == "42501"
    for who in ("deid_t_attacker", "deid_t_reader"):
        with pytest.raises(psycopg.Error) as dist:
            wh.connect("coord", who).execute(RECONSTRUCT, ["rc_deny", "rc_deny_r"])
        assert dist.value.diag.sqlstate == "42501", who
        assert dist.value.diag.message_primary == one.value.diag.message_primary
        assert dist.value.diag.message_hint == one.value.diag.message_hint
    assert reconstructions("rc_deny_r") == NOTHING
    # a deid_admin of the coordinator and of node0 only: node1 refuses, and nothing is drawn on
    # node0 either (every node is asked before any draws)
    for m in ("coord", "node0"):
        with superuser(m) as c:
            c.execute("GRANT deid_admin TO deid_t_attacker")
    try:
        with pytest.raises(psycopg.Error) as e:
            wh.connect("coord", "deid_t_attacker").execute(RECONSTRUCT, ["rc_deny", "rc_deny_r"])
        assert e.value.diag.sqlstate == "42501"
        assert e.value.diag.message_primary == one.value.diag.message_primary
    finally:
        for m in ("coord", "node0"):
            with superuser(m) as c:
                c.execute("REVOKE deid_admin FROM deid_t_attacker")
    assert reconstructions("rc_deny_r") == NOTHING


def test_the_definers_refuse_another_role_and_a_forged_proof(wh):
    wh.connect("coord", "deid_t_analyst").execute(DISASSOCIATION, ["rc_forge"])
    release_id, run = run_of("rc_forge")
    coord_attacker = wh.connect("coord", "deid_t_attacker")
    for statement in ["SELECT deid._dist_reconstruct_of('rc_forge', 'rc_forge_r', 'deid_t_analyst')",
                      "SELECT deid._dist_reconstruct_of('rc_forge', 'rc_forge_r', 'deid_t_attacker')",
                      "SELECT deid._dist_reconstruct_finish('rc_forge', 'rc_forge_r', 1, 0,"
                      " 'deid_t_analyst')",
                      "SELECT deid._dist_reconstruct_finish('rc_forge', 'rc_forge_r', 1, 0,"
                      " 'deid_t_attacker')"]:
        with pytest.raises(psycopg.Error) as e:
            coord_attacker.execute(statement)
        assert e.value.diag.sqlstate == "42501", statement
    for who, caller, proof in [("deid_t_attacker", "deid_t_analyst", "0" * 64),
                               ("deid_t_attacker", "deid_t_attacker", "0" * 64),
                               ("deid_t_analyst", "deid_t_analyst", "0" * 64),
                               ("deid_t_analyst", "deid_t_analyst", None)]:
        for step in ("check", "draw", "undo"):
            with pytest.raises(psycopg.Error) as e:
                wh.connect("node0", who).execute(
                    "SELECT deid._dist_node_reconstruct(%s, %s, 'rc_forge_r', 1, 0, %s, %s)",
                    [run, proof, step, caller])
            assert e.value.diag.sqlstate == "42501", (who, caller, step)
    with superuser("coord") as c:               # the right proof (leaked), but not the requester
        proof = c.execute("SELECT deid._dist_keyed(%s)", [run]).fetchone()[0]
    for step in ("check", "draw", "undo"):
        with pytest.raises(psycopg.Error) as e:
            coord_attacker.execute("SELECT deid._dist_reconstruct('deid_shards', %s, %s,"
                                   " 'rc_forge_r', 1, 0, %s)", [run, proof, step])
        assert e.value.diag.sqlstate == "42501", step
    assert reconstructions("rc_forge_r") == NOTHING


def test_the_requester_reconstructs_every_part_through_the_coordinator(wh):
    analyst = wh.connect("coord", "deid_t_analyst")
    analyst.execute(DISASSOCIATION, ["rc_ok"])
    with superuser("coord") as c:      # never read yet: its parts are still marked pending
        parts = c.execute("SELECT parts FROM deid.distributed_release WHERE name = 'rc_ok'"
                          ).fetchone()[0]
    n = analyst.execute(RECONSTRUCT, ["rc_ok", "rc_ok_r"]).fetchone()[0]
    assert n == sum(p["rows"] for p in parts)
    # the coordinator's view; each node's table and its view (withheld there)
    assert reconstructions("rc_ok_r") == {"coord": (1, 1), **{m: (2, 1) for m in NODES}}
    reader = wh.connect("coord", "deid_t_reader")
    rows = reader.execute("SELECT node, record_id, codes FROM release.rc_ok_r").fetchall()
    assert len(rows) == n
    assert Counter(node for node, _, _ in rows) == Counter({p["node"]: p["rows"] for p in parts})
    released = {c for (codes,) in reader.execute(
        "SELECT codes FROM release.rc_ok_record_chunk UNION ALL"
        " SELECT codes FROM release.rc_ok_shared_chunk").fetchall() for c in codes or ()} | {
        c for (c,) in reader.execute("SELECT code FROM release.rc_ok_item_chunk").fetchall()}
    assert {c for _, _, codes in rows for c in codes or ()} <= released
    for m in NODES:      # what the view shows of a node is what that node drew
        with superuser(m) as c:
            node = c.execute("SELECT current_database() || ':' || current_setting('port')"
                             ).fetchone()[0]
            stored = c.execute("SELECT record_id, codes FROM deid_release.rc_ok_r ORDER BY 1"
                               ).fetchall()
        assert sorted((r, cs) for nd, r, cs in rows if nd == node) == stored
        with pytest.raises(psycopg.Error) as e:   # on the node itself: read through the coordinator
            wh.connect(m, "deid_t_analyst").execute("SELECT count(*) FROM release.rc_ok_r")
        assert e.value.diag.sqlstate == "42501"
    with pytest.raises(psycopg.Error) as e:
        wh.connect("coord", "deid_t_attacker").execute("SELECT count(*) FROM release.rc_ok_r")
    assert e.value.diag.sqlstate == "42501"
    before = reconstructions("rc_ok_r")
    with pytest.raises(psycopg.Error) as e:        # the same target again: refused, nothing changes
        analyst.execute(RECONSTRUCT, ["rc_ok", "rc_ok_r"])
    assert e.value.diag.sqlstate == "42P07" and e.value.diag.message_hint
    assert reconstructions("rc_ok_r") == before
    analyst.execute("SELECT deid.drop_release('rc_ok')")     # the reconstruction goes with it
    assert {m: v[0] for m, v in reconstructions("rc_ok_r").items()} == {m: 0 for m in MEMBERS}


def test_a_part_the_coordinator_never_logged_is_no_release(wh):
    """A part made by driving a node's store by hand stays pending under a run the
    coordinator never logged: no proof exists for it, so no node reconstructs it."""
    node = wh.connect("node0", "deid_t_analyst")
    node.execute("SELECT deid._dist_node_store('rc_unlogged_run', 0, 'registry.diagnoses',"
                 " jsonb_build_object('method', 'disassociation', 'k', 5, 'options',"
                 " '{\"m\": 2, \"record\": \"patient_id\", \"item\": \"icd9\"}', 'name',"
                 " 'rc_pending'))")
    try:
        with pytest.raises(psycopg.Error) as e:
            node.execute(RECONSTRUCT, ["rc_pending", "rc_pending_r"])
        assert e.value.diag.sqlstate == "42704"
        with pytest.raises(psycopg.Error) as e:
            wh.connect("coord", "deid_t_analyst").execute(RECONSTRUCT,
                                                          ["rc_pending", "rc_pending_r"])
        assert e.value.diag.sqlstate == "42704"
        for step in ("check", "draw"):
            with pytest.raises(psycopg.Error) as e:
                node.execute("SELECT deid._dist_node_reconstruct('rc_unlogged_run', %s,"
                             " 'rc_pending_r', 1, 0, %s, 'deid_t_analyst')", ["0" * 64, step])
            assert e.value.diag.sqlstate == "42501"
        assert reconstructions("rc_pending_r") == NOTHING
    finally:
        wh.connect("coord", "deid_t_analyst").execute("SELECT deid.cleanup_distributed()")
