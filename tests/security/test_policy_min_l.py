"""A policy's min_l applies to the methods that have an l, and only to those.

A policy granted with min_l (allow_requests(role, relation, min_k, min_l)) used to block every
method but anatomy: a request without l was refused for its missing l ("Ask for k >= 5 and
l >= 2", 42501), one with l by the method ("method generalization has no l", 22023). Now each
method's plug-in declares whether it has an l (HAS_L, methods/contract.py): anatomy's requests
need l >= min_l, the others' are judged by their own parameters (k >= min_k).
"""
import psycopg
import pytest

from dbfixtures import hint_of, sqlstate_of

RESEARCHER = "deid_t_researcher"     # the policy, no SELECT
SOURCE = "public.minl_src"
COLUMNS = {"anatomy": "{age,sex,dx}", "generalization": "{age,dx}",
           "condensation": "{age,sex}", "disassociation": "{codes}"}


@pytest.fixture(scope="module")
def source(admin):
    admin.execute("SELECT deid.interval_hierarchy('minl_age', 0, 120, '{5,10,20,40}')"
                  " WHERE NOT EXISTS (SELECT 1 FROM deid.hierarchy WHERE name = 'minl_age')")
    admin.execute(f"DROP TABLE IF EXISTS {SOURCE}")
    admin.execute(f"CREATE TABLE {SOURCE} (id int PRIMARY KEY, age int NOT NULL, sex text NOT NULL,"
                  " dx text NOT NULL, codes text[] NOT NULL)")
    admin.execute(f"INSERT INTO {SOURCE} SELECT i, 20 + i % 40, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END,"
                  " 'D' || (i % 5), ARRAY['c' || (i % 4), 'e' || (i % 3)] FROM generate_series(1, 300) i")
    for column, role, hierarchy in (("age", "quasi_identifier", "minl_age"),
                                    ("sex", "quasi_identifier", None),
                                    ("dx", "sensitive", None), ("codes", "quasi_identifier", None)):
        admin.execute("SELECT deid.set_role(%s, %s, %s, %s)", [SOURCE, column, role, hierarchy])
    admin.execute("SELECT deid.allow_requests(%s, %s, 5, 2)", [RESEARCHER, SOURCE])
    yield SOURCE
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 'minl_%'")
    admin.execute("DELETE FROM deid.policy WHERE relation = %s::regclass", [SOURCE])


def request(conn, method, k, l, name):
    return conn.execute(
        "SELECT release_id FROM deid.anonymize_request(%s, %s, k => %s, l => %s, columns => %s,"
        " release => %s)", [SOURCE, method, k, l, COLUMNS[method], name]).fetchone()


def test_anatomy_needs_the_policys_l(connect, source):
    conn = connect(RESEARCHER)
    for l in (None, 1):
        with pytest.raises(psycopg.Error) as e:
            request(conn, "anatomy", 5, l, "minl_anatomy_low")
        assert sqlstate_of(e) == "42501" and hint_of(e) == "Ask for k >= 5 and l >= 2."
    assert request(conn, "anatomy", 5, 2, "minl_anatomy")


@pytest.mark.parametrize("method", ["generalization", "condensation", "disassociation"])
def test_a_method_without_l_is_judged_by_its_k(connect, source, method):
    conn = connect(RESEARCHER)
    assert request(conn, method, 5, None, f"minl_{method}")
    with pytest.raises(psycopg.Error) as e:           # below the policy's k: its k alone
        request(conn, method, 4, None, f"minl_{method}_low")
    assert sqlstate_of(e) == "42501" and hint_of(e) == "Ask for k >= 5."
    with pytest.raises(psycopg.Error) as e:           # an l is the method's own refusal
        request(conn, method, 5, 2, f"minl_{method}_l")
    assert sqlstate_of(e) == "22023" and "no l" in e.value.diag.message_primary
