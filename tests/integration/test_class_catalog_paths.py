"""The class catalog of a generalization release (002, per source system) is the stored release
grouped per source whichever statement derived it: one joint GROUP BY rolled up per source (few
classes over all quasi-identifiers: at most JOINT_ROLLUP_MAX, >= 4 rows a class) or one GROUP BY
per source (nearly unique joint classes). Quasi-identifiers named like the statements' own
aliases (n, c0, k0) must not confuse either."""
import json

import psycopg
import pytest
from psycopg import sql

TABLES = {
    # few joint classes (<= 8 for 400 rows): the joint GROUP BY, rolled up
    "t_cat_few": "SELECT i AS id, 'v' || (i % 2) AS n, 'v' || (i / 2 % 2) AS c0, 'v' || (i / 4 % 2) AS k0",
    # 20 value pairs per source, independent: 400 rows, 400 joint classes -- one GROUP BY a source
    "t_cat_many": "SELECT i AS id, 'v' || (i % 20) AS n, 'v' || ((i % 20) * 7 % 20) AS c0,"
                  " 'v' || (i / 20 % 20) AS k0",
}
SOURCES = (("registry", ["n", "c0"]), ("pathology", ["k0"]))


@pytest.fixture(scope="module")
def tables(admin):
    leaves = "\n".join(f"v{i};*" for i in range(20))
    admin.execute("SELECT deid.load_hierarchy('t_cat_h', %s) WHERE NOT EXISTS"
                  " (SELECT 1 FROM deid.hierarchy WHERE name = 't_cat_h')", [leaves])
    for table, select in TABLES.items():
        name = sql.Identifier("public", table)
        admin.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
        admin.execute(sql.SQL("CREATE TABLE {} AS {} FROM generate_series(0, 399) i")
                      .format(name, sql.SQL(select)))        # select: a constant of this module
        admin.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (id)").format(name))
        for source, cols in SOURCES:
            for c in cols:
                admin.execute("SELECT deid.set_role(%s, %s, 'quasi_identifier', 't_cat_h', source => %s)",
                              [table, c, source])
    return admin


@pytest.mark.parametrize("table, joint", [("t_cat_few", True), ("t_cat_many", False)])
def test_catalog_is_the_stored_release_grouped_per_source(tables, table, joint):
    release = table + "_r"
    rid, _, rows, groups, _, verified = tables.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'generalization', k => 5, columns => '{n,c0,k0}',"
        " options => %s, release => %s)",
        [table, json.dumps({"replace": True}), release]).fetchone()
    assert verified and rows == 400
    assert (4 * groups <= rows) == joint          # which statement derived the catalog
    got = tables.execute("SELECT class_id, cardinality, generalized, source FROM deid.equivalence_class"
                         " WHERE release_id = %s ORDER BY class_id", [rid]).fetchall()
    want, first = [], 0
    for source, cols in SOURCES:
        ids = [sql.Identifier(c) for c in cols]
        found = tables.execute(sql.SQL(
            "SELECT %s + (row_number() OVER (ORDER BY {order}))::int - 1, count(*),"
            " jsonb_build_object({pairs}), %s FROM {release} GROUP BY {group} ORDER BY 1").format(
                order=sql.SQL(", ").join(sql.SQL('{} COLLATE "C"').format(i) for i in ids),
                pairs=sql.SQL(", ").join(sql.SQL("{}, {}").format(sql.Literal(c), i)
                                         for c, i in zip(cols, ids)),
                release=sql.Identifier("release", release),
                group=sql.SQL(", ").join(ids)), [first, source]).fetchall()
        want += found
        first += len(found)
    assert got == want and len(got) >= 3
    assert tables.execute("SELECT deid.verify_release(%s)", [release]).fetchone()[0]["verified"]


# leaves whose text a row's text quotes or escapes (comma, quote, backslash, space, parenthesis)
ODD = ["a,b", 'x"y', "v\\w", "s p", "(p)"]


@pytest.fixture(scope="module")
def odd_table(tables):
    tables.execute("SELECT deid.load_hierarchy('t_cat_odd_h', %s) WHERE NOT EXISTS"
                   " (SELECT 1 FROM deid.hierarchy WHERE name = 't_cat_odd_h')",
                   ["\n".join(f"{v};*" for v in ODD)])
    tables.execute("DROP TABLE IF EXISTS public.t_cat_odd")
    tables.execute("CREATE TABLE public.t_cat_odd AS SELECT i AS id, (%s::text[])[1 + i %% 5] AS n,"
                   " (%s::text[])[1 + i / 5 %% 2] AS c0, (%s::text[])[1 + i / 10 %% 3] AS k0"
                   " FROM generate_series(0, 399) i", [ODD, ODD, ODD])
    tables.execute("ALTER TABLE public.t_cat_odd ADD PRIMARY KEY (id)")
    for source, cols in SOURCES:
        for c in cols:
            tables.execute("SELECT deid.set_role('t_cat_odd', %s, 'quasi_identifier', 't_cat_odd_h',"
                           " source => %s)", [c, source])
    return tables


def recomputed(conn, table):
    """The table's digest as table_digest.digests takes it, in a pass of its own."""
    return conn.execute(sql.SQL(
        "SELECT count(*)::int, sum(h)::text || ' ' || sum(hashint8extended(h, 1))::text FROM"
        " (SELECT hashtextextended(ROW(c.*)::text, 0) AS h FROM {} c OFFSET 0) d").format(
            sql.Identifier("deid_release", table))).fetchone()


@pytest.mark.parametrize("table", ["t_cat_few", "t_cat_many", "t_cat_odd"])
def test_release_digest_taken_by_the_joint_group_by_is_the_tables(odd_table, table):
    """Where the joint GROUP BY takes the release table's digest (text quasi-identifiers only:
    a joint class's rows are byte-identical), the log records what a pass of its own over the
    table takes -- values that a row's text quotes included -- and a changed row fails
    verification."""
    conn, release = odd_table, table + "_d"
    conn.execute("SELECT * FROM deid.anonymize_request(%s, 'generalization', k => 5,"
                 " columns => '{n,c0,k0}', options => %s, release => %s)",
                 [table, json.dumps({"replace": True, "allow_overlap": True}), release])
    logged = conn.execute("SELECT metrics->'digests'->'tables'->%s FROM deid.release"
                          " WHERE name = %s AND status = 'committed'", [release, release]).fetchone()[0]
    n, sums = recomputed(conn, release)
    assert (logged["rows"], logged["sums"]) == (n, sums) and n == 400
    assert conn.execute("SELECT deid.verify_release(%s)", [release]).fetchone()[0]["verified"]
    with conn.transaction():
        conn.execute(sql.SQL("UPDATE {} SET k0 = k0 || ' ' WHERE ctid = (SELECT min(ctid) FROM {})")
                     .format(sql.Identifier("deid_release", release),
                             sql.Identifier("deid_release", release)))
        with pytest.raises(Exception) as e:
            conn.execute("SELECT deid.verify_release(%s)", [release])
        assert getattr(e.value, "sqlstate", None) == "DE002"
        raise psycopg.Rollback()
