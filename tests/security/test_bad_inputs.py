"""Every bad input gets a SQLSTATE, a message in PostgreSQL's style and a HINT, and leaves
nothing behind: no relation, no log row, no catalog row, no temporary file. For callers
without SELECT (a policy), no planted value and no count below k shows up.

Each case: (id, role, SQL, expected SQLSTATE). Roles: "admin" (superuser), "analyst"
(SELECT on the table), "researcher" (a policy, k >= 5), "reader", "rogue" (a deid_admin
without SELECT).
"""
import os
import re

import psycopg
import pytest
from psycopg import sql

TABLE = "public.t_bad"
SETS = "public.t_bad_sets"       # sets of codes: NULL (ids 1-10) or empty (ids 11-20)
ROWS = 61
SECRETS = ("zz_secret_value", "Person 1")
R = "SELECT * FROM deid.anonymize_request"     # the front door, abbreviated
A = f"{R}('{TABLE}', 'anatomy', k => 5, columns => '{{age,sex,dx}}'"
G = f"{R}('{TABLE}', 'generalization', k => 5, columns => '{{age,sex}}'"

CASES = [
    # ---- anonymize_request: the call itself
    ("unknown_relation", "analyst", f"{R}('no_such_table', 'anatomy', k => 5)", "42P01"),
    ("unknown_schema", "analyst", f"{R}('nope.t', 'anatomy', k => 5)", "42P01"),
    ("bad_relation_name", "analyst", f"{R}('a.b.c.d', 'anatomy', k => 5)", "42602"),
    ("null_relation", "analyst", f"{R}(NULL, 'anatomy', k => 5)", "22004"),
    ("null_method", "analyst", f"{R}('{TABLE}', NULL, k => 5)", "22004"),
    ("unknown_method", "analyst", f"{R}('{TABLE}', 'magic', k => 5)", "22023"),
    ("null_k", "analyst", f"{R}('{TABLE}', 'anatomy', k => NULL)", "22004"),
    ("k_one", "analyst", f"{R}('{TABLE}', 'anatomy', k => 1)", "22023"),
    ("k_zero_generalization", "analyst", f"{R}('{TABLE}', 'generalization', k => 0)", "22023"),
    ("l_zero", "analyst", f"{A}, l => 0)", "22023"),
    ("l_with_generalization", "analyst", f"{G}, l => 2)", "22023"),
    ("unknown_column", "analyst", f"{R}('{TABLE}', 'anatomy', k => 5, columns => '{{age,nope}}')", "42703"),
    ("identifier_column", "analyst", f"{R}('{TABLE}', 'anatomy', k => 5, columns => '{{age,name}}')", "22023"),
    ("unclassified_column", "analyst", f"{R}('{TABLE}', 'anatomy', k => 5, columns => '{{age,misc}}')", "22023"),
    ("duplicate_column", "analyst", f"{R}('{TABLE}', 'anatomy', k => 5, columns => '{{age,age,dx}}')", "22023"),
    ("columns_two_dimensional", "analyst", f"{R}('{TABLE}', 'anatomy', k => 5, columns => '{{{{age,sex}},{{dx,zip}}}}')", "22023"),
    ("no_codes", "analyst", f"{R}('{SETS}', 'disassociation', k => 3, columns => '{{codes}}')", "DE001"),
    ("null_codes", "analyst", f"{R}('{SETS}', 'disassociation', k => 3, columns => '{{codes}}', selection => 'id <= 10')", "DE001"),
    ("empty_codes", "analyst", f"{R}('{SETS}', 'disassociation', k => 3, columns => '{{codes}}', selection => 'id > 10')", "DE001"),
    ("empty_codes_generalization", "analyst", f"{R}('{SETS}', 'disassociation', k => 3, columns => '{{codes}}', selection => 'id > 10', options => '{{\"model\": \"generalization\", \"hierarchy\": \"t_bad_sex\"}}')", "DE001"),
    ("empty_columns", "analyst", f"{R}('{TABLE}', 'anatomy', k => 5, columns => '{{}}')", "22004"),
    ("no_quasi_identifier", "analyst", f"{R}('{TABLE}', 'anatomy', k => 5, columns => '{{dx}}')", "22023"),
    ("l_without_sensitive", "analyst", f"{R}('{TABLE}', 'anatomy', k => 5, l => 2, columns => '{{age,sex}}')", "22023"),
    ("l_too_large", "analyst", f"{A}, l => 50)", "22023"),
    ("fewer_rows_than_k", "analyst", f"{R}('{TABLE}', 'anatomy', k => 6, columns => '{{age,sex,dx}}', selection => 'age = 30')", "DE001"),
    ("null_quasi_identifier", "analyst", f"{R}('{TABLE}', 'anatomy', k => 5, columns => '{{age,zip,dx}}')", "22004"),
    ("no_hierarchy", "analyst", f"{R}('{TABLE}', 'generalization', k => 5, columns => '{{age,zip}}')", "22023"),
    # ---- options
    ("malformed_json", "analyst", f"{A}, options => '{{bad')", "22023"),
    ("options_not_object", "analyst", f"{A}, options => '[1]')", "22023"),
    ("unknown_option", "analyst", f"{A}, options => '{{\"bogus\": 1}}')", "22023"),
    ("replace_string", "analyst", f"{A}, options => '{{\"replace\": \"false\"}}')", "22023"),
    ("replace_number", "analyst", f"{A}, options => '{{\"replace\": 0}}')", "22023"),
    ("seed_string", "analyst", f"{A}, options => '{{\"seed\": \"7\"}}')", "22023"),
    ("seed_negative", "analyst", f"{A}, options => '{{\"seed\": -1}}')", "22023"),
    ("seed_fraction", "analyst", f"{A}, options => '{{\"seed\": 1.5}}')", "22023"),
    ("seed_overflow", "analyst", f"{A}, options => '{{\"seed\": 100000000000000000000}}')", "22023"),
    ("nulls_number", "analyst", f"{A}, options => '{{\"nulls\": 1}}')", "22023"),
    ("nulls_unknown", "analyst", f"{A}, options => '{{\"nulls\": \"maybe\"}}')", "22023"),
    ("row_id_number", "analyst", f"{A}, options => '{{\"row_id\": 5}}')", "22023"),
    ("row_id_unknown", "analyst", f"{A}, options => '{{\"row_id\": \"nope\"}}')", "42703"),
    ("row_id_text", "analyst", f"{A}, options => '{{\"row_id\": \"sex\"}}')", "22023"),
    ("model_unknown", "analyst", f"{A}, options => '{{\"model\": \"x\"}}')", "22023"),
    ("output_unknown", "analyst", f"{A}, options => '{{\"output\": \"x\"}}')", "22023"),
    ("column_l_not_object", "analyst", f"{A}, l => 2, options => '{{\"column_l\": 3}}')", "22023"),
    ("column_l_zero", "analyst", f"{A}, l => 2, options => '{{\"column_l\": {{\"dx\": 0}}}}')", "22023"),
    ("column_l_overflow", "analyst", f"{A}, l => 2, options => '{{\"column_l\": {{\"dx\": 99999999999}}}}')", "22023"),
    ("column_l_without_l", "analyst", f"{A}, options => '{{\"column_l\": {{\"dx\": 1}}}}')", "22023"),
    ("column_l_not_sensitive", "analyst", f"{A}, l => 2, options => '{{\"column_l\": {{\"age\": 1}}}}')", "22023"),
    ("search_unknown", "analyst", f"{G}, options => '{{\"search\": \"best\"}}')", "22023"),
    ("priority_above_one", "analyst", f"{G}, options => '{{\"priorities\": {{\"age\": 2}}}}')", "22023"),
    ("limit_negative", "analyst", f"{G}, options => '{{\"limits\": {{\"age\": -1}}}}')", "22023"),
    ("limit_above_top", "analyst", f"{G}, options => '{{\"limits\": {{\"age\": 99}}}}')", "22023"),
    ("limit_unknown_column", "analyst", f"{G}, options => '{{\"limits\": {{\"dx\": 1}}}}')", "22023"),
    # ---- selection
    ("selection_empty", "analyst", f"{A}, selection => '')", "22023"),
    ("selection_syntax", "analyst", f"{A}, selection => 'age >')", "42601"),
    ("selection_semicolon", "analyst", f"{A}, selection => 'age > 1; DROP TABLE x')", "42601"),
    ("selection_subquery", "analyst", f"{A}, selection => 'age IN (SELECT 1)')", "0A000"),
    ("selection_function", "analyst", f"{A}, selection => 'lower(sex) = ''f''')", "0A000"),
    ("selection_unknown_column", "analyst", f"{A}, selection => 'nope = 1')", "42703"),
    ("selection_type_mismatch", "analyst", f"{A}, selection => 'age = ''abc''')", "22P02"),
    ("selection_too_long", "analyst", f"{A}, selection => 'age IN (' || repeat('1,', 60000) || '1)')", "22023"),
    ("selection_too_deep", "analyst", f"{A}, selection => repeat('(', 300) || 'age = 1' || repeat(')', 300))", "0A000"),
    ("selection_not_in_hierarchy", "analyst", f"{G}, selection => 'sex = ''X''')", "22023"),
    # ---- release names
    ("release_name_invalid", "analyst", f"{A}, release => 'Bad-Name')", "22023"),
    ("release_name_too_long", "analyst", f"{A}, release => repeat('a', 41))", "22023"),
    ("release_exists", "analyst", f"{A}, release => 't_bad_kept')", "42P07"),
    ("release_table_clash", "analyst", f"{G}, release => 't_bad_kept_qit')", "42P07"),
    ("replace_other_owner", "researcher", f"{A}, options => '{{\"replace\": true}}', release => 't_bad_kept')", "42501"),
    # ---- policy callers: refused before or after the read, never a value or a count
    ("policy_below_minimum", "researcher", f"{R}('{TABLE}', 'anatomy', k => 3, columns => '{{age,sex,dx}}')", "42501"),
    ("policy_select_sensitive", "researcher", f"{A}, selection => 'dx = ''D1''')", "42501"),
    ("policy_select_identifier", "researcher", f"{A}, selection => 'name = ''Person 1''')", "42501"),
    # (the reasons that depend on the data are one refusal for them: tests/security/test_refusals.py)
    ("policy_null_quasi_identifier", "researcher", f"{R}('{TABLE}', 'anatomy', k => 5, columns => '{{age,zip,dx}}')", "DE001"),
    ("policy_fewer_rows_than_k", "researcher", f"{R}('{TABLE}', 'anatomy', k => 6, columns => '{{age,sex,dx}}', selection => 'age = 30')", "DE001"),
    ("policy_value_not_in_hierarchy", "researcher", f"{R}('{TABLE}', 'generalization', k => 5, columns => '{{race,sex}}')", "DE001"),
    ("policy_null_codes", "researcher", f"{R}('{SETS}', 'disassociation', k => 3, columns => '{{codes}}')", "DE001"),
    ("reader_without_policy", "reader", f"{A})", "42501"),
    # ---- administration
    ("set_role_not_admin", "analyst", f"SELECT deid.set_role('{TABLE}', 'age', 'sensitive')", "42501"),
    ("set_role_unknown_column", "admin", f"SELECT deid.set_role('{TABLE}', 'nope', 'sensitive')", "42703"),
    ("set_role_bad_role", "admin", f"SELECT deid.set_role('{TABLE}', 'age', 'secret')", "22023"),
    ("set_role_null_role", "admin", f"SELECT deid.set_role('{TABLE}', 'age', NULL)", "22004"),
    ("set_role_unknown_hierarchy", "admin", f"SELECT deid.set_role('{TABLE}', 'sex', 'quasi_identifier', 'nope')", "42704"),
    ("set_role_value_not_in_hierarchy", "admin", f"SELECT deid.set_role('{TABLE}', 'race', 'quasi_identifier', 't_bad_race')", "22023"),
    ("set_role_without_select", "rogue", f"SELECT deid.set_role('{TABLE}', 'sex', 'quasi_identifier', 't_bad_sex')", "42501"),
    ("interval_on_text", "admin", f"SELECT deid.set_role('{TABLE}', 'sex', 'quasi_identifier', 't_bad_age')", "22023"),
    ("interval_low_ge_high", "admin", "SELECT deid.interval_hierarchy('t_bad_x', 10, 5, '{5}')", "22023"),
    ("interval_high_nan", "admin", "SELECT deid.interval_hierarchy('t_bad_x', 0, 'NaN', '{5}')", "22023"),
    ("interval_low_nan", "admin", "SELECT deid.interval_hierarchy('t_bad_x', 'NaN', 100, '{5}')", "22023"),
    ("interval_high_infinite", "admin", "SELECT deid.interval_hierarchy('t_bad_x', 0, 'Infinity', '{5}')", "22023"),
    ("interval_low_infinite", "admin", "SELECT deid.interval_hierarchy('t_bad_x', '-Infinity', 0, '{5}')", "22023"),
    ("interval_info_loss_nan", "admin", "SELECT deid.interval_hierarchy('t_bad_x', 0, 100, '{5}', '{0,NaN,1}')", "22023"),
    ("hierarchy_info_loss_nan", "admin", "SELECT deid.load_hierarchy('t_bad_y', E'a;x;*', '{0,NaN,1}')", "22023"),
    ("interval_widths", "admin", "SELECT deid.interval_hierarchy('t_bad_x', 0, 100, '{5,7}')", "22023"),
    ("hierarchy_exists", "admin", "SELECT deid.load_hierarchy('t_bad_sex', 'F;*')", "42710"),
    ("hierarchy_two_parents", "admin", "SELECT deid.load_hierarchy('t_bad_y', E'a;x;*\\na;y;*')", "22023"),
    ("hierarchy_bad_name", "admin", "SELECT deid.load_hierarchy('bad name', 'a;*')", "22023"),
    ("drop_hierarchy_unknown", "admin", "SELECT deid.drop_hierarchy('nope')", "42704"),
    ("drop_hierarchy_null", "admin", "SELECT deid.drop_hierarchy(NULL)", "22004"),
    ("drop_hierarchy_bound", "admin", "SELECT deid.drop_hierarchy('t_bad_sex')", "22023"),
    ("allow_unknown_role", "admin", f"SELECT deid.allow_requests('no_such_role', '{TABLE}', 5)", "42704"),
    ("allow_min_k_zero", "admin", f"SELECT deid.allow_requests('deid_t_reader', '{TABLE}', 0)", "22023"),
    ("allow_not_owner", "analyst", f"SELECT deid.allow_requests('deid_t_reader', '{TABLE}', 5)", "42501"),
    ("drop_release_unknown", "analyst", "SELECT deid.drop_release('no_such_release')", "42704"),
    ("drop_release_null", "analyst", "SELECT deid.drop_release(NULL)", "22004"),
    ("drop_release_other", "researcher", "SELECT deid.drop_release('t_bad_kept')", "42501"),
    # ---- measurement
    ("k_anonymity_unknown_column", "analyst", f"SELECT deid.k_anonymity('{TABLE}', '{{nope}}')", "42703"),
    ("k_anonymity_null", "analyst", "SELECT deid.k_anonymity(NULL)", "22004"),
    ("k_anonymity_duplicate", "analyst", f"SELECT deid.k_anonymity('{TABLE}', '{{age,age}}')", "22023"),
    ("k_anonymity_no_select", "reader", f"SELECT deid.k_anonymity('{TABLE}', '{{age}}')", "42501"),
    ("l_diversity_overlap", "analyst", f"SELECT * FROM deid.l_diversity('{TABLE}', '{{age}}', '{{age}}')", "22023"),
    ("classes_unknown_relation", "analyst", "SELECT * FROM deid.equivalence_classes('nope', '{a}')", "42P01"),
]
POLICY_CALLERS = {"researcher", "reader"}
ROLES = {"admin": None, "analyst": "deid_t_analyst", "researcher": "deid_t_researcher",
         "reader": "deid_t_reader", "rogue": "deid_t_rogue_admin"}


