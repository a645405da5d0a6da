"""The ordinary use: a registry that grows every month and is released again every month.

A re-release keeps the groups the latest earlier release of the same method and columns gave
the old rows and groups the new rows among themselves (methods/kept_groups.py), so read
together the releases single out no fewer than k rows (the composition rule still judges
every release). Real login roles: a policy requester without SELECT and an analyst with
SELECT; the reader's arithmetic on the released tables shows what a re-release adds.
"""
import re
import zlib

import psycopg
import pytest
from psycopg import sql

from dbfixtures import sqlstate_of

RESEARCHER = "deid_t_researcher"      # a policy, no SELECT
ANALYST = "deid_t_analyst"            # SELECT on the source
READER = "deid_t_reader"
FIRST, MONTHLY, MONTHS = 400, 40, 12
REQUESTS = {
    "anatomy": ("anatomy", 5, 2, "{age,sex,zip,dx}", None),
    "condensation": ("condensation", 5, None, "{age,zip,bmi}", '{"seed": 7}'),
    "generalization": ("generalization", 5, None, "{age,sex,zip,dx}", None),
    "disassociation": ("disassociation", 5, None, "{codes}", None),
}


@pytest.fixture
def registry(admin, request):
    """public.rr_<test>: FIRST patients; month(i) adds MONTHLY more."""
    table = "rr_" + re.sub(r"[^a-z0-9]", "", request.node.name.lower())[-30:]
    ident = sql.Identifier("public", table)
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))
    admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, age int NOT NULL,"
                          " sex text NOT NULL, zip int NOT NULL, bmi float8 NOT NULL,"
                          " dx text NOT NULL, codes text[] NOT NULL)").format(ident))
    qualified = f"public.{table}"

    def grow(upto):
        admin.execute(sql.SQL(
            "INSERT INTO {} SELECT i, 20 + (i * 37) %% 60, CASE WHEN i %% 2 = 0 THEN 'M'"
            " ELSE 'F' END, 10100 + (i * 53) %% 30, 18 + (i * 13) %% 17, 'D' || ((i * 7919) %% 5),"
            " ARRAY['c' || (i %% 7), 'c' || (7 + (i * 3) %% 5)] FROM generate_series("
            "(SELECT coalesce(max(id), 0) + 1 FROM {}), %s) i").format(ident, ident), [upto])

    grow(FIRST)
    admin.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(ident, sql.Identifier(ANALYST)))
    admin.execute("SELECT deid.interval_hierarchy('rr_age', 0, 120, '{5,10,20,40}')"
                  " WHERE NOT EXISTS (SELECT 1 FROM deid.hierarchy WHERE name = 'rr_age')")
    admin.execute("SELECT deid.interval_hierarchy('rr_zip', 10000, 10200, '{10,50,100}')"
                  " WHERE NOT EXISTS (SELECT 1 FROM deid.hierarchy WHERE name = 'rr_zip')")
    admin.execute("SELECT deid.load_hierarchy('rr_sex', E'F;*\\nM;*')"
                  " WHERE NOT EXISTS (SELECT 1 FROM deid.hierarchy WHERE name = 'rr_sex')")
    for col, h in (("age", "rr_age"), ("sex", "rr_sex"), ("zip", "rr_zip"), ("bmi", None)):
        admin.execute("SELECT deid.set_role(%s, %s, 'quasi_identifier', %s)", [qualified, col, h])
    admin.execute("SELECT deid.set_role(%s, 'dx', 'sensitive')", [qualified])
    admin.execute("SELECT deid.allow_requests(%s, %s, 5)", [RESEARCHER, qualified])
    yield qualified, grow
    admin.execute("DELETE FROM deid.policy WHERE relation = %s::regclass", [qualified])


def release(conn, source, name, method, options=None, selection=None):
    """A release of `source`; its name made unique to the source (release names are global)."""
    m, k, l, columns, default = REQUESTS[method]
    name = f"{name}_{zlib.crc32(source.encode()):x}"
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, %s, k => %s, l => %s, columns => %s,"
        " options => %s, selection => %s, release => %s)",
        [source, m, k, l, columns, options or default, selection, name]).fetchone()


def months_through(conn, source, grow, method, tag):
    """How many of MONTHS monthly releases of the growing table go through."""
    through = 0
    for month in range(MONTHS):
        if month:
            grow(FIRST + month * MONTHLY)
        try:
            release(conn, source, f"rr_{tag}_{method[:4]}_{month}", method)
            through += 1
        except psycopg.Error as e:
            assert e.diag.sqlstate == "DE001", e
    return through


@pytest.mark.parametrize("method", ["anatomy", "condensation", "generalization",
                                    "disassociation"])
