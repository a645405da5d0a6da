"""Attack: the policy path lends rights (a forged policy row, a grant on a view
that calls its owner's function, an admin's hierarchy check, a leaked relation name).

deid reads a relation as some role R: the caller (with SELECT), a policy's grantor (for a
requester without SELECT), or a deid_admin checking a hierarchy. Whatever code that read
executes -- a view's functions and operators, a table's row-security policies, the casts deid
applies -- runs with R's rights, so it must be R's own code or code of a trusted owner
(superusers, deid_owner, roles that may SET ROLE R anyway). And nobody but deid's owner
writes the rows that say who reads as whom (deid.policy) or what a column is
(deid.column_role).

Real login roles: a deid_admin who is not a superuser (deid_t_rogue_admin), a plain data owner
(deid_t_pol_owner), an attacker with nothing but its own schema (deid_t_attacker), a
policy-only requester (deid_t_researcher). The probe function reports the role it runs as and
tries to make the session user a superuser.
"""
import threading
import time

import psycopg
import pytest
from psycopg import sql

from dbfixtures import hint_of, sqlstate_of
from test_escalation import PROBE, Probe, _is_superuser

ATTACKER = "deid_t_attacker"
ROGUE_ADMIN = "deid_t_rogue_admin"
OWNER = "deid_t_pol_owner"
RESEARCHER = "deid_t_researcher"
ROWS = 40


@pytest.fixture
def world(admin):
    """Schema att (the attacker's, with its probe) and schema own (the data owner's)."""
    if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [OWNER]).fetchone():
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(OWNER)))
    for role in (ATTACKER, ROGUE_ADMIN, OWNER, RESEARCHER):
        admin.execute(sql.SQL("ALTER ROLE {} NOSUPERUSER").format(sql.Identifier(role)))
    _drop(admin)
    admin.execute(sql.SQL("CREATE SCHEMA att AUTHORIZATION {}").format(sql.Identifier(ATTACKER)))
    admin.execute(sql.SQL("CREATE SCHEMA own AUTHORIZATION {}").format(sql.Identifier(OWNER)))
    admin.execute("GRANT USAGE ON SCHEMA att, own TO PUBLIC")
    admin.execute(PROBE.format(schema="att"))
    admin.execute(sql.SQL("ALTER FUNCTION att.probe(int) OWNER TO {}").format(
        sql.Identifier(ATTACKER)))
    admin.execute(sql.SQL("ALTER FUNCTION att.probe_bool(int) OWNER TO {}").format(
        sql.Identifier(ATTACKER)))
    yield admin
    for role in (ATTACKER, ROGUE_ADMIN, OWNER, RESEARCHER):
        admin.execute(sql.SQL("ALTER ROLE {} NOSUPERUSER").format(sql.Identifier(role)))
    _drop(admin)


def _drop(admin):
    admin.execute("DELETE FROM deid.policy WHERE relation::text ~ '^(att|own)\\.'")
    admin.execute("DELETE FROM deid.column_role WHERE relation::text ~ '^(att|own)\\.'")
    admin.execute("DROP SCHEMA IF EXISTS att, own CASCADE")


def _table(conn, name, extra=""):
    """A small table (id, a int, b text) of the connection's role, classified by the superuser."""
    conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, a int, b text{})").format(
        sql.SQL(name), sql.SQL(extra)))
    conn.execute(sql.SQL("INSERT INTO {} (id, a, b) SELECT i, i % 2, 'x' || (i % 2)"
                         " FROM generate_series(1, {}) i").format(sql.SQL(name), sql.Literal(ROWS)))


def _classify(admin, rel, qi="a", sensitive="b"):
    admin.execute("SELECT deid.set_role(%s, %s, 'quasi_identifier')", [rel, qi])
    admin.execute("SELECT deid.set_role(%s, %s, 'sensitive')", [rel, sensitive])