@pytest.fixture(scope="module")
def bad(admin):
    admin.execute(f"DROP TABLE IF EXISTS {TABLE} CASCADE")
    admin.execute(f"""CREATE TABLE {TABLE} (id int PRIMARY KEY, name text, age int, sex text,
                      race text, zip text, dx text, misc text)""")
    admin.execute(f"""INSERT INTO {TABLE} SELECT i, 'Person ' || i, 20 + i % 12,
                      CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END,
                      CASE WHEN i = 7 THEN 'zz_secret_value' ELSE 'white' END,
                      CASE WHEN i % 20 = 3 THEN NULL ELSE '100' || (i % 3) END,
                      'D' || (i % 4), 'm' FROM generate_series(1, {ROWS}) i""")
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchy WHERE name LIKE 't_bad_%'"
                  " AND NOT EXISTS (SELECT 1 FROM deid.column_role r WHERE r.hierarchy = name)")
    admin.execute("SELECT deid.load_hierarchy('t_bad_sex', E'F;*\\nM;*')")
    admin.execute("SELECT deid.load_hierarchy('t_bad_race', E'white;*\\nblack;*')")
    admin.execute("SELECT deid.interval_hierarchy('t_bad_age', 0, 150, '{10}')")
    for col, role, h in [("name", "identifier", None), ("age", "quasi_identifier", "t_bad_age"),
                         ("sex", "quasi_identifier", "t_bad_sex"), ("zip", "quasi_identifier", None),
                         ("dx", "sensitive", None)]:
        admin.execute("SELECT deid.set_role(%s, %s, %s, %s)", [TABLE, col, role, h])
    # bound while every value was in the hierarchy; the secret value arrives later
    admin.execute(f"UPDATE {TABLE} SET race = 'white' WHERE id = 7")
    admin.execute(f"SELECT deid.set_role('{TABLE}', 'race', 'quasi_identifier', 't_bad_race')")
    admin.execute(f"UPDATE {TABLE} SET race = 'zz_secret_value' WHERE id = 7")
    admin.execute(f"GRANT SELECT ON {TABLE} TO deid_t_analyst")
    admin.execute(f"SELECT deid.allow_requests('deid_t_researcher', '{TABLE}', 5)")
    sets = sql.Identifier(*SETS.split("."))
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sets))
    admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, codes text[])").format(sets))
    admin.execute(sql.SQL("INSERT INTO {} SELECT i, CASE WHEN i > 10 THEN '{{}}'::text[] END"
                          " FROM generate_series(1, 20) i").format(sets))
    admin.execute("SELECT deid.set_role(%s, 'codes', 'quasi_identifier')", [SETS])
    admin.execute(sql.SQL("GRANT SELECT ON {} TO deid_t_analyst").format(sets))
    admin.execute("SELECT deid.allow_requests('deid_t_researcher', %s, 3)", [SETS])
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 't_bad%'")
    with psycopg.connect(admin.info.dsn, user="deid_t_analyst", autocommit=True) as c:
        c.execute(f"{A}, release => 't_bad_kept')").fetchall()
    yield admin
    admin.execute("SELECT deid.drop_release('t_bad_kept')")
    for rel in (TABLE, SETS):
        admin.execute("DELETE FROM deid.policy WHERE relation = %s::regclass", [rel])
        admin.execute("DELETE FROM deid.column_role WHERE relation = %s::regclass", [rel])
    admin.execute(sql.SQL("DROP TABLE {}").format(sets))


