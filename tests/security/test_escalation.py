"""Attack: make deid run the caller's own code with deid's rights.

A login role with nothing but the default privileges (CONNECT, TEMP) -- or a deid_admin who
is not a superuser -- builds a relation whose reading runs a function of its own: a view that
calls it (temporary or not), an operator, a cast of a type it owns, a domain check, a column
default, a row-level security policy. Then it hands that relation to every deid entry point
that reads a relation. The probe function reports the role it runs as (a NOTICE) and tries to
make the attacker a superuser.

deid must never run it as anyone but the attacker: every probe NOTICE names the attacker,
and the attacker is never a superuser afterwards. The call itself may succeed (it reads what
the attacker may read) or fail cleanly.
"""
import psycopg
import pytest
from psycopg import sql

from dbfixtures import sqlstate_of

ATTACKER = "deid_t_attacker"
ROGUE_ADMIN = "deid_t_rogue_admin"

PROBE = """
CREATE FUNCTION {schema}.probe(x int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'deid-probe ran as %', current_user;
    BEGIN
        EXECUTE format('ALTER ROLE %I SUPERUSER', session_user);
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
    RETURN x;
END $$;
CREATE FUNCTION {schema}.probe_bool(x int) RETURNS boolean LANGUAGE sql
    AS $$ SELECT {schema}.probe(x) IS NOT NULL $$;
"""


def _is_superuser(admin, role):
    return admin.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role]).fetchone()[0]


class Probe:
    """A connection of `role` that records the roles the probe ran as."""

    def __init__(self, conn):
        self.conn, self.ran_as = conn, []
        conn.add_notice_handler(self._notice)

    def _notice(self, diag):
        text = diag.message_primary or ""
        if text.startswith("deid-probe ran as "):
            self.ran_as.append(text.rsplit(" ", 1)[1])

    def attempt(self, sql, params=None):
        """Run `sql`; return its SQLSTATE (None when it succeeded)."""
        try:
            self.conn.execute(sql, params).fetchall()
            return None
        except psycopg.Error as e:
            return sqlstate_of(type("E", (), {"value": e}))


@pytest.fixture
def attacker_schema(admin):
    """A schema owned by the attacker (a realistic login role has one) + a fresh admin-owned
    secret table the attacker may not read."""
    for role in (ATTACKER, ROGUE_ADMIN):
        admin.execute(f"ALTER ROLE {role} NOSUPERUSER")
    admin.execute("DROP SCHEMA IF EXISTS att CASCADE")
    admin.execute(f"CREATE SCHEMA att AUTHORIZATION {ATTACKER}")
    admin.execute(f"GRANT USAGE ON SCHEMA att TO {ROGUE_ADMIN}")
    admin.execute("DROP TABLE IF EXISTS public.t_secret")
    admin.execute("CREATE TABLE public.t_secret (id int PRIMARY KEY, name text, ssn text, dx text)")
    admin.execute("INSERT INTO public.t_secret SELECT i, 'Name ' || i, 'SSN-' || (100000 + i),"
                  " 'DX' || (i % 4) FROM generate_series(1, 40) i")
    yield "att"
    for role in (ATTACKER, ROGUE_ADMIN):
        admin.execute(f"ALTER ROLE {role} NOSUPERUSER")
    admin.execute("DROP SCHEMA IF EXISTS att CASCADE")


def _attacker(connect, schema="att"):
    p = Probe(connect(ATTACKER))
    p.conn.execute(PROBE.format(schema=schema))
    return p


def _check(admin, probe, role=ATTACKER):
    assert not _is_superuser(admin, role), "the attacker became a superuser"
    others = sorted(set(probe.ran_as) - {role})
    assert not others, f"the caller's code ran as {others}"