@pytest.mark.parametrize("who", [RESEARCHER, ANALYST])
def test_monthly_rerelease_goes_through(registry, connect, method, who):
    source, grow = registry
    conn = connect(who)
    tag = "p" if who == RESEARCHER else "s"
    assert months_through(conn, source, grow, method, tag) == MONTHS


def test_anatomy_rerelease_adds_only_groups_of_new_rows(registry, connect):
    """The reader's difference of two months' count tables: whole new groups, each of at
    least k rows; every old group's counts are as they were."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, "rr_d_0", "anatomy")
    grow(FIRST + MONTHLY)
    release(researcher, source, "rr_d_1", "anatomy")
    reader = connect(READER)
    q = sql.SQL("SELECT group_id, dx, count FROM {} ORDER BY 1, 2")
    tag = f"{zlib.crc32(source.encode()):x}"
    before, after = (reader.execute(q.format(sql.Identifier("release", f"{n}_{tag}_dx")))
                     .fetchall() for n in ("rr_d_0", "rr_d_1"))
    assert set(before) <= set(after)
    added = {}
    for g, _, n in set(after) - set(before):
        added[g] = added.get(g, 0) + n
    old_groups = {g for g, _, _ in before}
    assert added and not set(added) & old_groups and min(added.values()) >= 5


def test_fresh_grouping_of_a_grown_table_is_judged(registry, connect):
    """options.regroup: the rule judges the new grouping, and refuses the regrouping."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, "rr_f_0", "anatomy")
    grow(FIRST + MONTHLY)
    with pytest.raises(psycopg.Error) as e:
        release(researcher, source, "rr_f_1", "anatomy", options='{"regroup": true}')
    assert sqlstate_of(e) == "DE001"


def test_deleted_row_of_a_released_group_is_refused(registry, connect, admin):
    """A patient deleted since: the re-release would publish its group without it (the
    difference of the two count tables is its diagnosis): refused uniformly."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, "rr_x_0", "anatomy")
    admin.execute(sql.SQL("DELETE FROM {} WHERE id = 7").format(
        sql.Identifier(*source.split("."))))
    grow(FIRST + MONTHLY)
    with pytest.raises(psycopg.Error) as e:
        release(researcher, source, "rr_x_1", "anatomy")
    d = e.value.diag
    assert d.sqlstate == "DE001" and d.message_detail is None
    assert not re.search(r"\d", d.message_primary + " " + d.message_hint)


def test_updated_sensitive_value_is_refused(registry, connect, admin):
    """A patient's diagnosis changed since: the kept group's counts would differ by that one
    change (the old and the new diagnosis). Refused."""
    source, grow = registry
    analyst = connect(ANALYST)
    release(analyst, source, "rr_u_0", "anatomy")
    admin.execute(sql.SQL("UPDATE {} SET dx = 'CHANGED' WHERE id = 7").format(
        sql.Identifier(*source.split("."))))
    grow(FIRST + MONTHLY)
    with pytest.raises(psycopg.Error) as e:
        release(analyst, source, "rr_u_1", "anatomy")
    assert sqlstate_of(e) == "DE001"


@pytest.mark.parametrize("change", ["UPDATE {} SET dx = 'CHANGED' WHERE id = 7",
                                    "UPDATE {} SET age = 119 WHERE id = 7",
                                    "DELETE FROM {} WHERE id = 7"], ids=["dx", "age", "delete"])
def test_generalization_rerelease_of_a_changed_row_is_refused(registry, connect, admin, change):
    """The old rows are published again as they were: a row changed or deleted since would
    be the difference of the two releases (R1 EXCEPT ALL R2). Refused uniformly."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, "rr_gc_0", "generalization")
    admin.execute(sql.SQL(change).format(sql.Identifier(*source.split("."))))
    grow(FIRST + 2 * MONTHLY)
    with pytest.raises(psycopg.Error) as e:
        release(researcher, source, "rr_gc_1", "generalization")
    d = e.value.diag
    assert d.sqlstate == "DE001" and d.message_detail is None


def test_generalization_rerelease_adds_classes_of_new_rows(registry, connect):
    """The reader's R2 EXCEPT ALL R1: the new rows only, each class of them k or more."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, "rr_ga_0", "generalization")
    grow(FIRST + MONTHLY)
    release(researcher, source, "rr_ga_1", "generalization")
    reader = connect(READER)
    a, b = (sql.Identifier("release", f"{n}_{zlib.crc32(source.encode()):x}")
            for n in ("rr_ga_0", "rr_ga_1"))
    diff = reader.execute(sql.SQL(
        "SELECT age, sex, zip, count(*) FROM (SELECT age, sex, zip, dx FROM {b}"
        " EXCEPT ALL SELECT age, sex, zip, dx FROM {a}) x GROUP BY 1, 2, 3").format(
            a=a, b=b)).fetchall()
    assert sum(n for *_, n in diff) == MONTHLY and min(n for *_, n in diff) >= 5
    assert not reader.execute(sql.SQL("SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}").format(
        a=a, b=b)).fetchall()


@pytest.mark.parametrize("method", ["anatomy", "condensation", "generalization"])
def test_a_rerelease_verifies_afterwards(registry, connect, admin, method):
    """deid.verify_release checks a re-release from what is stored, as any release."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, f"rr_v0_{method[:4]}", method)
    grow(FIRST + MONTHLY)
    release(researcher, source, f"rr_v1_{method[:4]}", method)
    name = f"rr_v1_{method[:4]}_{zlib.crc32(source.encode()):x}"
    assert admin.execute("SELECT deid.verify_release(%s)", [name]).fetchone()[0]


