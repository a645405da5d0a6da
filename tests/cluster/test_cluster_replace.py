"""options.replace on the coordinator: a distributed release re-released under its name, all
or nothing. The new parts are stored under a name of their own on the nodes; the coordinator's
views and log row switch to them in its transaction; the old parts are dropped after. A
replacement that fails leaves the old release as it was; only its requester or a deid_admin
may replace it."""
import psycopg
import pytest

from .conftest import NODES, member_url, orphan_runs
from .test_cluster_generalization import GEN, GEN_REQUEST, gen_warehouse  # noqa: F401 (fixture)

REQUEST = ("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => %s, l => 2,"
           " columns => '{age,sex,race,zip,diagnosis}', options => %s, release => %s)")
REPLACE = '{"seed": 9, "replace": true}'


def superuser(who):
    return psycopg.connect(member_url(who), autocommit=True)


def logged(name):
    with superuser("coord") as c:
        return c.execute("SELECT release_id, run, relations FROM deid.distributed_release"
                         " WHERE name = %s", [name]).fetchall()


def node_statuses(run):
    out = {}
    for m in NODES:
        with superuser(m) as c:
            out[m] = c.execute("SELECT r.status FROM deid.distributed_part p JOIN deid.release r"
                               " USING (release_id) WHERE p.run = %s", [run]).fetchall()
    return out


def wh_rows(who, name):
    with psycopg.connect(member_url("coord"), user=who, autocommit=True) as c:
        return sorted(c.execute(f"SELECT age, sex, race, zip, group_id, node FROM release.{name}_qit"
                                ).fetchall())


def test_the_requester_replaces_a_distributed_release(wh):
    analyst = wh.connect("coord", "deid_t_analyst")
    analyst.execute(REQUEST, [10, '{"seed": 9}', "rp_a"])
    [(old_id, old_run, relations)] = logged("rp_a")
    before = wh_rows("deid_t_reader", "rp_a")
    row = analyst.execute(REQUEST, [10, REPLACE, "rp_a"]).fetchone()
    assert row[-1] is True and row[1] == relations
    [(new_id, new_run, new_relations)] = logged("rp_a")
    assert new_id == row[0] != old_id and new_run != old_run and new_relations == relations
    assert wh_rows("deid_t_reader", "rp_a") == before        # the same seed: the same release
    assert node_statuses(old_run) == {m: [] for m in NODES}  # the old parts went
    for m in NODES:
        with superuser(m) as c:
            assert c.execute("SELECT count(*) FROM deid.release WHERE name = 'rp_a'"
                             " AND status = 'dropped'").fetchone()[0] == 1
    assert orphan_runs() == {n: [] for n in NODES}


def test_without_replace_the_name_is_taken(wh):
    analyst = wh.connect("coord", "deid_t_analyst")
    analyst.execute(REQUEST, [10, '{"seed": 9}', "rp_taken"])
    with pytest.raises(psycopg.Error) as e:
        analyst.execute(REQUEST, [10, '{"seed": 9}', "rp_taken"])
    assert e.value.diag.sqlstate == "42P07" and "replace" in e.value.diag.message_hint


def test_another_role_cannot_replace_and_nothing_changes(wh):
    wh.connect("coord", "deid_t_analyst").execute(REQUEST, [10, '{"seed": 9}', "rp_theirs"])
    before = logged("rp_theirs")
    for who in ("deid_t_attacker", "deid_t_reader", "deid_t_researcher"):
        with pytest.raises(psycopg.Error) as e:
            wh.connect("coord", who).execute(REQUEST, [10, REPLACE, "rp_theirs"])
        assert e.value.diag.sqlstate == "42501", who
        assert e.value.diag.message_hint
    assert logged("rp_theirs") == before
    assert orphan_runs() == {n: [] for n in NODES}


def test_a_replacement_refused_on_a_node_leaves_the_old_release(wh):
    analyst = wh.connect("coord", "deid_t_analyst")
    analyst.execute(REQUEST, [10, '{"seed": 9}', "rp_keep"])
    before, seen = logged("rp_keep"), wh_rows("deid_t_reader", "rp_keep")
    with pytest.raises(psycopg.Error):
        analyst.execute(REQUEST, [100000, REPLACE, "rp_keep"])   # no node reaches K
    assert logged("rp_keep") == before
    assert wh_rows("deid_t_reader", "rp_keep") == seen
    assert orphan_runs() == {n: [] for n in NODES}


@pytest.fixture(scope="module")
def gen_ready(warehouse, request):
    """The distributed generalization source of test_cluster_generalization.py."""
    with superuser("coord") as c:
        ready = c.execute("SELECT 1 FROM deid.distributed_source"
                          " WHERE source = to_regclass(%s)", [GEN]).fetchone()
    return warehouse if ready else request.getfixturevalue("gen_warehouse")


def test_a_distributed_generalization_is_replaced_with_its_merged_check(gen_ready):
    analyst = gen_ready.connect("coord", "deid_t_analyst")
    analyst.execute(GEN_REQUEST, [GEN, 5, '{"seed": 1}', "rp_gen"])
    [(old_id, old_run, relations)] = logged("rp_gen")
    with psycopg.connect(member_url("coord"), user="deid_t_reader", autocommit=True) as c:
        before = sorted(c.execute("SELECT age, sex, race, pt FROM release.rp_gen").fetchall())
    analyst.execute(GEN_REQUEST, [GEN, 5, '{"seed": 1, "replace": true}', "rp_gen"])
    [(new_id, new_run, new_relations)] = logged("rp_gen")
    assert new_id != old_id and new_relations == relations
    with psycopg.connect(member_url("coord"), user="deid_t_reader", autocommit=True) as c:
        assert sorted(c.execute("SELECT age, sex, race, pt FROM release.rp_gen").fetchall()) == before
    assert node_statuses(old_run) == {m: [] for m in NODES}
    assert orphan_runs() == {n: [] for n in NODES}