# Entry points that read a relation the caller names, as the attacker calls them.
MEASURES = [
    "SELECT deid.k_anonymity('{rel}'::regclass, '{{a}}')",
    "SELECT * FROM deid.equivalence_classes('{rel}'::regclass, '{{a}}')",
    "SELECT * FROM deid.l_diversity('{rel}'::regclass, '{{a}}', '{{b}}')",
]


def _bait(probe, relation_sql, rel):
    probe.conn.execute(relation_sql)
    probe.ran_as.clear()           # building the bait ran the probe as the attacker itself
    return rel


def test_temp_only_view_makes_no_superuser(admin, connect, attacker_schema):
    """The smallest attack: only TEMP, a temporary view over a temporary function."""
    conn = connect(ATTACKER)
    conn.execute("""CREATE FUNCTION pg_temp.f(x int) RETURNS int LANGUAGE plpgsql AS
        $$ BEGIN EXECUTE 'ALTER ROLE deid_t_attacker SUPERUSER'; RETURN x; END $$""")
    conn.execute("CREATE TEMP TABLE t (id int PRIMARY KEY, a int)")
    conn.execute("INSERT INTO t VALUES (1, 1)")
    conn.execute("CREATE TEMP VIEW v AS SELECT id, pg_temp.f(a) AS a FROM t")
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT deid.k_anonymity('pg_temp.v'::regclass, '{a}')")
    assert e.value.diag.sqlstate == "42501"
    assert not _is_superuser(admin, ATTACKER)


