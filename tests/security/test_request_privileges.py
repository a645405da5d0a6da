"""Release requests and privileges: policy-allowed roles, readers, minimums."""
import psycopg
import pytest

from dbfixtures import sqlstate_of


@pytest.fixture(scope="module")
def policy(admin):
    for col, role in [("age", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("zip", "quasi_identifier"), ("diagnosis", "sensitive")]:
        admin.execute("SELECT deid.set_role('registry.patients', %s, %s)", [col, role])
    admin.execute("SELECT deid.allow_requests('deid_t_researcher', 'registry.patients', 25, 2)")
    return admin


REQ = ("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => %s, l => %s,"
       " columns => '{age,sex,zip,diagnosis}', options => '{\"seed\": 3}', release => %s)")


def test_policy_role_gets_release_but_not_source(policy, connect):
    conn = connect("deid_t_researcher")
    rid, relations, *_ , verified = conn.execute(REQ, [25, 2, "t_pol"]).fetchone()
    assert verified
    assert conn.execute("SELECT count(*) FROM release.t_pol_qit").fetchone()[0] == 3000
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM registry.patients LIMIT 1")
    assert sqlstate_of(e) == "42501"
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM deid_release.t_pol_qit LIMIT 1")
    assert sqlstate_of(e) == "42501"
    via = policy.execute("SELECT parameters->'authorized_via'->>'via', requested_by FROM deid.release"
                         " WHERE release_id = %s", [rid]).fetchone()
    assert via == ("policy", "deid_t_researcher")
    # readers see the release, nothing else
    reader = connect("deid_t_reader")
    assert reader.execute("SELECT count(*) FROM release.t_pol_diagnosis").fetchone()[0] > 0


@pytest.mark.parametrize("k, l", [(10, 2), (25, 1), (25, None)])
def test_request_below_policy_minimum_is_refused(policy, connect, k, l):
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_researcher").execute(REQ, [k, l, "t_below"])
    assert sqlstate_of(e) == "42501"
    assert "policy minimum" in str(e.value)
    assert not policy.execute("SELECT 1 FROM pg_class WHERE relname LIKE 't_below%'").fetchone()


def test_reader_cannot_request(policy, connect):
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_reader").execute(REQ, [50, 2, "t_reader"])
    assert sqlstate_of(e) == "42501"


def test_policy_role_cannot_select_on_unclassified_columns(policy, connect):
    """A policy-based selection may use only the released quasi-identifiers (was
    42703 for unclassified columns; now 42501 for every other column, with a hint)."""
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_researcher").execute(
            "SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 25, l => 2,"
            " columns => '{age,sex,zip,diagnosis}', selection => $$name = 'Patient 1'$$)")
    assert sqlstate_of(e) == "42501"


def test_analyst_with_select_needs_no_policy(policy, connect):
    r = connect("deid_t_analyst").execute(REQ, [5, 2, "t_analyst"]).fetchone()
    assert r[5]
