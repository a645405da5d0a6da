"""The single-node attacks that apply, against the sharded warehouse: the caller is the caller on
every node (its own role, that node's grants, policies and code checks), a part is readable only
through the coordinator's logged release, and every new SECURITY DEFINER function of the
distributed path refuses a caller who names another role or another's run."""
import psycopg
import pytest

from .conftest import MEMBERS, NODES, member_url, orphan_runs

REFUSAL = "the request cannot be released under its privacy model"
ANATOMY = ("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => %s, l => %s,"
           " columns => '{age,sex,race,zip,diagnosis}', options => '{\"seed\": 3}', release => %s)")


def superuser(who):
    return psycopg.connect(member_url(who), autocommit=True)


def nothing_left(name):
    """No part, table or view of release `name` on any member; no pending part of a run the
    coordinator did not log, anywhere."""
    for m in MEMBERS:
        with superuser(m) as c:
            assert not c.execute("SELECT 1 FROM pg_class WHERE relname LIKE %s AND relnamespace"
                                 " IN ('release'::regnamespace, 'deid_release'::regnamespace)",
                                 [name + "%"]).fetchall(), m
    assert orphan_runs() == {n: [] for n in NODES}


def run_of(name):
    with superuser("coord") as c:
        return c.execute("SELECT release_id, run FROM deid.distributed_release WHERE name = %s",
                         [name]).fetchone()


def test_no_select_on_one_node_is_the_single_node_refusal(wh):
    wh.on_all("REVOKE SELECT ON registry.patients FROM deid_t_analyst", members=["node1"])
    try:
        with pytest.raises(psycopg.Error) as one:
            wh.connect("node1", "deid_t_analyst").execute(ANATOMY, [10, 2, "sec_one_node"])
        with pytest.raises(psycopg.Error) as dist:
            wh.connect("coord", "deid_t_analyst").execute(ANATOMY, [10, 2, "sec_no_select"])
    finally:
        wh.on_all("GRANT SELECT ON registry.patients TO deid_t_analyst", members=["node1"])
    assert dist.value.diag.sqlstate == one.value.diag.sqlstate == "42501"
    assert dist.value.diag.message_primary == one.value.diag.message_primary
    assert dist.value.diag.message_hint
    nothing_left("sec_no_select")


def test_a_hostile_view_on_a_node_runs_no_code_as_the_caller(wh):
    for i, m in enumerate(MEMBERS):
        with superuser(m) as c:
            c.execute("DROP SCHEMA IF EXISTS att CASCADE")
            c.execute("CREATE SCHEMA att AUTHORIZATION deid_t_attacker")
        with psycopg.connect(member_url(m), user="deid_t_attacker", autocommit=True) as a:
            a.execute("CREATE TABLE att.log (who name)")
            a.execute("GRANT INSERT ON att.log TO PUBLIC")
            a.execute("CREATE TABLE att.t (id int PRIMARY KEY, age int, dx text)")
            if m != "coord":
                a.execute("INSERT INTO att.t SELECT g, g %% 50, 'd' || (g %% 4) FROM"
                          " generate_series(%s::int, %s::int) g", [100 * i, 100 * i + 60])
            a.execute("CREATE FUNCTION att.probe(int) RETURNS boolean LANGUAGE plpgsql AS"
                      " $$BEGIN INSERT INTO att.log VALUES (current_user); RETURN true; END$$")
            a.execute("CREATE VIEW att.v AS SELECT id, age, dx FROM att.t WHERE att.probe(age)")
            a.execute("GRANT USAGE ON SCHEMA att TO deid_t_analyst")
            a.execute("GRANT SELECT ON att.v TO deid_t_analyst")
        with superuser(m) as c:
            c.execute("SELECT deid.set_role('att.v', 'age', 'quasi_identifier'),"
                      " deid.set_role('att.v', 'dx', 'sensitive')")
    wh.connect("coord", "deid_t_attacker").execute(
        "SELECT deid.register_distributed_source('att.v', 'deid_shards', 'id')")
    with pytest.raises(psycopg.Error) as e:
        wh.connect("coord", "deid_t_analyst").execute(
            "SELECT * FROM deid.anonymize_request('att.v', 'anatomy', k => 2, l => 2,"
            " columns => '{age,dx}', options => '{\"row_id\": \"id\"}', release => 'sec_hostile')")
    assert e.value.diag.sqlstate == "42501" and "att.probe" in e.value.diag.message_primary
    for m in NODES:
        with superuser(m) as c:
            assert c.execute("SELECT who FROM att.log").fetchall() == [], m
    nothing_left("sec_hostile")


