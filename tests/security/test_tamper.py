"""deid.verify_release re-derives a release from what is stored and refuses a tampered one:
one release per method on small data, then for EVERY table it stored (its
release tables and its rows in deid's catalogs: deid.rid_set, deid.equivalence_class,
deid.cluster_member) tamper statements run as superuser -- a changed value, a row moved to
another group, a deleted row, an inserted row, a raised count, a renamed value -- each in a
transaction rolled back afterwards. verify_release keeps its contract: a jsonb report with
"verified": true, or DE002 (VERIFICATION_FAILED) raised.

The list of stored tables comes from the catalog (the release's relations, and each artefact
catalog holding rows of the release), so a method that starts storing a new table without a
tamper case here fails test_every_stored_table_has_a_tamper_case."""
import json

import psycopg
import pytest
from psycopg import sql

from dbfixtures import server_python_dir
from fixtures.paper003 import FIG1, FIG3B

CATALOGS = ("deid.rid_set", "deid.equivalence_class", "deid.cluster_member",
            "deid.release_selection")
LEAVES = sorted({c for r in FIG1 for c in r})
AA_ROWS = "\n".join(";".join([c, c.split(".")[0], c[0] + "xx", "*"]) for c in LEAVES)

# release -> (source, method, k, l, columns, options)
RELEASES = {
    # the insensitive columns go into the QIT in their own types (their text depends on the
    # session's settings: test_digests_survive_a_changed_session)
    "tmp_ana": ("tamper.pat", "anatomy", 5, 2,
                "{age,sex,zip,diagnosis,treatment,seen,span,ratio,blob,born}", {}),
    "tmp_anag": ("tamper.pat", "anatomy", 5, 2, "{age,sex,zip,diagnosis,treatment}",
                 {"output": "generalized"}),
    "tmp_gen": ("tamper.gen", "generalization", 5, None, "{n,c0,k0}", {}),
    "tmp_cond": ("tamper.pat", "condensation", 5, None, "{age,sex,zip,diagnosis}", {}),
    "tmp_dis": ("tamper.dx", "disassociation", 3, None, "{codes}",
                {"m": 2, "max_cluster_size": 6, "utility": FIG3B}),
    "tmp_aa": ("tamper.dx", "disassociation", 3, None, "{codes}",
               {"m": 1, "model": "generalization", "hierarchy": "tamper_aa"}),
}

FIRST = " ctid = (SELECT min(ctid) FROM {t})"
# a row of the first group moved to the last group
MOVE = ("UPDATE {t} SET group_id = (SELECT max(group_id) FROM {t}) WHERE ctid = (SELECT min(ctid)"
        " FROM {t} WHERE group_id = (SELECT min(group_id) FROM {t}))")
# the first row of the first group and the first row of the last group swap groups
SWAP = ("UPDATE {t} x SET {c} = y.{c} FROM {t} y WHERE (x.ctid, y.ctid) IN ((%(a)s, %(b)s), (%(b)s, %(a)s))")
SWAP_GROUPS = SWAP.replace("{c}", "group_id") % {
    "a": "(SELECT min(ctid) FROM {t} WHERE group_id = (SELECT min(group_id) FROM {t}))",
    "b": "(SELECT min(ctid) FROM {t} WHERE group_id = (SELECT max(group_id) FROM {t}))"}
SWAP_ENDS = SWAP % {"a": "(SELECT min(ctid) FROM {t})", "b": "(SELECT max(ctid) FROM {t})"}
COUNT_TABLE = {
    "raise a count": "UPDATE {t} SET count = count + 1 WHERE" + FIRST,
    # a value renamed and its count raised: the counts still add up
    "rename a value, raise its count": "UPDATE {t} SET {c} = 'renamed', count = count + 1 WHERE" + FIRST,
    "rename a value": "UPDATE {t} SET {c} = {c} || 'x' WHERE" + FIRST,
    "move a count to another group": MOVE,
}

