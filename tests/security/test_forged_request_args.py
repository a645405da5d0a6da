"""The request's arguments cross SQL as one jsonb into one begin function,
deid._request_begin(args jsonb, caller name), SECURITY DEFINER and executable by everyone (the
public wrapper runs as the caller and calls it). A role that calls it by hand with a jsonb of
its own making gains nothing: a key the wrapper never writes, or a value of another type, is
refused before anything is read (22023 with a HINT); every check the wrapper's call meets --
the caller is the session's role, SELECT or a policy, the policy's minimums -- still runs on
the values; and the eight-argument begin is gone, so there is no second door."""
import json

import psycopg
import pytest

from dbfixtures import hint_of, sqlstate_of

BEGIN = "SELECT deid._request_begin(%s::jsonb, %s)"


@pytest.fixture(scope="module")
def policy(admin):
    for col, role in [("age", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("zip", "quasi_identifier"), ("diagnosis", "sensitive")]:
        admin.execute("SELECT deid.set_role('registry.patients', %s, %s)", [col, role])
    admin.execute("SELECT deid.allow_requests('deid_t_researcher', 'registry.patients', 25, 2)")
    return admin


@pytest.fixture(scope="module")
def relid(policy):
    return policy.execute("SELECT 'registry.patients'::regclass::oid::bigint").fetchone()[0]


def args(oid, **over):
    value = {"relid": oid, "method": "anatomy", "k": 25, "l": 2,
             "columns": ["age", "sex", "zip", "diagnosis"], "selection": None,
             "options": '{"seed": 3}', "name": "forged"}
    value.update(over)
    return json.dumps(value)


def refused(conn, statement, params):
    with pytest.raises(psycopg.Error) as e:
        conn.execute(statement, params)
    return e


def nothing_released(admin):
    return not admin.execute("SELECT 1 FROM deid.release WHERE name LIKE 'forged%'").fetchone() \
        and not admin.execute("SELECT 1 FROM pg_class WHERE relname LIKE 'forged%'").fetchone()


def test_a_role_without_select_or_policy_is_refused(policy, connect, relid):
    e = refused(connect("deid_t_attacker"), BEGIN, [args(relid), "deid_t_attacker"])
    assert sqlstate_of(e) == "42501" and hint_of(e)
    assert nothing_released(policy)


def test_naming_another_role_as_the_caller_is_refused(policy, connect, relid):
    e = refused(connect("deid_t_attacker"), BEGIN, [args(relid), "deid_t_analyst"])
    assert sqlstate_of(e) == "42501"
    assert nothing_released(policy)


@pytest.mark.parametrize("extra", [
    {"caller": "deid_t_analyst"},                 # a second caller inside the value
    {"grant": {"via": "select"}},                 # the authorization the checks would decide
    {"checked": True},
    {"purpose": "release"},
])
def test_a_key_the_wrapper_never_writes_is_refused(policy, connect, relid, extra):
    value = json.loads(args(relid))
    value.update(extra)
    for role in ("deid_t_attacker", "deid_t_researcher"):
        e = refused(connect(role), BEGIN, [json.dumps(value), role])
        assert sqlstate_of(e) == "22023" and "has no argument" in str(e.value)
        assert "Call deid.anonymize_request" in hint_of(e)
    assert nothing_released(policy)


@pytest.mark.parametrize("over", [
    {"k": "25"}, {"k": True}, {"k": 2.5}, {"relid": "16384"}, {"columns": "age"},
    {"columns": [1, 2]}, {"options": {"seed": 3}}, {"method": ["anatomy"]},
])
def test_a_value_of_another_type_is_refused(policy, connect, relid, over):
    e = refused(connect("deid_t_researcher"), BEGIN, [args(relid, **over), "deid_t_researcher"])
    assert sqlstate_of(e) == "22023" and hint_of(e)
    assert nothing_released(policy)


@pytest.mark.parametrize("text", ["[]", "1", '"x"', "null"])
def test_a_value_that_is_no_object_is_refused(policy, connect, text):
    e = refused(connect("deid_t_researcher"), BEGIN, [text, "deid_t_researcher"])
    assert sqlstate_of(e) == "22023"


def test_the_policys_minimums_hold_for_a_forged_value(policy, connect, relid):
    """k and l below the policy's minimums, written straight into the jsonb: refused as the
    wrapper's call is, through begin and through the invoker that calls it."""
    conn = connect("deid_t_researcher")
    for over in ({"k": 2}, {"l": 1}, {"k": 2, "l": None}):
        e = refused(conn, BEGIN, [args(relid, **over), "deid_t_researcher"])
        assert sqlstate_of(e) == "42501" and "policy minimum" in str(e.value)
        e = refused(conn, "SELECT * FROM deid._anonymize_request(%s::jsonb)",
                    [args(relid, **over)])
        assert sqlstate_of(e) == "42501"
    assert nothing_released(policy)


def test_a_begun_request_is_released_only_through_its_own_read(policy, connect, relid):
    """A token from a hand-called begin is no release: finish takes only a snapshot that
    deid read (the policy's grantor read it inside begin), and only for its own caller."""
    researcher = connect("deid_t_researcher")
    token = researcher.execute(BEGIN, [args(relid), "deid_t_researcher"]).fetchone()[0]
    e = refused(connect("deid_t_attacker"), "SELECT * FROM deid._request_finish(%s, %s)",
                [token, "deid_t_researcher"])
    assert sqlstate_of(e) == "42501"
    assert nothing_released(policy)


def test_there_is_one_begin_function_and_its_body_is_not_callable(policy, connect):
    assert policy.execute(
        "SELECT to_regprocedure('deid._request_begin(oid, text, int, int, text[], text, text,"
        " text, name)') IS NULL AND to_regprocedure('deid._request_begin(jsonb, name)')"
        " IS NOT NULL").fetchone()[0]
    e = refused(connect("deid_t_attacker"), "SELECT deid._request_begin__py(%s::jsonb, %s)",
                ['{}', "deid_t_attacker"])
    assert sqlstate_of(e) == "42501"


def test_the_public_call_builds_the_same_value(policy, connect):
    """The wrapper's jsonb reaches begin whole: a policy requester's release as before."""
    row = connect("deid_t_researcher").execute(
        "SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 25, l => 2,"
        " columns => '{age,sex,zip,diagnosis}', options => '{\"seed\": 3}',"
        " release => 'jsonb_ok')").fetchone()
    assert row[-1] is True
    params = policy.execute("SELECT parameters FROM deid.release WHERE name = 'jsonb_ok'"
                            ).fetchone()[0]
    assert params["k"] == 25 and params["columns"] == ["age", "sex", "zip", "diagnosis"]