def test_a_policy_requester_gets_the_uniform_refusal_and_its_release(wh):
    for m in MEMBERS:
        with superuser(m) as c:
            c.execute("SELECT deid.allow_requests('deid_t_researcher', 'registry.patients', 5, 2)")
    researcher = wh.connect("coord", "deid_t_researcher")
    with pytest.raises(psycopg.Error) as e:       # more than a node holds: refused on that node
        researcher.execute(ANATOMY, [2000, 2, "sec_policy_big"])
    assert e.value.diag.sqlstate == "DE001" and e.value.diag.message_primary == REFUSAL
    assert e.value.diag.message_detail is None
    nothing_left("sec_policy_big")
    row = researcher.execute(ANATOMY, [10, 2, "sec_policy"]).fetchone()
    assert row[-1] is True
    assert researcher.execute("SELECT count(*) FROM release.sec_policy_qit").fetchone()[0] == row[2]
    with pytest.raises(psycopg.Error) as e:       # no SELECT: no selection on a sensitive column
        researcher.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy',"
                           " k => 10, l => 2, columns => '{age,sex,diagnosis}',"
                           " selection => $$diagnosis = 'C50'$$, release => 'sec_policy_sel')")
    assert e.value.diag.sqlstate == "42501"


def test_parts_are_read_only_through_the_logged_release(wh):
    analyst = wh.connect("coord", "deid_t_analyst")
    analyst.execute(ANATOMY, [10, 2, "sec_read"])
    release_id, run = run_of("sec_read")
    attacker, reader = wh.connect("coord", "deid_t_attacker"), wh.connect("coord", "deid_t_reader")
    assert reader.execute("SELECT count(*) FROM release.sec_read_qit").fetchone()[0] > 0
    for statement, params in [
            ("SELECT count(*) FROM release.sec_read_qit", None),
            ("SELECT * FROM deid._dist_proof(%s, 'deid_t_attacker')", [release_id]),
            ("SELECT * FROM deid._dist_proof(%s, 'deid_t_analyst')", [release_id]),
            ("SELECT * FROM deid._dist_fetch('deid_shards', %s, %s, 'sec_read_qit') AS t(g int)",
             [run, "0" * 64])]:
        with pytest.raises(psycopg.Error) as e:
            attacker.execute(statement, params)
        assert e.value.diag.sqlstate == "42501", statement
    with pytest.raises(psycopg.Error) as e:          # a reader without the proof: nothing either
        reader.execute("SELECT * FROM deid._dist_fetch('deid_shards', %s, %s, 'sec_read_qit')"
                       " AS t(g int)", [run, "0" * 64])
    assert e.value.diag.sqlstate == "42501"
    with pytest.raises(psycopg.Error) as e:          # on a node, the part's own view: revoked
        wh.connect("node0", "deid_t_analyst").execute("SELECT count(*) FROM release.sec_read_qit")
    assert e.value.diag.sqlstate == "42501"


def test_another_roles_parts_cannot_be_removed_held_or_checked(wh):
    wh.connect("coord", "deid_t_analyst").execute(ANATOMY, [10, 2, "sec_abort"])
    release_id, run = run_of("sec_abort")
    attacker = wh.connect("coord", "deid_t_attacker")
    for statement in ["SELECT deid._dist_abort_on('deid_shards', 0, %s)",
                      "SELECT deid._dist_check('deid_shards', %s)"]:
        with pytest.raises(psycopg.Error) as e:
            attacker.execute(statement, [run])
        assert e.value.diag.sqlstate == "42501", statement
    assert attacker.execute("SELECT deid.cleanup_distributed()").fetchone()[0] == 0
    node = wh.connect("node0", "deid_t_attacker")
    with superuser("node0") as c:
        part_id = c.execute("SELECT release_id FROM deid.distributed_part WHERE run = %s",
                            [run]).fetchone()[0]
    for caller in ["deid_t_attacker", "deid_t_analyst"]:
        with pytest.raises(psycopg.Error) as e:
            node.execute("SELECT deid._dist_hold(%s, 'x', 1, %s)", [part_id, caller])
        assert e.value.diag.sqlstate == "42501", caller
        with pytest.raises(psycopg.Error) as e:
            node.execute("SELECT deid._dist_node_abort(%s, %s)", [run, caller])
        assert e.value.diag.sqlstate == "42501", caller
    assert node.execute("SELECT deid._dist_node_pending('deid_t_attacker')").fetchone()[0] == "[]"
    assert wh.connect("coord", "deid_t_reader").execute(
        "SELECT count(*) FROM release.sec_abort_qit").fetchone()[0] > 0


