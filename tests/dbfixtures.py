"""Database fixtures of the integration and security suites: psycopg against the private
cluster (make test sets DEID_TEST_URL to a fresh database). A real server, real PL/Python,
real login roles."""
import os
import pathlib
import subprocess

import psycopg
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Login roles used by the security tests (cluster-wide, created once).
LOGIN_ROLES = {
    "deid_t_admin": "GRANT deid_admin TO deid_t_admin",
    "deid_t_reader": "GRANT deid_reader TO deid_t_reader",
    "deid_t_researcher": None,     # no SELECT on the source; gets a policy
    "deid_t_analyst": None,        # SELECT on the source
    "deid_t_attacker": None,       # nothing but the defaults (CONNECT, TEMP)
    "deid_t_rogue_admin": "GRANT deid_admin TO deid_t_rogue_admin",   # an admin, not a superuser
}


def _url():
    url = os.environ.get("DEID_TEST_URL")
    if not url:
        url = subprocess.check_output(["sh", str(ROOT / "scripts" / "cluster.sh"), "url"],
                                      text=True).strip().rsplit("/", 1)[0] + "/deid_test"
    return url


@pytest.fixture(scope="session")
def url():
    return _url()


@pytest.fixture(scope="session")
def admin(url):
    """Superuser connection on a database with a freshly created extension and sample."""
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("SET deid.drop_with_releases = on")     # releases of an earlier run go too
    conn.execute("DROP EXTENSION IF EXISTS deid CASCADE")
    conn.execute("RESET deid.drop_with_releases")
    conn.execute("DROP SCHEMA IF EXISTS registry CASCADE")
    conn.execute("CREATE EXTENSION deid CASCADE")
    conn.execute((ROOT / "scripts" / "sample_patients.sql").read_text())
    conn.execute("SELECT registry.generate_patients(3000, 0.25)")
    for role, grant in LOGIN_ROLES.items():
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
            conn.execute(f'CREATE ROLE "{role}" LOGIN')
        if grant:
            conn.execute(grant)
        # a failed escalation test on an old build must not leave a superuser behind
        conn.execute(f'ALTER ROLE "{role}" NOSUPERUSER NOCREATEROLE NOCREATEDB NOBYPASSRLS')
    conn.execute("GRANT USAGE ON SCHEMA registry TO PUBLIC")
    conn.execute("GRANT SELECT ON registry.patients TO deid_t_analyst, deid_t_admin")
    yield conn
    conn.close()


@pytest.fixture
def connect(url, admin):
    """connect(role) -> autocommit connection logged in as that role."""
    opened = []

    def _connect(role):
        c = psycopg.connect(url, user=role, autocommit=True)
        opened.append(c)
        return c
    yield _connect
    for c in opened:
        c.close()


def sqlstate_of(excinfo):
    return excinfo.value.diag.sqlstate


def hint_of(excinfo):
    return excinfo.value.diag.message_hint


def server_python_dir(conn):
    """The directory of the Python package that the installed deid version loads (the build
    that share/deid/python-<extversion>/current points at), for tests that patch the server's
    modules in a DO block."""
    home = conn.execute(
        "SELECT c.setting || '/deid/python-' || e.extversion FROM pg_config c, pg_extension e"
        " WHERE c.name = 'SHAREDIR' AND e.extname = 'deid'").fetchone()[0]
    return os.path.join(home, "builds", os.path.basename(os.readlink(os.path.join(home, "current"))))


def _server_suite(request):
    """The suites that share the session's database (tests/upgrade makes databases of its own)."""
    return request.node.path.parent.name in ("integration", "security")


RESET = ("INSERT INTO deid.composition_reset (after_release)"
         " SELECT coalesce(max(release_id), 0) FROM deid.release")


@pytest.fixture(scope="module", autouse=True)
def own_history(request):
    """Each test file of the server suites is a study of its own, and so is each test: the
    releases of earlier files and tests stay, but no longer bear on later requests through
    the composition rule (a superuser's reset, deid.composition_reset). Within a test,
    releases compose as they would for a user."""
    if _server_suite(request):
        try:
            request.getfixturevalue("admin").execute(RESET)
        except psycopg.OperationalError:     # the durability test's crash took it down
            pass


@pytest.fixture(autouse=True)
def own_test_history(request):
    """See own_history: once a test is over, its releases (and earlier ones) are forgotten
    (in the cluster suite too, for the tests that use the single-node database)."""
    yield
    if _server_suite(request) or "admin" in request.fixturenames:
        admin = request.getfixturevalue("admin")
        try:
            admin.execute(RESET)
        except psycopg.OperationalError:     # the durability test's crash took it down
            pass