def _refused(conn, statement, params=None):
    with pytest.raises(psycopg.Error) as e:
        conn.execute(statement, params).fetchall()
    assert sqlstate_of(e) == "42501", str(e.value)
    assert hint_of(e), "every error has a HINT"
    return e


def _probe_never_ran_as_other(admin, probe, role):
    assert not _is_superuser(admin, role), f"{role} became a superuser"
    others = sorted(set(probe.ran_as) - {role})
    assert not others, f"{role}'s code ran as {others}"


def _policy_row(admin, grantee, rel, min_k, grantor):
    """A policy row as an earlier, honest grant left it (the relation changed since)."""
    admin.execute("INSERT INTO deid.policy (grantee, relation, min_k, granted_by)"
                  " VALUES (%s::regrole, %s::regclass, %s, %s)", [grantee, rel, min_k, grantor])
    admin.execute("SELECT deid._install_reader(%s)", [grantor])


REQUEST = ("SELECT * FROM deid.anonymize_request(%s, 'anatomy', k => 2, columns => '{a,b}',"
           " options => '{\"row_id\": \"id\"}', release => %s)")


# ------------------------------------------------------------- (a) catalog rows: no DML
@pytest.mark.parametrize("statement", [
    "INSERT INTO deid.policy (grantee, relation, min_k, granted_by)"
    " VALUES ('deid_t_rogue_admin', 'registry.patients', 1, 'postgres')",
    "UPDATE deid.policy SET granted_by = 'postgres'",
    "DELETE FROM deid.policy",
    "INSERT INTO deid.column_role (relation, column_name, role)"
    " VALUES ('registry.patients', 'name', 'insensitive')",
    "UPDATE deid.column_role SET role = 'insensitive'",
    "DELETE FROM deid.column_role",
])
def test_admin_has_no_dml_on_policy_or_column_role(world, connect, statement):
    rogue = connect(ROGUE_ADMIN)
    with pytest.raises(psycopg.Error) as e:
        rogue.execute(statement)
    assert sqlstate_of(e) == "42501"
    assert "permission denied for table" in str(e.value)
    # reading stays
    rogue.execute("SELECT count(*) FROM deid.policy").fetchone()
    rogue.execute("SELECT count(*) FROM deid.column_role").fetchone()


# ------------------------------------ (f) only an owner of the relation grants a policy
def test_admin_who_is_not_the_owner_cannot_allow_requests(world, connect):
    world.execute(sql.SQL("GRANT SELECT ON registry.patients TO {}").format(
        sql.Identifier(ROGUE_ADMIN)))
    try:
        e = _refused(connect(ROGUE_ADMIN),
                     "SELECT deid.allow_requests('deid_t_researcher', 'registry.patients', 5)")
        assert "owner" in str(e.value)
        assert not world.execute("SELECT 1 FROM deid.policy WHERE granted_by = %s",
                                 [ROGUE_ADMIN]).fetchone()
    finally:
        world.execute(sql.SQL("REVOKE SELECT ON registry.patients FROM {}").format(
            sql.Identifier(ROGUE_ADMIN)))


def test_owner_allow_requests_records_the_caller(world, connect):
    owner = connect(OWNER)
    _table(owner, "own.t")
    owner.execute("SELECT deid.allow_requests('deid_t_researcher', 'own.t', 3)")
    assert world.execute("SELECT granted_by::text, per_source_k FROM deid.policy"
                         " WHERE relation = 'own.t'::regclass").fetchone() == (OWNER, False)


def test_policy_of_a_grantor_who_is_no_owner_is_refused_at_request_time(world, connect):
    """A policy an admin who is no owner granted (deid 1.0.0 let a deid_admin grant) lends that
    admin's rights: it no longer works, and says so without naming what is inside."""
    _table(world, "own.p")
    _classify(world, "own.p")
    world.execute(sql.SQL("GRANT SELECT ON own.p TO {}").format(sql.Identifier(ROGUE_ADMIN)))
    _policy_row(world, RESEARCHER, "own.p", 2, ROGUE_ADMIN)
    e = _refused(connect(RESEARCHER), REQUEST, ["own.p", "t_pol_noowner"])
    assert "not an owner" in str(e.value)


