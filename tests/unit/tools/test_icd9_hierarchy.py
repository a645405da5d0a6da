"""bench/disassociation/icd9_hierarchy.py: the ICD-9 hierarchy rows (chapters from the public ranges) load as a
deid member hierarchy, and 003's policies built from it are disjoint and cover what they should."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "disassociation"))
import icd9_hierarchy as icd9  # noqa: E402

from deid.catalog.hierarchies import parse_member_rows  # noqa: E402

CODES = ["001.1", "139.0", "250.00", "250.01", "401.9", "403.90", "459.9", "V45.81", "E880.9",
         "999.9", "800.0"]


@pytest.mark.parametrize("code,want", [
    ("001.1", ("001", "S001-009", "C001-139")), ("139.0", ("139", "S130-139", "C001-139")),
    ("140.1", ("140", "S140-149", "C140-239")), ("401.9", ("401", "S400-409", "C390-459")),
    ("459.9", ("459", "S450-459", "C390-459")), ("460", ("460", "S460-469", "C460-519")),
    ("280.0", ("280", "S280-289", "C280-289")), ("V45.81", ("V45", "SV40-V49", "CV01-V91")),
    ("E880.9", ("E880", "SE880-E889", "CE000-E999"))])
def test_ancestors_follow_the_chapter_ranges(code, want):
    assert icd9.ancestors(code) == want


def test_sections_never_cross_a_chapter():
    for lo, hi in icd9.CHAPTERS:
        for cat in range(lo, hi + 1):
            a, b = icd9.section_of(cat).split("-")
            assert lo <= int(a) <= cat <= int(b) <= hi


def test_rows_load_as_a_member_hierarchy():
    members = parse_member_rows(icd9.rows(CODES))
    assert sorted(members[0]) == sorted(CODES)
    assert len(members) == 5 and set(members[3].values()) == {"*"}


@pytest.mark.parametrize("level", [1, 2, 3])
def test_level_policies_partition_the_codes(level):
    pol = icd9.level_policy(CODES, level)
    flat = [i for u in pol for i in u]
    assert sorted(flat) == list(range(len(CODES)))
    sizes = [len(icd9.level_policy(CODES, lv)) for lv in (1, 2, 3)]
    assert sizes[0] >= sizes[1] >= sizes[2]


def test_similarity_and_frequency_policies_are_disjoint():
    names = [f"{c:03d}.{s}" for c in range(400, 460) for s in range(4)]
    sim = icd9.similarity_policy(names, 5)
    assert all(len(u) == 5 for u in sim)
    assert len({i for u in sim for i in u}) == 5 * len(sim)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 6, 400)
    codes = np.concatenate([np.sort(rng.choice(12, n, replace=False, p=np.r_[[0.3, 0.2],
                                               [0.05] * 10])) for n in lengths])
    offsets = np.r_[0, np.cumsum(lengths)]
    pol = icd9.frequency_policy(offsets, codes, 12, 5.0)
    taken = [c for u in pol for c in u]
    assert pol and len(taken) == len(set(taken))
    fi = icd9.frequent_itemsets(offsets, codes, 12, 20)
    assert all(tuple(u) in fi for u in pol)


def test_generator_category_repeat_keeps_the_shape_and_the_default():
    """bench_disassociation_kernel.make_records(category_repeat=...): fewer codes of one
    3-digit category per record at Table 1's shape; the default is the real data's ratio
    (1.083 codes per (record, category)), 1.0 keeps every repeat."""
    from bench_disassociation_kernel import make_records
    from bench_disassociation_utility import codes_per_category
    base = make_records(3000, seed=3)
    same = make_records(3000, seed=3, category_repeat=0.275)
    assert all(np.array_equal(a, b) for a, b in zip(base[:2], same[:2]))
    offsets, codes, names, _ = make_records(3000, seed=3, category_repeat=0.0)
    pol = icd9.level_policy(names, 1)
    assert codes_per_category(offsets, codes, pol) < 1.01     # the 43-code record aside
    assert codes_per_category(*base[:2], icd9.level_policy(base[2], 1)) > 1.0
    assert abs(codes.size / (offsets.size - 1) - 5.11) < 0.1
    assert np.diff(offsets).max() == 43
