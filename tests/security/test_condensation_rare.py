"""Condensation (004) must not copy rare records (a copied rare record
re-identifies its patient).

Two attacks an auditor ran with real login roles:

* a source-unique row (age 99, zip 10099, UNIQUE_SECRET_DX) at k = 10 appeared verbatim in
  the release, and the release was reported verified;
* on a 600-row table with a unique-valued categorical column, 573 released rows equalled
  source rows.

What must hold: every released categorical value is held by at least k source rows (rarer
ones generalized through the column's hierarchy, else merged into one label), and no released
row equals a source row that fewer than k source rows share on the released columns.  A stored
release tampered to hold a rare value fails deid.verify_release.
"""
import psycopg
from psycopg import sql
import pytest

from dbfixtures import sqlstate_of

ANALYST = "deid_t_analyst"
K = 10
UNIQUE = "public.t_rare_unique"        # attack 1: one source-unique row
WIDE = "public.t_rare_codes"           # attack 2: a unique-valued categorical column
SECRET = "UNIQUE_SECRET_DX"
WIDE_ROWS = 600


@pytest.fixture(scope="module")
def rare(admin):
    for t in (UNIQUE, WIDE):
        admin.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(*t.split("."))))
    admin.execute("""CREATE TABLE public.t_rare_unique (id bigint PRIMARY KEY, age int NOT NULL,
                     zip int NOT NULL, dx text NOT NULL)""")
    admin.execute("""INSERT INTO public.t_rare_unique
        SELECT i, 30 + (i * 7) % 40, 10000 + (i * 13) % 60,
               (ARRAY['A01','B02','C03','D04'])[1 + i % 4] FROM generate_series(1, 299) i""")
    admin.execute("INSERT INTO public.t_rare_unique VALUES (300, 99, 10099, %s)", [SECRET])
    admin.execute("""CREATE TABLE public.t_rare_codes (id bigint PRIMARY KEY, code text NOT NULL,
                     age int NOT NULL, zip int NOT NULL, sex text NOT NULL)""")
    admin.execute("""INSERT INTO public.t_rare_codes
        SELECT i, 'CODE-' || i, 20 + (i * 7919) %% 70, 10000 + (i * 104729) %% 40,
               CASE WHEN i %% 3 = 0 THEN 'F' ELSE 'M' END FROM generate_series(1, %s) i""",
                  [WIDE_ROWS])
    for t, cols in ((UNIQUE, ("age", "zip", "dx")), (WIDE, ("code", "age", "zip", "sex"))):
        for c in cols:
            admin.execute("SELECT deid.set_role(%s, %s, 'quasi_identifier')", [t, c])
        admin.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(
            sql.Identifier(*t.split(".")), sql.Identifier(ANALYST)))
    yield admin
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 't_rare%'")
    for t in (UNIQUE, WIDE):
        admin.execute("DELETE FROM deid.column_role WHERE relation = %s::regclass", [t])


def release(conn, table, columns, name, seed=7):
    [row] = conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'condensation', k => %s, columns => %s,"
        " options => %s, release => %s)",
        [table, K, "{" + ",".join(columns) + "}", '{"seed": %d}' % seed, name]).fetchall()
    assert row[5], "the release is verified"
    return row


def verbatim_rare(admin, table, columns, name):
    """Released rows equal (as text, on every released column) to a source row whose
    combination of the released columns has fewer than k source rows."""
    cols = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in columns)
    # the USING join needs the text columns to keep their names
    q = sql.SQL("""WITH src AS (SELECT {aliased}, count(*) AS n FROM {src} GROUP BY {grp}),
                        rel AS (SELECT {aliased} FROM {rel})
                   SELECT count(*) FROM rel JOIN src USING ({names}) WHERE src.n < {k}""").format(
        aliased=sql.SQL(", ").join(sql.SQL("{}::text AS {}").format(sql.Identifier(c), sql.Identifier(c))
                                   for c in columns),
        grp=cols, src=sql.Identifier(*table.split(".")), rel=sql.Identifier("deid_release", name),
        names=sql.SQL(", ").join(sql.Identifier(c) for c in columns), k=sql.Literal(K))
    return admin.execute(q).fetchone()[0]