# (release, kind) -> {case: statement}; kind: the table's suffix after the release name
# ('' for a release's one table) or the artefact catalog. {t}: the stored table, {rid}: the
# release id, {c} / {cl}: the column COLUMN names for the kind (identifier / literal). DELETE
# and INSERT of a row are added for every release table (ROW_CASES).
CASES = {
    ("tmp_ana", "_qit"): {
        "update one value": "UPDATE {t} SET zip = zip || 'x' WHERE" + FIRST,
        "update one date": "UPDATE {t} SET born = born + 1 WHERE" + FIRST,
        # a QIT row moved to another group: every group still holds L values
        "move one row to another group": MOVE,
        "swap two rows' groups": SWAP_GROUPS,
    },
    ("tmp_ana", "_diagnosis"): COUNT_TABLE,
    ("tmp_ana", "_treatment"): COUNT_TABLE,
    ("tmp_ana", "deid.rid_set"): {
        "change a RID": "UPDATE deid.rid_set SET rids = overlay(rids placing int8send(1000000)"
                        " from 1 for 8) WHERE release_id = {rid} AND attribute = 'diagnosis'"
                        " AND chunk = 0",
        "rename a value": "UPDATE deid.rid_set SET value_list[1] = value_list[1] || 'x'"
                          " WHERE release_id = {rid} AND chunk = 0",
        "delete an attribute": "DELETE FROM deid.rid_set WHERE release_id = {rid}"
                               " AND attribute = 'treatment'",
    },
    ("tmp_ana", "deid.equivalence_class"): {
        "update one value": "UPDATE deid.equivalence_class SET generalized = generalized"
                            " || jsonb_build_object({cl}, 'x') WHERE release_id = {rid} AND class_id = 0",
        "raise a count": "UPDATE deid.equivalence_class SET cardinality = cardinality + 1"
                         " WHERE release_id = {rid} AND class_id = 0",
        "delete a row": "DELETE FROM deid.equivalence_class WHERE release_id = {rid} AND class_id = 0",
        "insert a row": "INSERT INTO deid.equivalence_class SELECT release_id, 100000, cardinality,"
                        " generalized, source FROM deid.equivalence_class WHERE release_id = {rid}"
                        " AND class_id = 0",
    },
    ("tmp_anag", ""): {
        "update one value": "UPDATE {t} SET diagnosis = diagnosis || 'x' WHERE" + FIRST,
        "update a generalized value": "UPDATE {t} SET sex = 'x' WHERE" + FIRST,
        "move one row to another group": MOVE,
        "swap two rows' groups": SWAP_GROUPS,
    },
    ("tmp_gen", ""): {
        "update one value": "UPDATE {t} SET n = CASE WHEN n = '*' THEN 'v0' ELSE '*' END WHERE" + FIRST,
        "swap two rows' values": SWAP_ENDS,
    },
    ("tmp_cond", ""): {
        "update one value": "UPDATE {t} SET age = age + 1 WHERE" + FIRST,
        "swap two rows' values": SWAP_ENDS,
    },
    ("tmp_dis", "_cluster"): {
        "raise a count": "UPDATE {t} SET size = size + 1 WHERE" + FIRST,
    },
    ("tmp_dis", "_record_chunk"): {
        "rename a value": "UPDATE {t} SET codes = array_replace(codes, codes[1], '999.99')"
                          " WHERE ctid = (SELECT min(ctid) FROM {t} WHERE cardinality(codes) > 0)",
        "move a subrecord to another chunk": "UPDATE {t} SET chunk_id = chunk_id + 1 WHERE" + FIRST,
    },
    ("tmp_dis", "_item_chunk"): {
        "rename a value": "UPDATE {t} SET code = code || 'x' WHERE" + FIRST,
        "move to another cluster": "UPDATE {t} SET cluster_id = 3 - cluster_id WHERE" + FIRST,
    },
    ("tmp_dis", "_shared_chunk"): {
        "rename a value": "UPDATE {t} SET codes = array_replace(codes, codes[1], '999.99')"
                          " WHERE ctid = (SELECT min(ctid) FROM {t} WHERE cardinality(codes) > 0)",
    },
    ("tmp_aa", "_generalized"): {
        "rename a value": "UPDATE {t} SET codes = array_replace(codes, codes[1], codes[1] || 'x')"
                          " WHERE ctid = (SELECT min(ctid) FROM {t} WHERE cardinality(codes) > 0)",
        # (the table has one column: two rows swapping their codes is the same release)
        "update a row to another group's codes": "UPDATE {t} SET codes = (SELECT codes FROM {t} WHERE"
                                                 " codes <> (SELECT codes FROM {t} WHERE" + FIRST
                                                 + ") LIMIT 1) WHERE" + FIRST,
    },
}
# the column {c} of a kind's statements
COLUMN = {("tmp_ana", "_diagnosis"): "diagnosis", ("tmp_ana", "_treatment"): "treatment",
          ("tmp_gen", ""): "k0", ("tmp_cond", ""): "diagnosis", ("tmp_aa", "_generalized"): "codes",
          ("tmp_ana", "deid.equivalence_class"): "sex", ("tmp_anag", "deid.equivalence_class"): "sex",
          ("tmp_gen", "deid.equivalence_class"): "k0"}
