"""deid never becomes a way around PostgreSQL's privileges: real login roles."""
import psycopg
import pytest

from dbfixtures import sqlstate_of

MEASURES = [
    "SELECT deid.k_anonymity('registry.patients', '{sex,race}')",
    "SELECT * FROM deid.equivalence_classes('registry.patients', '{sex,race}')",
    "SELECT * FROM deid.l_diversity('registry.patients', '{sex}', '{treatment}')",
    "SELECT deid._k_anonymity('registry.patients'::regclass, '{sex}')",
    "SELECT * FROM deid._column_roles('registry.patients'::regclass, 'postgres')",
    "SELECT deid._datapath_probe('registry.patients'::regclass, '{sex}')",
]


@pytest.mark.parametrize("sql", MEASURES)
@pytest.mark.parametrize("role", ["deid_t_reader", "deid_t_researcher"])
def test_no_raw_facts_without_select(connect, role, sql):
    conn = connect(role)
    with pytest.raises(psycopg.Error) as e:
        conn.execute(sql).fetchall()
    assert sqlstate_of(e) == "42501"


def test_analyst_with_select_may_measure(connect):
    conn = connect("deid_t_analyst")
    assert conn.execute(MEASURES[0]).fetchone()[0] >= 1


def test_column_privileges_are_respected(admin, connect):
    admin.execute("DROP TABLE IF EXISTS public.t_colpriv")
    admin.execute("CREATE TABLE public.t_colpriv (id int primary key, a int, secret int)")
    admin.execute("INSERT INTO t_colpriv SELECT i, i % 3, i FROM generate_series(1, 30) i")
    admin.execute("GRANT SELECT (id, a) ON t_colpriv TO deid_t_researcher")
    conn = connect("deid_t_researcher")
    assert conn.execute("SELECT deid.k_anonymity('public.t_colpriv', '{a}')").fetchone()[0] == 10
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT deid.k_anonymity('public.t_colpriv', '{secret}')")
    assert sqlstate_of(e) == "42501"


def test_row_level_security_is_not_bypassed(admin, connect):
    """Reads run as the caller: a table with row-level security and no policy for the caller
    shows it no row (such tables are not refused: RLS applies as defined)."""
    admin.execute("DROP TABLE IF EXISTS public.t_rls")
    admin.execute("CREATE TABLE public.t_rls (id int primary key, a int)")
    admin.execute("INSERT INTO t_rls SELECT i, i % 2 FROM generate_series(1, 10) i")
    admin.execute("ALTER TABLE t_rls ENABLE ROW LEVEL SECURITY")
    admin.execute("GRANT SELECT ON t_rls TO deid_t_analyst")
    assert connect("deid_t_analyst").execute(
        "SELECT deid.k_anonymity('public.t_rls', '{a}')").fetchone()[0] is None


@pytest.mark.parametrize("table", ["deid.rid_set", "deid.rid_sets", "deid.equivalence_class", "deid.release",
                                   "deid.policy", "registry.patients"])
def test_reader_cannot_read_catalog_or_source(connect, table):
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_reader").execute(f"SELECT * FROM {table}")
    assert sqlstate_of(e) == "42501"


def test_admin_may_read_audit_trail(connect):
    conn = connect("deid_t_admin")
    conn.execute("SELECT * FROM deid.rid_set LIMIT 1")
    conn.execute("SELECT * FROM deid.rid_sets LIMIT 1")
    conn.execute("SELECT * FROM deid.equivalence_class LIMIT 1")


@pytest.mark.parametrize("sql", [
    "SELECT deid.set_role('registry.patients', 'sex', 'sensitive')",
    "SELECT deid.load_hierarchy('t_x', 'a;*')",
    "SELECT deid.interval_hierarchy('t_y', 0, 10, '{5}')",
])
def test_only_admins_classify(connect, sql):
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_analyst").execute(sql)
    assert sqlstate_of(e) == "42501"


def test_only_owner_or_admin_sets_policy(connect):
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_analyst").execute(
            "SELECT deid.allow_requests('deid_t_analyst', 'registry.patients', 5)")
    assert sqlstate_of(e) == "42501"


def test_policy_arguments(admin):
    with pytest.raises(psycopg.Error) as e:
        admin.execute("SELECT deid.allow_requests('deid_t_researcher', 'registry.patients', 0)")
    assert sqlstate_of(e) == "22023"
    with pytest.raises(psycopg.Error) as e:
        admin.execute("SELECT deid.allow_requests('no_such_role', 'registry.patients', 5)")
    assert sqlstate_of(e) == "42704"


def test_caller_spoofing_is_refused(connect):
    """Passing another role as the hidden caller argument gains nothing."""
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_reader").execute(
            "SELECT deid._store_role('registry.patients'::regclass, 'sex', 'sensitive', NULL, NULL, 'postgres')")
    assert sqlstate_of(e) == "42501"
