"""The sharded warehouse of the cluster tests: a coordinator and 2 nodes, each a private
PostgreSQL cluster of its own (scripts/shard-cluster.sh: own port, own socket, so that a node
can be stopped or killed with kill -9 on its own). The session starts them (initdb on first
use), makes a fresh database on each with deid and plproxy, the PL/Proxy cluster deid_shards on
the coordinator, the sharded sample and the same login roles on every member, and stops them at
the end. Ports: DEID_SHARD_PORT (the coordinator; nodes follow), data under DEID_SHARD_DIR."""
import os
import pathlib
import subprocess
import time

import psycopg
import pytest
from psycopg import sql
from dbfixtures import RESET     # the composition rule's history reset (a superuser's)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "shard-cluster.sh"
DB = "deid_cluster_test"
NODES = ["node0", "node1"]
MEMBERS = ["coord"] + NODES
ROLES = {
    "deid_t_admin": "GRANT deid_admin TO deid_t_admin",
    "deid_t_reader": "GRANT deid_reader TO deid_t_reader",
    "deid_t_researcher": None,     # a policy, no SELECT
    "deid_t_analyst": None,        # SELECT on the sources
    "deid_t_attacker": None,       # nothing but the defaults
}
SOURCES = ["registry.patients", "registry.patients_survival", "registry.diagnoses"]


def shard(*args):
    env = dict(os.environ, DEID_SHARD_NODES=str(len(NODES)))
    return subprocess.run(["sh", str(SCRIPT), *args], env=env, check=True, text=True,
                          capture_output=True).stdout.strip()


def member_url(who, db=DB):
    return shard("url", who, db)


def wait_ready(who, timeout=60):
    """Until the member accepts connections (after a start or a crash's recovery)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(member_url(who, "postgres"), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Warehouse:
    def __init__(self):
        self.conns = []

    def connect(self, who, role=None):
        c = psycopg.connect(member_url(who), user=role, autocommit=True)
        self.conns.append(c)
        return c

    def on_all(self, statement, params=None, members=MEMBERS):
        for m in members:
            with psycopg.connect(member_url(m), autocommit=True) as c:
                c.execute(statement, params)

    def start(self):
        shard("start")
        for m in MEMBERS:
            wait_ready(m)

    def close(self):
        for c in self.conns:
            c.close()
        self.conns = []


@pytest.fixture(scope="session")
def warehouse():
    w = Warehouse()
    w.start()
    shard("setup", DB)
    shard("sample", DB, "3000")
    for role, grant in ROLES.items():
        for m in MEMBERS:
            with psycopg.connect(member_url(m, "postgres"), autocommit=True) as c:
                if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                    c.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
                c.execute(sql.SQL("ALTER ROLE {} NOSUPERUSER NOCREATEROLE NOCREATEDB NOBYPASSRLS")
                          .format(sql.Identifier(role)))
                if grant:
                    c.execute(grant)
    w.on_all("GRANT USAGE ON SCHEMA registry TO PUBLIC")
    w.on_all("GRANT SELECT ON registry.patients, registry.patients_survival, registry.diagnoses"
             " TO deid_t_analyst")
    coord = w.connect("coord")
    for s in SOURCES:
        coord.execute("SELECT deid.register_distributed_source(%s, 'deid_shards', 'patient_id')", [s])
    yield w
    w.close()
    shard("stop")


@pytest.fixture
def wh(warehouse):
    yield warehouse
    warehouse.close()


def orphan_runs():
    """{node: [run, ...]} of the pending parts on every node whose run the coordinator has not
    logged (a logged run's parts may stay marked pending until first read: the log decides)."""
    with psycopg.connect(member_url("coord"), autocommit=True) as c:
        logged = {r for r, in c.execute("SELECT run FROM deid.distributed_release").fetchall()}
    out = {}
    for m in NODES:
        with psycopg.connect(member_url(m), autocommit=True) as c:
            out[m] = [r for r, in c.execute(
                "SELECT run FROM deid.distributed_part WHERE status = 'pending'").fetchall()
                if r not in logged]
    return out


@pytest.fixture(autouse=True)
def own_cluster_history(request):
    """Each test is a study of its own, as in the single-node suites (tests/dbfixtures.py,
    own_test_history): once it is over, the releases it made on the coordinator and the nodes no
    longer bear on later tests' requests through the composition rule (a superuser's reset)."""
    yield
    if "warehouse" not in request.fixturenames:
        return
    warehouse = request.getfixturevalue("warehouse")
    for m in MEMBERS:
        try:
            warehouse.on_all(RESET, members=[m])
        except psycopg.OperationalError:      # a test stopped or killed this member
            pass
