"""The anatomy plug-in's post-processing (plugins/anatomy.py): RID sets per (group, value),
each group's distinct values and its generalized labels -- against plain numpy references."""
from types import SimpleNamespace

import numpy as np
import pytest

from deid.read.frame import EncodedColumn, Frame
from deid.methods.anatomy import plugin


def shapes(seed, n, n_groups, width):
    rng = np.random.default_rng(seed)
    group = rng.integers(0, n_groups, n).astype(np.int64)
    codes = rng.integers(0, width, n).astype(np.int64)
    order = plugin.by_group(group, n_groups)
    return group, codes, order, group[order]


@pytest.mark.parametrize("n, n_groups, width", [(0, 1, 3), (1, 1, 2), (5000, 70, 300),
                                                (20000, 900, 17), (3000, 40000, 70000),
                                                (3000, 1 << 25, 1 << 26)])
def test_value_pairs_are_the_stable_sort_by_group_then_value(n, n_groups, width):
    """ValuePairs: rows by (group, value, row) -- sorting keys with their positions, or (keys
    too wide for that) by argsort -- and each distinct pair's group, value and count."""
    group, codes, order, in_order = shapes(n + width, n, n_groups, width)
    p = plugin.ValuePairs(in_order, codes, width, order)
    key = group * width + codes
    rows = np.argsort(key, kind="stable")
    assert np.array_equal(p.rows, rows)
    pairs, counts = np.unique(key, return_counts=True)
    assert np.array_equal(p.group, pairs // width) and np.array_equal(p.code, pairs % width)
    assert np.array_equal(p.count, counts)


@pytest.mark.parametrize("n, n_groups, width", [(0, 1, 3), (4000, 60, 10), (4000, 6000, 800)])
def test_distinct_pairs(n, n_groups, width):
    """Presence table (small pair space) or np.unique (large): the sorted distinct pairs."""
    group, codes, _, _ = shapes(n * 3 + width, n, n_groups, width)
    g, c = plugin.distinct_pairs(group, codes, width, n_groups)
    pairs = np.unique(group * width + codes)
    assert np.array_equal(g, pairs // width) and np.array_equal(c, pairs % width)


@pytest.mark.parametrize("nulls", [False, True])
def test_group_labels_of_numbers(nulls):
    """Ranges per group: with or without NULLs, as the values' extremes in the column's text."""
    rng = np.random.default_rng(8)
    n, n_groups = 3000, 40
    group = rng.integers(0, n_groups, n).astype(np.int64)
    group[:n_groups] = np.arange(n_groups)                  # every group has a row
    days = rng.integers(-3000, 20000, n).astype(np.int64)
    ints = rng.integers(-5, 5, n).astype(np.int64)
    null = (rng.random(n) < 0.2) if nulls else np.zeros(n, bool)
    frame = Frame(n, np.arange(n), {"d": EncodedColumn("d", "date", days, null),
                                    "i": EncodedColumn("i", "int", ints, np.zeros(n, bool))})
    order = plugin.by_group(group, n_groups)
    labels = plugin.group_labels(SimpleNamespace(hierarchies={}), frame, ["d", "i"], group,
                                 n_groups, order, group[order])
    for g in range(n_groups):
        rows = group == g
        for q, values, null_q in (("d", days, null), ("i", ints, np.zeros(n, bool))):
            present = values[rows & ~null_q]
            if not len(present):
                want = "NULL"
            else:
                lo, hi = present.min(), present.max()
                text = (lambda v: str(np.datetime64(int(v), "D"))) if q == "d" else str
                want = text(lo) if lo == hi else f"[{text(lo)}-{text(hi)}]"
                if null_q[rows].any():
                    want += " or NULL"
            assert labels[q][g] == want