def state(admin):
    """What a failed call must not change."""
    tmp = os.path.join(admin.execute("SHOW data_directory").fetchone()[0], "base", "pgsql_tmp")
    files = sorted(f for f in os.listdir(tmp) if f.startswith("pgsql_tmpdeid")) if os.path.isdir(tmp) else []
    return {
        "relations": admin.execute(
            "SELECT count(*) FROM pg_class WHERE relnamespace IN ('release'::regnamespace,"
            " 'deid_release'::regnamespace, 'deid'::regnamespace)").fetchone()[0],
        "log": admin.execute("SELECT count(*), max(release_id) FROM deid.release").fetchone(),
        "catalog": admin.execute(
            "SELECT (SELECT count(*) FROM deid.rid_set), (SELECT count(*) FROM deid.equivalence_class),"
            " (SELECT count(*) FROM deid.hierarchy), (SELECT count(*) FROM deid.column_role),"
            " (SELECT count(*) FROM deid.policy)").fetchone(),
        "files": files,
    }


def test_there_are_enough_cases():
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(bad, connect, case):
    name, who, sql, sqlstate = case
    conn = bad if ROLES[who] is None else connect(ROLES[who])
    before = state(bad)
    with pytest.raises(psycopg.Error) as e:
        conn.execute(sql).fetchall()
    d = e.value.diag
    assert d.sqlstate == sqlstate, f"{name}: {d.sqlstate} {d.message_primary}"
    assert d.message_hint, f"{name}: no HINT for: {d.message_primary}"
    for text in (d.message_primary, d.message_detail or "", d.message_hint):
        assert not re.search(r"plpy\.|spiexceptions|Traceback|\bNone\b", text), f"{name}: {text}"
    assert state(bad) == before, f"{name} left something behind"
    if who in POLICY_CALLERS:
        text = " ".join(x for x in (d.message_primary, d.message_detail, d.message_hint) if x)
        assert not [s for s in SECRETS if s in text], f"{name}: {text}"
        assert not d.message_detail, f"{name}: a detail for a caller without SELECT: {d.message_detail}"
        # the counts of this table below k: NULL zips (3), rows of age 30 (5)
        assert not re.search(r"(?<![\w.=])(3|5|61)(?![\w.])", d.message_primary + d.message_hint), \
            f"{name}: {text}"


