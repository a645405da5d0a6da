"""Attack: a requester without SELECT (a policy) tells the data apart by how deid refuses.

Every refusal whose cause depends on the data -- too few rows, a NULL, a value outside a
hierarchy, an L no group reaches -- reaches such a requester as one and the same error:
same SQLSTATE, message and hint, no detail. The order in which a method checks its reasons
then tells nothing either: over {age, death_date} with selection 'age = 99', the living patient
(death_date NULL) and the dead one (too few rows) are refused alike. Progress notices carry no
count. A requester with SELECT keeps the detailed reasons.
"""
import re

import psycopg
import pytest
from psycopg import sql

TABLE = "public.t_refuse"
RESEARCHER, ANALYST = "deid_t_researcher", "deid_t_analyst"
ROWS = 120


@pytest.fixture(scope="module")
def refuse(admin):
    t = sql.Identifier(*TABLE.split("."))
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(t))
    admin.execute(sql.SQL("""CREATE TABLE {} (id int PRIMARY KEY, name text, age int, death_date date,
                      sex text, race text, zip text, dx text)""").format(t))
    # 10 patients of each age 20..31 (one diagnosis per age), all dead; patient 1000 is the
    # one aged 99, alive at first (the tests kill and revive them)
    admin.execute(sql.SQL("""INSERT INTO {}
        SELECT i, 'Person ' || i, 20 + i % 12, DATE '2020-01-01' + i,
               CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END, 'white',
               CASE WHEN i % 20 = 3 THEN NULL ELSE '100' || (i % 3) END, 'D' || (i % 4)
          FROM generate_series(1, {}) i""").format(t, sql.Literal(ROWS)))
    admin.execute(sql.SQL("INSERT INTO {} VALUES (1000, 'Person 99', 99, NULL, 'F', 'white', '1001', 'D1')").format(t))
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchy WHERE name LIKE 't_refuse_%'"
                  " AND NOT EXISTS (SELECT 1 FROM deid.column_role r WHERE r.hierarchy = name)")
    admin.execute("SELECT deid.load_hierarchy('t_refuse_sex', E'F;*\\nM;*')")
    admin.execute("SELECT deid.load_hierarchy('t_refuse_race', E'white;*\\nblack;*')")
    for col, role, h in [("name", "identifier", None), ("age", "quasi_identifier", None),
                         ("death_date", "quasi_identifier", None), ("zip", "quasi_identifier", None),
                         ("sex", "quasi_identifier", "t_refuse_sex"),
                         ("race", "quasi_identifier", "t_refuse_race"), ("dx", "sensitive", None)]:
        admin.execute("SELECT deid.set_role(%s, %s, %s, %s)", [TABLE, col, role, h])
    # a value outside race's hierarchy arrives after the column was bound to it
    admin.execute(sql.SQL("UPDATE {} SET race = 'zz_outside' WHERE id = 7").format(t))
    admin.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(t, sql.Identifier(ANALYST)))
    admin.execute("SELECT deid.allow_requests(%s, %s, 3)", [RESEARCHER, TABLE])
    yield admin
    admin.execute("DELETE FROM deid.policy WHERE relation = %s::regclass", [TABLE])
    admin.execute("DELETE FROM deid.column_role WHERE relation = %s::regclass", [TABLE])
    admin.execute(sql.SQL("DROP TABLE {}").format(t))


@pytest.fixture(autouse=True)
def no_release_left(refuse):
    yield
    refuse.execute("SELECT deid.drop_release(name) FROM deid.release WHERE name = 't_refuse_rel'"
                   " AND status = 'committed'")


def request(conn, method, k, columns, selection=None, l=None, options=None):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, %s, k => %s, l => %s, columns => %s,"
        " selection => %s, options => %s, release => 't_refuse_rel')",
        [TABLE, method, k, l, columns, selection, options]).fetchall()


def refusal(conn, **case):
    with pytest.raises(psycopg.Error) as e:
        request(conn, **case)
    d = e.value.diag
    return d.sqlstate, d.message_primary, d.message_hint, d.message_detail


