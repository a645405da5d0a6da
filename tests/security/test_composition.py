"""Attack: differencing two releases of one source.

Every release is readable by deid_reader, a role without SELECT on the source. Two legal
releases of the same table, one of all rows and one of `age <> 99`, differ by the one patient
aged 99: `release.a EXCEPT ALL release.b` (generalization) or the difference of the count
tables (anatomy) is that patient's diagnosis. deid refuses a release whose selected rows differ
from an earlier release's of the same source by more than 0 and fewer than k rows, either way;
a requester with SELECT may override that (options.allow_overlap, recorded in the log), a
policy-based requester may not.

Each test has a source table of its own: the control keeps every earlier release's selection,
dropped and replaced ones too (their data may have been copied while they were live).
"""
import re
import threading
import zlib

import psycopg
import pytest
from psycopg import sql

from dbfixtures import hint_of, sqlstate_of

RESEARCHER = "deid_t_researcher"      # a policy, no SELECT
ANALYST = "deid_t_analyst"            # SELECT on the source
ROWS = 200
LAB = "{age,lab}"         # another method's study publishes another sensitive column than dx
SECRET = "SECRET_DX"
REFUSED = "DE001"


@pytest.fixture(scope="module")
def hierarchy(admin):
    admin.execute("SELECT deid.interval_hierarchy('ovl_age', 0, 120, '{5,10,20,40}')"
                  " WHERE NOT EXISTS (SELECT 1 FROM deid.hierarchy WHERE name = 'ovl_age')")
    return admin


@pytest.fixture
def source(hierarchy, request):
    """A fresh table public.ovl_<test>: ROWS patients, the one aged 99 holds SECRET (a second
    sensitive column, lab, for a second method's study); the
    researcher may request releases with k >= 5, the analyst holds SELECT."""
    admin = hierarchy
    table = "ovl_" + re.sub(r"[^a-z0-9]", "", request.node.name.lower())[-30:]
    ident = sql.Identifier("public", table)
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))
    admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, alt_id int NOT NULL UNIQUE,"
                          " age int NOT NULL, dx text NOT NULL, lab text NOT NULL)").format(ident))
    admin.execute(sql.SQL(
        "INSERT INTO {} SELECT i, 1000 + i, CASE WHEN i = 7 THEN 99 ELSE 20 + i % 40 END,"
        " CASE WHEN i = 7 THEN {} ELSE 'D' || (i % 4) END, 'L' || (i % 3)"
        " FROM generate_series(1, {}) i"
    ).format(ident, sql.Literal(SECRET), sql.Literal(ROWS)))
    admin.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(ident, sql.Identifier(ANALYST)))
    qualified = f"public.{table}"
    admin.execute("SELECT deid.set_role(%s, 'age', 'quasi_identifier', 'ovl_age')", [qualified])
    admin.execute("SELECT deid.set_role(%s, 'dx', 'sensitive')", [qualified])
    admin.execute("SELECT deid.set_role(%s, 'lab', 'sensitive')", [qualified])
    admin.execute("SELECT deid.allow_requests(%s, %s, 5)", [RESEARCHER, qualified])
    yield qualified
    admin.execute("DELETE FROM deid.policy WHERE relation = %s::regclass", [qualified])


def req(conn, source, release, method="generalization", selection=None, options=None, k=5,
        columns="{age,dx}"):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, %s, k => %s, columns => %s,"
        " selection => %s, options => %s, release => %s)",
        [source, method, k, columns, selection, options, release]).fetchone()


def refused(conn, source, release, **kw):
    with pytest.raises(psycopg.Error) as e:
        req(conn, source, release, **kw)
    return e


def assert_count_free(e):
    d = e.value.diag
    text = " ".join(x for x in (d.message_primary, d.message_detail, d.message_hint) if x)
    assert d.message_hint and not re.search(r"\d", d.message_primary + " " + d.message_hint), text
    assert d.message_detail is None, text
    assert SECRET not in text


def nothing_left(admin, release):
    assert admin.execute("SELECT count(*) FROM deid.release WHERE name = %s",
                         [release]).fetchone()[0] == 0
    assert admin.execute("SELECT count(*) FROM deid.release_selection s"
                         " WHERE NOT EXISTS (SELECT FROM deid.release r"
                         "                   WHERE r.release_id = s.release_id)").fetchone()[0] == 0
    assert admin.execute("SELECT count(*) FROM pg_class WHERE relname LIKE %s",
                         [release + "%"]).fetchone()[0] == 0