ROUTES = {
    "temp_view": ("CREATE TEMP TABLE tt (id int PRIMARY KEY, a int, b text);"
                  "INSERT INTO tt SELECT i, i % 3, 'x' || (i % 2) FROM generate_series(1, 30) i;"
                  "CREATE TEMP VIEW bait AS SELECT id, att.probe(a) AS a, b FROM tt", "pg_temp.bait"),
    "view": ("CREATE TABLE att.tt (id int PRIMARY KEY, a int, b text);"
             "INSERT INTO att.tt SELECT i, i % 3, 'x' || (i % 2) FROM generate_series(1, 30) i;"
             "CREATE VIEW att.bait AS SELECT id, att.probe(a) AS a, b FROM att.tt", "att.bait"),
    "operator": ("CREATE FUNCTION att.op(int, int) RETURNS boolean LANGUAGE sql AS"
                 " $$ SELECT att.probe($1) IS NOT NULL $$;"
                 "CREATE OPERATOR att.=== (LEFTARG = int, RIGHTARG = int, FUNCTION = att.op);"
                 "CREATE TABLE att.tt (id int PRIMARY KEY, a int, b text);"
                 "INSERT INTO att.tt SELECT i, i % 3, 'x' || (i % 2) FROM generate_series(1, 30) i;"
                 "CREATE VIEW att.bait AS SELECT id, a, b FROM att.tt WHERE a OPERATOR(att.===) a",
                 "att.bait"),
    "cast": ("CREATE TYPE att.ct AS (v int);"
             "CREATE FUNCTION att.ct_text(att.ct) RETURNS text LANGUAGE sql AS"
             " $$ SELECT 'v' || att.probe(($1).v) $$;"
             "CREATE CAST (att.ct AS text) WITH FUNCTION att.ct_text(att.ct);"
             "CREATE TABLE att.bait (id int PRIMARY KEY, a att.ct, b text);"
             "INSERT INTO att.bait SELECT i, ROW(i % 3)::att.ct, 'x' || (i % 2)"
             " FROM generate_series(1, 30) i", "att.bait"),
    "domain_check": ("CREATE DOMAIN att.d AS int CHECK (att.probe_bool(VALUE));"
                     "CREATE TABLE att.bait (id int PRIMARY KEY, a att.d, b text);"
                     "INSERT INTO att.bait SELECT i, i % 3, 'x' || (i % 2)"
                     " FROM generate_series(1, 30) i", "att.bait"),
    "column_default": ("CREATE TABLE att.bait (id int PRIMARY KEY, a int DEFAULT att.probe(1),"
                       " b text DEFAULT 'x' || att.probe(2));"
                       "INSERT INTO att.bait SELECT i, i % 3, 'x' || (i % 2)"
                       " FROM generate_series(1, 30) i", "att.bait"),
    "rls_policy": ("CREATE TABLE att.bait (id int PRIMARY KEY, a int, b text);"
                   "INSERT INTO att.bait SELECT i, i % 3, 'x' || (i % 2) FROM generate_series(1, 30) i;"
                   "ALTER TABLE att.bait ENABLE ROW LEVEL SECURITY;"
                   "ALTER TABLE att.bait FORCE ROW LEVEL SECURITY;"
                   "CREATE POLICY p ON att.bait USING (att.probe_bool(a))", "att.bait"),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("measure", MEASURES, ids=["k_anonymity", "equivalence_classes",
                                                   "l_diversity"])
def test_measurements_run_caller_code_only_as_caller(admin, connect, attacker_schema, route, measure):
    probe = _attacker(connect)
    rel = _bait(probe, *ROUTES[route])
    probe.attempt(measure.format(rel=rel))
    _check(admin, probe)


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("method", ["anatomy", "generalization"])
def test_requests_run_caller_code_only_as_caller(admin, connect, attacker_schema, route, method):
    """anonymize_request on a bait relation the attacker classified through a rogue admin."""
    probe = _attacker(connect)
    rel = _bait(probe, *ROUTES[route])
    if rel.startswith("pg_temp"):      # a temporary relation is the session's own: no roles
        sql = ("SELECT * FROM deid.anonymize_request(%s, %s, k => 2, columns => '{a,b}',"
               " options => '{\"row_id\": \"id\"}')")
    else:
        probe.conn.execute(f"GRANT USAGE ON SCHEMA att TO {ROGUE_ADMIN};"
                           f"GRANT SELECT ON ALL TABLES IN SCHEMA att TO {ROGUE_ADMIN}")
        rogue = Probe(connect(ROGUE_ADMIN))
        rogue.attempt("SELECT deid.set_role(%s, 'a', 'quasi_identifier')", [rel])
        rogue.attempt("SELECT deid.set_role(%s, 'b', 'sensitive')", [rel])
        _check(admin, rogue, ROGUE_ADMIN)
        sql = ("SELECT * FROM deid.anonymize_request(%s, %s, k => 2, columns => '{a,b}',"
               " options => '{\"row_id\": \"id\"}')")
    probe.attempt(sql, [rel, method])
    _check(admin, probe)


@pytest.mark.parametrize("route", ["view", "cast", "operator"])
def test_set_role_hierarchy_check_runs_caller_code_only_as_caller(admin, connect, attacker_schema,
                                                                   route):
    """set_role(..., hierarchy => ...) checks the column's values: a rogue deid_admin (not a
    superuser) hands it a bait relation."""
    admin.execute("SELECT deid.drop_hierarchy('t_att_h') FROM deid.hierarchy WHERE name = 't_att_h'")
    admin.execute("SELECT deid.load_hierarchy('t_att_h', $h$0;*\n1;*\n2;*\nv0;*\nv1;*\nv2;*$h$)")
    probe = _attacker(connect)
    rel = _bait(probe, *ROUTES[route])
    probe.conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA att TO {ROGUE_ADMIN}")
    rogue = Probe(connect(ROGUE_ADMIN))
    rogue.attempt("SELECT deid.set_role(%s, 'a', 'quasi_identifier', hierarchy => 't_att_h')", [rel])
    _check(admin, rogue, ROGUE_ADMIN)
    admin.execute("DELETE FROM deid.column_role WHERE relation::text LIKE 'att.%'")
    admin.execute("SELECT deid.drop_hierarchy('t_att_h')")


# ------------------------------------------------------------ item 2: any role reads any table
def test_view_over_unreadable_table_gives_nothing(admin, connect, attacker_schema):
    conn = connect(ATTACKER)
    conn.execute("CREATE VIEW att.peek AS SELECT id, name AS a, ssn AS b FROM public.t_secret")
    for sql in ["SELECT * FROM deid.equivalence_classes('att.peek'::regclass, '{a,b}')",
                "SELECT deid.k_anonymity('att.peek'::regclass, '{a}')"]:
        with pytest.raises(psycopg.Error) as e:
            conn.execute(sql).fetchall()
        assert sqlstate_of(e) == "42501"
        assert "SSN-" not in str(e.value) and "Name " not in str(e.value)


def test_security_invoker_view_over_unreadable_table_gives_nothing(admin, connect, attacker_schema):
    conn = connect(ATTACKER)
    conn.execute("CREATE VIEW att.peek WITH (security_invoker = true) AS"
                 " SELECT id, name AS a, ssn AS b FROM public.t_secret")
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM deid.equivalence_classes('att.peek'::regclass, '{a,b}')").fetchall()
    assert sqlstate_of(e) == "42501"
    assert "SSN-" not in str(e.value)


def test_row_level_security_applies_as_defined(admin, connect, attacker_schema):
    """The attacker may read the table, but its policy shows it only some rows: every measure
    sees exactly those rows."""
    admin.execute("ALTER TABLE public.t_secret ENABLE ROW LEVEL SECURITY")
    admin.execute("CREATE POLICY mine ON public.t_secret USING (id <= 12)")
    admin.execute(f"GRANT SELECT ON public.t_secret TO {ATTACKER}")
    conn = connect(ATTACKER)
    classes = conn.execute("SELECT size, qi_values FROM deid.equivalence_classes("
                           "'public.t_secret'::regclass, '{dx}')").fetchall()
    assert sum(size for size, _ in classes) == 12
    expected = conn.execute("SELECT min(c) FROM (SELECT count(*) c FROM public.t_secret"
                            " GROUP BY dx) s").fetchone()[0]
    assert conn.execute("SELECT deid.k_anonymity('public.t_secret'::regclass, '{dx}')"
                        ).fetchone()[0] == expected


def test_column_privilege_only_grant_for_requests(admin, connect, attacker_schema):
    """SELECT on some columns: a request may release exactly those."""
    admin.execute("SELECT deid.set_role('public.t_secret', 'dx', 'quasi_identifier')")
    admin.execute("SELECT deid.set_role('public.t_secret', 'name', 'sensitive')")
    admin.execute("SELECT deid.set_role('public.t_secret', 'ssn', 'sensitive')")
    admin.execute(f"GRANT SELECT (id, dx, name) ON public.t_secret TO {ATTACKER}")
    conn = connect(ATTACKER)
    ok = conn.execute("SELECT verified, rows FROM deid.anonymize_request('public.t_secret',"
                      " 'anatomy', k => 2, columns => '{dx,name}', release => 't_colgrant')").fetchone()
    assert ok == (True, 40)
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM deid.anonymize_request('public.t_secret', 'anatomy', k => 2,"
                     " columns => '{dx,ssn}', release => 't_colgrant2')").fetchall()
    assert sqlstate_of(e) == "42501"
    assert "SSN-" not in str(e.value)
    admin.execute("SELECT deid.drop_release('t_colgrant')")
    admin.execute("DELETE FROM deid.column_role WHERE relation = 'public.t_secret'::regclass")


# ------------------------------------------- the read's parallel parts (datapath / readpass)
PARALLEL_PROBE = """
CREATE FUNCTION att.probe_par(x int) RETURNS int LANGUAGE plpgsql PARALLEL SAFE AS $$
BEGIN
    IF x = -1 THEN      -- (a worker may not change roles or settings: it can only report)
        RAISE NOTICE 'deid-probe ran as %', current_user;
    END IF;
    RETURN x;
END $$;
"""
# a plain table large enough (fillfactor 10, >= readpass.PARALLEL_MIN_PAGES pages) that deid
# reads it as ctid ranges which PostgreSQL runs in parallel workers; one row (a = -1) runs the
# probe in whichever process reads its page
PARALLEL_ROUTES = {
    "rls_policy": ("CREATE TABLE att.big (id int PRIMARY KEY, a int, b text) WITH (fillfactor = 10);"
                   "INSERT INTO att.big SELECT i, CASE WHEN i = 20000 THEN -1 ELSE i % 3 END,"
                   " 'x' || (i % 2) FROM generate_series(1, 30000) i;"
                   "ALTER TABLE att.big ENABLE ROW LEVEL SECURITY;"
                   "ALTER TABLE att.big FORCE ROW LEVEL SECURITY;"
                   "CREATE POLICY p ON att.big USING (att.probe_par(a) IS NOT NULL)"),
    "cast": ("CREATE TYPE att.pt AS (v int);"
             "CREATE FUNCTION att.pt_text(att.pt) RETURNS text LANGUAGE sql PARALLEL SAFE AS"
             " $$ SELECT 'v' || att.probe_par(($1).v) $$;"
             "CREATE CAST (att.pt AS text) WITH FUNCTION att.pt_text(att.pt);"
             "CREATE TABLE att.big (id int PRIMARY KEY, a att.pt, b text) WITH (fillfactor = 10);"
             "INSERT INTO att.big SELECT i, ROW(CASE WHEN i = 20000 THEN -1 ELSE i % 3 END)::att.pt,"
             " 'x' || (i % 2) FROM generate_series(1, 30000) i"),
}


@pytest.mark.parametrize("route", sorted(PARALLEL_ROUTES))
@pytest.mark.parametrize("entry", ["l_diversity", "anatomy"])
def test_parallel_read_runs_caller_code_only_as_caller(admin, connect, attacker_schema, route,
                                                       entry):
    """The read of a large plain table runs as parallel parts: the caller's PARALLEL SAFE code
    (a policy, a cast) then runs in parallel workers. There it must run as the caller too --
    and, as the caller, a worker cannot even change roles or settings. The probe's notice
    comes back from the worker with its context; the call succeeds."""
    probe = _attacker(connect)
    probe.conn.execute(PARALLEL_PROBE)
    probe.conn.execute(PARALLEL_ROUTES[route])
    probe.conn.execute("ANALYZE att.big")
    # the attacker's own session setting: every part goes to a worker (none to the leader)
    probe.conn.execute("SET parallel_leader_participation = off")
    contexts = []
    probe.conn.add_notice_handler(lambda d: contexts.append(d.context or ""))
    if entry == "l_diversity":
        state = probe.attempt("SELECT * FROM deid.l_diversity('att.big'::regclass, '{a}', '{b}')")
    else:
        rogue_admin = sql.Identifier(ROGUE_ADMIN)
        probe.conn.execute(sql.SQL("GRANT USAGE ON SCHEMA att TO {}").format(rogue_admin))
        probe.conn.execute(sql.SQL("GRANT SELECT ON att.big TO {}").format(rogue_admin))
        rogue = Probe(connect(ROGUE_ADMIN))
        rogue.attempt("SELECT deid.set_role('att.big', 'a', 'quasi_identifier')")
        rogue.attempt("SELECT deid.set_role('att.big', 'b', 'sensitive')")
        _check(admin, rogue, ROGUE_ADMIN)
        state = probe.attempt("SELECT * FROM deid.anonymize_request('att.big', 'anatomy', k => 2,"
                              " columns => '{a,b}', options => '{\"row_id\": \"id\"}')")
    _check(admin, probe)
    assert probe.ran_as, "the probe did not run: the attack was not exercised"
    assert state is None, state
    # the read did run in parts handed to parallel workers
    assert any("parallel worker" in c for c in contexts), contexts
