"""The class catalog of a generalization release (002, per source system) is the stored release
grouped per source whichever statement derived it: one joint GROUP BY rolled up per source (few
classes over all quasi-identifiers: at most JOINT_ROLLUP_MAX, >= 4 rows a class) or one GROUP BY
per source (nearly unique joint classes). Quasi-identifiers named like the statements' own
aliases (n, c0, k0) must not confuse either."""
import json

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