def diagnoses_leaked(reader, a, b, method):
    """What deid_reader learns from two releases: the diagnoses in a and not in b."""
    if method == "anatomy":
        q = ("SELECT dx FROM (SELECT dx, sum(count) n FROM {a} GROUP BY dx) x,"
             " generate_series(1, x.n::int) EXCEPT ALL"
             " SELECT dx FROM (SELECT dx, sum(count) n FROM {b} GROUP BY dx) y,"
             " generate_series(1, y.n::int)")
        a, b = a + "_dx", b + "_dx"
    else:
        q = "SELECT dx FROM {a} EXCEPT ALL SELECT dx FROM {b}"
    return reader.execute(sql.SQL(q).format(a=sql.Identifier("release", a),
                                            b=sql.Identifier("release", b))).fetchall()


@pytest.mark.parametrize("order", [(None, "age <> 99"), ("age <> 99", "age <> 98")],
                         ids=["all-then-fewer", "fewer-then-all"])
@pytest.mark.parametrize("method", ["generalization", "anatomy"])
def test_differencing_by_one_row_is_refused(source, connect, admin, method, order):
    """All rows and all but the patient aged 99, in either order (all rows spelled as a
    selection that keeps all, age <> 98)."""
    researcher = connect(RESEARCHER)
    first, second = (f"ovl_{zlib.crc32(source.encode()):x}_{i}" for i in (1, 2))   # global names
    assert req(researcher, source, first, method, selection=order[0])[5]
    e = refused(researcher, source, second, method=method, selection=order[1])
    assert sqlstate_of(e) == REFUSED
    assert_count_free(e)
    nothing_left(admin, second)


@pytest.mark.parametrize("method", ["generalization", "anatomy"])
def test_the_refused_pair_would_give_the_diagnosis(source, connect, admin, method):
    """With SELECT and allow_overlap the pair is released: deid_reader differences it."""
    analyst = connect(ANALYST)
    assert req(analyst, source, f"ovl_all_{method[:3]}", method)[5]
    e = refused(analyst, source, f"ovl_no99_{method[:3]}", method=method, selection="age <> 99")
    assert sqlstate_of(e) == REFUSED and "allow_overlap" in hint_of(e)
    assert req(analyst, source, f"ovl_no99_{method[:3]}", method, selection="age <> 99",
               options='{"allow_overlap": true}')[5]
    reader = connect("deid_t_reader")
    assert diagnoses_leaked(reader, f"ovl_all_{method[:3]}", f"ovl_no99_{method[:3]}",
                            method) == [(SECRET,)]
    logged = admin.execute("SELECT parameters->'options'->'allow_overlap' FROM deid.release"
                           " WHERE name = %s", [f"ovl_no99_{method[:3]}"])
    assert logged.fetchone()[0] is True


def test_policy_requester_may_not_allow_overlap(source, connect, admin):
    researcher = connect(RESEARCHER)
    assert req(researcher, source, "ovl_p_all")[5]
    e = refused(researcher, source, "ovl_p_no99", selection="age <> 99",
                options='{"allow_overlap": true}')
    assert sqlstate_of(e) == "42501" and "SELECT" in hint_of(e)
    nothing_left(admin, "ovl_p_no99")
    # even where there is nothing to override
    e = refused(researcher, source, "ovl_p_same", options='{"allow_overlap": true}')
    assert sqlstate_of(e) == "42501"
    nothing_left(admin, "ovl_p_same")


def test_differing_by_k_or_more_is_allowed(source, connect):
    """By another method (the same method's later release of other rows is a regrouping,
    test_composition_attacks.py), which publishes lab, not dx (a second method's counts of dx over
    the same rows are refused: test_rerelease.py)."""
    researcher = connect(RESEARCHER)
    assert req(researcher, source, "ovl_k_all")[5]
    # age 21: exactly 5 rows (= k) of 200
    assert req(researcher, source, "ovl_k_ana_no21", method="anatomy", selection="age <> 21",
               columns=LAB)[5]


def test_the_larger_k_of_the_two_counts(source, connect):
    """5 rows differ (age 21). A new release with k = 5 must not weaken an earlier one's k = 10,
    and a new release with k = 10 keeps its own promise against an earlier k = 5."""
    researcher = connect(RESEARCHER)
    assert req(researcher, source, "ovl_k10_all", k=10)[5]
    e = refused(researcher, source, "ovl_k5_no21", selection="age <> 21", k=5)
    assert sqlstate_of(e) == REFUSED
    assert req(researcher, source, "ovl_k5_no2x", selection="age <> 21 AND age <> 22", k=5,
               method="anatomy", columns=LAB)[5]
    # 15 rows from ovl_k10_all, but 5 from ovl_k5_no2x: fewer than this release's k = 10
    e = refused(researcher, source, "ovl_k10_no3x", k=10,
                selection="age <> 21 AND age <> 22 AND age <> 23")
    assert sqlstate_of(e) == REFUSED


