"""Every deid function a login role may execute, internal ones included, answers a bad call with
a SQLSTATE, a message in PostgreSQL's style (no Python exception class, no traceback, in the
message or its CONTEXT) and a HINT.

The public functions are reached through their wrappers; but the internal functions they call
(``deid._*``) are executable too (a SECURITY INVOKER wrapper runs as its caller), and a role may
call them directly. The functions are enumerated from pg_proc with has_function_privilege, for a
plain login, a deid_admin and a policy's requester (the public ones too), and each is called,
in a transaction rolled back afterwards, with two sets of bad
arguments: every argument NULL, and every argument a wrong value of its type (another role's name,
an OID of nothing, a negative number, garbage text)."""
import psycopg
import pytest
from psycopg import sql

ROLES = ("deid_t_attacker", "deid_t_admin", "deid_t_researcher")
# A wrong value of each argument type (the name is a role that exists and is not the caller).
WRONG = {"text": "'zz no such thing'", "name": "'deid_owner'", "oid": "0", "integer": "-1",
         "bigint": "-1", "double precision": "-1", "numeric": "-1", "boolean": "false",
         "bytea": "'\\x00'::bytea", "text[]": "'{zz}'", "bigint[]": "'{-1}'",
         "double precision[]": "'{-1}'", "numeric[]": "'{-1}'", "bytea[]": "'{}'", "jsonb": "'{}'",
         "regclass": "'pg_class'::regclass", "integer[]": "'{-1}'", "date": "'1800-01-01'"}
PYTHON_MARKS = ("plpy.", "spiexceptions", "Traceback", "Error: ", "Exception: ", "PL/Python function",
                "\nNone", " None ")


def _executable(conn, role):
    return conn.execute(
        "SELECT p.oid::regprocedure::text, p.proname,"
        "       array(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) t),"
        "       l.lanname = 'plpython3u' AND NOT p.prosecdef"
        "  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.pronamespace = 'deid'::regnamespace"
        "   AND p.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype)"
        "   AND has_function_privilege(%s, p.oid, 'EXECUTE') ORDER BY 1", [role]).fetchall()


def _call(name, types, how):
    args = ", ".join(("NULL::" + t) if how == "null" else f"{WRONG[t]}::{t}" for t in types)
    return f"SELECT deid.{name}({args})"


def _flaw(err, as_caller):
    """What is wrong with an error a role got, or None. AS_CALLER: a SECURITY INVOKER PL/Python
    implementation (it runs as its caller, so the caller may execute it; PL/Python puts its
    traceback in CONTEXT, which only a PL/pgSQL layer would drop, and a layer that runs as the
    caller needs EXECUTE on what it calls): only the message is checked."""
    d = err.diag
    text = d.message_primary if as_caller else "\n".join(filter(None, (d.message_primary, d.context)))
    if not d.sqlstate or d.sqlstate == "38000":
        return f"SQLSTATE {d.sqlstate} (PL/Python's default)"
    if any(mark in (text or "") for mark in PYTHON_MARKS):
        return "Python in the message" + ("" if as_caller else " or CONTEXT")
    if not d.message_hint:
        return "no HINT"
    return None


@pytest.fixture(scope="module")
def researcher_policy(admin):
    admin.execute("SELECT deid.set_role('registry.patients', 'age', 'quasi_identifier')")
    admin.execute("SELECT deid.allow_requests('deid_t_researcher', 'registry.patients', 5)")
    yield
    admin.execute("SELECT deid.revoke_requests('deid_t_researcher', 'registry.patients')")


@pytest.mark.parametrize("role", ROLES)
def test_every_executable_internal_function_answers_bad_calls_cleanly(admin, connect, researcher_policy,
                                                                     role):
    functions = _executable(admin, role)
    assert len(functions) > 30, functions        # the enumeration found the internal surface
    unknown = sorted({t for _, _, types, _ in functions for t in types} - set(WRONG))
    assert not unknown, f"give WRONG a value of {unknown}"
    conn = connect(role)
    conn.execute("SET statement_timeout = '20s'")
    flaws = []
    for signature, name, types, as_caller in functions:
        for how in ("null", "wrong"):
            query = _call(name, types, how)
            try:
                with conn.transaction():            # what a call did is undone
                    conn.execute(query)
                    raise psycopg.Rollback()
            except psycopg.Error as e:
                flaw = _flaw(e, as_caller)
                if flaw:
                    flaws.append(f"{signature} [{how}]: {flaw}: {e.diag.sqlstate} {e.diag.message_primary!r}"
                                 f" hint={e.diag.message_hint!r}")
    assert not flaws, f"{len(flaws)} bad answers as {role}:\n" + "\n".join(flaws)


def test_allow_requests_says_nothing_of_the_reader_it_replaces(admin):
    """Granting a policy installs the grantor's reader; a first grant used to print PostgreSQL's
    NOTICE that the reader it would replace did not exist."""
    admin.execute("SELECT deid.set_role('registry.patients', 'age', 'quasi_identifier')")
    notices = []
    conn = admin

    def keep(diag):
        notices.append(diag.message_primary)
    conn.add_notice_handler(keep)
    try:
        conn.execute("DROP FUNCTION IF EXISTS deid." + conn.execute(
            "SELECT deid._reader_name(current_user)").fetchone()[0] + "(text)")
        notices.clear()
        conn.execute("SELECT deid.allow_requests('deid_t_reader', 'registry.patients', 5)")
        conn.execute("SELECT deid.revoke_requests('deid_t_reader', 'registry.patients')")
    finally:
        conn.remove_notice_handler(keep)
    assert notices == []