def test_revoke_requests(world, connect):
    """With no DML on deid.policy, a policy goes through deid.revoke_requests: its grantor, an
    owner or a deid_admin; not the grantee or anyone else."""
    owner = connect(OWNER)
    _table(owner, "own.t")
    for revoker in (OWNER, ROGUE_ADMIN):
        owner.execute("SELECT deid.allow_requests(%s, 'own.t', 2)", [RESEARCHER])
        for other in (RESEARCHER, ATTACKER):
            _refused(connect(other), "SELECT deid.revoke_requests(%s, 'own.t')", [RESEARCHER])
        connect(revoker).execute("SELECT deid.revoke_requests(%s, 'own.t')", [RESEARCHER])
        assert not world.execute("SELECT 1 FROM deid.policy WHERE relation = 'own.t'::regclass"
                                 ).fetchone()
    with pytest.raises(psycopg.Error) as e:
        owner.execute("SELECT deid.revoke_requests(%s, 'own.t')", [RESEARCHER])
    assert sqlstate_of(e) == "42704" and hint_of(e)


# ----------------- (b) a superuser's honest grant on a plain role's view: no superuser
VIEW_WITH_PROBE = "CREATE OR REPLACE VIEW att.v AS SELECT id, att.probe(a) AS a, b FROM att.t"


def test_superuser_grant_on_view_calling_its_owners_function_is_refused(world, connect):
    attacker = Probe(connect(ATTACKER))
    _table(attacker.conn, "att.t")
    attacker.conn.execute(VIEW_WITH_PROBE)
    _classify(world, "att.v")
    attacker.ran_as.clear()
    # grant time: the grantor (here the superuser) is told exactly what would run as it
    with pytest.raises(psycopg.Error) as e:
        world.execute("SELECT deid.allow_requests(%s, 'att.v', 2)", [ATTACKER])
    assert sqlstate_of(e) == "42501" and hint_of(e)
    assert "att.probe(integer)" in str(e.value) and ATTACKER in str(e.value)
    assert "postgres" in str(e.value)
    _probe_never_ran_as_other(world, attacker, ATTACKER)


def test_view_replaced_after_the_grant_is_refused_at_request_time(world, connect):
    """An honest grant on a clean view; the owner then makes the view
    call its function, revokes its own SELECT and requests through the policy."""
    attacker = Probe(connect(ATTACKER))
    _table(attacker.conn, "att.t")
    attacker.conn.execute("CREATE VIEW att.v AS SELECT id, a, b FROM att.t")
    _classify(world, "att.v")
    world.execute("SELECT deid.allow_requests(%s, 'att.v', 2)", [ATTACKER])
    attacker.conn.execute(VIEW_WITH_PROBE)
    attacker.conn.execute(sql.SQL("REVOKE ALL ON att.v FROM {}").format(sql.Identifier(ATTACKER)))
    attacker.ran_as.clear()
    e = _refused(attacker.conn, REQUEST, ["att.v", "t_pol_b"])
    _probe_never_ran_as_other(world, attacker, ATTACKER)
    assert not attacker.ran_as, "the probe ran at all"
    # a requester without SELECT learns nothing of what is inside the grantor's view
    assert "probe" not in str(e.value) and "att.t" not in str(e.value)


def test_admin_forged_policy_row_cannot_even_be_written(world, connect):
    """End to end: the forged row with granted_by = 'postgres' is refused, so the
    admin's view function never runs as postgres."""
    rogue = Probe(connect(ROGUE_ADMIN))
    with pytest.raises(psycopg.Error) as e:
        rogue.conn.execute("INSERT INTO deid.policy (grantee, relation, min_k, granted_by)"
                           " VALUES (%s::regrole, 'registry.patients', 1, 'postgres')",
                           [ROGUE_ADMIN])
    assert sqlstate_of(e) == "42501"
    _probe_never_ran_as_other(world, rogue, ROGUE_ADMIN)


