"""release.<release>_estimate of an anatomy release (log/estimate_view.py): what a BI tool's
SELECT ..., sum(weight) ... GROUP BY returns is 001's estimate of the COUNT query, the estimate
behind the report's ARE (deid.report_source: releases/report_measures.py), recomputed here from
the release's tables; the view is readable by the release's audience only and goes with it."""
import re

import psycopg
import pytest
from psycopg import sql

from conftest import sqlstate_of
from deid.releases import report_measures
from test_anonymize_anatomy import classified  # noqa: F401  (the columns' roles)

QIS, SENSITIVE = ["age", "sex", "race", "zip"], ["diagnosis", "treatment"]
TYPES = {c: None for c in QIS + SENSITIVE + ["vital_status"]}   # psycopg infers them


@pytest.fixture(scope="module")
def released(classified):
    admin = classified
    admin.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 10,"
                  " l => 3, columns => '{age,sex,race,zip,diagnosis,treatment,vital_status}',"
                  " options => '{\"seed\": 3}', release => 't_est')")
    yield admin
    admin.execute("SELECT deid.drop_release('t_est')")


class Statements:
    """report_measures' database handle over a psycopg connection: its $n parameters, numbered
    in the order they appear, become psycopg's placeholders."""

    def __init__(self, conn):
        self.conn = conn

    def query(self, text, params=(), types=None):
        numbers = [int(n) for n in re.findall(r"\$(\d+)", text)]
        assert numbers == list(range(1, len(numbers) + 1))
        cur = self.conn.execute(re.sub(r"\$\d+", "%s", text), list(params))
        return [dict(zip([d.name for d in cur.description], row)) for row in cur.fetchall()]

    def value(self, text, params=(), types=None):
        rows = self.query(text, params, types)
        return next(iter(rows[0].values())) if rows else None


def _table(conn, query):
    cur = conn.execute(query)
    return [d.name for d in cur.description], cur.fetchall()


def independent_estimate(qit, counts, conds):
    """001's estimate from the release's rows in memory: per group, the QIT rows matching the
    QI conditions times each conditioned attribute's share of the group."""
    (qcols, qrows) = qit
    col = {c: i for i, c in enumerate(qcols)}
    matching, size = {}, {}
    for row in qrows:
        g = row[col["group_id"]]
        size[g] = size.get(g, 0) + 1
        ok = all(_holds(row[col[c]], kind, v) for c, kind, v in conds if c in col)
        matching[g] = matching.get(g, 0) + int(ok)
    total = 0.0
    for g, m in matching.items():
        share = 1.0
        for c, _, v in (x for x in conds if x[0] in counts):
            share *= sum(n for gg, value, n in counts[c] if gg == g and value == v) / size[g]
        total += m * share
    return total


def _holds(x, kind, v):
    if x is None:
        return False
    return v[0] <= x <= v[1] if kind == "between" else x == v


def view_answer(conn, conds):
    """The query a BI tool sends: a filter on the view's columns, sum(weight)."""
    where, args, _ = report_measures._where(conds, TYPES)
    return conn.execute(sql.SQL("SELECT coalesce(sum(weight), 0) FROM release.t_est_estimate"
                                " WHERE {}").format(sql.SQL(re.sub(r"\$\d+", "%s", where))),
                        args).fetchone()[0]


def test_view_answers_the_reports_estimate(released):
    conn = released
    counts = {s: f"release.t_est_{s}" for s in SENSITIVE}
    qit = _table(conn, "SELECT * FROM release.t_est_qit")
    stored = {s: conn.execute(sql.SQL("SELECT group_id, {}, count FROM {}").format(
        sql.Identifier(s), sql.Identifier("release", f"t_est_{s}"))).fetchall() for s in SENSITIVE}
    db = Statements(conn)
    queries = report_measures._random_queries(db, "release.t_est_qit", counts,
                                              QIS + ["vital_status"], SENSITIVE, seed=11)
    assert len(queries) == report_measures.N_QUERIES
    nonzero = 0
    for conds in queries:
        expected = independent_estimate(qit, stored, conds)
        assert report_measures._estimate(db, "release.t_est_qit", counts, conds, TYPES) == \
            pytest.approx(expected, rel=1e-9, abs=1e-9)
        assert view_answer(conn, conds) == pytest.approx(expected, rel=1e-9, abs=1e-9), conds
        nonzero += expected > 0
    assert nonzero > len(queries) // 4        # the queries are not all empty


def test_group_by_sums_to_the_counts(released):
    """Grouped by a sensitive attribute alone, the weights are its released counts; over all
    rows they sum to the rows of the release."""
    conn = released
    by_view = dict(conn.execute("SELECT diagnosis, sum(weight) FROM release.t_est_estimate"
                                " GROUP BY diagnosis").fetchall())
    by_table = dict(conn.execute("SELECT diagnosis, sum(count) FROM release.t_est_diagnosis"
                                 " GROUP BY diagnosis").fetchall())
    assert by_view.keys() == by_table.keys()
    assert all(by_view[d] == pytest.approx(float(by_table[d]), rel=1e-9) for d in by_table)
    total = conn.execute("SELECT sum(weight) FROM release.t_est_estimate").fetchone()[0]
    assert total == pytest.approx(3000.0, rel=1e-12)
    cols = [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'release.t_est_estimate'::regclass"
        " AND attnum > 0 ORDER BY attnum")]
    assert cols == QIS + ["vital_status"] + SENSITIVE + ["weight"]