def set_death(admin, dead):
    admin.execute(sql.SQL("UPDATE {} SET death_date = {} WHERE id = 1000").format(
        sql.Identifier("public", "t_refuse"), sql.Literal("2025-05-05" if dead else None)))


ORACLE = {
    "condensation": dict(method="condensation", k=3, columns="{age,death_date}"),
    "anatomy": dict(method="anatomy", k=3, columns="{age,death_date,dx}"),
}


def living_and_dead(admin, conn, method):
    """The refusals of the alive-or-dead oracle, selection 'age = 99' over {age, death_date}, for the
    patient alive (death_date NULL) and dead (one row, fewer than k)."""
    case = dict(ORACLE[method], selection="age = 99")
    try:
        set_death(admin, False)
        living = refusal(conn, **case)
        set_death(admin, True)
        return living, refusal(conn, **case)
    finally:
        set_death(admin, False)


@pytest.mark.parametrize("method", sorted(ORACLE))
def test_living_and_dead_are_refused_alike(refuse, connect, method):
    living, dead = living_and_dead(refuse, connect(RESEARCHER), method)
    assert living == dead, (living, dead)
    assert living[0] == "DE001" and living[2] and living[3] is None
    assert "death_date" not in " ".join(living[1:3])


@pytest.mark.parametrize("method", sorted(ORACLE))
def test_a_requester_with_select_keeps_the_reasons(refuse, connect, method):
    living, dead = living_and_dead(refuse, connect(ANALYST), method)
    assert living[0] == "22004" and "death_date" in living[1], living
    assert dead[0] == "DE001" and dead != living, dead


DATA_DEPENDENT = {
    "null_quasi_identifier": dict(method="anatomy", k=3, columns="{age,zip,dx}"),
    "null_condensed": dict(method="condensation", k=3, columns="{age,zip}"),
    "few_rows": dict(method="anatomy", k=11, columns="{age,sex,dx}", selection="age = 21"),
    "no_row": dict(method="anatomy", k=3, columns="{age,sex,dx}", selection="age = 1000"),
    "few_rows_condensation": dict(method="condensation", k=11, columns="{age,sex}",
                                  selection="age = 21"),
    "few_rows_generalization": dict(method="generalization", k=62, columns="{sex}",
                                    selection="sex = 'F'"),        # 61 rows
    "k_above_size": dict(method="anatomy", k=500, columns="{age,sex,dx}"),
    "value_outside_hierarchy": dict(method="generalization", k=3, columns="{race,sex}"),
    "unsatisfiable_l": dict(method="anatomy", k=3, l=2, columns="{age,sex,dx}",
                            selection="age = 21"),                 # one diagnosis per age
    "l_above_distinct_values": dict(method="anatomy", k=3, l=5, columns="{age,sex,dx}",
                                    selection="age < 25"),         # 4 diagnoses
}


def test_every_data_dependent_reason_is_one_refusal(refuse, connect):
    conn = connect(RESEARCHER)
    seen = {name: refusal(conn, **case) for name, case in DATA_DEPENDENT.items()}
    assert len(set(seen.values())) == 1, seen
    state, message, hint, detail = next(iter(seen.values()))
    assert state == "DE001" and hint and detail is None
    text = message + " " + hint
    assert not re.search(r"\d", text), text                       # no count, no k
    assert not re.search(r"zip|race|dx|death_date|zz_outside", text), text
    assert not refuse.execute("SELECT 1 FROM pg_class WHERE relname LIKE 't_refuse_rel%'").fetchone()


def test_the_same_reasons_are_told_to_a_requester_with_select(refuse, connect):
    conn = connect(ANALYST)
    seen = {name: refusal(conn, **case) for name, case in DATA_DEPENDENT.items()}
    assert len({s[1] for s in seen.values()}) > 3, seen             # the detailed messages
    assert seen["null_quasi_identifier"][0] == "22004"