MEMBER = "(SELECT %s(cluster_id) FROM deid.cluster_member WHERE release_id = {rid})"
MEMBERS = {
    # the first members of the first and the last cluster swapped: every cluster keeps its size
    "swap two members": "UPDATE deid.cluster_member m SET rids = o.rids[1:1] || m.rids[2:]"
                        " FROM deid.cluster_member o WHERE m.release_id = {rid} AND o.release_id = {rid}"
                        " AND (m.cluster_id, o.cluster_id) IN ((%(a)s, %(b)s), (%(b)s, %(a)s))"
                        % {"a": MEMBER % "min", "b": MEMBER % "max"},
    "change a member": "UPDATE deid.cluster_member SET rids[1] = 1000000 WHERE release_id = {rid}"
                       " AND cluster_id = " + MEMBER % "min",
    "delete a row": "DELETE FROM deid.cluster_member WHERE release_id = {rid} AND cluster_id = "
                    + MEMBER % "max",
    "insert a row": "INSERT INTO deid.cluster_member SELECT release_id, 100000, rids"
                    " FROM deid.cluster_member WHERE release_id = {rid} LIMIT 1",
}
for _r in ("tmp_cond", "tmp_dis", "tmp_aa"):
    CASES[(_r, "deid.cluster_member")] = MEMBERS
for _r in ("tmp_anag", "tmp_gen"):
    CASES[(_r, "deid.equivalence_class")] = CASES[("tmp_ana", "deid.equivalence_class")]
CASES[("tmp_anag", "deid.rid_set")] = CASES[("tmp_ana", "deid.rid_set")]
SELECTION = {
    # the overlap control's record of the rows a release selected
    "change a row id": "UPDATE deid.release_selection SET rids = overlay(rids placing"
                       " int8send(-1) from 2 for 8) WHERE release_id = {rid}",
    "delete the row": "DELETE FROM deid.release_selection WHERE release_id = {rid}",
}
for _r in RELEASES:
    CASES[(_r, "deid.release_selection")] = SELECTION

ROW_CASES = {
    "delete a row": "DELETE FROM {t} WHERE" + FIRST,
    "insert a row": "INSERT INTO {t} SELECT * FROM {t} LIMIT 1",
}


def statement(release, kind, case):
    """The tamper statement of a case (release tables: ROW_CASES too)."""
    return {**(ROW_CASES if not kind.startswith("deid.") else {}), **CASES[(release, kind)]}[case]


def all_cases():
    for (release, kind), cases in CASES.items():
        more = ROW_CASES if not kind.startswith("deid.") else {}
        for name in sorted({**cases, **more}):
            yield pytest.param(release, kind, name, id=f"{release}{kind}-{name.replace(' ', '_')}")