def test_identical_selection_is_allowed(source, connect):
    researcher = connect(RESEARCHER)
    assert req(researcher, source, "ovl_i_1")[5]
    assert req(researcher, source, "ovl_i_2", method="anatomy", columns=LAB)[5]
    assert req(researcher, source, "ovl_i_3", selection="age > 0")[5]   # the same rows


def test_dropped_and_replaced_releases_still_count(source, connect, admin):
    researcher = connect(RESEARCHER)
    assert req(researcher, source, "ovl_d_all")[5]
    researcher.execute("SELECT deid.drop_release('ovl_d_all')")
    e = refused(researcher, source, "ovl_d_no99", selection="age <> 99")
    assert sqlstate_of(e) == REFUSED
    nothing_left(admin, "ovl_d_no99")
    # a replacement of a release differs from the release it replaces, which was readable
    assert req(researcher, source, "ovl_r")[5]
    e = refused(researcher, source, "ovl_r", selection="age <> 99", options='{"replace": true}')
    assert sqlstate_of(e) == REFUSED
    assert admin.execute("SELECT status FROM deid.release WHERE name = 'ovl_r'").fetchall() == [
        ("committed",)]
    assert researcher.execute("SELECT count(*) FROM release.ovl_r").fetchone()[0] == ROWS


def test_another_row_id_column_is_not_a_way_around(source, connect, admin):
    """Row ids of another column are another id space: not comparable, so refused."""
    analyst = connect(ANALYST)
    assert req(analyst, source, "ovl_rid_all")[5]
    e = refused(analyst, source, "ovl_rid_alt", selection="age <> 99",
                options='{"row_id": "alt_id"}')
    assert sqlstate_of(e) == REFUSED
    nothing_left(admin, "ovl_rid_alt")


def test_selection_catalog_is_private_and_dumped(source, connect, admin):
    researcher = connect(RESEARCHER)
    assert req(researcher, source, "ovl_cat")[5]
    stored = admin.execute(
        "SELECT s.n, length(s.rids), s.row_id FROM deid.release_selection s"
        " JOIN deid.release r USING (release_id) WHERE r.name = 'ovl_cat'").fetchone()
    # ids 1..ROWS: one run ('R', its first id and its length), not 8 bytes per id
    assert stored == (ROWS, 1 + 16, "id")
    first = admin.execute("SELECT s.rids FROM deid.release_selection s"
                          " JOIN deid.release r USING (release_id) WHERE r.name = 'ovl_cat'")
    assert bytes(first.fetchone()[0]) == b"R" + (1).to_bytes(8, "big") + ROWS.to_bytes(8, "big")
    for role in (RESEARCHER, ANALYST, "deid_t_reader"):
        with pytest.raises(psycopg.Error) as e:
            connect(role).execute("SELECT * FROM deid.release_selection")
        assert sqlstate_of(e) == "42501"
    assert connect("deid_t_admin").execute(
        "SELECT count(*) FROM deid.release_selection").fetchone()[0] >= 1
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_admin").execute("DELETE FROM deid.release_selection")
    assert sqlstate_of(e) == "42501"
    assert admin.execute("SELECT 'deid.release_selection'::regclass::oid = ANY (extconfig)"
                         " FROM pg_extension WHERE extname = 'deid'").fetchone()[0]


def test_concurrent_requests_of_one_source_are_compared(source, url, connect, admin):
    """Two requests in flight at once: the second waits for the first's lock on the source and
    then sees its committed selection."""
    first = psycopg.connect(url, user=RESEARCHER, autocommit=False)
    try:
        assert req(first, source, "ovl_cc_all")[5]            # holds the source's lock
        outcome = {}

        def second():
            try:
                outcome["row"] = req(connect(RESEARCHER), source, "ovl_cc_no99",
                                     selection="age <> 99")
            except psycopg.Error as e:
                outcome["state"] = e.diag.sqlstate
        worker = threading.Thread(target=second)
        worker.start()
        worker.join(3)
        assert worker.is_alive()                              # waiting for the lock
        first.commit()
        worker.join(30)
        assert outcome == {"state": REFUSED}
    finally:
        first.close()
    nothing_left(admin, "ovl_cc_no99")
