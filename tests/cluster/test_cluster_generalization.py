"""Generalization (002) over shards, the node and coordinator steps through SQL on one server:
the rows of registry.patients split over three tables (one empty), as three nodes hold them.
deid.generalization_classes on every part, merged and searched by deid.generalization_levels,
chooses exactly the levels (and steps, loss, suppression, joint classes) that the single-node
release of all the rows chooses; each part stored at those levels and checked through the
coordinator's merge (verify.shared.merged_classes) holds k per source; what a caller without
SELECT can do with the steps: nothing."""
import json

import psycopg
import pytest
from psycopg import sql

from dbfixtures import server_python_dir, sqlstate_of

from .conftest import member_url

ANALYST, RESEARCHER, ATTACKER = "deid_t_analyst", "deid_t_researcher", "deid_t_attacker"
PARTS = ["n0", "n1", "n2"]                 # n2 holds no row
SOURCES = {"registry": ["age", "sex", "race"], "pathology": ["pt"]}
ROLES = [("name", "identifier", None, None), ("age", "quasi_identifier", "t_age_5y", "registry"),
         ("sex", "quasi_identifier", "t_sex", "registry"),
         ("race", "quasi_identifier", "t_race", "registry"),
         ("pt", "quasi_identifier", "t_pt", "pathology"), ("diagnosis", "sensitive", None, None)]
PT = "\n".join(f"{v};{v[0]};{'[1-2]' if v[0] in '12' else '[3-4]'};*"
               for v in ["1a", "1b", "1c", "1mic", "2a", "2b", "3", "4"])


@pytest.fixture(scope="module")
def shards(admin):
    admin.execute("SELECT deid.interval_hierarchy('t_age_5y', 0, 120, '{5,10,20}')")
    admin.execute("SELECT deid.load_hierarchy('t_pt', %s, info_loss => '{0,0.3,0.6,1}')", [PT])
    admin.execute("SELECT deid.load_hierarchy('t_sex', E'F;*\\nM;*')")
    admin.execute("SELECT deid.load_hierarchy('t_race', %s)",
                  ["\n".join(f"{r};*" for r in ["white", "black", "asian", "hispanic", "other"])])
    admin.execute("DROP SCHEMA IF EXISTS shard CASCADE")
    admin.execute("CREATE SCHEMA shard")
    admin.execute("GRANT USAGE ON SCHEMA shard TO PUBLIC")
    where = {"whole": "true", "n0": "patient_id % 3 = 0", "n1": "patient_id % 3 > 0", "n2": "false"}
    for t, w in where.items():
        admin.execute(sql.SQL("CREATE TABLE shard.{} AS SELECT * FROM registry.patients WHERE {}")
                      .format(sql.Identifier(t), sql.SQL(w)))
        admin.execute(sql.SQL("ALTER TABLE shard.{} ADD PRIMARY KEY (patient_id)")
                      .format(sql.Identifier(t)))
        admin.execute(sql.SQL("GRANT SELECT ON shard.{} TO {}").format(sql.Identifier(t),
                                                                      sql.Identifier(ANALYST)))
        for col, role, hier, source in ROLES:
            admin.execute("SELECT deid.set_role(%s, %s, %s, %s, source => %s)",
                          [f"shard.{t}", col, role, hier, source])
    return admin


REQUESTS = [
    dict(k=5, columns="{age,sex,race,pt,diagnosis}", selection=None, options={}),
    dict(k=5, columns="{age,sex,race,pt,diagnosis}", selection="pt = '1'",
         options={"priorities": {"age": 0.3, "race": 0.2, "sex": 0.9, "pt": 0.8}}),
    dict(k=20, columns="{age,sex,race,pt}", selection=None, options={"search": "optimal"}),
    dict(k=3, columns="{age,sex,race}", selection="sex = 'F'",
         options={"search": "optimal", "limits": {"race": 0}}),
]


def classes(conn, table, r):
    return conn.execute("SELECT deid.generalization_classes(%s, %s, %s, %s, %s)",
                        [f"shard.{table}", r["k"], r["columns"], r["selection"],
                         json.dumps(r["options"])]).fetchone()[0]


def levels(conn, table, r, parts):
    return conn.execute("SELECT deid.generalization_levels(%s, %s, %s, %s, %s, %s)",
                        [f"shard.{table}", r["k"], r["columns"], r["selection"],
                         json.dumps(r["options"]), parts]).fetchone()[0]