# ------------------- (c) an analyst's view read by a deid_admin's hierarchy check
def test_admin_set_role_hierarchy_on_analysts_view_is_refused(world, connect):
    world.execute("SELECT deid.drop_hierarchy('t_pol_h') FROM deid.hierarchy WHERE name = 't_pol_h'")
    world.execute("SELECT deid.load_hierarchy('t_pol_h', $h$0;*\n1;*$h$)")
    try:
        attacker = Probe(connect(ATTACKER))
        _table(attacker.conn, "att.t")
        attacker.conn.execute(VIEW_WITH_PROBE)
        attacker.conn.execute(sql.SQL("GRANT SELECT ON att.v, att.t TO {}").format(
            sql.Identifier(ROGUE_ADMIN)))
        rogue = Probe(connect(ROGUE_ADMIN))
        e = _refused(rogue.conn, "SELECT deid.set_role('att.v', 'a', 'quasi_identifier',"
                                 " hierarchy => 't_pol_h')")
        assert "att.probe(integer)" in str(e.value) and ROGUE_ADMIN in str(e.value)
        assert not rogue.ran_as, f"the analyst's code ran as {rogue.ran_as}"
        _probe_never_ran_as_other(world, rogue, ROGUE_ADMIN)
        # the admin's own table with a hierarchy: fine
        world.execute("CREATE TABLE own.h (id int PRIMARY KEY, a int)")
        world.execute("INSERT INTO own.h VALUES (1, 0), (2, 1)")
        world.execute(sql.SQL("GRANT SELECT ON own.h TO {}").format(sql.Identifier(ROGUE_ADMIN)))
        rogue.conn.execute("SELECT deid.set_role('own.h', 'a', 'quasi_identifier',"
                           " hierarchy => 't_pol_h')")
    finally:
        world.execute("DELETE FROM deid.column_role WHERE relation::text ~ '^(att|own)\\.'")
        world.execute("SELECT deid.drop_hierarchy('t_pol_h')")


@pytest.mark.parametrize("measure", [
    "SELECT deid.k_anonymity('att.v'::regclass, '{a}')",
    "SELECT * FROM deid.equivalence_classes('att.v'::regclass, '{a}')",
    "SELECT * FROM deid.l_diversity('att.v'::regclass, '{a}', '{b}')",
])
def test_measurements_of_another_roles_view_are_refused(world, connect, measure):
    attacker = Probe(connect(ATTACKER))
    _table(attacker.conn, "att.t")
    attacker.conn.execute(VIEW_WITH_PROBE)
    attacker.conn.execute(sql.SQL("GRANT SELECT ON att.v TO {}").format(sql.Identifier(ROGUE_ADMIN)))
    rogue = Probe(connect(ROGUE_ADMIN))
    _refused(rogue.conn, measure)
    assert not rogue.ran_as
    _probe_never_ran_as_other(world, rogue, ROGUE_ADMIN)


TABLE_SQL = ("CREATE TABLE att.tt (id int PRIMARY KEY, a int, b text);"
             "INSERT INTO att.tt SELECT i, i % 2, 'x' || (i % 2) FROM generate_series(1, 40) i;")
