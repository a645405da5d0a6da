"""Generalization over shards for a requester without SELECT (a policy's): the nodes' class
tables, the coordinator's choice, the parts' reports and their stored classes travel sealed
through the caller's PL/Proxy session (distributed/sealed_generalization.py). The caller gets
the release the single server gives, can neither read nor forge what it carries (a bad tag:
DE002), and every refusal that depends on the rows is the uniform one, with no count."""
import base64
import json

import psycopg
import pytest

from .conftest import NODES, member_url, orphan_runs
from .test_cluster_generalization import GEN, GEN_REQUEST, gen_warehouse  # noqa: F401 (fixture)

RESEARCHER = "deid_t_researcher"
COLUMNS = "{age,sex,race,pt,diagnosis}"
OPTIONS = json.dumps({"seed": 1})
REFUSAL = "the request cannot be released under its privacy model"
CLASSES = ("SELECT r FROM deid._dist_gen_classes_sealed('deid_shards', %s, %s, 5,"
           " %s::text[], NULL, %s) AS r")
STORE = ("SELECT deid._dist_node_store_part_sealed(%s, 0, %s, %s, %s::text[], NULL, %s, %s, %s)")


@pytest.fixture(scope="module")
def gen_ready(warehouse, request):
    """The distributed generalization source of test_cluster_generalization.py (its fixture,
    unless another module already made it in this session: its hierarchies exist then)."""
    with psycopg.connect(member_url("coord"), autocommit=True) as c:
        ready = c.execute("SELECT 1 FROM deid.distributed_source"
                          " WHERE source = to_regclass(%s)", [GEN]).fetchone()
    return warehouse if ready else request.getfixturevalue("gen_warehouse")


@pytest.fixture(scope="module")
def policy(gen_ready):
    gen_ready.on_all("SELECT deid.allow_requests(%s, %s, 5)", [RESEARCHER, GEN])
    return gen_ready


def superuser(who):
    return psycopg.connect(member_url(who), autocommit=True)


def nothing_on_nodes(name):
    for m in NODES:
        with superuser(m) as c:
            assert not c.execute("SELECT 1 FROM deid.release WHERE name = %s AND status ="
                                 " 'committed'", [name]).fetchall(), m
    assert orphan_runs() == {n: [] for n in NODES}


def test_a_policy_requester_gets_the_single_server_release(policy):
    w = policy
    row = w.connect("coord", RESEARCHER).execute(GEN_REQUEST, [GEN, 5, OPTIONS, "gp_rel"]).fetchone()
    # the single server: the same requester, its policy on every node's rows in one table
    w.connect("coord").execute("SELECT deid.allow_requests(%s, %s, 5)",
                               [RESEARCHER, GEN.replace("_gen", "_all")])
    whole = w.connect("coord", RESEARCHER).execute(
        GEN_REQUEST, [GEN.replace("_gen", "_all"), 5, OPTIONS, "gp_rel_one"]).fetchone()
    assert row[5] and row[2:4] == whole[2:4] and row[4] == pytest.approx(whole[4])
    reader = w.connect("coord", "deid_t_reader")
    cols = "age, sex, race, pt"
    got = reader.execute(f"SELECT {cols}, count(*) FROM release.gp_rel GROUP BY {cols}"
                         f" ORDER BY {cols}").fetchall()
    want = reader.execute(f"SELECT {cols}, count(*) FROM release.gp_rel_one GROUP BY {cols}"
                          f" ORDER BY {cols}").fetchall()
    assert got == want
    with superuser("coord") as c:
        metrics = c.execute("SELECT metrics FROM deid.distributed_release WHERE name = 'gp_rel'"
                            ).fetchone()[0]
    assert metrics["verification"]["nodes"] == 2


def _clear_table(w):
    return bytes(w.connect("node0", "deid_t_analyst").execute(
        "SELECT deid._dist_node_gen_classes('gp_clear', %s, 5, %s::text[], NULL, %s)",
        [GEN, COLUMNS, OPTIONS]).fetchone()[0])