ENUM_TABLE = "public.t_bad_enum"


@pytest.fixture
def enum_table(bad):
    """A quasi-identifier of an enum type (its selection once failed with 42883)."""
    table = sql.Identifier(*ENUM_TABLE.split("."))
    bad.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
    bad.execute("DROP TYPE IF EXISTS public.t_bad_stage")
    bad.execute("CREATE TYPE public.t_bad_stage AS ENUM ('low', 'medium', 'high')")
    bad.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, stage public.t_bad_stage, dx text)")
                .format(table))
    bad.execute(sql.SQL("INSERT INTO {} SELECT i, (ARRAY['low', 'medium', 'high'])[1 + i % 3]"
                        "::public.t_bad_stage, 'D' || (i % 4) FROM generate_series(1, 60) i")
                .format(table))
    bad.execute("SELECT deid.drop_hierarchy('t_bad_stage') FROM deid.hierarchy"
                " WHERE name = 't_bad_stage'")
    bad.execute("SELECT deid.load_hierarchy('t_bad_stage', E'low;*\\nmedium;*\\nhigh;*')")
    bad.execute("SELECT deid.set_role(%s, 'stage', 'quasi_identifier', 't_bad_stage')", [ENUM_TABLE])
    bad.execute("SELECT deid.set_role(%s, 'dx', 'sensitive')", [ENUM_TABLE])
    bad.execute(sql.SQL("GRANT SELECT ON {} TO deid_t_analyst").format(table))
    bad.execute("SELECT deid.allow_requests('deid_t_researcher', %s, 5)", [ENUM_TABLE])
    yield ENUM_TABLE
    bad.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                " AND name LIKE 't_bad_enum%'")
    for catalog in ("policy", "column_role"):
        bad.execute(sql.SQL("DELETE FROM {} WHERE relation = %s::regclass").format(
            sql.Identifier("deid", catalog)), [ENUM_TABLE])
    bad.execute(sql.SQL("DROP TABLE {}").format(table))
    bad.execute("SELECT deid.drop_hierarchy('t_bad_stage')")
    bad.execute("DROP TYPE public.t_bad_stage")


