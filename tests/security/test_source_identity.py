"""Attacks: the same patients released as another source.

The composition rule compares a release with the earlier releases of its source. A hostile
requester (a policy, no SELECT) tries to make the source look new:

- a view over the table (its own relation, its own oid): the three-request tracker split
  over the table and two views of it;
- the table dropped and re-created under the same name (a new oid), the same patients in it;
- a view whose row ids deid cannot trace to the table's (computed, joined, aggregated, a
  UNION): it must be refused, not treated as a fresh source;
- a view and its table requested at once: they must wait for each other.

A release of a view counts as a release of the base table its row ids come from, read in the
view's stored rule (no code of the view runs); a re-created table keeps its name's history
until a deid_admin clears it (deid.clear_source_history, logged).
"""
import re

import psycopg
import pytest
from psycopg import sql

from dbfixtures import sqlstate_of

RESEARCHER = "deid_t_researcher"      # a policy, no SELECT
READER = "deid_t_reader"
REFUSED = "DE001"
UNMAPPED = "0A000"
K, L = 5, 2
SECRET = "SECRET_DX"
TRACKER = ("age < 40 OR (age = 61 AND sex = 'M' AND zip = 10133)", None, "age >= 40")


def _fill(admin, table):
    ident = sql.Identifier("public", table)
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(ident))
    admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, age int NOT NULL,"
                          " sex text NOT NULL, zip int NOT NULL, dx text NOT NULL)").format(ident))
    admin.execute(sql.SQL(
        "INSERT INTO {} SELECT i, CASE WHEN i = 7 THEN 61 ELSE 20 + (i * 37) % 60 END,"
        " CASE WHEN i = 7 THEN 'M' WHEN i % 2 = 0 THEN 'M' ELSE 'F' END,"
        " CASE WHEN i = 7 THEN 10133 ELSE 10100 + (i * 53) % 30 END,"
        " CASE WHEN i = 7 THEN {} ELSE 'D' || ((i * 7919) % 5) END"
        " FROM generate_series(1, 200) i").format(ident, sql.Literal(SECRET)))
    classify(admin, f"public.{table}")


def classify(admin, relation):
    """Roles of the columns, and the researcher's policy (k >= 5), on a table or a view."""
    for col in ("age", "sex", "zip"):
        admin.execute("SELECT deid.set_role(%s, %s, 'quasi_identifier')", [relation, col])
    admin.execute("SELECT deid.set_role(%s, 'dx', 'sensitive')", [relation])
    admin.execute("SELECT deid.allow_requests(%s, %s, 5)", [RESEARCHER, relation])


@pytest.fixture
def source(admin, request):
    """A fresh table of 200 patients; patient 7, the only (61, M, 10133), holds SECRET."""
    table = "sid_" + re.sub(r"[^a-z0-9]", "", request.node.name.lower())[-30:]
    _fill(admin, table)
    yield f"public.{table}", table
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
        sql.Identifier("public", table)))


def view(admin, name, body, classified=True):
    admin.execute(sql.SQL("DROP VIEW IF EXISTS {}").format(sql.Identifier("public", name)))
    admin.execute(sql.SQL("CREATE VIEW {} AS ").format(sql.Identifier("public", name))
                  + sql.SQL(body))
    if classified:
        classify(admin, f"public.{name}")
    return f"public.{name}"


def anatomy(conn, source, release, selection=None, row_id=None):
    options = '{"row_id": "%s"}' % row_id if row_id else "{}"
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'anatomy', k => %s, l => %s,"
        " columns => '{age,sex,zip,dx}', selection => %s, options => %s, release => %s)",
        [source, K, L, selection, options, release]).fetchone()


def attempt(conn, *args, **kw):
    """The release, or the error that refused it."""
    try:
        return anatomy(conn, *args, **kw)
    except psycopg.Error as e:
        return e


def assert_uniform(e):
    d = e.diag
    assert d.sqlstate == REFUSED and d.message_hint, d.message_primary
    assert not re.search(r"\d", d.message_primary + " " + d.message_hint)
    assert d.message_detail is None