def test_the_caller_can_neither_read_nor_forge_the_sealed_bytes(policy):
    w = policy
    researcher = w.connect("coord", RESEARCHER)
    sealed = [bytes(r) for (r,) in researcher.execute(
        CLASSES, ["gp_run", GEN, COLUMNS, OPTIONS]).fetchall()]
    assert len(sealed) == 2
    clear = _clear_table(w)
    assert all(clear not in s and clear[-24:] not in s for s in sealed)
    with pytest.raises(psycopg.Error) as e:       # the clear step needs SELECT, as before
        researcher.execute("SELECT deid.generalization_levels(%s, 5, %s::text[], NULL, %s, %s)",
                           [GEN, COLUMNS, OPTIONS, sealed])
    assert e.value.diag.sqlstate == "42501"
    node = w.connect("node0", RESEARCHER)
    flipped = bytearray(sealed[0])
    flipped[len(flipped) // 2] ^= 1
    for chosen in [base64.b64encode(bytes(flipped)).decode(),       # altered
                   base64.b64encode(sealed[0]).decode(),           # a class table, not a choice
                   "not base64", None]:
        with pytest.raises(psycopg.Error) as e:
            node.execute(STORE, ["gp_run", GEN, 5, COLUMNS, OPTIONS, "gp_forged", chosen])
        assert e.value.diag.sqlstate == "DE002" and e.value.diag.message_hint
        assert e.value.diag.message_detail is None
    nothing_on_nodes("gp_forged")


def test_the_definers_refuse_another_role_and_another_sessions_run(policy):
    w = policy
    coord, node = w.connect("coord", "deid_t_attacker"), w.connect("node0", "deid_t_attacker")
    for conn, statement in [
            (coord, "SELECT deid._dist_gen_choose('0123', 'deid_t_researcher', 'r', NULL)"),
            (coord, "SELECT deid._dist_gen_choose('0123', 'deid_t_attacker', 'r', NULL)"),
            (coord, "SELECT deid._dist_gen_accept('r', 'deid_t_researcher', NULL, NULL, NULL)"),
            (coord, "SELECT deid._dist_gen_accept('r', 'deid_t_attacker', NULL, NULL, NULL)"),
            (node, "SELECT deid._dist_seal_classes('0123', 'deid_t_researcher', 'r')"),
            (node, "SELECT deid._dist_seal_classes('0123', 'deid_t_attacker', 'r')"),
            (node, "SELECT deid._dist_part_finish_sealed('0123', 'deid_t_researcher', 'r', 0, 'x')"),
            (node, "SELECT deid._dist_part_finish_sealed('0123', 'deid_t_attacker', 'r', 0, 'x')"),
            (node, "SELECT deid._dist_node_gen_stored_sealed('r', 'deid_t_researcher')")]:
        with pytest.raises(psycopg.Error) as e:
            conn.execute(statement)
        assert e.value.diag.sqlstate == "42501", statement


def _choice_by_hand(researcher, name):
    """The coordinator's steps driven by hand in one session: a run, the nodes' sealed tables,
    the coordinator's begin and its sealed choice for them."""
    args = ("jsonb_build_object('relid', %s::regclass::oid::bigint, 'method', 'generalization',"
            " 'k', 5, 'columns', %s::text[], 'options', %s::text, 'name', %s::text)")
    run = json.loads(researcher.execute(f"SELECT deid._dist_begin({args}, current_user)",
                                        [GEN, COLUMNS, OPTIONS, name]).fetchone()[0])["run"]
    tables = [r for (r,) in researcher.execute(CLASSES, [run, GEN, COLUMNS, OPTIONS]).fetchall()]
    token = researcher.execute(f"SELECT deid._request_begin({args}, current_user)",
                               [GEN, COLUMNS, OPTIONS, None]).fetchone()[0]
    chosen = researcher.execute("SELECT deid._dist_gen_choose(%s, current_user, %s, %s)",
                                [token, run, tables]).fetchone()[0]
    return run, chosen


def test_a_choice_opens_only_for_its_own_request(policy):
    """A choice made for one request (k = 5) is refused for a part of another (k = 6, or
    another selection): the sealed purpose carries the request's digest."""
    w = policy
    run, chosen = _choice_by_hand(w.connect("coord", RESEARCHER), "gp_by_hand")
    node = w.connect("node0", RESEARCHER)
    for k, selection in [(6, None), (5, "age > 40")]:
        with pytest.raises(psycopg.Error) as e:
            node.execute("SELECT deid._dist_node_store_part_sealed(%s, 0, %s, %s, %s::text[], %s,"
                         " %s, 'gp_other', %s)", [run, GEN, k, COLUMNS, selection, OPTIONS, chosen])
        assert e.value.diag.sqlstate == "DE002", (k, selection)
    nothing_on_nodes("gp_other")


def test_no_count_below_k_and_one_refusal_for_every_data_reason(policy):
    w = policy
    researcher = w.connect("coord", RESEARCHER)
    refusals = []
    for k, options, name in [(100000, OPTIONS, "gp_too_few"),
                             (5, json.dumps({"seed": 1, "limits": {"age": 0, "sex": 0,
                                                                   "race": 0, "pt": 0}}),
                              "gp_no_levels")]:
        with pytest.raises(psycopg.Error) as e:
            researcher.execute(GEN_REQUEST, [GEN, k, options, name])
        d = e.value.diag
        refusals.append((d.sqlstate, d.message_primary, d.message_hint, d.message_detail))
        nothing_on_nodes(name)
    assert refusals[0] == refusals[1]
    assert refusals[0][0] == "DE001" and refusals[0][1] == REFUSAL and refusals[0][3] is None


def test_the_sealed_class_step_is_no_oracle_for_near_duplicate_selections(policy):
    """Called by hand, the class step (which stores nothing) refuses what the single-node
    request refuses: a selection a few rows off an earlier release's, with the uniform DE001."""
    w = policy
    with superuser("coord") as c:     # a cell of 1 to 4 rows, over both nodes
        rare = c.execute("SELECT age, sex, race FROM registry.patients_all GROUP BY age, sex, race"
                         " HAVING count(*) BETWEEN 1 AND 4 ORDER BY 1, 2, 3 LIMIT 1").fetchone()
    assert rare is not None, "the fixed sample holds a cell of 1 to 4 rows"
    age, sex, race = rare
    others = f"(age <> {age} OR sex <> '{sex}' OR race <> '{race}')"      # all but that cell
    researcher = w.connect("coord", RESEARCHER)
    researcher.execute(GEN_REQUEST.replace("release =>", "selection => 'age >= 0', release =>"),
                       [GEN, 5, OPTIONS, "gp_all"])
    probe = ("SELECT r FROM deid._dist_gen_classes_sealed('deid_shards', 'gp_probe', %s, 5,"
             " %s::text[], %s, %s) AS r")
    assert len(researcher.execute(probe, [GEN, COLUMNS, "age >= 0", OPTIONS]).fetchall()) == 2
    with pytest.raises(psycopg.Error) as e:
        researcher.execute(probe, [GEN, COLUMNS, others, OPTIONS]).fetchall()
    assert e.value.diag.sqlstate == "DE001" and REFUSAL in e.value.diag.message_primary
    assert e.value.diag.message_detail is None


def test_a_forged_request_jsonb_is_refused(policy):
    """The run's arguments are the jsonb deid's wrapper builds: another key (a claimed grant,
    say) or a wrong type is refused before anything is read; below the policy's k, 42501."""
    w = policy
    researcher = w.connect("coord", RESEARCHER)
    base = ("jsonb_build_object('relid', %s::regclass::oid::bigint, 'method', 'generalization',"
            " 'k', 5, 'columns', %s::text[], 'options', %s::text, 'name', 'gp_forged_args')")
    for forged in [f"{base} || jsonb_build_object('via', 'select')",
                   f"{base} || jsonb_build_object('k', '5')",
                   f"{base} || jsonb_build_object('columns', 'age')"]:
        with pytest.raises(psycopg.Error) as e:
            researcher.execute(f"SELECT deid._dist_begin({forged}, current_user)",
                               [GEN, COLUMNS, OPTIONS])
        assert e.value.diag.sqlstate == "22023" and e.value.diag.message_hint, forged
    with pytest.raises(psycopg.Error) as e:
        w.connect("node0", RESEARCHER).execute(
            "SELECT deid._dist_node_gen_sealed_classes('gp_low_k', %s, 4, %s::text[], NULL, %s)",
            [GEN, COLUMNS, OPTIONS])
    assert e.value.diag.sqlstate == "42501"
    with superuser("coord") as c:
        assert not c.execute("SELECT 1 FROM deid.distributed_release WHERE name ="
                             " 'gp_forged_args'").fetchall()
    nothing_on_nodes("gp_forged_args")
