"""Golden tests of the visible surface (PostgreSQL Anonymizer's pg_regress habit): each
tests/golden/NAME.sql runs through psql; its output must equal tests/golden/expected/NAME.out,
so a change to a help text, an error message or a result shape shows up as a diff in review.
DEID_GOLDEN_UPDATE=1 writes the expected files instead (then review the diff)."""
import difflib
import os
import pathlib
import subprocess

import pytest

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.sql"))


@pytest.mark.parametrize("name", CASES)
def test_golden(admin, url, name):
    out = subprocess.run(["psql", "-X", "-a", "-q", "-v", "ON_ERROR_STOP=0", "-f",
                          str(GOLDEN / f"{name}.sql"), url],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300).stdout
    out = out.replace(str(GOLDEN / f"{name}.sql"), f"{name}.sql")
    # PostgreSQL's own source locations change between minor versions
    out = "".join(line for line in out.splitlines(True) if not line.startswith("LOCATION:  "))
    expected_path = GOLDEN / "expected" / f"{name}.out"
    if os.environ.get("DEID_GOLDEN_UPDATE"):
        expected_path.write_text(out)
    expected = expected_path.read_text()
    if out != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), out.splitlines(True),
                                            "expected", "actual"))
        pytest.fail(f"{name}: the visible surface changed:\n{diff[:6000]}")