# Every way a relation of the attacker's makes a reader run the attacker's code; the bait is
# att.bait (columns id, a, b), read by a deid_admin checking a hierarchy on column a.
ROUTES = {
    "view": TABLE_SQL + "CREATE VIEW att.bait AS SELECT id, att.probe(a) AS a, b FROM att.tt",
    "nested_view": TABLE_SQL + "CREATE VIEW att.inner AS SELECT id, att.probe(a) AS a, b"
                   " FROM att.tt; CREATE VIEW att.bait AS SELECT * FROM att.inner",
    "operator": "CREATE FUNCTION att.op(int, int) RETURNS boolean LANGUAGE sql AS"
                " $$ SELECT att.probe($1) IS NOT NULL $$;"
                "CREATE OPERATOR att.=== (LEFTARG = int, RIGHTARG = int, FUNCTION = att.op);"
                + TABLE_SQL + "CREATE VIEW att.bait AS SELECT id, a, b FROM att.tt"
                " WHERE a OPERATOR(att.===) a",
    "aggregate": "CREATE FUNCTION att.sf(int, int) RETURNS int LANGUAGE sql AS"
                 " $$ SELECT coalesce($1, 0) + att.probe($2) $$;"
                 "CREATE AGGREGATE att.agg(int) (SFUNC = att.sf, STYPE = int);"
                 + TABLE_SQL + "CREATE VIEW att.bait AS SELECT id, (SELECT att.agg(x)"
                 " FROM (VALUES (a)) v(x)) AS a, b FROM att.tt",
    "set_returning": TABLE_SQL + "CREATE FUNCTION att.rows() RETURNS SETOF att.tt LANGUAGE sql"
                     " AS $$ SELECT * FROM att.tt WHERE att.probe(1) = 1 $$;"
                     "CREATE VIEW att.bait AS SELECT * FROM att.rows()",
    "domain_cast_in_view": "CREATE DOMAIN att.d AS int CHECK (att.probe_bool(VALUE));"
                           + TABLE_SQL + "CREATE VIEW att.bait AS SELECT id, a::att.d AS a, b"
                           " FROM att.tt",
    "cast": "CREATE TYPE att.ct AS (v int);"
            "CREATE FUNCTION att.ct_text(att.ct) RETURNS text LANGUAGE sql AS"
            " $$ SELECT 'v' || att.probe(($1).v) $$;"
            "CREATE CAST (att.ct AS text) WITH FUNCTION att.ct_text(att.ct);"
            "CREATE TABLE att.bait (id int PRIMARY KEY, a att.ct, b text);"
            "INSERT INTO att.bait SELECT i, ROW(i % 2)::att.ct, 'x' FROM generate_series(1, 40) i",
    "rls_policy": TABLE_SQL + "ALTER TABLE att.tt ENABLE ROW LEVEL SECURITY;"
                  "CREATE POLICY p ON att.tt USING (att.probe_bool(a));"
                  "CREATE VIEW att.bait WITH (security_invoker = true) AS SELECT * FROM att.tt",
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_into_an_admins_hierarchy_check_is_refused(world, connect, route):
    world.execute("SELECT deid.drop_hierarchy('t_pol_r') FROM deid.hierarchy WHERE name = 't_pol_r'")
    world.execute("SELECT deid.load_hierarchy('t_pol_r', $h$0;*\n1;*\n(0);*\n(1);*\nv0;*\nv1;*$h$)")
    try:
        attacker = Probe(connect(ATTACKER))
        attacker.conn.execute(ROUTES[route])
        attacker.conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA att TO {}").format(
            sql.Identifier(ROGUE_ADMIN)))
        rogue = Probe(connect(ROGUE_ADMIN))
        _refused(rogue.conn, "SELECT deid.set_role('att.bait', 'a', 'quasi_identifier',"
                             " hierarchy => 't_pol_r')")
        assert not rogue.ran_as, f"the attacker's code ran as {rogue.ran_as}"
        _probe_never_ran_as_other(world, rogue, ROGUE_ADMIN)
    finally:
        world.execute("DELETE FROM deid.column_role WHERE relation::text ~ '^(att|own)\\.'")
        world.execute("SELECT deid.drop_hierarchy('t_pol_r')")