@pytest.fixture(scope="module")
def released(admin):
    admin.execute("DROP SCHEMA IF EXISTS tamper CASCADE")
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchies"
                  " WHERE name IN ('tamper_aa', 'tamper_v')")
    admin.execute("CREATE SCHEMA tamper")
    admin.execute("CREATE TABLE tamper.pat AS SELECT patient_id, age, sex, zip, diagnosis, treatment,"
                  " timestamptz '2024-03-01 12:00+00' - patient_id * interval '1 hour' AS seen,"
                  " patient_id * interval '1 minute' AS span, patient_id / 7.0::float8 AS ratio,"
                  " int4send(patient_id::int) AS blob, birth_date AS born"
                  " FROM registry.patients ORDER BY patient_id LIMIT 400")
    admin.execute("ALTER TABLE tamper.pat ADD PRIMARY KEY (patient_id)")
    for col, role in [("age", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("zip", "quasi_identifier"), ("diagnosis", "sensitive"),
                      ("treatment", "sensitive"), ("seen", "insensitive"), ("span", "insensitive"),
                      ("ratio", "insensitive"), ("blob", "insensitive"), ("born", "insensitive")]:
        admin.execute("SELECT deid.set_role('tamper.pat', %s, %s)", [col, role])
    admin.execute("CREATE TABLE tamper.gen AS SELECT i AS id, 'v' || (i % 2) AS n,"
                  " 'v' || (i / 2 % 2) AS c0, 'v' || (i / 4 % 3) AS k0 FROM generate_series(0, 199) i")
    admin.execute("ALTER TABLE tamper.gen ADD PRIMARY KEY (id)")
    admin.execute("SELECT deid.load_hierarchy('tamper_v', %s)", ["\n".join(f"v{i};*" for i in range(3))])
    for source, cols in (("registry", ["n", "c0"]), ("pathology", ["k0"])):
        for c in cols:
            admin.execute("SELECT deid.set_role('tamper.gen', %s, 'quasi_identifier', 'tamper_v',"
                          " source => %s)", [c, source])
    admin.execute("CREATE TABLE tamper.dx (id int PRIMARY KEY, codes text[])")
    for i, r in enumerate(FIG1, start=1):
        admin.execute("INSERT INTO tamper.dx VALUES (%s, %s)", [i, r])
    admin.execute("SELECT deid.load_hierarchy('tamper_aa', %s)", [AA_ROWS])
    ids = {}
    for name, (source, method, k, l, columns, options) in RELEASES.items():
        # several groupings of one table on purpose: the composition rule would refuse the
        # second, so the superuser overrides it (logged)
        ids[name] = admin.execute(
            "SELECT release_id FROM deid.anonymize_request(%s, %s, k => %s, l => %s, columns => %s,"
            " options => %s, release => %s)",
            [source, method, k, l, columns, json.dumps(dict(options, seed=7, allow_overlap=True)),
             name]).fetchone()[0]
    yield admin, ids
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 'tmp\\_%'")
    admin.execute("DROP SCHEMA tamper CASCADE")
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchies"
                  " WHERE name IN ('tamper_aa', 'tamper_v')")


def stored_tables(conn, name, release_id):
    """{kind: stored table} of a release, from the catalog: its relations (the tables under
    the views; kind = the suffix after the release's name) and the artefact catalogs that
    hold rows of it."""
    out = {}
    for view in conn.execute("SELECT unnest(relations) FROM deid.release WHERE release_id = %s",
                             [release_id]).fetchall():
        table = view[0].split(".", 1)[1]
        assert table.startswith(name)
        out[table[len(name):]] = table
    for catalog in CATALOGS:
        schema, table = catalog.split(".")
        if conn.execute(sql.SQL("SELECT 1 FROM {} WHERE release_id = %s LIMIT 1").format(
                sql.Identifier(schema, table)), [release_id]).fetchone():
            out[catalog] = catalog
    return out


def verify(conn, name):
    return conn.execute("SELECT deid.verify_release(%s)", [name]).fetchone()[0]