@pytest.mark.parametrize("r", REQUESTS)
def test_merged_levels_are_the_single_node_levels(shards, connect, r):
    analyst = connect(ANALYST)
    chosen = levels(analyst, "n0", r, [classes(analyst, t, r) for t in PARTS])
    name = f"t_whole_{REQUESTS.index(r)}"
    row = analyst.execute("SELECT * FROM deid.anonymize_request('shard.whole', 'generalization',"
                          " k => %s, columns => %s, selection => %s, options => %s, release => %s)",
                          [r["k"], r["columns"], r["selection"], json.dumps(r["options"]), name]
                          ).fetchone()
    metrics = shards.execute("SELECT metrics FROM deid.release WHERE release_id = %s",
                             [row[0]]).fetchone()[0]
    for key in ("levels", "steps", "loss", "suppressed", "joint_k", "joint_classes", "limits"):
        assert chosen["metrics"][key] == metrics[key], key
    assert (chosen["rows"], chosen["groups"]) == (row[2], row[3])
    assert chosen["discernibility"] == pytest.approx(row[4])
    shards.execute("SELECT deid.drop_release(%s)", [name])


PATCH = """DO $$
import sys, json
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)
from deid.pg import Database
from deid.verify.generalization import stored_classes
plpy.notice(json.dumps([{s: stored_classes(Database(), t, c) for s, c in SOURCES.items()}
                        for t in TABLES]))
$$ LANGUAGE plpython3u"""


def test_parts_stored_at_the_chosen_levels_pass_the_merged_check(shards, connect, url):
    """Each part's rows stored at the chosen levels (a table per node, as the node's write
    stores them), their classes read back by the node side of the verifier
    (verify.generalization.stored_classes) and merged: the merged classes are those of the
    union of the parts, k per source holds over them, and a part missing fails the check."""
    r = REQUESTS[0]
    analyst = connect(ANALYST)
    chosen = levels(analyst, "n0", r, [classes(analyst, t, r) for t in PARTS])["levels"]
    shards.execute("CREATE SCHEMA IF NOT EXISTS deid_release")
    labels = {"age": "CASE %(l)s WHEN 0 THEN age::text WHEN 4 THEN '*'"
                     " ELSE (age / (5 * (2 ^ (%(l)s - 1))::int))::text END",
              "sex": "CASE WHEN %(l)s = 0 THEN sex ELSE '*' END",
              "race": "CASE WHEN %(l)s = 0 THEN race ELSE '*' END",
              "pt": "CASE %(l)s WHEN 0 THEN pt WHEN 1 THEN left(pt, 1) WHEN 2 THEN"
                    " CASE WHEN left(pt, 1) IN ('1', '2') THEN '[1-2]' ELSE '[3-4]' END ELSE '*' END"}
    cols = ["age", "sex", "race", "pt"]
    tables = []
    for t in PARTS:
        target = f"t_part_{t}"
        shards.execute(sql.SQL("DROP TABLE IF EXISTS deid_release.{}").format(sql.Identifier(target)))
        select = sql.SQL(", ").join(sql.SQL(labels[c] % {"l": int(chosen[c])} + " AS {}")
                                    .format(sql.Identifier(c)) for c in cols)
        shards.execute(sql.SQL("CREATE TABLE deid_release.{} AS SELECT {} FROM shard.{}")
                       .format(sql.Identifier(target), select, sql.Identifier(t)))
        tables.append(target)
    notices = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        conn.execute(PATCH.replace("PYTHON_DIR", repr(server_python_dir(shards)))
                     .replace("TABLES", repr(tables)).replace("SOURCES", repr(SOURCES)))
    parts = json.loads(notices[-1])
    from deid.verify.shared.merged_classes import check_merged
    from deid.errors import DeidError
    n = shards.execute("SELECT count(*) FROM shard.whole").fetchone()[0]
    out = check_merged(parts, SOURCES, 5, n_rows=n)
    union = sql.SQL(" UNION ALL ").join(sql.SQL("SELECT * FROM deid_release.{}")
                                        .format(sql.Identifier(t)) for t in tables)
    for source, qis in SOURCES.items():
        whole = shards.execute(sql.SQL("SELECT min(c), count(*) FROM (SELECT count(*) c FROM ({}) u"
                                       " GROUP BY {}) s").format(
            union, sql.SQL(", ").join(map(sql.Identifier, qis)))).fetchone()
        assert (out["sources"][source]["min_size"], out["sources"][source]["classes"]) == whole
        assert sum(sum(p[source]["counts"]) for p in parts) == n and parts[2][source]["counts"] == []
    with pytest.raises(DeidError):
        check_merged(parts[:1], SOURCES, 5, n_rows=n)                   # a part missing
    for t in tables:
        shards.execute(sql.SQL("DROP TABLE deid_release.{}").format(sql.Identifier(t)))


