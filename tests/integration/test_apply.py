"""`deid release` and `deid apply PLAN.toml` (client/) run as real processes against
the test cluster, as a real deid_admin login role: phases on stderr, the result row, refusals
with their SQLSTATE, and a release plan that is idempotent and all-or-nothing."""
import json
import pathlib
import re
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "client"))
from deid_cli import plan_steps  # noqa: E402

from test_cli import ROOT, deid  # noqa: E402

ADMIN = "deid_t_admin"
OWNER = "postgres"    # a plan with a policy runs as the source's owner (allow_requests)
HIERARCHY = """
[[hierarchy]]
name = "{prefix}_age"
low = 0
high = 120
widths = [5, 10, 20]

[[hierarchy]]
name = "{prefix}_sex"
rows = \"\"\"
F;*
M;*
\"\"\"
"""
ROLES = """
[[role]]
relation = "registry.patients"
[role.columns]
name = "identifier"
age = {{ role = "quasi_identifier", hierarchy = "{prefix}_age" }}
sex = {{ role = "quasi_identifier", hierarchy = "{prefix}_sex" }}
zip = "quasi_identifier"
diagnosis = "sensitive"

[[policy]]
role = "deid_t_researcher"
relation = "registry.patients"
min_k = 10
min_l = 2
"""
REQUEST = """
[[request]]
name = "{name}"
source = "registry.patients"
method = "anatomy"
k = {k}
l = 2
columns = ["age", "sex", "zip", "diagnosis"]
options = {{ seed = 1 }}
"""


def plan(tmp_path, prefix, requests):
    text = (HIERARCHY + ROLES).format(prefix=prefix) + "".join(
        REQUEST.format(name=n, k=k) for n, k in requests)
    path = tmp_path / f"{prefix}.toml"
    path.write_text(text)
    return str(path)


def committed(admin, prefix):
    return [r[0] for r in admin.execute("SELECT name FROM deid.release WHERE name LIKE %s"
                                        " AND status = 'committed' ORDER BY name",
                                        [prefix + "%"]).fetchall()]


@pytest.fixture
def cleanup(admin):
    names = []
    yield names
    for n in names:
        if admin.execute("SELECT 1 FROM deid.release WHERE name = %s AND status = 'committed'",
                         [n]).fetchone():
            admin.execute("SELECT deid.drop_release(%s)", [n])


def test_the_example_plan_parses():
    steps = plan_steps.steps(plan_steps.load(ROOT / "docs/examples/release-plan.toml"))
    assert [s[0] for s in steps] == ["hierarchy"] * 2 + ["role"] * 5 + ["policy"] + ["request"] * 2


def test_apply_runs_a_plan_and_again_is_a_no_op(url, admin, tmp_path, cleanup):
    cleanup += ["t_plan_a", "t_plan_b"]
    # the same grouping twice (another k would regroup the rows: refused by the composition rule)
    path = plan(tmp_path, "t_plan", [("t_plan_a", 10), ("t_plan_b", 10)])
    r = deid(url, OWNER, "apply", path)
    assert r.returncode == 0, r.stderr
    assert committed(admin, "t_plan") == ["t_plan_a", "t_plan_b"]
    assert "read" in r.stderr and "done" not in r.stderr      # phases shown as lines of their own
    assert " | released: " in r.stdout and "created" in r.stdout
    assert admin.execute("SELECT hierarchy FROM deid.column_role WHERE column_name = 'age'"
                         " AND relation = 'registry.patients'::regclass").fetchone() == ("t_plan_age",)
    ids = admin.execute("SELECT array_agg(release_id ORDER BY release_id) FROM deid.release"
                        " WHERE name LIKE 't_plan%'").fetchone()
    again = deid(url, OWNER, "apply", path, "--json")
    assert again.returncode == 0, again.stderr
    results = [s["result"] for s in json.loads(again.stdout)["steps"]]
    assert results == ["unchanged"] * 8 + ["skipped (committed, same parameters)"] * 2
    assert admin.execute("SELECT array_agg(release_id ORDER BY release_id) FROM deid.release"
                         " WHERE name LIKE 't_plan%'").fetchone() == ids


def test_a_changed_hierarchy_is_refused(url, admin, tmp_path, cleanup):
    cleanup += ["t_hchg_a"]
    assert deid(url, OWNER, "apply", plan(tmp_path, "t_hchg", [("t_hchg_a", 10)])).returncode == 0
    changed = tmp_path / "changed.toml"
    changed.write_text(pathlib.Path(tmp_path / "t_hchg.toml").read_text()
                       .replace("widths = [5, 10, 20]", "widths = [10, 20]"))
    r = deid(url, OWNER, "apply", str(changed))
    assert r.returncode == 1 and "(42710)" in r.stderr and "HINT:" in r.stderr


