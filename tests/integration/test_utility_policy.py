"""003's utility policies as SQL (Sec. 3.1, 6.1): deid.utility_policy(hierarchy, level) builds a
hierarchy-based policy from a loaded hierarchy (deid_admin only: hierarchies are deid_admin's
catalog); deid.utility_from(relation, constraint_column, code_column) turns a relation of
(constraint, code) rows into the JSON list of code lists that options.utility takes, read as
the caller.  The attacks come first: a caller without rights, injection-looking names,
overlapping or NULL constraints; then the policies drive a disassociation request."""
import json

import psycopg
import pytest

from conftest import hint_of, sqlstate_of
from fixtures.paper003 import FIG1

ICD9_ROWS = "\n".join([
    "294.10;294;S290-299;C290-319;*", "295.04;295;S290-299;C290-319;*",
    "296.00;296;S290-299;C290-319;*", "296.01;296;S290-299;C290-319;*",
    "296.02;296;S290-299;C290-319;*", "296.03;296;S290-299;C290-319;*",
    "401.0;401;S400-409;C390-459;*", "404.00;404;S400-409;C390-459;*",
    "480.1;480;S480-489;C460-519;*", "692.71;692;S690-699;C680-709;*",
    "695.10;695;S690-699;C680-709;*", "834.0;834;S830-839;C800-999;*",
    "944.01;944;S940-949;C800-999;*"])


@pytest.fixture(scope="module")
def up(admin):
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchy"
                  " WHERE name IN ('icd9_up', 'age_up')")
    admin.execute("SELECT deid.load_hierarchy('icd9_up', %s)", [ICD9_ROWS])
    admin.execute("SELECT deid.interval_hierarchy('age_up', 0, 100, '{10}')")
    admin.execute("DROP SCHEMA IF EXISTS up CASCADE")
    admin.execute("CREATE SCHEMA up")
    admin.execute("CREATE TABLE up.study (constraint_id int, code text)")
    admin.execute("INSERT INTO up.study VALUES (1, '296.00'), (1, '296.01'), (2, '692.71'),"
                  " (2, '695.10'), (2, '695.10')")
    admin.execute('CREATE TABLE up.overlap ("constraint" text, code text)')
    admin.execute("INSERT INTO up.overlap VALUES ('a', '296.00'), ('b', '296.00'), ('b', '401.0')")
    admin.execute("CREATE TABLE up.nulls (constraint_id int, code text)")
    admin.execute("INSERT INTO up.nulls VALUES (1, '296.00'), (1, NULL)")
    admin.execute("CREATE TABLE up.secret (constraint_id int, code text)")
    admin.execute("INSERT INTO up.secret VALUES (1, 'S-ONLY-ADMIN')")
    admin.execute("CREATE TABLE up.patients (id int PRIMARY KEY, codes text[])")
    for i, r in enumerate(FIG1, start=1):
        admin.execute("INSERT INTO up.patients VALUES (%s, %s)", [i, r])
    admin.execute("GRANT USAGE ON SCHEMA up TO PUBLIC")
    admin.execute("GRANT SELECT ON up.study, up.overlap, up.nulls, up.patients TO deid_t_analyst")
    yield admin
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 'up\\_%'")
    admin.execute("DROP SCHEMA up CASCADE")
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchy"
                  " WHERE name IN ('icd9_up', 'age_up')")


def err(conn, sql, params=None):
    with pytest.raises(psycopg.Error) as e:
        conn.execute(sql, params)
    return e


# -- deid.utility_policy(hierarchy, level) ---------------------------------------------------

def test_utility_policy_levels(up, connect):
    adm = connect("deid_t_admin")
    got = {lv: adm.execute("SELECT deid.utility_policy(hierarchy => 'icd9_up', level => %s)",
                           [lv]).fetchone()[0] for lv in (1, 2, 3)}
    assert sorted(map(sorted, got[1])) == sorted([
        ["294.10"], ["295.04"], ["296.00", "296.01", "296.02", "296.03"], ["401.0"],
        ["404.00"], ["480.1"], ["692.71"], ["695.10"], ["834.0"], ["944.01"]])
    assert sorted(map(sorted, got[2])) == sorted([
        ["294.10", "295.04", "296.00", "296.01", "296.02", "296.03"], ["401.0", "404.00"],
        ["480.1"], ["692.71", "695.10"], ["834.0"], ["944.01"]])
    assert sorted(map(sorted, got[3])) == sorted([
        ["294.10", "295.04", "296.00", "296.01", "296.02", "296.03"], ["401.0", "404.00"],
        ["480.1"], ["692.71", "695.10"], ["834.0", "944.01"]])