def tracked(reader, names):
    q = sql.SQL("SELECT dx, sum(count) FROM {} GROUP BY dx")
    totals = [dict(reader.execute(q.format(sql.Identifier("release", n + "_dx"))).fetchall())
              for n in names]
    left = {dx: totals[0].get(dx, 0) + totals[2].get(dx, 0) - totals[1].get(dx, 0)
            for dx in totals[1]}
    return {dx: n for dx, n in left.items() if n}


def released(admin, name):
    return admin.execute("SELECT count(*) FROM deid.release WHERE name = %s AND status ="
                         " 'committed'", [name]).fetchone()[0]


def test_tracker_through_views_of_the_source_is_refused(source, connect, admin):
    """R1 of the table, R2 and R3 of two views over it: each view was a fresh history, and
    R1 + R3 - R2 gave the patient's diagnosis. Now the views' releases are the table's: one
    of them is refused uniformly, and the reader cannot complete the tracker."""
    rel, table = source
    everyone = view(admin, f"{table}_all", f"SELECT * FROM public.{table}")
    older = view(admin, f"{table}_old", f"SELECT id, age, sex, zip, dx FROM public.{table}"
                                        " WHERE age >= 40")
    researcher = connect(RESEARCHER)
    names = [f"{table}_{i}" for i in (1, 2, 3)]
    got = [attempt(researcher, rel, names[0], selection=TRACKER[0]),
           attempt(researcher, everyone, names[1], row_id="id"),
           attempt(researcher, older, names[2], row_id="id")]
    assert not isinstance(got[0], psycopg.Error), got[0]
    refusals = [e for e in got if isinstance(e, psycopg.Error)]
    assert refusals, "the tracker went through the views"
    for e in refusals:
        assert_uniform(e)
    assert sum(released(admin, n) for n in names) < 3


def test_view_releases_record_the_base_table(source, connect, admin):
    """A view that renames the row id and selects through a subquery: its release counts as a
    release of the table, by the table's row-id column."""
    rel, table = source
    v = view(admin, f"{table}_v", f"SELECT pid, age, sex, zip, dx FROM (SELECT id AS pid, *"
                                  f" FROM public.{table} WHERE zip > 0) s WHERE sex <> 'X'")
    assert anatomy(connect(RESEARCHER), v, f"{table}_v1", row_id="pid")[5]
    got = admin.execute("SELECT i.relation, i.row_id FROM deid.release_identity i JOIN"
                        " deid.release r USING (release_id) WHERE r.name = %s",
                        [f"{table}_v1"]).fetchall()
    assert got == [(f"public.{table}", "id")]
    # a release of the table itself differing by one row is now refused
    assert_uniform(attempt(connect(RESEARCHER), rel, f"{table}_t1", selection="zip <> 10133"))


@pytest.mark.parametrize("kind,body", [
    ("computed", "SELECT id + 0 AS id, age, sex, zip, dx FROM public.{t}"),
    ("join", "SELECT a.id, a.age, a.sex, a.zip, b.dx FROM public.{t} a"
             " JOIN public.{t} b ON b.age = a.age"),
    ("aggregate", "SELECT min(id) AS id, age, sex, zip, min(dx) AS dx FROM public.{t}"
                  " GROUP BY age, sex, zip"),
    ("union", "SELECT id, age, sex, zip, dx FROM public.{t} UNION ALL"
              " SELECT id + 1000, age, sex, zip, dx FROM public.{t}"),
    ("function", "SELECT g AS id, 30 AS age, 'M'::text AS sex, 10100 AS zip, 'D1'::text AS dx"
                 " FROM generate_series(1, 50) g"),
], ids=["computed", "join", "aggregate", "union", "function"])
def test_a_view_whose_row_ids_cannot_be_traced_is_refused(source, connect, admin, kind, body):
    """Its releases could not be compared with the table's: refused before any release,
    with a SQLSTATE and a hint, and nothing left behind."""
    rel, table = source
    v = view(admin, f"{table}_{kind}", body.format(t=table))
    name = f"sid_unmapped_{kind}"
    e = attempt(connect(RESEARCHER), v, name, row_id="id")
    assert isinstance(e, psycopg.Error), f"the {kind} view was released"
    assert e.diag.sqlstate == UNMAPPED and e.diag.message_hint, e.diag.message_primary
    assert not released(admin, name)