def test_disassociation_monthly_increments_go_through(registry, connect):
    """Disassociation keeps no clusters: each month's new records released on their own (a
    selection on the row id: a requester with SELECT; a policy may select only on released
    quasi-identifiers)."""
    source, grow = registry
    researcher = connect(ANALYST)
    m, k, _, columns, _ = REQUESTS["disassociation"]
    tag = f"{zlib.crc32(source.encode()):x}"
    for month in range(MONTHS):
        if month:
            grow(FIRST + month * MONTHLY)
        low = 0 if month == 0 else FIRST + (month - 1) * MONTHLY
        assert researcher.execute(
            "SELECT * FROM deid.anonymize_request(%s, %s, k => %s, columns => %s,"
            " selection => %s, release => %s)",
            [source, m, k, columns, f"id > {low}", f"rr_di_{month}_{tag}"]).fetchone()[5]


@pytest.mark.parametrize("method", ["anatomy", "condensation", "generalization"])
def test_several_studies_and_a_second_method(registry, connect, method):
    """Three studies of one cohort by the same method and columns (the first one's groups,
    kept), then a study by another method, all by the policy requester. After generalization,
    the anatomy study of the same dx takes the other patients (ages 50 and over): two methods
    that publish exact per-group counts of dx over the same patients are refused (below)."""
    source, _ = registry
    researcher = connect(RESEARCHER)
    mine, theirs = (("age < 50", "age >= 50") if method == "generalization" else (None, None))
    for study in range(3):
        assert release(researcher, source, f"rr_st{study}_{method[:4]}", method,
                       selection=mine)[5]
    other = "anatomy" if method != "anatomy" else "condensation"
    assert release(researcher, source, f"rr_st_other_{method[:4]}", other, selection=theirs)[5]


def test_second_method_of_the_same_sensitive_column_is_refused(registry, connect, admin):
    """Generalization publishes dx raw per class, anatomy its counts per group: over the same
    patients, an anatomy group minus a class inside it would be a few patients whose dx is
    the counts' difference. The policy requester gets the uniform refusal; an analyst with
    SELECT may override with allow_overlap (the warning logged)."""
    source, _ = registry
    researcher, analyst = connect(RESEARCHER), connect(ANALYST)
    assert release(researcher, source, "rr_cm_g", "generalization")[5]
    with pytest.raises(psycopg.Error) as e:
        release(researcher, source, "rr_cm_a", "anatomy")
    d = e.value.diag
    assert d.sqlstate == "DE001" and d.message_detail is None and d.message_hint
    assert not re.search(r"\d", d.message_primary + " " + d.message_hint)
    with pytest.raises(psycopg.Error) as e:
        release(analyst, source, "rr_cm_a", "anatomy")
    assert sqlstate_of(e) == "DE001" and "another method" in e.value.diag.message_detail
    assert release(analyst, source, "rr_cm_a", "anatomy",
                   options='{"allow_overlap": true}')[5]
    warnings = admin.execute("SELECT metrics->'warnings' FROM deid.release WHERE name = %s",
                             [f"rr_cm_a_{zlib.crc32(source.encode()):x}"]).fetchone()[0]
    assert any("allow_overlap" in w for w in warnings)


def test_clearing_a_dropped_tables_history_keeps_other_tables_groups(registry, connect, admin):
    """A deid_admin's clearing of a dropped table's name bears on that name alone: another
    table's re-release still keeps its earlier groups (it was regrouped, and refused, when the
    clearing read as a reset of every source)."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    assert release(researcher, source, "rr_cl_0", "anatomy")[5]
    admin.execute("DROP TABLE IF EXISTS public.rr_gone")
    admin.execute("CREATE TABLE public.rr_gone (id int PRIMARY KEY)")
    admin.execute("DROP TABLE public.rr_gone")
    connect("deid_t_admin").execute("SELECT deid.clear_source_history('public.rr_gone')")
    grow(FIRST + MONTHLY)
    assert release(researcher, source, "rr_cl_1", "anatomy")[5]