def phase_notices(conn, **case):
    notices = []
    conn.add_notice_handler(lambda d: notices.append(" ".join(
        x for x in (d.message_primary, d.message_detail, d.message_hint) if x)))
    conn.execute("SET client_min_messages = notice")
    try:
        request(conn, **case)
    except psycopg.Error:
        pass
    return [n for n in notices if n.startswith("deid: ")]


@pytest.mark.parametrize("who", [RESEARCHER, ANALYST])
def test_progress_notices_carry_no_count(refuse, connect, who):
    """A 1-row selection: the read's notice came before the k check, with 'rows 1'. A
    requester without SELECT gets the notices only once the release is verified (then which
    phase refused tells nothing): here none."""
    conn = connect(who)
    notices = phase_notices(conn, method="anatomy", k=3, columns="{age,sex,dx}",
                            selection="age = 99")
    assert [n.split()[1] for n in notices] == ([] if who == RESEARCHER else ["read"]), notices
    for n in notices:
        assert not re.search(r"\d", re.sub(r" in \d+\.\d+ s", "", n)), n


def test_a_release_s_notices_carry_no_count_but_its_phases(refuse, connect):
    conn = connect(RESEARCHER)
    notices = phase_notices(conn, method="anatomy", k=3, columns="{age,sex,dx}",
                            options='{"nulls": "value"}')
    assert [n.split()[1] for n in notices] == ["read", "method", "write", "verify", "publish", "digest"], notices
    for n in notices:
        assert not re.search(r"\d", re.sub(r" in \d+\.\d+ s", "", n)), n


def test_fractions_done_only_for_a_requester_with_select(refuse, connect):
    """Long phases report a fraction done in 10 % steps (`deid: write 90 %`), in real time, to a
    requester with SELECT; a policy requester, whose notices are held until the release is
    logged, gets none of them: its notices still carry nothing but the phases and seconds."""
    fraction = re.compile(r"^deid: (method|write) [1-9]0 %$")
    seen = {}
    for who in (ANALYST, RESEARCHER):
        seen[who] = phase_notices(connect(who), method="anatomy", k=3, columns="{age,sex,dx}",
                                  options='{"nulls": "value"}')
        refuse.execute("SELECT deid.drop_release('t_refuse_rel')")
    fractions = [n for n in seen[ANALYST] if fraction.match(n)]
    assert fractions and [n.split()[1] for n in seen[ANALYST] if n not in fractions] == \
        ["read", "method", "write", "verify", "publish", "digest"], seen[ANALYST]
    assert seen[ANALYST].index(fractions[-1]) < seen[ANALYST].index(
        next(n for n in seen[ANALYST] if n.startswith("deid: write done")))
    assert [n.split()[1] for n in seen[RESEARCHER]] == ["read", "method", "write", "verify", "publish", "digest"]
    for n in seen[RESEARCHER]:
        assert not re.search(r"\d", re.sub(r" in \d+\.\d+ s", "", n)), n


@pytest.mark.parametrize("method, k, l, options", [
    ("disassociation", 1, None, {}),             # k below 2: the method's validation, detail "k = 1"
    ("generalization", 3, None, {"search": "nope"}),   # an option outside its schema
])
def test_a_refusal_before_the_grant_has_no_detail_for_a_policy_requester(refuse, connect, method,
                                                                          k, l, options):
    """Refusals raised before deid knows how the requester may read (the method's validation
    of k, l and options) keep their detail only for a caller with SELECT on the source."""
    import json
    errors = {}
    for role in (RESEARCHER, ANALYST):
        with pytest.raises(psycopg.Error) as e:
            connect(role).execute(
                "SELECT * FROM deid.anonymize_request(%s, %s, k => %s, l => %s,"
                " columns => %s, options => %s::jsonb)",
                [TABLE, method, k, l, "{dx}" if method == "disassociation" else "{age,sex,dx}",
                 json.dumps(options)]).fetchall()
        errors[role] = e.value.diag
    assert errors[RESEARCHER].message_detail is None, errors[RESEARCHER].message_detail
    assert errors[RESEARCHER].message_hint and errors[RESEARCHER].sqlstate == errors[ANALYST].sqlstate