def test_utility_policy_needs_deid_admin(up, connect):
    for role in ("deid_t_analyst", "deid_t_attacker", "deid_t_reader"):
        e = err(connect(role), "SELECT deid.utility_policy('icd9_up', 1)")
        assert sqlstate_of(e) == "42501"
        assert "deid_admin" in hint_of(e)
        assert "296" not in str(e.value) + (hint_of(e) or "")


@pytest.mark.parametrize("name", ["icd9_up'; DROP TABLE up.study; --", 'icd9_up"', "nope",
                                  "ICD9_UP"])
def test_utility_policy_unknown_or_injection_names(up, connect, name):
    adm = connect("deid_t_admin")
    e = err(adm, "SELECT deid.utility_policy(%s, 1)", [name])
    assert sqlstate_of(e) == "42704" and hint_of(e)
    assert up.execute("SELECT count(*) FROM up.study").fetchone()[0] == 5


@pytest.mark.parametrize("hierarchy,level,state", [
    ("icd9_up", 0, "22023"), ("icd9_up", 4, "22023"), ("icd9_up", -1, "22023"),
    ("icd9_up", None, "22004"), (None, 1, "22004"), ("age_up", 1, "22023")])
def test_utility_policy_bad_levels(up, connect, hierarchy, level, state):
    e = err(connect("deid_t_admin"), "SELECT deid.utility_policy(%s, %s)", [hierarchy, level])
    assert sqlstate_of(e) == state and hint_of(e)


# -- deid.utility_from(relation, constraint_column, code_column) ------------------------------

def test_utility_from_relation(up, connect):
    got = connect("deid_t_analyst").execute(
        "SELECT deid.utility_from('up.study')").fetchone()[0]
    assert sorted(map(sorted, got)) == [["296.00", "296.01"], ["692.71", "695.10"]]


def test_utility_from_reads_as_the_caller(up, connect):
    for role in ("deid_t_attacker", "deid_t_researcher"):
        e = err(connect(role), "SELECT deid.utility_from('up.secret')")
        assert sqlstate_of(e) == "42501" and hint_of(e)
        assert "S-ONLY-ADMIN" not in str(e.value) + (hint_of(e) or "")


def test_utility_from_refuses_overlap_and_nulls(up, connect):
    ana = connect("deid_t_analyst")
    e = err(ana, "SELECT deid.utility_from('up.overlap', 'constraint')")
    assert sqlstate_of(e) == "22023" and "disjoint" in hint_of(e)
    e = err(ana, "SELECT deid.utility_from('up.nulls')")
    assert sqlstate_of(e) == "22004" and hint_of(e)


@pytest.mark.parametrize("cols", [("constraint_id", 'code"; DROP TABLE up.study; --'),
                                  ("constraint_id) FROM up.secret --", "code"),
                                  ("nope", "code"), ("constraint_id", None)])
def test_utility_from_injection_looking_columns(up, connect, cols):
    e = err(connect("deid_t_analyst"), "SELECT deid.utility_from('up.study', %s, %s)", list(cols))
    assert sqlstate_of(e) in ("42703", "22004") and hint_of(e)
    assert up.execute("SELECT count(*) FROM up.study").fetchone()[0] == 5


def test_utility_from_injection_looking_relation(up, connect):
    e = err(connect("deid_t_analyst"), "SELECT deid.utility_from('up.study; DROP TABLE up.study')")
    assert sqlstate_of(e) in ("42P01", "42602")
    assert up.execute("SELECT count(*) FROM up.study").fetchone()[0] == 5


# -- the policies drive a request ---------------------------------------------------------------

def test_policies_drive_a_disassociation_request(up, connect):
    adm = connect("deid_t_admin")
    level1 = adm.execute("SELECT deid.utility_policy('icd9_up', 1)").fetchone()[0]
    ana = connect("deid_t_analyst")
    for name, utility in (("up_level1", level1), ("up_from", None)):
        opts = ("jsonb_build_object('m', 2, 'seed', 1, 'utility', "
                + ("%s::jsonb" if utility is not None else "deid.utility_from('up.study')")
                + ")::text")
        params = [json.dumps(utility)] if utility is not None else []
        ana.execute("SELECT * FROM deid.anonymize_request('up.patients', 'disassociation', k => 3,"
                    f" columns => '{{codes}}', options => {opts}, release => '{name}')", params)
        assert ana.execute(f"SELECT sum(size) FROM release.{name}_cluster").fetchone()[0] == 10
    e = err(ana, "SELECT * FROM deid.anonymize_request('up.patients', 'disassociation', k => 3,"
                 " columns => '{codes}', options => %s, release => 'up_bad')",
            [json.dumps({"utility": [["296.00"], ["296.00", "401.0"]]})])
    assert sqlstate_of(e) == "22023" and "disjoint" in hint_of(e)