def test_utility_from_of_another_roles_view_is_refused(world, connect):
    """deid.utility_from reads the caller's relation as the caller, like the measurements."""
    attacker = Probe(connect(ATTACKER))
    attacker.conn.execute(ROUTES["view"])
    attacker.conn.execute(sql.SQL("GRANT SELECT ON att.bait TO {}").format(
        sql.Identifier(ROGUE_ADMIN)))
    rogue = Probe(connect(ROGUE_ADMIN))
    _refused(rogue.conn, "SELECT deid.utility_from('att.bait', 'a', 'b')")
    assert not rogue.ran_as
    assert attacker.conn.execute("SELECT deid.utility_from('att.bait', 'a', 'b')").fetchone()[0]


def test_materialized_view_runs_no_query_when_read(world, connect):
    """A materialized view's functions ran when it was refreshed, not when it is read: no
    refusal, and the probe does not run."""
    attacker = Probe(connect(ATTACKER))
    attacker.conn.execute(TABLE_SQL + "CREATE MATERIALIZED VIEW att.m AS"
                          " SELECT id, att.probe(a) AS a, b FROM att.tt")
    attacker.conn.execute(sql.SQL("GRANT SELECT ON att.m TO {}").format(sql.Identifier(ROGUE_ADMIN)))
    rogue = Probe(connect(ROGUE_ADMIN))
    assert rogue.conn.execute("SELECT deid.k_anonymity('att.m'::regclass, '{a}')"
                              ).fetchone()[0] == ROWS // 2
    assert not rogue.ran_as


# --------------- (d) a row-security policy calling another role's function, read by a grantor
def test_rls_policy_calling_another_roles_function_is_refused(world, connect):
    owner = Probe(connect(OWNER))
    _table(owner.conn, "own.t")
    _classify(world, "own.t")
    owner.conn.execute("SELECT deid.allow_requests(%s, 'own.t', 2)", [RESEARCHER])
    owner.conn.execute("ALTER TABLE own.t ENABLE ROW LEVEL SECURITY;"
                       "ALTER TABLE own.t FORCE ROW LEVEL SECURITY;"
                       "CREATE POLICY p ON own.t USING (att.probe_bool(a))")
    researcher = Probe(connect(RESEARCHER))
    e = _refused(researcher.conn, REQUEST, ["own.t", "t_pol_d"])
    assert "probe" not in str(e.value)
    assert not researcher.ran_as and not owner.ran_as
    _probe_never_ran_as_other(world, owner, OWNER)
    # at grant time the grantor is told which policy and function
    e = _refused(owner.conn, "SELECT deid.allow_requests(%s, 'own.t', 2)", [RESEARCHER])
    assert "att.probe_bool(integer)" in str(e.value) and OWNER in str(e.value)


# ------------------------------- (e) a cast to text deid applies, of another role's type
def test_user_cast_of_another_roles_type_is_refused(world, connect):
    attacker = connect(ATTACKER)
    attacker.execute("CREATE TYPE att.ct AS (v int);"
                     "CREATE FUNCTION att.ct_text(att.ct) RETURNS text LANGUAGE sql AS"
                     " $$ SELECT 'v' || att.probe(($1).v) $$;"
                     "CREATE CAST (att.ct AS text) WITH FUNCTION att.ct_text(att.ct)")
    owner = Probe(connect(OWNER))
    owner.conn.execute("CREATE TABLE own.c (id int PRIMARY KEY, a att.ct, b text)")
    owner.conn.execute("INSERT INTO own.c SELECT i, ROW(i % 2)::att.ct, 'x' || (i % 2)"
                       " FROM generate_series(1, 40) i")
    _classify(world, "own.c")
    for statement, params in [(REQUEST, ["own.c", "t_pol_e"]),
                              ("SELECT * FROM deid.l_diversity('own.c'::regclass, '{a}', '{b}')",
                               None)]:
        e = _refused(owner.conn, statement, params)
        assert "att.ct_text(att.ct)" in str(e.value) and OWNER in str(e.value)
    assert not owner.ran_as
    _probe_never_ran_as_other(world, owner, OWNER)