def test_a_failing_request_leaves_nothing_of_the_plan(url, admin, tmp_path, cleanup):
    cleanup += ["t_fail_a", "t_fail_b"]
    admin.execute("SELECT deid.clear_roles('registry.patients')")
    r = deid(url, OWNER, "apply", plan(tmp_path, "t_fail", [("t_fail_a", 10), ("t_fail_b", 100000)]))
    assert r.returncode == 1
    assert "ERROR:" in r.stderr and "HINT:" in r.stderr
    lines = r.stdout.splitlines()
    assert any("t_fail_b" in x and "FAILED" in x for x in lines)
    assert any("t_fail_a" in x and "(rolled back)" in x for x in lines)
    assert committed(admin, "t_fail") == []
    assert not admin.execute("SELECT 1 FROM deid.release WHERE name LIKE 't_fail%'").fetchone()
    assert not admin.execute("SELECT 1 FROM deid.hierarchy WHERE name LIKE 't_fail%'").fetchone()
    assert not admin.execute("SELECT 1 FROM deid.column_role"
                             " WHERE relation = 'registry.patients'::regclass").fetchone()
    j = deid(url, OWNER, "apply", plan(tmp_path, "t_fail", [("t_fail_a", 10), ("t_fail_b", 100000)]),
             "--json")
    body = json.loads(j.stdout)
    assert j.returncode == 1 and body["applied"] is False and body["error"]["sqlstate"]


def test_release_shows_phases_and_the_result(url, admin, cleanup):
    cleanup += ["t_cli_release"]
    for col, role in [("age", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("zip", "quasi_identifier"), ("diagnosis", "sensitive")]:
        admin.execute("SELECT deid.set_role('registry.patients', %s, %s)", [col, role])
    r = deid(url, ADMIN, "release", "registry.patients", "--method", "anatomy", "--k", "10",
             "--l", "2", "--columns", "age,sex,zip,diagnosis", "--options", '{"seed": 1}',
             "--name", "t_cli_release")
    assert r.returncode == 0, r.stderr
    phases = [x.split()[0] for x in r.stderr.splitlines()[1:]]
    assert "read" in phases and len(phases) >= 3
    table = dict((c.strip() for c in x.split(" | ", 1)) for x in r.stdout.splitlines()[2:-1])
    assert table["rows"] == "3000" and table["verified"] == "True"
    # a progress bar, fed by the notices: the write's fraction done, then full at the digest
    bar = re.compile(r"^  (read|method|write|verify|publish|digest) +[0-9.]+ (s|%)  \[#*-*\] +\d+%$")
    lines = r.stderr.splitlines()[1:]
    assert all(bar.match(x) for x in lines), lines
    assert any(re.match(r"^  write +[1-9]0 %", x) for x in lines), lines
    assert lines[-1].startswith("  digest") and lines[-1].endswith("[####################] 100%")
    refused = deid(url, ADMIN, "release", "registry.patients", "--method", "anatomy", "--k", "10",
                   "--l", "2", "--columns", "age,sex,zip,diagnosis", "--name", "t_cli_release")
    assert refused.returncode == 1
    assert "ERROR:" in refused.stderr and "already exists (42P07)" in refused.stderr
    assert "HINT:" in refused.stderr


def test_release_redraws_its_bar_on_a_terminal(url, admin, cleanup):
    """On a terminal (a real pseudo-terminal as standard error) a fraction redraws the bar in
    place; a finished phase stays as a line."""
    import os
    import pty
    import subprocess
    cleanup += ["t_cli_tty"]
    for col, role in [("age", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("zip", "quasi_identifier"), ("diagnosis", "sensitive")]:
        admin.execute("SELECT deid.set_role('registry.patients', %s, %s)", [col, role])
    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "client"))
    p = subprocess.run([sys.executable, "-m", "deid_cli", "release", "registry.patients", "--method",
                        "anatomy", "--k", "10", "--l", "2", "--columns", "age,sex,zip,diagnosis",
                        "--name", "t_cli_tty", "--dbname", url, "-U", ADMIN],
                       stdout=subprocess.PIPE, stderr=follower, env=env, timeout=120)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:                       # the terminal's other end is closed: all read
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert p.returncode == 0, shown
    text = shown.decode()
    assert re.search(r"\r  write +[1-9]0 %  \[#*-*\] +\d+%\x1b\[K\r", text), text
    assert "\r  verify" in text and "100%\x1b[K" in text


def test_help_shows_an_example():
    for cmd in ("release", "apply"):
        r = deid("", ADMIN, cmd, "--help")
        assert r.returncode == 0 and "example" in r.stdout and f"deid {cmd} " in r.stdout
