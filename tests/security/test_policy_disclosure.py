"""Attack: a policy-only requester (deid.allow_requests, no SELECT) learns more than the
release.

The table has planted facts the requester must never learn: a rare diagnosis held by exactly
3 patients, a quasi-identifier that is NULL in exactly 7 rows, a race value that is in no
hierarchy, and the table's exact size. Every result, message, detail and hint is checked for
them.
"""
import re

import psycopg
import pytest

from dbfixtures import sqlstate_of

RESEARCHER = "deid_t_researcher"
ROWS = 203                      # an unusual table size: must not show up anywhere
SECRET_VALUE = "martian_secret_value"


@pytest.fixture(scope="module")
def planted(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_plant")
    admin.execute("""CREATE TABLE public.t_plant (
        id int PRIMARY KEY, name text, age int, zip text, sex text, race text, dx text, note text)""")
    admin.execute(f"""INSERT INTO public.t_plant
        SELECT i, 'Person ' || i, 20 + i % 50, (10000 + (i % 9) * 11)::text,
               CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END,
               CASE WHEN i = 77 THEN '{SECRET_VALUE}' WHEN i % 3 = 0 THEN 'white' ELSE 'black' END,
               CASE WHEN i IN (5, 50, 150) THEN 'D3' ELSE 'D' || (i % 5 + 4) END,
               'note ' || i
          FROM generate_series(1, {ROWS}) i""")
    admin.execute("UPDATE public.t_plant SET zip = NULL WHERE id IN (11, 22, 33, 44, 55, 66, 88)")
    for col, role in [("name", "identifier"), ("age", "quasi_identifier"),
                      ("zip", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("dx", "sensitive"), ("note", "insensitive")]:
        admin.execute("SELECT deid.set_role('public.t_plant', %s, %s)", [col, role])
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchy WHERE name IN"
                  " ('t_plant_race', 't_plant_sex')")
    admin.execute("SELECT deid.load_hierarchy('t_plant_race', $h$white;*\nblack;*\n"
                  f"{SECRET_VALUE};*$h$)")
    admin.execute("SELECT deid.load_hierarchy('t_plant_sex', $h$F;*\nM;*$h$)")
    admin.execute("SELECT deid.set_role('public.t_plant', 'race', 'quasi_identifier',"
                  " hierarchy => 't_plant_race')")
    admin.execute("SELECT deid.set_role('public.t_plant', 'sex', 'quasi_identifier',"
                  " hierarchy => 't_plant_sex')")
    # the secret value leaves the hierarchy after the column was bound to it
    admin.execute("UPDATE deid.hierarchy_member SET value = 'venusian' WHERE hierarchy ="
                  f" 't_plant_race' AND value = '{SECRET_VALUE}'")
    admin.execute(f"SELECT deid.allow_requests('{RESEARCHER}', 'public.t_plant', 5)")
    yield admin
    admin.execute("DELETE FROM deid.policy WHERE relation = 'public.t_plant'::regclass")
    admin.execute("DELETE FROM deid.column_role WHERE relation = 'public.t_plant'::regclass")


def leaks(err, extra=()):
    """Planted facts found in an error's message, detail and hint."""
    d = err.diag
    text = " ".join(x for x in (d.message_primary, d.message_detail, d.message_hint) if x)
    found = [s for s in (SECRET_VALUE, "Person ", "D3") + tuple(extra) if s in text]
    found += [n for n in ("3", "7", str(ROWS), "196") if re.search(rf"(?<![\w.]){n}(?![\w.])", text)]
    return found


def request(conn, method="anatomy", k=5, columns="{age,zip,sex,dx}", selection=None, options=None,
            release="t_plant_rel"):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request('public.t_plant', %s, k => %s, columns => %s,"
        " selection => %s, options => %s, release => %s)",
        [method, k, columns, selection, options or '{"seed": 1}', release]).fetchall()


@pytest.mark.parametrize("selection", [
    "dx = 'D3'",                # sensitive
    "note = 'note 5'",          # insensitive
    "race = 'white'",           # a quasi-identifier that is not released by this request
    "name = 'Person 5'",        # identifier
    "dx <> 'D3' AND age > 0",
])
def test_selection_only_on_released_quasi_identifiers(planted, connect, selection):
    conn = connect(RESEARCHER)
    with pytest.raises(psycopg.Error) as e:
        request(conn, selection=selection, options='{"nulls": "value", "seed": 1}')
    assert sqlstate_of(e) == "42501", str(e.value)
    assert e.value.diag.message_hint
    assert not planted.execute("SELECT 1 FROM pg_class WHERE relname LIKE 't_plant_rel%'").fetchone()


def test_selection_on_a_released_quasi_identifier_is_allowed(planted, connect):
    conn = connect(RESEARCHER)
    row = request(conn, selection="age >= 20", options='{"nulls": "value", "seed": 1}',
                  release="t_plant_ok")[0]
    assert row[5] is True
    planted.execute("SELECT deid.drop_release('t_plant_ok')")


@pytest.mark.parametrize("case", [
    dict(options='{"seed": 1}'),                                        # zip NULL in 7 rows
    dict(selection="age = 21", k=6, options='{"nulls": "value", "seed": 1}'),  # 5 rows < k
    dict(selection="age = 1000", options='{"nulls": "value", "seed": 1}'),  # no row
    dict(k=500, options='{"nulls": "value", "seed": 1}'),                # more than the table
    dict(method="generalization", columns="{race,sex}"),                # value not in hierarchy
    dict(method="generalization", columns="{race,sex}", selection="sex = 'M'"),
    dict(method="generalization", columns="{sex}", k=150,                 # k unreachable
         options='{"limits": {"sex": 0}, "seed": 1}'),
    dict(k=12, columns="{age,zip,sex,dx}", options='{"nulls": "value", "seed": 1, "model": "kl"}',
         selection="age = 21 OR age = 22"),                                    # 9 rows < k
], ids=["null_count", "few_rows", "no_row", "k_above_size", "value_not_in_hierarchy",
        "value_not_in_hierarchy_selected", "k_unreachable", "few_rows_or"])
def test_errors_carry_no_count_and_no_value(planted, connect, case):
    conn = connect(RESEARCHER)
    with pytest.raises(psycopg.Error) as e:
        request(conn, **case)
    assert not leaks(e.value, ("9 ", "5 row")), (str(e.value), e.value.diag.message_detail,
                                                 e.value.diag.message_hint)
    assert not e.value.diag.message_detail          # details may hold data: never for this caller
    assert e.value.diag.message_hint, str(e.value)
    assert not planted.execute("SELECT 1 FROM pg_class WHERE relname LIKE 't_plant_rel%'").fetchone()


def test_a_release_result_shows_only_what_the_release_shows(planted, connect):
    conn = connect(RESEARCHER)
    rid, relations, rows, groups, disc, verified = request(
        conn, options='{"nulls": "value", "seed": 1}', release="t_plant_full")[0]
    assert verified and rows == ROWS       # the release itself has every row: not a secret
    assert conn.execute("SELECT count(*) FROM release.t_plant_full_qit").fetchone()[0] == ROWS
    planted.execute("SELECT deid.drop_release('t_plant_full')")


# ------------------------------------------------------------ item 4: releases have owners
def test_replace_needs_the_owner(planted, connect):
    analyst = connect("deid_t_analyst")
    planted.execute("GRANT SELECT ON public.t_plant TO deid_t_analyst")
    analyst.execute("SELECT * FROM deid.anonymize_request('public.t_plant', 'anatomy', k => 5,"
                    " columns => '{age,sex,dx}', release => 't_owned')").fetchall()
    conn = connect(RESEARCHER)
    with pytest.raises(psycopg.Error) as e:
        request(conn, columns="{age,sex,dx}", options='{"replace": true, "seed": 1}', release="t_owned")
    assert sqlstate_of(e) == "42501"
    assert e.value.diag.message_hint
    # the analyst's release is untouched
    assert analyst.execute("SELECT count(*) FROM release.t_owned_qit").fetchone()[0] == ROWS
    # the owner may replace it (another k regroups the rows: the composition rule's override)
    analyst.execute("SELECT * FROM deid.anonymize_request('public.t_plant', 'anatomy', k => 6,"
                    " columns => '{age,sex,dx}',"
                    " options => '{\"replace\": true, \"allow_overlap\": true}',"
                    " release => 't_owned')").fetchall()
    planted.execute("SELECT deid.drop_release('t_owned')")


@pytest.mark.parametrize("options", ['{"replace": "false"}', '{"replace": 1}', '{"seed": "7"}',
                                     '{"seed": 1.5}', '{"seed": true}', '{"nulls": 1}'])
def test_options_are_type_checked(planted, connect, options):
    analyst = connect("deid_t_analyst")
    with pytest.raises(psycopg.Error) as e:
        analyst.execute("SELECT * FROM deid.anonymize_request('public.t_plant', 'anatomy', k => 5,"
                        " columns => '{age,sex,dx}', options => %s, release => 't_typed')",
                        [options]).fetchall()
    assert sqlstate_of(e) == "22023"
    assert e.value.diag.message_hint


def test_concurrent_requests_for_one_name(planted, connect):
    """Two requests for the same new name: one release, one clean 42P07 with a hint."""
    import threading
    first, second = connect("deid_t_analyst"), connect("deid_t_analyst")
    sql = ("SELECT * FROM deid.anonymize_request('public.t_plant', 'anatomy', k => 5,"
           " columns => '{age,sex,dx}', release => 't_race')")
    first.autocommit = False
    first.execute(sql).fetchall()           # holds its transaction open
    outcome = {}

    def other():
        try:
            second.execute(sql).fetchall()
            outcome["ok"] = True
        except psycopg.Error as e:
            outcome["error"] = e
    t = threading.Thread(target=other)
    t.start()
    t.join(1.0)
    first.commit()
    t.join(60)
    assert "error" in outcome, "both requests created the release"
    assert outcome["error"].diag.sqlstate == "42P07", str(outcome["error"])
    assert outcome["error"].diag.message_hint
    assert planted.execute("SELECT count(*) FROM deid.release WHERE name = 't_race'"
                           " AND status = 'committed'").fetchone()[0] == 1
    first.autocommit = True
    planted.execute("SELECT deid.drop_release('t_race')")
