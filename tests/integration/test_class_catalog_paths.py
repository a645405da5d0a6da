"""The class catalog of a generalization release (002, per source system) is the stored release
grouped per source whichever statement derived it: one joint GROUP BY rolled up per source (few
classes over all quasi-identifiers: at most JOINT_ROLLUP_MAX, >= 4 rows a class) or one GROUP BY
per source (nearly unique joint classes). Quasi-identifiers named like the statements' own
aliases (n, c0, k0) must not confuse either."""
import json

import pytest

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
        admin.execute(f"DROP TABLE IF EXISTS public.{table}")
        admin.execute(f"CREATE TABLE public.{table} AS {select} FROM generate_series(0, 399) i")
        admin.execute(f"ALTER TABLE public.{table} ADD PRIMARY KEY (id)")
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
        quoted = [f'"{c}"' for c in cols]
        found = tables.execute(
            f"SELECT %s + (row_number() OVER (ORDER BY {', '.join(q + ' COLLATE ' + chr(34) + 'C' + chr(34) for q in quoted)}))::int - 1,"
            f" count(*), jsonb_build_object({', '.join(repr(c) + ', ' + q for c, q in zip(cols, quoted))}), %s"
            f" FROM release.{release} GROUP BY {', '.join(quoted)} ORDER BY 1", [first, source]).fetchall()
        want += found
        first += len(found)
    assert got == want and len(got) >= 3
    assert tables.execute("SELECT deid.verify_release(%s)", [release]).fetchone()[0]["verified"]