def tampered(conn, name, release_id, kind, case):
    """verify_release after the case's tamper statement (rolled back): the psycopg error it
    raised, or None."""
    table = stored_tables(conn, name, release_id)[kind]
    column = COLUMN.get((name, kind))
    stmt = sql.SQL(statement(name, kind, case)).format(
        t=sql.Identifier("deid_release", table), rid=sql.Literal(release_id),
        c=sql.Identifier(column or "-"), cl=sql.Literal(column))
    with conn.transaction():
        changed = conn.execute(stmt).rowcount
        assert changed > 0, f"the tamper statement changed nothing: {stmt.as_string(conn)}"
        try:
            verify(conn, name)
            err = None
        except psycopg.Error as e:
            err = e
        raise psycopg.Rollback()
    return err


def test_every_stored_table_has_a_tamper_case(released):
    """Each table a release stores (read from the catalog) has tamper cases here, and every
    method (and output form) made a release."""
    conn, ids = released
    assert {RELEASES[r][1] for r in ids} == {"anatomy", "generalization", "condensation",
                                             "disassociation"}
    listed = {(r, kind) for r, i in ids.items() for kind in stored_tables(conn, r, i)}
    assert listed == set(CASES), (sorted(listed - set(CASES)), sorted(set(CASES) - listed))
    for key in listed:
        assert any(n.startswith(("update", "move", "swap", "rename", "raise", "change"))
                   for n in CASES[key]), key


def test_untampered_releases_verify(released):
    conn, ids = released
    for name in ids:
        report = verify(conn, name)
        assert report["verified"] is True and report["release"] == name
        digests = report["digests"]
        assert digests["recorded"] is True and report["warnings"] == []
        stored = set(stored_tables(conn, name, ids[name]).values())
        assert set(digests["tables"]) == {t for t in stored if "." not in t} | set(CATALOGS)


@pytest.mark.parametrize("release, kind, case", list(all_cases()))
def test_tampered_table_fails_verification(released, release, kind, case):
    conn, ids = released
    err = tampered(conn, release, ids[release], kind, case)
    assert err is not None, f"{release} {kind}: '{case}' still verifies"
    assert err.diag.sqlstate == "DE002", err.diag.message_primary
    assert err.diag.message_hint


def _without_digests(conn, release_id):
    """The release's row as a release logged before digests were recorded (its metrics without
    "digests"): the append-only trigger is bypassed, inside the caller's transaction."""
    conn.execute("ALTER TABLE deid.release DISABLE TRIGGER release_append_only")
    conn.execute("UPDATE deid.release SET metrics = metrics - 'digests' WHERE release_id = %s",
                 [release_id])
    conn.execute("ALTER TABLE deid.release ENABLE TRIGGER release_append_only")


@pytest.mark.parametrize("kind, case", [
    ("_qit", "move one row to another group"),
    ("_diagnosis", "rename a value, raise its count"),
    ("_diagnosis", "raise a count"),
    ("_treatment", "rename a value"),
])
def test_moved_row_and_renamed_value_fail_without_digests(released, kind, case):
    """A moved QIT row and a renamed, recounted value are caught by re-deriving the anatomy tables from the RID sets
    alone (as for a release logged before digests were recorded), not only by the digests."""
    conn, ids = released
    with conn.transaction():
        _without_digests(conn, ids["tmp_ana"])
        err = tampered(conn, "tmp_ana", ids["tmp_ana"], kind, case)
        raise psycopg.Rollback()
    assert err is not None, f"'{case}' on {kind} verifies without digests"
    assert err.diag.sqlstate == "DE002", err.diag.message_primary


def test_release_without_digests_verifies_with_a_warning(released):
    """A release logged before digests were recorded verifies on its re-derived checks; the
    report says that no digest was recorded (a warning, not a failure: see reverify.py)."""
    conn, ids = released
    with conn.transaction():
        _without_digests(conn, ids["tmp_ana"])
        report = verify(conn, "tmp_ana")
        raise psycopg.Rollback()
    assert report["verified"] is True
    assert report["digests"]["recorded"] is False
    assert "no digest recorded" in report["warnings"][0]


