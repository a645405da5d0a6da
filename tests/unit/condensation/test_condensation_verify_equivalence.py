"""The condensation verifier's faster paths give what the plain definitions give: the
rare-copy count against a count over row tuples, the recoded-time sorts against numpy's."""
from collections import Counter

import numpy as np
import pytest

from deid.verify.shared import survival_pairs as sp
from deid.verify.shared.rare_records import count_rare_copies


def brute_rare_copies(source, released, k):
    held = Counter(map(tuple, source.tolist()))
    return sum(1 for row in map(tuple, released.tolist()) if 0 < held.get(row, 0) < k)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [2, 3, 5])
def test_rare_copy_count_is_the_count_over_row_tuples(seed, k):
    rng = np.random.default_rng(seed)
    n = 400
    source = np.stack([rng.integers(0, 4, n), rng.integers(0, 3, n),
                       np.round(rng.normal(0, 1, n), 1), rng.integers(0, 2, n) * 2.5],
                      axis=1).astype(float)
    released = source[rng.permutation(n)].copy()
    moved = rng.random(n) < 0.5                     # half the rows no longer equal a source row
    released[moved, 2] += 0.05
    released[rng.random(n) < 0.1, 0] = 9            # a value no source row has
    assert count_rare_copies(source, released, k) == brute_rare_copies(source, released, k)


def test_rare_copy_count_without_any_shared_value():
    source = np.arange(20, dtype=float).reshape(10, 2)
    assert count_rare_copies(source, source + 0.5, 3) == 0
    assert count_rare_copies(source, source, 3) == 10


@pytest.mark.parametrize("values", [
    np.array([3.0, 1.0, 2.0, 3.0, 70000.0]),            # a long range: numpy's sort
    np.array([5.0, -2.0, 5.0, 0.0, 7.0, -2.0, 0.0]),    # whole numbers of a short range
    np.array([0.5, 0.25, 0.5, 1.0]),                    # fractions
    np.zeros(0)])
def test_recoded_time_sorts_are_numpys(values):
    assert np.array_equal(sp._sort(values), np.sort(values))
    assert np.array_equal(sp._argsort_stable(values), np.argsort(values, kind="stable"))
    ordered = np.sort(values)
    got = sp._runs(ordered)
    want = np.unique(ordered, return_index=True, return_counts=True)
    for a, b in zip(got, want):
        assert np.array_equal(a, b)