# -- who may run the steps ----------------------------------------------------------------------

@pytest.mark.parametrize("role", [RESEARCHER, ATTACKER])
def test_no_step_without_select(shards, connect, role):
    """A policy requester (no SELECT; its grantor would read) and a role with nothing get the
    same refusal before anything is read: the class table holds counts below k."""
    shards.execute("SELECT deid.allow_requests(%s, 'shard.n0', 5)", [RESEARCHER])
    conn = connect(role)
    r = REQUESTS[0]
    for call in (lambda: classes(conn, "n0", r),
                 lambda: levels(conn, "n0", r, [classes(connect(ANALYST), "n0", r)])):
        with pytest.raises(psycopg.Error) as e:
            call()
        assert sqlstate_of(e) == "42501"
        assert "SELECT on the source" in str(e.value)
        assert e.value.diag.message_detail is None and e.value.diag.message_hint


@pytest.mark.parametrize("part", [b"", b"DGC1\x00\x00\x00\x00", b"not a class table", None])
def test_forged_parts_are_refused(shards, connect, part):
    analyst = connect(ANALYST)
    good = classes(analyst, "n0", REQUESTS[0])
    with pytest.raises(psycopg.Error) as e:
        levels(analyst, "n0", REQUESTS[0], [good, part])
    assert sqlstate_of(e) in ("22023", "22004") and e.value.diag.message_hint


def test_a_part_over_other_columns_is_refused(shards, connect):
    analyst = connect(ANALYST)
    other = dict(REQUESTS[0], columns="{age,sex}")
    with pytest.raises(psycopg.Error) as e:
        levels(analyst, "n0", REQUESTS[0], [classes(analyst, "n0", REQUESTS[0]),
                                            classes(analyst, "n1", other)])
    assert sqlstate_of(e) == "22023"


# -- through the front door of a sharded warehouse (tests/cluster/conftest.py) ------------------

GEN = "registry.patients_gen"
GEN_REQUEST = ("SELECT * FROM deid.anonymize_request(%s, 'generalization', k => %s,"
               " columns => '{age,sex,race,pt,diagnosis}', options => %s, release => %s)")