def test_digests_survive_a_changed_session(released):
    """Digests are of the stored values, not of the session's output settings."""
    conn, ids = released
    with conn.transaction():
        for setting, value in [("DateStyle", "SQL, DMY"), ("IntervalStyle", "sql_standard"),
                               ("extra_float_digits", "-3"), ("bytea_output", "escape"),
                               ("TimeZone", "Asia/Kolkata"), ("client_encoding", "LATIN1")]:
            conn.execute(sql.SQL("SET LOCAL {} = {}").format(sql.Identifier(setting),
                                                               sql.Literal(value)))
        for name in ids:
            assert verify(conn, name)["verified"] is True
        raise psycopg.Rollback()


# In the request's own backend: the count table is changed after the writer stored it and
# before the verifier reads it ($1: the release id, unused).
PATCH = """
DO $patch$
import sys
sys.path.insert(0, PYTHON_DIR)
from deid.log import release_log as catalog_log
write = catalog_log.write_artefacts
def tampered(db, release_id, plan):
    write(db, release_id, plan)
    plpy.execute(plpy.prepare(TAMPER, ["bigint"]), [release_id])
catalog_log.write_artefacts = tampered
$patch$ LANGUAGE plpython3u
"""


@pytest.mark.parametrize("case", ["raise a count", "rename a value, raise its count",
                                  "move a count to another group", "delete a row"])
def test_request_fails_when_a_count_table_is_not_its_rid_sets(url, released, case):
    """Before commit too: the anatomy verifier checks the count tables it did not compute
    against the RID sets it checked (a writer that stored a wrong count fails the request)."""
    conn, _ = released
    python_dir = server_python_dir(conn)
    tamper = sql.SQL(statement("tmp_ana", "_diagnosis", case)).format(
        t=sql.Identifier("deid_release", "tmp_req_diagnosis"), c=sql.Identifier("diagnosis"))
    source, method, k, l, columns, _ = RELEASES["tmp_ana"]
    with psycopg.connect(url, autocommit=True) as patched:
        patched.execute(PATCH.replace("PYTHON_DIR", repr(python_dir))
                        .replace("TAMPER", repr(tamper.as_string(patched))))
        with pytest.raises(psycopg.Error) as e:
            patched.execute("SELECT * FROM deid.anonymize_request(%s, %s, k => %s, l => %s,"
                            " columns => %s, release => 'tmp_req')", [source, method, k, l, columns])
    assert e.value.diag.sqlstate == "DE002", e.value.diag.message_primary
    assert "tmp_req_diagnosis" in e.value.diag.message_primary
    assert not conn.execute("SELECT 1 FROM deid.release WHERE name = 'tmp_req'").fetchone()


@pytest.mark.parametrize("release, column", [("tmp_ana", "zip"), ("tmp_gen", "k0"),
                                             ("tmp_aa", "codes")])
def test_a_changed_column_fails_verification(released, release, column):
    """A release table whose column was renamed or retyped (same values) differs from its
    digest: the digest records the table's columns too."""
    conn, ids = released
    table = next(t for k, t in stored_tables(conn, release, ids[release]).items()
                 if "." not in k and column in t + "".join(
                     r[0] for r in conn.execute("SELECT attname FROM pg_attribute WHERE attrelid ="
                                                " %s::regclass", [f"deid_release.{t}"])))
    for ddl in ["ALTER TABLE {t} RENAME COLUMN {c} TO renamed",
                "ALTER TABLE {t} ALTER COLUMN {c} TYPE varchar(400)"]:
        stmt = sql.SQL(ddl).format(t=sql.Identifier("deid_release", table), c=sql.Identifier(column))
        with conn.transaction():
            # CASCADE: an anatomy release's estimate view reads its views
            conn.execute("DROP VIEW " + sql.Identifier("release", table).as_string(conn) + " CASCADE")
            conn.execute(stmt)
            with pytest.raises(psycopg.Error) as e:
                verify(conn, release)
            raise psycopg.Rollback()
        assert e.value.diag.sqlstate == "DE002", e.value.diag.message_primary