def test_not_a_relation_of_the_release(released):
    """The view is not listed among the release's relations (the verifier and the digests
    cover the stored tables only) and verify_release still passes."""
    conn = released
    relations, view = conn.execute("SELECT relations, metrics->>'estimate_view' FROM deid.release"
                                   " WHERE name = 't_est' AND status = 'committed'").fetchone()
    assert view == "release.t_est_estimate" and view not in relations
    assert '"verified": true' in conn.execute("SELECT deid.verify_release('t_est')::text").fetchone()[0]


def test_audience_only(released, connect):
    """Readable by deid_reader and the requester; another role gets 42501."""
    reader = connect("deid_t_reader")
    assert reader.execute("SELECT count(*) > 0 FROM release.t_est_estimate").fetchone()[0]
    attacker = connect("deid_t_attacker")
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
        attacker.execute("SELECT sum(weight) FROM release.t_est_estimate")
    assert sqlstate_of(e) == "42501"
    privileges = released.execute(
        "SELECT array_agg(DISTINCT grantee::regrole::text ORDER BY grantee::regrole::text)"
        " FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = %s::regclass"
        " AND a.privilege_type = 'SELECT' AND a.grantee <> c.relowner",
        ["release.t_est_estimate"]).fetchone()[0]
    same = released.execute(
        "SELECT array_agg(DISTINCT grantee::regrole::text ORDER BY grantee::regrole::text)"
        " FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = %s::regclass"
        " AND a.privilege_type = 'SELECT' AND a.grantee <> c.relowner",
        ["release.t_est_qit"]).fetchone()[0]
    assert privileges == same


def test_goes_with_the_release(admin):
    """drop_release drops it; replacing the release makes it anew; the generalized output has
    none."""
    def request(release, options):
        return admin.execute(
            "SELECT relations FROM deid.anonymize_request('registry.patients', 'anatomy', k => 10,"
            " columns => '{age,sex,diagnosis}', options => %s, release => %s)",
            [options, release]).fetchone()[0]

    def exists(name):
        return admin.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()[0]

    request("t_est_drop", '{"seed": 1}')
    assert exists("release.t_est_drop_estimate")
    # another seed regroups the rows: the composition rule's override (logged)
    request("t_est_drop", '{"seed": 2, "replace": true, "allow_overlap": true}')
    assert exists("release.t_est_drop_estimate")
    admin.execute("SELECT deid.drop_release('t_est_drop')")
    assert not exists("release.t_est_drop_estimate")
    request("t_est_gen", '{"output": "generalized", "allow_overlap": true}')
    assert not exists("release.t_est_gen_estimate")
    admin.execute("SELECT deid.drop_release('t_est_gen')")


def test_columns_named_like_the_views_own(admin):
    """A QI named weight and a sensitive attribute named n (the view's inner names): the
    weight column becomes _weight, the shares still sum to the counts."""
    admin.execute("DROP SCHEMA IF EXISTS est CASCADE")
    admin.execute("CREATE SCHEMA est")
    admin.execute("CREATE TABLE est.t (id int PRIMARY KEY, weight int, n text, v text)")
    admin.execute("INSERT INTO est.t SELECT i, 50 + i % 40, 'n' || (i % 4), 'v' || (i % 3)"
                  " FROM generate_series(1, 200) i")
    for col, role in (("weight", "quasi_identifier"), ("n", "sensitive"), ("v", "sensitive")):
        admin.execute("SELECT deid.set_role('est.t', %s, %s)", [col, role])
    admin.execute("SELECT * FROM deid.anonymize_request('est.t', 'anatomy', k => 5,"
                  " release => 't_est_names')")
    got = dict(admin.execute("SELECT n, sum(_weight) FROM release.t_est_names_estimate"
                             " WHERE weight < 70 GROUP BY n").fetchall())
    qit = dict(admin.execute("SELECT group_id, count(*) FILTER (WHERE weight < 70)::float8 / count(*)"
                             " FROM release.t_est_names_qit GROUP BY 1").fetchall())
    want = {}
    for g, n, c in admin.execute("SELECT group_id, n, count FROM release.t_est_names_n").fetchall():
        want[n] = want.get(n, 0.0) + qit[g] * c
    assert got.keys() == want.keys()
    assert all(got[n] == pytest.approx(want[n], rel=1e-9) for n in want)
    admin.execute("SELECT deid.drop_release('t_est_names')")
    admin.execute("DROP SCHEMA est CASCADE")


def test_weight_column_renamed_on_a_clash():
    from deid.log.estimate_view import view_sql, weight_column
    assert weight_column(["age", "weight"]) == "_weight"
    assert weight_column(["weight", "_weight"]) == "__weight"
    text = view_sql('release."r_estimate"', 'deid_release."r_qit"', ["weight"],
                    [("dx", 'deid_release."r_dx"')])
    assert text.endswith('USING ("group_id")') and '"_weight"' in text
    assert 's0("group_id", v, c, n)' in text and 's0.v AS "dx"' in text
