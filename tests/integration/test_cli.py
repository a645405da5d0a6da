"""The `deid` command (client/) run as a real process against the test cluster, as
real login roles: `deid list` and `deid verify RELEASE`, tables and --json, exit codes."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
from psycopg import sql

ROOT = pathlib.Path(__file__).resolve().parents[2]
RELEASE = "t_cli"


def deid(url, role, *argv):
    """Run `python -m deid_cli` (the installed console script's module) as `role`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "client"))
    for k in ("PGUSER", "PGDATABASE", "PGSERVICE"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-m", "deid_cli", *argv, "--dbname", url, "-U", role],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def released(admin):
    for col, role in [("name", "identifier"), ("age", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("zip", "quasi_identifier"), ("diagnosis", "sensitive")]:
        admin.execute("SELECT deid.set_role('registry.patients', %s, %s)", [col, role])
    admin.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 10,"
                  " l => 2, columns => '{age,sex,zip,diagnosis}', options => '{\"seed\": 1}',"
                  " release => %s)", [RELEASE])
    yield admin
    admin.execute("SELECT deid.drop_release(%s)", [RELEASE])


def test_help_shows_an_example():
    for argv in ([], ["list"], ["verify"]):
        r = subprocess.run([sys.executable, "-m", "deid_cli", *argv, "--help"], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "client")))
        assert r.returncode == 0 and "example" in r.stdout and "deid " in r.stdout


def test_list_shows_the_release(url, released):
    r = deid(url, "deid_t_admin", "list")
    assert r.returncode == 0, r.stderr
    header, rule, *rows = r.stdout.splitlines()
    assert header.split(" | ")[0].strip() == "name" and "requested_by" in header
    mine = [line.split(" | ") for line in rows if line.startswith(RELEASE + " ")]
    assert len(mine) == 1
    name, method, k, status, n, by, finished = (c.strip() for c in mine[0])
    assert (method, k, status, n) == ("anatomy", "10", "committed", "3000") and finished


def test_list_json_parses(url, released):
    r = deid(url, "deid_t_admin", "list", "--json")
    assert r.returncode == 0, r.stderr
    rows = [x for x in json.loads(r.stdout) if x["name"] == RELEASE]
    assert rows == [dict(rows[0], method="anatomy", k=10, status="committed", rows=3000)]
    assert rows[0]["requested_by"] == released.execute("SELECT current_user").fetchone()[0]


def test_verify_a_good_release(url, released):
    r = deid(url, "deid_t_admin", "verify", RELEASE)
    assert r.returncode == 0, r.stderr
    assert "verified | True" in r.stdout.replace("  ", "")
    j = deid(url, "deid_t_admin", "verify", RELEASE, "--json")
    assert j.returncode == 0 and json.loads(j.stdout)["verified"] is True


def test_verify_a_tampered_release_fails(url, released):
    qit = sql.Identifier("deid_release", RELEASE + "_qit")
    (moved,) = released.execute(sql.SQL("UPDATE {} SET age = age + 1 WHERE ctid ="
                                         " (SELECT min(ctid) FROM {}) RETURNING ctid")
                                .format(qit, qit)).fetchone()
    try:
        r = deid(url, "deid_t_admin", "verify", RELEASE)
        j = deid(url, "deid_t_admin", "verify", RELEASE, "--json")
    finally:
        released.execute(sql.SQL("UPDATE {} SET age = age - 1 WHERE ctid = %s").format(qit),
                         [moved])
    assert r.returncode != 0 and "(DE002)" in r.stderr and "HINT:" in r.stderr
    assert j.returncode != 0 and json.loads(j.stdout)["error"]["sqlstate"] == "DE002"


@pytest.mark.parametrize("argv", [["list"], ["verify", RELEASE]])
def test_a_role_without_deid_admin_is_refused(url, released, argv):
    r = deid(url, "deid_t_attacker", *argv)
    assert r.returncode != 0 and r.stdout == ""
    assert "(42501)" in r.stderr and "GRANT deid_admin" in r.stderr
    assert RELEASE not in r.stderr


@pytest.mark.skipif(pathlib.Path(sys.prefix) != ROOT / ".venv", reason="not the project's venv")
def test_make_venv_installs_the_console_script():
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "deid"), "--version"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout.strip() == "deid 1.1.0"


def test_inside_the_checkout_it_finds_the_private_cluster(url, released):
    """docs/cli.md's first example: no PG* setting, run from a folder of the checkout."""
    own = (ROOT / ".pgdata" / "run").resolve()
    if str(own).replace("/", "%2F") not in url:
        pytest.skip("the test database is not in this checkout's private cluster")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["PYTHONPATH"] = str(ROOT / "client")
    r = subprocess.run([sys.executable, "-m", "deid_cli", "list", "--json", "--dbname", url.rsplit("/", 1)[1]],
                       capture_output=True, text=True, env=env, cwd=ROOT / "docs", timeout=120)
    assert r.returncode == 0, r.stderr
    assert RELEASE in [x["name"] for x in json.loads(r.stdout)]