@pytest.mark.parametrize("method", ["anatomy", "generalization"])
@pytest.mark.parametrize("who", ["analyst", "researcher"])
@pytest.mark.parametrize("selection, rows", [("stage = 'medium'", 20),
                                             ("stage IN ('low', 'high')", 40),
                                             ("stage <> 'low' AND stage IS NOT NULL", 40)])
def test_a_selection_on_an_enum_column(enum_table, connect, method, who, selection, rows):
    """Compared as its text, as it is read and released."""
    conn = connect(ROLES[who])
    columns = "{stage,dx}" if method == "anatomy" else "{stage}"
    got = conn.execute(
        "SELECT rows FROM deid.anonymize_request(%s, %s, k => 5, columns => %s, selection => %s,"
        " release => 't_bad_enum_rel')", [enum_table, method, columns, selection]).fetchone()[0]
    assert got == rows
    conn.execute("SELECT deid.drop_release('t_bad_enum_rel')")


@pytest.mark.parametrize("selection", ["stage > 'low'", "stage BETWEEN 'low' AND 'medium'"])
def test_an_enum_column_is_not_ordered_as_text(enum_table, connect, selection):
    """Its text order is not the enum's order: refused, rather than a silently other selection."""
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_analyst").execute(
            "SELECT * FROM deid.anonymize_request(%s, 'anatomy', k => 5, columns => '{stage,dx}',"
            " selection => %s, release => 't_bad_enum_rel')", [enum_table, selection]).fetchall()
    assert e.value.diag.sqlstate == "0A000" and e.value.diag.message_hint, str(e.value)
