"""The condensation verifier's O(n) lookups and batched moments equal the plain computations
they replaced (verify/condensation.py, verify/cluster_moments.py; 004 Def. 1, Alg. 3)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deid.errors import DeidError
from deid.verify.shared import cluster_moments as cm
from deid.verify.condensation import _snapshot_rows


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3000), st.sampled_from([1, 2, 50, 10**9]))
def test_snapshot_rows_equal_binary_search(seed, n, gap):
    rng = np.random.default_rng(seed)
    snapshot = np.cumsum(rng.integers(1, gap + 1, n)).astype(np.int64) + int(rng.integers(-5, 5))
    rids = rng.permutation(snapshot)[:int(rng.integers(0, n + 1))]
    assert np.array_equal(_snapshot_rows(rids, snapshot), np.searchsorted(snapshot, rids))


@pytest.mark.parametrize("gap", [1, 3, 10**9])
@pytest.mark.parametrize("where", ["below", "above", "hole"])
def test_snapshot_rows_refuse_a_rid_not_in_the_snapshot(gap, where):
    snapshot = np.arange(100, 100 + 50 * gap, gap, dtype=np.int64)
    bad = {"below": 99, "above": int(snapshot[-1]) + 1,
           "hole": int(snapshot[10]) + 1 if gap > 1 else 99}[where]
    with pytest.raises(DeidError):
        _snapshot_rows(np.r_[snapshot[:5], bad].astype(np.int64), snapshot)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["codes", "floats", "wide"]))
def test_positions_find_every_present_value(seed, kind):
    rng = np.random.default_rng(seed)
    if kind == "codes":
        values = np.unique(rng.integers(-3, 8, 6)).astype(float)
    elif kind == "floats":
        values = np.unique(rng.normal(size=5))
    else:
        values = np.unique(rng.integers(0, 10**7, 5)).astype(float)
    x = np.r_[rng.choice(values, 50), values[0] - 1, values[-1] + 1, values[0] + 0.5]
    pos = cm._positions(values, x)
    present = np.isin(x, values)
    assert np.array_equal(values[pos] == x, present)
    assert np.array_equal(pos[present], np.searchsorted(values, x[present]))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_cluster_grams_equal_per_cluster_products(seed, q):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 9, int(rng.integers(1, 30)))
    starts = np.cumsum(counts) - counts
    centred = rng.normal(size=(int(counts.sum()), q))
    got = cm._cluster_grams(centred, counts, starts)
    for c, (a, m) in enumerate(zip(starts, counts)):
        block = centred[a:a + m]
        assert np.allclose(got[c], block.T @ block, rtol=1e-12, atol=1e-12)