# ------------------------ built-ins that run SQL text or use the reader's privileges
@pytest.mark.parametrize("view", [
    "CREATE VIEW att.v AS SELECT id, a,"
    " query_to_xml('SELECT att.probe(1)', true, true, '')::text AS b FROM att.t",
    "CREATE VIEW att.v AS SELECT id, a, b || left(pg_read_file('PG_VERSION'), 0) AS b FROM att.t",
], ids=["query_to_xml", "pg_read_file"])
def test_builtins_that_borrow_the_readers_rights_are_refused(world, connect, view):
    """A view of another role that calls only built-ins -- but these would run its SQL text,
    or read a server file, with the reader's rights."""
    attacker = Probe(connect(ATTACKER))
    _table(attacker.conn, "att.t")
    attacker.conn.execute(view)
    _classify(world, "att.v")
    attacker.ran_as.clear()
    e = _refused(world, "SELECT deid.allow_requests(%s, 'att.v', 2)", [ATTACKER])
    assert "att.v" in str(e.value)
    _probe_never_ran_as_other(world, attacker, ATTACKER)


# ------------------------------------------------- (g) owners' own code still works
def test_own_view_with_own_function_works(world, connect):
    attacker = Probe(connect(ATTACKER))
    _table(attacker.conn, "att.t")
    attacker.conn.execute(VIEW_WITH_PROBE)
    attacker.ran_as.clear()
    assert attacker.conn.execute("SELECT deid.k_anonymity('att.v'::regclass, '{a}')"
                                 ).fetchone()[0] == ROWS // 2
    assert set(attacker.ran_as) == {ATTACKER}
    _probe_never_ran_as_other(world, attacker, ATTACKER)


def test_builtins_security_invoker_views_and_definer_functions_work(world, connect):
    """The data owner's view of built-ins, a security_invoker view, a view calling another
    role's SECURITY DEFINER function (it runs as its owner), a row-security policy of
    built-ins: the owner measures, grants, and the researcher's request goes through."""
    world.execute("CREATE FUNCTION att.parity(x int) RETURNS int LANGUAGE sql SECURITY DEFINER"
                  " AS $$ SELECT x % 2 $$")
    world.execute(sql.SQL("ALTER FUNCTION att.parity(int) OWNER TO {}").format(
        sql.Identifier(ATTACKER)))
    owner = connect(OWNER)
    _table(owner, "own.t")
    owner.execute("ALTER TABLE own.t ENABLE ROW LEVEL SECURITY; ALTER TABLE own.t FORCE ROW"
                  " LEVEL SECURITY; CREATE POLICY p ON own.t USING (lower(b) LIKE 'x%' AND a >= 0)")
    owner.execute("CREATE VIEW own.v AS SELECT id, abs(a) + 0 * att.parity(a) AS a,"
                  " upper(b) AS b FROM own.t WHERE coalesce(a, 0) >= 0")
    owner.execute("CREATE VIEW own.si WITH (security_invoker = true) AS SELECT id, a, b FROM own.t")
    for rel in ("own.v", "own.si"):
        _classify(world, rel)
        assert owner.execute("SELECT deid.k_anonymity(%s::regclass, '{a}')",
                             [rel]).fetchone()[0] == ROWS // 2
        owner.execute("SELECT deid.allow_requests(%s, %s, 2)", [RESEARCHER, rel])
    researcher = connect(RESEARCHER)
    researcher.execute("SET client_min_messages = warning")
    ok = researcher.execute(REQUEST, ["own.v", "t_pol_g"]).fetchone()
    assert ok[-1] is True
    world.execute("SELECT deid.drop_release('t_pol_g')")