def test_a_recreated_table_keeps_its_history(source, connect, admin):
    """Drop the table and re-create it under the same name with the same patients: a new
    relation, but not a fresh history. Only a deid_admin clears it, and that is logged."""
    rel, table = source
    researcher = connect(RESEARCHER)
    assert anatomy(researcher, rel, f"{table}_1")[5]
    admin.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier("public", table)))
    _fill(admin, table)
    assert_uniform(attempt(researcher, rel, f"{table}_2", selection="zip <> 10133"))
    assert not released(admin, f"{table}_2")
    for role in (RESEARCHER, READER):
        with pytest.raises(psycopg.Error) as e:
            connect(role).execute("SELECT deid.clear_source_history(%s)", [rel])
        assert sqlstate_of(e) == "42501" and e.value.diag.message_hint
    said = connect("deid_t_admin").execute("SELECT deid.clear_source_history(%s)",
                                           [rel]).fetchone()[0]
    assert rel in said
    assert admin.execute("SELECT reset_by::text FROM deid.composition_reset WHERE relation = %s",
                         [rel]).fetchone()[0] == "deid_t_admin"
    assert anatomy(researcher, rel, f"{table}_3", selection="zip <> 10133")[5]


def test_tracker_across_drop_and_recreate_is_refused(source, connect, admin):
    """Each of the three requests of the tracker on a table dropped and re-created (the same
    patients) since the one before: each was a fresh history. One of them is refused
    uniformly: the tracker cannot be completed."""
    rel, table = source
    researcher = connect(RESEARCHER)
    names = [f"{table}_{i}" for i in (1, 2, 3)]
    got = []
    for name, selection in zip(names, TRACKER):
        if got:
            admin.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier("public", table)))
            _fill(admin, table)
        got.append(attempt(researcher, rel, name, selection=selection))
    assert not isinstance(got[0], psycopg.Error), got[0]
    refusals = [e for e in got if isinstance(e, psycopg.Error)]
    assert refusals, "the tracker went through the re-created table"
    for e in refusals:
        assert_uniform(e)


def test_a_view_and_its_table_wait_for_each_other(source, connect, admin, url):
    """A request of the table holds the source's lock until it commits; a request of a view
    over it waits for that lock (here: gives up after the wait with 55P03)."""
    rel, table = source
    v = view(admin, f"{table}_w", f"SELECT * FROM public.{table}")
    holder = psycopg.connect(url, user=RESEARCHER)            # not autocommit: holds the lock
    try:
        anatomy(holder, rel, f"{table}_h")
        waiter = connect(RESEARCHER)
        waiter.execute("SET deid.lock_wait = '1s'")
        e = attempt(waiter, v, f"{table}_w1", row_id="id")
        assert isinstance(e, psycopg.Error), "the view's request did not wait for the table's"
        assert e.diag.sqlstate == "55P03" and e.diag.message_hint
    finally:
        holder.rollback()
        holder.close()


@pytest.mark.parametrize("level", ["REPEATABLE READ", "SERIALIZABLE"])
def test_a_view_request_on_a_snapshot_older_than_the_tables_release_gets_40001(
        source, connect, admin, url, level):
    """The snapshot of a request of the view is taken before a request of the table commits:
    it must not decide the composition rule on a snapshot that misses that release."""
    rel, table = source
    v = view(admin, f"{table}_rr", f"SELECT * FROM public.{table}")
    late = psycopg.connect(url, user=RESEARCHER)
    try:
        late.execute(f"BEGIN ISOLATION LEVEL {level}")
        late.execute("SELECT 1")                                      # the snapshot is taken
        assert anatomy(connect(RESEARCHER), rel, f"{table}_t")[5]
        e = attempt(late, v, f"{table}_v", selection="zip <> 10133", row_id="id")
        assert isinstance(e, psycopg.Error), "decided on a snapshot that misses the release"
        assert e.diag.sqlstate == "40001" and "new transaction" in e.diag.message_hint
    finally:
        late.rollback()
        late.close()