def test_the_coordinators_definers_refuse_another_role_and_forged_parts(wh):
    attacker = wh.connect("coord", "deid_t_attacker")
    for statement in [
            "SELECT deid.register_distributed_source('registry.patients', 'deid_shards', 'age')",
            "SELECT * FROM deid._dist_finish('0123', 'deid_t_attacker')",
            "SELECT * FROM deid._dist_finish('0123', 'deid_t_analyst')",
            "SELECT deid._dist_begin(jsonb_build_object('relid', 'registry.patients'::regclass::oid"
            "::bigint, 'method', 'anatomy', 'k', 5, 'l', 2, 'options', '{}', 'name', 'sec_forged'),"
            " 'deid_t_analyst')"]:
        with pytest.raises(psycopg.Error) as e:
            attacker.execute(statement)
        assert e.value.diag.sqlstate == "42501", statement
    with pytest.raises(psycopg.Error) as e:     # a run of its own, driven by hand: no parts to log
        args = ("jsonb_build_object('relid', 'registry.patients'::regclass::oid::bigint,"
                " 'method', 'anatomy', 'k', 5, 'l', 2, 'options', '{}', 'name', '%s')")
        attacker.execute(f"SELECT deid._dist_begin({args % 'sec_forged'}, 'deid_t_attacker') AS r,"
                         f" deid._dist_finish((deid._dist_begin({args % 'sec_forged2'},"
                         " 'deid_t_attacker')::jsonb)->>'run', 'deid_t_attacker')")
    assert e.value.diag.sqlstate == "42501"
    with pytest.raises(psycopg.Error) as e:     # not the owner: not registered
        wh.connect("coord", "deid_t_analyst").execute(
            "SELECT deid.register_distributed_source('registry.patients', 'deid_shards', 'age')")
    assert e.value.diag.sqlstate == "42501" and e.value.diag.message_hint
    with superuser("coord") as c:
        assert c.execute("SELECT key_column FROM deid.distributed_source WHERE source ="
                         " 'registry.patients'::regclass").fetchone()[0] == "patient_id"
        assert not c.execute("SELECT 1 FROM deid.distributed_release WHERE name LIKE"
                             " 'sec_forged%'").fetchall()


def test_no_caller_reads_a_password_or_the_key(wh):
    with superuser("coord") as c:
        c.execute("CREATE USER MAPPING FOR deid_t_admin SERVER deid_shards"
                  " OPTIONS (password 'sekrit-pw-123')")
    try:
        attacker = wh.connect("coord", "deid_t_attacker")
        seen = attacker.execute("SELECT srvoptions::text FROM pg_foreign_server UNION ALL"
                                " SELECT umoptions::text FROM pg_user_mappings").fetchall()
        assert seen and not any("sekrit" in (s or "") or "password" in (s or "") for s, in seen)
        for statement in ["SELECT * FROM pg_user_mapping", "SELECT key FROM deid.distributed_key",
                          "SELECT deid._dist_keyed('x')",
                          "SELECT deid.set_distributed_key(repeat('a', 40))"]:
            with pytest.raises(psycopg.Error) as e:
                attacker.execute(statement)
            assert e.value.diag.sqlstate == "42501", statement
    finally:
        with superuser("coord") as c:
            c.execute("DROP USER MAPPING FOR deid_t_admin SERVER deid_shards")


def test_a_pending_part_cannot_be_reconstructed_on_its_node(wh):
    wh.connect("coord", "deid_t_analyst").execute(
        "SELECT * FROM deid.anonymize_request('registry.diagnoses', 'disassociation', k => 5,"
        " options => '{\"m\": 2, \"record\": \"patient_id\", \"item\": \"icd9\"}',"
        " release => 'sec_recon')")
    with pytest.raises(psycopg.Error) as e:     # never read yet: its parts are still pending
        wh.connect("node0", "deid_t_analyst").execute(
            "SELECT deid.reconstruct('sec_recon', 'sec_recon_r', 1)")
    assert e.value.diag.sqlstate == "42704"