def rare_values(admin, table, column, name):
    """Released values of a column that occur in the source, but in fewer than k source rows."""
    q = sql.SQL("""SELECT count(DISTINCT r.v) FROM (SELECT {c}::text AS v FROM {rel}) r
                   JOIN (SELECT {c}::text AS v, count(*) AS n FROM {src} GROUP BY 1) s USING (v)
                   WHERE s.n < {k}""").format(
        c=sql.Identifier(column), rel=sql.Identifier("deid_release", name),
        src=sql.Identifier(*table.split(".")), k=sql.Literal(K))
    return admin.execute(q).fetchone()[0]


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_a_source_unique_row_is_not_released_verbatim(rare, connect, seed):
    name = f"t_rare_u{seed}"
    release(connect(ANALYST), UNIQUE, ("age", "zip", "dx"), name, seed)
    rel = sql.Identifier("deid_release", name)
    assert rare.execute(sql.SQL("SELECT count(*) FROM {} WHERE dx = %s").format(rel),
                        [SECRET]).fetchone()[0] == 0
    assert rare.execute(sql.SQL("SELECT count(*) FROM {} WHERE age = 99 AND zip = 10099")
                        .format(rel)).fetchone()[0] == 0
    assert rare_values(rare, UNIQUE, "dx", name) == 0
    assert verbatim_rare(rare, UNIQUE, ("age", "zip", "dx"), name) == 0


def test_a_unique_valued_category_is_merged_and_no_row_is_copied(rare, connect):
    name = "t_rare_codes_rel"
    release(connect(ANALYST), WIDE, ("code", "age", "zip", "sex"), name)
    rel = sql.Identifier("deid_release", name)
    assert rare_values(rare, WIDE, "code", name) == 0
    # every source code is rare: the whole column is one merged label, not a source value
    labels = rare.execute(sql.SQL("SELECT DISTINCT code FROM {}").format(rel)).fetchall()
    assert len(labels) == 1
    assert not rare.execute("SELECT 1 FROM public.t_rare_codes WHERE code = %s",
                            [labels[0][0]]).fetchone()
    assert rare.execute(sql.SQL("SELECT count(*) FROM {} r JOIN public.t_rare_codes s"
                                " USING (code, age, zip, sex)").format(rel)).fetchone()[0] == 0
    # on the other released columns, no row copies a combination of fewer than k source rows
    assert verbatim_rare(rare, WIDE, ("age", "zip", "sex"), name) == 0
    m = rare.execute("SELECT metrics->'categories' FROM deid.release WHERE name = %s",
                     [name]).fetchone()[0]
    assert m["code"]["mode"] == "other" and m["code"]["label"] == labels[0][0]


def test_verify_release_fails_a_stored_rare_value(rare, connect):
    name = "t_rare_tamper"
    release(connect(ANALYST), UNIQUE, ("age", "zip", "dx"), name)
    assert rare.execute("SELECT deid.verify_release(%s)", [name]).fetchone()[0]
    rel = sql.Identifier("deid_release", name)
    rare.execute(sql.SQL("UPDATE {t} SET dx = %s, age = 99, zip = 10099"
                         " WHERE ctid = (SELECT min(ctid) FROM {t})").format(t=rel), [SECRET])
    with pytest.raises(psycopg.Error) as e:
        rare.execute("SELECT deid.verify_release(%s)", [name])
    assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
    assert SECRET not in e.value.diag.message_primary


def test_verify_release_fails_a_stored_copy_of_the_unique_row(rare, connect):
    """A copy of the unique row in the release's own terms (its code merged into the label):
    each stored value is common, so only the logged digest of the stored table shows it."""
    name = "t_rare_tamper_row"
    release(connect(ANALYST), UNIQUE, ("age", "zip", "dx"), name)
    rel = sql.Identifier("deid_release", name)
    label = rare.execute("SELECT metrics->'categories'->'dx'->>'label' FROM deid.release"
                         " WHERE name = %s", [name]).fetchone()[0]
    report = rare.execute("SELECT deid.verify_release(%s)", [name]).fetchone()[0]
    assert report["report"]["stored_digest"] == "row-hash sum as logged"
    rare.execute(sql.SQL("UPDATE {t} SET age = 99, zip = 10099 WHERE ctid = (SELECT min(ctid)"
                         " FROM {t} WHERE dx = %s)").format(t=rel), [label])
    with pytest.raises(psycopg.Error) as e:
        rare.execute("SELECT deid.verify_release(%s)", [name])
    assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
