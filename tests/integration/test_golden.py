"""Golden tests of the visible surface (PostgreSQL Anonymizer's pg_regress habit): each
tests/golden/NAME.sql runs through psql; its output must equal tests/golden/expected/NAME.out,
so a change to a help text, an error message or a result shape shows up as a diff in review.
DEID_GOLDEN_UPDATE=1 writes the expected files instead (then review the diff).
run_psql and assert_golden are shared with tests/integration/test_docs.py."""
import difflib
import os
import pathlib
import re
import subprocess

import pytest

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.sql"))
# psql names the script and its line in an error ("psql:/path/x.sql:12: ERROR: ...").
_PSQL_LINE = re.compile(r"^psql:[^:\n]*:\d+: ", re.M)


def run_psql(url, script, label, keep_lines=True, timeout=300):
    """The output of psql -a -f script (stdout and stderr in order), the script's path shown
    as `label`, without PostgreSQL's source locations (which change between minor versions).
    keep_lines=False also drops psql's "psql:<script>:<line>: " prefix of errors, for a script
    composed of parts whose line numbers move with unrelated edits."""
    out = subprocess.run(["psql", "-X", "-a", "-q", "-v", "ON_ERROR_STOP=0", "-f", str(script),
                          url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=timeout).stdout
    out = out.replace(str(script), label)
    if not keep_lines:
        out = _PSQL_LINE.sub("", out)
    return "".join(line for line in out.splitlines(True) if not line.startswith("LOCATION:  "))


def assert_golden(expected_path, out, what):
    """out must equal the golden file (DEID_GOLDEN_UPDATE=1 writes it instead)."""
    if os.environ.get("DEID_GOLDEN_UPDATE"):
        expected_path.parent.mkdir(parents=True, exist_ok=True)
        expected_path.write_text(out)
    expected = expected_path.read_text()
    if out != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), out.splitlines(True),
                                            "expected", "actual"))
        pytest.fail(f"{what} changed:\n{diff[:6000]}")


@pytest.mark.parametrize("name", CASES)
def test_golden(admin, url, name):
    out = run_psql(url, GOLDEN / f"{name}.sql", f"{name}.sql")
    assert_golden(GOLDEN / "expected" / f"{name}.out", out, f"{name}: the visible surface")
