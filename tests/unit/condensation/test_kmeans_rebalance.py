"""Rebalancing to >= k rows per cluster (004 Alg. 2 steps 2b-2c) and k-d blocks on adversarial
inputs: the guarantee must hold whatever k-means returns."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deid.errors import DeidError
from deid.methods.condensation import kmeans
from deid.methods.condensation.rebalance import rebalance, refine_rebalanced
from fixtures.rebalance_inputs import rebalance_inputs


def check_rebalanced(features, labels, centers, k):
    before = np.bincount(labels, minlength=len(centers))
    out = rebalance(features, labels, centers, k)
    after = np.bincount(out, minlength=len(centers))
    assert after.min() >= k and after.sum() == labels.size
    # clusters that had >= k rows only lost rows (never below k); short ones only gained
    moved = out != labels
    assert np.all(after[before >= k] <= before[before >= k])
    assert np.all(after[before < k] == k)
    assert np.all(np.isin(out[moved], np.flatnonzero(before < k)))
    return out


def test_everything_in_one_cluster():
    f = np.random.default_rng(0).normal(size=(100, 3))
    labels = np.zeros(100, dtype=np.int64)
    out = check_rebalanced(f, labels, np.random.default_rng(1).normal(size=(10, 3)), 10)
    assert np.bincount(out).tolist() == [10] * 10


def test_all_rows_identical_and_ties():
    f = np.ones((60, 2))
    labels = np.r_[np.zeros(55), np.ones(5)].astype(np.int64)
    centers = np.ones((6, 2))
    out = check_rebalanced(f, labels, centers, 10)
    # ties go by row position: cluster 2 (first short one with 0 rows, stable order) gets the
    # first 10 rows of the donor
    assert np.array_equal(np.flatnonzero(out == 2), np.arange(10))


def test_exactly_k_times_s_rows():
    rng = np.random.default_rng(2)
    f = rng.normal(size=(70, 2))
    labels = rng.integers(0, 3, 70)
    out = check_rebalanced(f, labels, rng.normal(size=(7, 2)), 10)
    assert np.bincount(out).tolist() == [10] * 7


def test_closest_rows_move():
    f = np.array([[0.0], [0.1], [0.2], [5.0], [5.1], [9.0]])
    labels = np.array([0, 0, 0, 0, 0, 1])
    out = rebalance(f, labels, np.array([[0.1], [9.0]]), 2)
    assert out.tolist() == [0, 0, 0, 0, 1, 1]          # 5.1 is the closest to 9.0


def test_donor_cap():
    # cluster 1 is the nearest donor but can give only its surplus (1 row)
    f = np.array([[0.0], [0.0], [0.0], [1.0], [1.0], [1.0], [10.0], [10.0], [10.0], [10.0]])
    labels = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    centers = np.array([[0.0], [1.0], [10.0], [2.0]])
    out = check_rebalanced(f, labels, centers, 2)
    # one row from cluster 1 (distance 1), then one from cluster 0 (distance 2), none from 2
    assert np.bincount(out).tolist() == [2, 2, 4, 2]
    assert np.flatnonzero(out == 3).tolist() == [0, 3]


def test_too_many_clusters_is_refused():
    with pytest.raises(DeidError):
        rebalance(np.zeros((5, 1)), np.zeros(5, dtype=np.int64), np.zeros((3, 1)), 2)


@settings(max_examples=1000, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 12), st.integers(1, 9),
       st.sampled_from(["random", "ties", "one_cluster", "skewed", "equal", "kmeans"]))
def test_rebalance_fuzz(seed, k, s, shape):
    rng = np.random.default_rng(seed)
    f, labels, centers = rebalance_inputs(rng, k, s, shape)
    check_rebalanced(f, labels, centers, k)
    refined = refine_rebalanced(f, labels, centers, k, rounds=int(rng.integers(0, 4)))
    sizes = np.bincount(refined, minlength=s)
    assert sizes.size == s and sizes.min() >= k and sizes.sum() == len(f)


def test_refined_rounds_never_worse_than_plain_rebalance():
    rng = np.random.default_rng(4)
    for trial in range(20):
        f = np.concatenate([rng.normal(c, 1.0, (int(rng.integers(20, 90)), 2))
                            for c in rng.uniform(-20, 20, (6, 2))])
        s = f.shape[0] // 25
        labels, centers = kmeans.weighted_kmeans(f, s, np.random.default_rng(trial), 5)

        def sse(lab):
            c = kmeans.cluster_means(f, lab, centers)
            return ((f - c[lab]) ** 2).sum()
        plain = rebalance(f, labels, centers, 25)
        refined = refine_rebalanced(f, labels, centers, 25, rounds=3)
        assert np.bincount(refined).min() >= 25
        assert sse(refined) <= sse(plain) + 1e-9


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 40), st.integers(1, 2000),
       st.sampled_from(["random", "ties", "equal"]))
def test_kd_blocks_fuzz(seed, k, block_rows, shape):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(k, 60 * k))
    if shape == "random":
        f = rng.normal(size=(n, 3))
    elif shape == "ties":
        f = rng.integers(0, 2, (n, 3)).astype(float)
    else:
        f = np.zeros((n, 2))
    blocks = kmeans.kd_blocks(f, k, block_rows)
    sizes = np.bincount(blocks)
    assert sizes.min() >= k
    assert sizes.max() <= max(block_rows, 2 * k - 1)
    assert (sizes // k).sum() == n // k                    # as many clusters as unblocked
    assert sum(r.size for r in kmeans.rows_by_block(blocks)) == n


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 15))
def test_seed_groups_fuzz(seed, k):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(k, 10 * k))
    f = rng.integers(0, 3, (n, 2)).astype(float) if seed % 2 else rng.normal(size=(n, 2))
    labels = kmeans.seed_groups(f, k, rng)
    sizes = np.bincount(labels)
    assert sizes.size == n // k and sizes.min() >= k and sizes.sum() == n