@pytest.fixture(scope="module")
def gen_warehouse(warehouse):
    """registry.patients_gen on every member (each node its own rows, the coordinator the
    definition), with hierarchies, registered as distributed; registry.patients_all on the
    coordinator holds every node's rows (the single-node release to compare with)."""
    from .conftest import MEMBERS, NODES
    w = warehouse
    w.on_all("DROP TABLE IF EXISTS registry.patients_gen, registry.patients_all")
    w.on_all("CREATE TABLE registry.patients_gen AS SELECT * FROM registry.patients")
    w.on_all("ALTER TABLE registry.patients_gen ADD PRIMARY KEY (patient_id)")
    w.on_all("SELECT deid.interval_hierarchy('t_age_5y', 0, 120, '{5,10,20}')")
    w.on_all("SELECT deid.load_hierarchy('t_pt', %s, info_loss => '{0,0.3,0.6,1}')", [PT])
    w.on_all("SELECT deid.load_hierarchy('t_sex', E'F;*\\nM;*')")
    w.on_all("SELECT deid.load_hierarchy('t_race', %s)",
             ["\n".join(f"{r};*" for r in ["white", "black", "asian", "hispanic", "other"])])
    coord = w.connect("coord")
    coord.execute("CREATE TABLE registry.patients_all (LIKE registry.patients_gen INCLUDING ALL)")
    for m in NODES:
        with psycopg.connect(member_url(m), autocommit=True) as c:
            rows = c.execute("SELECT * FROM registry.patients_gen").fetchall()
        with coord.cursor().copy("COPY registry.patients_all FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)
    for t in ["registry.patients_gen", "registry.patients_all"]:
        members = MEMBERS if t == GEN else ["coord"]
        for col, role, hier, source in ROLES:
            w.on_all("SELECT deid.set_role(%s, %s, %s, %s, source => %s)",
                     [t, col, role, hier, source], members=members)
        w.on_all(sql.SQL("GRANT SELECT ON {} TO deid_t_analyst").format(
            sql.Identifier(*t.split("."))), members=members)
    coord.execute("SELECT deid.register_distributed_source(%s, 'deid_shards', 'patient_id')", [GEN])
    return w


@pytest.mark.parametrize("k, options", [(5, {"seed": 1}),
                                        (10, {"search": "optimal", "seed": 1}),
                                        (4, {"priorities": {"age": 0.3, "race": 0.2, "sex": 0.9,
                                                            "pt": 0.8}, "seed": 1})])
def test_distributed_generalization_is_the_single_node_release(gen_warehouse, k, options):
    w = gen_warehouse
    analyst, reader, coord = (w.connect("coord", ANALYST), w.connect("coord", "deid_t_reader"),
                              w.connect("coord"))
    name = f"cl_gen_{k}"
    row = analyst.execute(GEN_REQUEST, [GEN, k, json.dumps(options), name]).fetchone()
    whole = analyst.execute(GEN_REQUEST, [GEN.replace("_gen", "_all"), k, json.dumps(options),
                                          name + "_one"]).fetchone()
    assert row[5] and row[2:4] == whole[2:4]
    assert row[4] == pytest.approx(whole[4])
    metrics = coord.execute("SELECT metrics FROM deid.distributed_release WHERE name = %s",
                            [name]).fetchone()[0]
    single = coord.execute("SELECT metrics FROM deid.release WHERE name = %s",
                           [name + "_one"]).fetchone()[0]
    for key in ("levels", "steps", "loss", "suppressed", "joint_k", "joint_classes"):
        assert metrics["generalization"][key] == single[key], key
    assert metrics["verification"]["nodes"] == 2
    # independent: the union of the parts, read on the coordinator, grouped per source
    view = sql.Identifier("release", name)
    for source, qis in SOURCES.items():
        sizes = [c for (c,) in reader.execute(sql.SQL("SELECT count(*) FROM {} GROUP BY {}").format(
            view, sql.SQL(", ").join(map(sql.Identifier, qis)))).fetchall()]
        assert min(sizes) >= k and sum(sizes) == row[2]
        assert metrics["verification"]["sources"][source] == {"classes": len(sizes),
                                                              "min_size": min(sizes)}
    # the same released rows as on one server: the multiset of QI label tuples
    cols = sql.SQL(", ").join(map(sql.Identifier, ["age", "sex", "race", "pt"]))
    got = reader.execute(sql.SQL("SELECT {}, count(*) FROM {} GROUP BY {} ORDER BY {}").format(
        cols, view, cols, cols)).fetchall()
    want = coord.execute(sql.SQL("SELECT {}, count(*) FROM {} GROUP BY {} ORDER BY {}").format(
        cols, sql.Identifier("release", name + "_one"), cols, cols)).fetchall()
    assert got == want


def test_distributed_generalization_needs_select_or_a_policy(gen_warehouse):
    """A requester with neither SELECT nor a policy is refused before any node reads (a policy
    requester's path: tests/cluster/test_cluster_generalization_policy.py). Nothing is left on
    a node."""
    w = gen_warehouse
    attacker = w.connect("coord", ATTACKER)
    with pytest.raises(psycopg.Error) as e:
        attacker.execute(GEN_REQUEST, [GEN, 5, "{}", "cl_gen_policy"])
    assert e.value.diag.sqlstate == "42501" and e.value.diag.message_hint
    assert e.value.diag.message_detail is None
    from .test_cluster_release import _parts_named
    assert not any(_parts_named(w, "cl_gen_policy").values())


def test_node_steps_cannot_be_abused(gen_warehouse):
    """On a node, the attacker cannot store a part without a snapshot of its own, nor read the
    stored classes of another role's part."""
    w = gen_warehouse
    analyst = w.connect("coord", ANALYST)
    analyst.execute(GEN_REQUEST, [GEN, 5, '{"seed": 2}', "cl_gen_abuse"])
    node = w.connect("node0", ATTACKER)
    with pytest.raises(psycopg.Error) as e:
        node.execute("SELECT deid._dist_part_finish('0123', current_user, 'run', 1, %s)",
                     [json.dumps({"levels": {}, "metrics": {}, "rows": 0, "groups": 0,
                                  "discernibility": 0})])
    assert e.value.diag.sqlstate == "42501"
    run = w.connect("node0").execute(
        "SELECT p.run FROM deid.distributed_part p JOIN deid.release r USING (release_id)"
        " WHERE r.name = 'cl_gen_abuse'").fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        node.execute("SELECT deid._dist_node_gen_stored(%s, current_user)", [run])
    assert e.value.diag.sqlstate == "42501"
    with pytest.raises(psycopg.Error) as e:       # as someone else: the caller check
        node.execute("SELECT deid._dist_node_gen_stored(%s, 'deid_t_analyst')", [run])
    assert e.value.diag.sqlstate == "42501"


OVERLAP = json.dumps({"allow_overlap": True})     # parts of one node differing by a row


def _store_on_node(node, run, name, chosen, k=5):
    """A node's store step by hand (as the coordinator's deid._dist_store_part sends it): the
    part's report."""
    return json.loads(node.execute(
        "SELECT deid._dist_node_store_part(%s, 0, %s, %s, '{age,sex,race,pt,diagnosis}', NULL,"
        " %s, %s, %s)", [run, GEN, k, OVERLAP, name, json.dumps(chosen)]).fetchone()[0])


def _classes_on_node(node, run, k=5):
    return node.execute("SELECT deid._dist_node_gen_classes(%s, %s, %s,"
                        " '{age,sex,race,pt,diagnosis}', NULL, %s)", [run, GEN, k, OVERLAP]
                        ).fetchone()[0]


def test_a_nodes_class_read_serves_only_the_store_of_its_own_run_and_role(gen_warehouse):
    """The store step of a run reuses the rows its node read for the class step of the same
    run, as the same role, in the same backend (one snapshot for both steps); another run, or
    the same run continued as another role (SET ROLE), reads the source again. Seen through a
    row added to the node's source between the two steps."""
    w = gen_warehouse
    other = "deid_t_analyst_b"
    su = w.connect("node0")
    if not su.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [other]).fetchone():
        su.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(other)))
    su.execute(sql.SQL("GRANT SELECT ON registry.patients_gen TO {}").format(sql.Identifier(other)))
    su.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(other), sql.Identifier(ANALYST)))
    n = su.execute("SELECT count(*) FROM registry.patients_gen").fetchone()[0]
    node = w.connect("node0", ANALYST)
    add = ("INSERT INTO registry.patients_gen SELECT patient_id + 1000000, name, birth_date, age,"
           " sex, race, zip, diagnosis, treatment, pt, vital_status, hospital"
           " FROM registry.patients_gen ORDER BY patient_id LIMIT 1")
    drop = "DELETE FROM registry.patients_gen WHERE patient_id > 1000000"
    runs = []
    try:
        chosen = node.execute("SELECT deid.generalization_levels(%s, 5, '{age,sex,race,pt,"
                              "diagnosis}', NULL, %s, %s)",
                              [GEN, OVERLAP, [_classes_on_node(node, "rc_same")]]).fetchone()[0]
        su.execute(add)                                    # n + 1 rows from now on
        runs.append(("rc_same", ANALYST))
        assert _store_on_node(node, "rc_same", "rc_same", chosen)["rows"] == n   # reused

        _classes_on_node(node, "rc_one")                   # n + 1 rows read for another run ...
        su.execute(drop)                                   # n rows from now on
        runs.append(("rc_two", ANALYST))
        assert _store_on_node(node, "rc_two", "rc_two", chosen)["rows"] == n      # ... read again

        _classes_on_node(node, "rc_role")                  # n rows read as the analyst
        su.execute(add)                                    # n + 1 rows from now on
        node.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(other)))
        runs.append(("rc_role", other))
        assert _store_on_node(node, "rc_role", "rc_role", chosen)["rows"] == n + 1  # read as `other`
        node.execute("RESET ROLE")
    finally:
        su.execute(drop)
        for run, role in runs:
            node.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            node.execute("SELECT deid._dist_node_abort(%s, current_user)", [run])
            node.execute("RESET ROLE")
        su.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(other), sql.Identifier(ANALYST)))