def test_code_changed_while_the_grantor_reads_fails_the_request(world, connect):
    """The requester picks the moment the grantor reads. A function that passed the check (a
    SECURITY DEFINER function runs as its owner) and turns into the reader's code while the
    read runs fails the request after the read: nothing is released, and the transaction takes
    back whatever the read did."""
    world.execute("CREATE FUNCTION att.slow(x int) RETURNS int LANGUAGE sql SECURITY DEFINER"
                  " AS $$ SELECT x FROM pg_sleep(0.05) $$")
    world.execute(sql.SQL("ALTER FUNCTION att.slow(int) OWNER TO {}").format(
        sql.Identifier(ATTACKER)))
    owner = connect(OWNER)
    _table(owner, "own.t")
    owner.execute("CREATE VIEW own.v AS SELECT id, att.slow(a) AS a, b FROM own.t")
    _classify(world, "own.v")
    owner.execute("SELECT deid.allow_requests(%s, 'own.v', 2)", [RESEARCHER])
    researcher = connect(RESEARCHER)
    outcome = {}

    def request():
        try:
            researcher.execute(REQUEST, ["own.v", "t_pol_race"]).fetchall()
            outcome["state"] = None
        except psycopg.Error as e:
            outcome["state"], outcome["message"] = e.diag.sqlstate, str(e)

    worker = threading.Thread(target=request)
    worker.start()
    # the grantor's read has begun once the researcher's backend sleeps inside att.slow
    deadline = time.monotonic() + 30
    while not world.execute("SELECT 1 FROM pg_stat_activity WHERE usename = %s"
                            " AND wait_event = 'PgSleep'", [RESEARCHER]).fetchone():
        assert time.monotonic() < deadline and worker.is_alive(), "the read never began"
        time.sleep(0.01)
    connect(ATTACKER).execute("ALTER FUNCTION att.slow(int) SECURITY INVOKER")
    worker.join()
    assert outcome["state"] == "42501", outcome
    assert "att.slow" not in outcome["message"]
    assert not world.execute("SELECT 1 FROM deid.release WHERE name = 't_pol_race'").fetchone()


# --------------------------- (h) the grantor's view reads a table the grantor may not read
def test_policy_requester_does_not_learn_relations_inside_the_view(world, connect):
    world.execute("CREATE TABLE own.hidden_inner (id int PRIMARY KEY, a int, b text)")
    world.execute("INSERT INTO own.hidden_inner SELECT i, i % 2, 'x' FROM generate_series(1, 40) i")
    owner = connect(OWNER)
    owner.execute("CREATE VIEW own.v AS SELECT id, a, b FROM own.hidden_inner")
    _classify(world, "own.v")
    owner.execute("SELECT deid.allow_requests(%s, 'own.v', 2)", [RESEARCHER])
    e = _refused(connect(RESEARCHER), REQUEST, ["own.v", "t_pol_h"])
    text = " ".join(x or "" for x in (e.value.diag.message_primary, e.value.diag.message_detail,
                                      e.value.diag.message_hint))
    assert "hidden_inner" not in text, text


# --------------------------------------------------------- (3) per_source_k, logged
def test_per_source_k_is_a_policy_option_carried_to_the_log(world, connect):
    owner = connect(OWNER)
    _table(owner, "own.t")
    _classify(world, "own.t")
    owner.execute("SELECT deid.allow_requests(%s, 'own.t', 2, per_source_k => true)", [RESEARCHER])
    assert world.execute("SELECT per_source_k FROM deid.policy WHERE relation = 'own.t'::regclass"
                         ).fetchone() == (True,)
    researcher = connect(RESEARCHER)
    researcher.execute("SET client_min_messages = warning")
    researcher.execute(REQUEST, ["own.t", "t_pol_3"]).fetchall()
    logged = world.execute("SELECT parameters -> 'authorized_via' FROM deid.release"
                           " WHERE name = 't_pol_3' AND status = 'committed'").fetchone()[0]
    assert logged["via"] == "policy" and logged["per_source_k"] is True
    world.execute("SELECT deid.drop_release('t_pol_3')")
    owner.execute("SELECT deid.allow_requests(%s, 'own.t', 2)", [RESEARCHER])
    assert world.execute("SELECT per_source_k FROM deid.policy WHERE relation = 'own.t'::regclass"
                         ).fetchone() == (False,)
