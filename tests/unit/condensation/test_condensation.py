"""Unit tests of the condensation kernel (paper 004 Alg. 1-3, Prop. 1)."""

import ast
import pathlib

import numpy as np
import pytest

from deid.errors import (DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED,
                         PRIVACY_MODEL_UNSATISFIABLE, VERIFICATION_FAILED)
from deid.methods.condensation import condense as cd
from deid.methods.condensation import kmeans
from deid.methods.condensation.condense import condense
from deid.methods.condensation.release_values import reassign_survival_times
from deid.verify.shared.cluster_moments import verify_condensation

RTOL = 1e-9


def registry(n, seed=0, status_p=0.6):
    """A small colon-registry-like table: age, stage, sex, race, tobacco, payor, months, status."""
    rng = np.random.default_rng(seed)
    stage = rng.integers(0, 4, n)
    age = rng.integers(30, 95, n)
    X = np.stack([
        age, stage, rng.integers(0, 2, n), rng.choice(5, n, p=[.7, .15, .1, .03, .02]),
        rng.integers(0, 2, n), rng.integers(0, 3, n),
        np.rint(rng.exponential(20, n) * (1 + 0.3 * stage)),
        (rng.random(n) < status_p).astype(int)], axis=1).astype(float)
    kinds = ["int", "categorical", "categorical", "categorical", "categorical",
             "categorical", "int", "categorical"]
    return X, kinds


def numeric_columns(kinds, skip=()):
    return [j for j, kd in enumerate(kinds) if kd != "categorical" and j not in skip]


def verify(X, kinds, res, k, status=None, time_col=None, rtol=RTOL):
    split = res.survival_times is not None
    return verify_condensation(
        X, res.cluster_id, res.synthetic, res.synthetic_cluster_id, k,
        status_col=status if split else None, time_col=time_col,
        survival_times=res.survival_times,
        moment_columns=numeric_columns(kinds, skip=(status,) if split else ()),
        moment_values=res.synthetic_unrounded, rtol=rtol, check_ranges=True,
        integer_columns=[j for j, kd in enumerate(kinds) if kd == "int"
                         and not (j == time_col and res.survival_times == "ranked")])


def cluster_moments(values, cluster_id, c):
    rows = values[cluster_id == c]
    return rows.mean(axis=0), np.cov(rows.T, ddof=1).reshape(values.shape[1], -1)


# --------------------------------------------------------------------------------------------
# moment-exact synthesis (beyond the paper) and Prop. 1
# --------------------------------------------------------------------------------------------

def test_moments_exact_in_every_cluster():
    X, kinds = registry(3000, seed=1)
    X[:, 0] = X[:, 0] * 0.37 + 1000.0                      # float-like column, offset
    kinds[0] = "float"
    res = condense(X, kinds, 50, status=7, time_col=6, seed=3)
    cols = [0, 6]
    syn = res.synthetic_unrounded
    for c in range(res.n_clusters):
        mu, cov = cluster_moments(X[:, cols], res.cluster_id, c)
        mu2, cov2 = cluster_moments(syn[:, cols], res.synthetic_cluster_id, c)
        scale = np.abs(np.diag(cov)).max()
        assert np.abs(cov2 - cov).max() <= RTOL * scale
        assert np.abs(mu2 - mu).max() <= RTOL * (np.abs(mu).max() + np.sqrt(scale))
    rep = verify(X, kinds, res, 50, status=7, time_col=6)
    assert rep["max_cov_error"] < 1e-3 and rep["max_mean_error"] < 1e-3   # far inside rtol


def test_one_hot_moments_exact_before_decoding():
    # the full coded covariance (numeric + one-hot blocks) is matched, not only numeric columns
    from deid.methods.condensation import pca_synthesis as ps
    X, kinds = registry(600, seed=2)
    coded, layout = cd._code_attributes(X, kinds, list(range(7)))
    cid = np.repeat(np.arange(6), 100)
    syn = ps.synthesize_clusters(coded, cid, np.random.default_rng(0))
    for c in range(6):
        mu, cov = cluster_moments(coded, cid, c)
        mu2, cov2 = cluster_moments(syn, cid, c)
        assert np.abs(cov2 - cov).max() <= RTOL * np.abs(cov).max()
        assert np.abs(mu2 - mu).max() <= RTOL * (np.abs(mu).max() + 1)


@pytest.mark.parametrize("n_rows,p", [(3, 10), (5, 12), (8, 8), (9, 8), (2, 4), (40, 6)])
def test_moments_exact_direct_and_transpose(n_rows, p):
    from deid.methods.condensation import pca_synthesis as ps
    rng = np.random.default_rng(n_rows * 100 + p)
    clusters = rng.standard_normal((7, n_rows, p)) * rng.uniform(0.01, 50, p) \
        + rng.uniform(-500, 500, p)
    clusters[:, :, 0] = 4.25                                 # constant column
    syn = ps.synthesize_batch(clusters, np.random.default_rng(1))
    for g in range(7):
        a, b = clusters[g], syn[g]
        cov, cov2 = np.cov(a.T), np.cov(b.T)
        assert np.abs(cov2 - cov).max() <= RTOL * np.abs(cov).max()
        assert np.abs(b.mean(0) - a.mean(0)).max() <= RTOL * np.abs(a).max()
        assert np.all(b[:, 0] == 4.25)
        if n_rows > 2:
            assert not np.allclose(np.sort(b[:, 1]), np.sort(a[:, 1]))   # new values
        else:   # documented limit: 2 rows are fixed (up to order) by their mean and covariance
            assert np.allclose(np.sort(b, axis=0), np.sort(a, axis=0))


def test_transpose_trick_agrees_with_direct_pca():
    from deid.methods.condensation import pca_synthesis as ps
    rng = np.random.default_rng(5)
    A = rng.standard_normal((4, 6, 15))                      # n = 6 rows << p = 15
    A -= A.mean(axis=1, keepdims=True)
    lam_d, vec_d = ps.pca_direct(A)
    lam_t, vec_t = ps.pca_transpose(A)
    r = 5                                                    # rank of a centred 6-row cluster
    assert np.allclose(lam_d[:, :r], lam_t[:, :r], rtol=1e-10, atol=1e-12)
    assert np.allclose(lam_t[:, r:], 0, atol=1e-10) and np.allclose(lam_d[:, r:], 0, atol=1e-10)
    for g in range(4):
        for i in range(r):                                   # same axes up to sign
            dot = vec_d[g][:, i] @ vec_t[g][:, i]
            assert abs(abs(dot) - 1) < 1e-9
    # Prop. 1: A^T v is an eigenvector of A^T A with the same eigenvalue
    gram = np.swapaxes(A, 1, 2) @ A
    for g in range(4):
        for i in range(r):
            v = vec_t[g][:, i]
            assert np.allclose(gram[g] @ v, lam_t[g, i] * v, atol=1e-9)


def test_cluster_with_fewer_rows_than_attributes():
    # k = 2 with many one-hot columns: clusters of 2-3 rows, p >> n (the transpose path)
    rng = np.random.default_rng(9)
    n = 40
    X = np.stack([rng.integers(0, 12, n), rng.integers(0, 9, n), rng.normal(size=n),
                  rng.normal(size=n)], axis=1)
    kinds = ["categorical", "categorical", "float", "float"]
    res = condense(X, kinds, 2, seed=1)
    assert res.cluster_size.min() >= 2 and res.cluster_size.max() < 4
    verify(X, kinds, res, 2)


# --------------------------------------------------------------------------------------------
# clustering, blocking and rebalancing (Alg. 2 steps 2a-2c)
# --------------------------------------------------------------------------------------------

def test_every_cluster_at_least_k_and_partition():
    X, kinds = registry(5000, seed=4)
    for algorithm in ("improved", "original"):
        kw = {"status": 7, "time_col": 6} if algorithm == "improved" else {}
        res = condense(X, kinds, 30, algorithm=algorithm, seed=2, block_rows=700, **kw)
        assert res.cluster_id.shape == (5000,)
        assert res.cluster_size.min() >= 30
        assert np.array_equal(np.bincount(res.cluster_id), res.cluster_size)
        assert res.n_blocks > 1
        verify(X, kinds, res, 30, status=7, time_col=6)


def test_status_split_keeps_status_pure_and_counts():
    X, kinds = registry(2000, seed=6)
    res = condense(X, kinds, 40, status=7, time_col=6, seed=0)
    for c in range(res.n_clusters):
        st = X[res.cluster_id == c, 7]
        assert np.all(st == res.cluster_status[c])
        assert np.all(res.synthetic[res.synthetic_cluster_id == c, 7] == res.cluster_status[c])
    n1 = int(X[:, 7].sum())
    assert (res.cluster_status == 1).sum() == n1 // 40        # floor(n_i / k) per subset


def test_status_subset_with_exactly_k_rows():
    X, kinds = registry(300, seed=7)
    X[:, 7] = 0
    X[:25, 7] = 1
    res = condense(X, kinds, 25, status=7, time_col=6, seed=0)
    ones = np.flatnonzero(res.cluster_status == 1)
    assert ones.size == 1 and res.cluster_size[ones[0]] == 25
    verify(X, kinds, res, 25, status=7, time_col=6)


def test_only_one_status_present():
    X, kinds = registry(300, seed=8)
    X[:, 7] = 1
    res = condense(X, kinds, 25, status=7, time_col=6, seed=0)
    assert np.all(res.cluster_status == 1)
    verify(X, kinds, res, 25, status=7, time_col=6)


def test_kd_blocks_sizes():
    rng = np.random.default_rng(3)
    for feats in (rng.normal(size=(10_007, 3)), np.zeros((5_000, 2)),
                  rng.integers(0, 2, (7_777, 4)).astype(float)):
        for k, rows in ((10, 300), (100, 1000), (7, 50), (13, 13)):
            blocks = kmeans.kd_blocks(feats, k, rows)
            sizes = np.bincount(blocks)
            assert sizes.min() >= k
            assert sizes.max() <= max(rows, 2 * k - 1)
            assert (sizes // k).sum() == feats.shape[0] // k
    assert np.all(kmeans.kd_blocks(rng.normal(size=(500, 2)), 10, None) == 0)


def test_per_block_step_is_shardable():
    # a block's clusters depend only on its rows and its seed
    X, kinds = registry(3000, seed=10)
    coded, layout = cd._code_attributes(X, kinds, list(range(7)))
    feats = coded * cd._feature_scale(coded, layout, np.full(8, 1 / 7))
    blocks = kmeans.rows_by_block(kmeans.kd_blocks(feats, 20, 500))
    for b, rows in enumerate(blocks):
        one = cd.cluster_block(feats[rows], 20, np.random.default_rng([1, b]))
        again = cd.cluster_block(feats[rows].copy(), 20, np.random.default_rng([1, b]))
        assert np.array_equal(one, again)
        assert np.bincount(one).min() >= 20 and one.max() + 1 == rows.size // 20


def test_weighted_kmeans_separates_clear_clusters():
    rng = np.random.default_rng(0)
    centres = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], dtype=float)
    X = np.concatenate([c + rng.normal(scale=0.3, size=(50, 2)) for c in centres])
    labels, centers = kmeans.weighted_kmeans(X, 4, np.random.default_rng(1), max_iter=50)
    assert sorted(np.bincount(labels).tolist()) == [50, 50, 50, 50]
    for c in range(4):
        assert np.ptp(labels[c * 50:(c + 1) * 50]) == 0


def test_kmeans_plus_plus_all_equal_rows():
    seeds = kmeans.kmeans_plus_plus(np.ones((30, 3)), 5, np.random.default_rng(0))
    assert seeds.shape == (5,) and seeds.min() >= 0 and seeds.max() < 30


def test_weight_on_time_tightens_time_within_clusters():
    X, kinds = registry(4000, seed=11)
    spread = {}
    for w in (0.0, 0.9):
        res = condense(X, kinds, 40, status=7, time_col=6, weights={6: w}, seed=1,
                       block_rows=None)
        spread[w] = np.mean([np.std(X[res.cluster_id == c, 6]) for c in range(res.n_clusters)])
        assert res.weights[6] == w and np.isclose(res.weights[[0, 1, 2, 3, 4, 5]].sum(), 1 - w)
    assert spread[0.9] < 0.5 * spread[0.0]


def test_exact_path_is_one_block_per_status():
    X, kinds = registry(3000, seed=12)
    res = condense(X, kinds, 50, status=7, time_col=6, block_rows=None, seed=0)
    assert res.n_blocks == 2 and np.all(res.cluster_block == res.cluster_status)


# --------------------------------------------------------------------------------------------
# survival times (step 2.d.ii), permissible values (2.d.iii), categorical round trip
# --------------------------------------------------------------------------------------------

def test_original_times_are_the_cluster_multisets_by_rank():
    X, kinds = registry(2000, seed=13)
    res = condense(X, kinds, 40, status=7, time_col=6, survival_times="original", seed=4)
    unr = res.synthetic_unrounded
    for c in range(res.n_clusters):
        rel = res.synthetic[res.synthetic_cluster_id == c, 6]
        assert np.array_equal(np.sort(rel), np.sort(X[res.cluster_id == c, 6]))
        syn_t = unr[res.synthetic_cluster_id == c, 6]
        order = np.argsort(syn_t, kind="stable")
        assert np.all(np.diff(rel[order]) >= 0)              # by rank of the synthetic time


def test_perturbed_times_keep_rank_order_and_release_no_original_time():
    rng = np.random.default_rng(14)
    n = 1500
    X = np.stack([rng.normal(60, 10, n), rng.integers(0, 3, n),
                  rng.exponential(500.0, n), (rng.random(n) < 0.5)], axis=1)
    kinds = ["float", "categorical", "float", "categorical"]
    res = condense(X, kinds, 30, status=3, time_col=2, seed=5, survival_times="perturbed")
    assert res.survival_times == "perturbed"
    assert condense(X, kinds, 30, status=3, time_col=2, seed=5).survival_times == "recode"
    released, unr = res.synthetic[:, 2], res.synthetic_unrounded[:, 2]
    assert not np.isin(released, X[:, 2]).any()              # no exact original time
    for c in range(res.n_clusters):
        mine = res.synthetic_cluster_id == c
        orig = np.sort(X[res.cluster_id == c, 2])
        rel = released[mine][np.argsort(unr[mine], kind="stable")]
        assert np.all(np.diff(rel) >= 0)                     # within-cluster rank order kept
        # the r-th released time lies in the r-th original time's cell
        mids = (orig[1:] + orig[:-1]) / 2
        assert np.all(rel[1:] >= mids) and np.all(rel[:-1] <= mids)
    verify(X, kinds, res, 30, status=3, time_col=2)


def test_perturbed_integer_times():
    original = np.array([10, 10, 12, 20, 21, 22, 40, 5, 5, 5], dtype=float)
    cluster = np.array([0, 0, 0, 0, 0, 0, 0, 1, 1, 1])
    synthetic = np.arange(10, dtype=float)
    out = reassign_survival_times(original, synthetic, cluster, "perturbed",
                                  np.random.default_rng(0), integer=True)
    assert np.array_equal(out, np.rint(out))
    assert np.all(out[7:] == 5)                              # constant within cluster kept
    first = out[:7]
    assert np.all(np.diff(first) >= 0)                       # synthetic order = rank order
    # integer cells (the integers strictly between two neighbours are split between them):
    # 10 -> {10} (11 belongs to 12's cell), 12 -> {11..15}, 20 -> {16..20}, 21 -> {21},
    # 22 -> {22..30}, 40 -> {31..40} (mirrored, clipped to the observed maximum)
    assert np.all(first[:2] == 10) and first[4] == 21
    assert first[2] in {11, 13, 14, 15} and 16 <= first[3] <= 19
    assert 23 <= first[5] <= 30 and 31 <= first[6] <= 39
    for seed in range(50):
        out = reassign_survival_times(original, synthetic, cluster, "perturbed",
                                      np.random.default_rng(seed), integer=True)
        assert out.min() >= 5 and out.max() <= 40            # inside the observed range


def test_perturbed_integer_times_avoid_every_source_time():
    # cluster 0 = {100, 110}; cell of 100 is {100..104}, but 103 and 104 are cluster 1's times
    original = np.array([100, 110, 103, 104, 105, 200], dtype=float)
    cluster = np.array([0, 0, 1, 1, 1, 1])
    seen = set()
    for seed in range(60):
        out = reassign_survival_times(original, np.arange(6.0), cluster, "perturbed",
                                      np.random.default_rng(seed), integer=True)
        seen.add(out[0])
        assert not np.isin(out[[0, 1, 5]], original).any()
        assert out[2] <= out[3] <= out[4] <= out[5]
    assert seen == {101.0, 102.0}


def test_time_bins_hold_k_rows_and_three_integers():
    from deid.methods.condensation.release_values import time_bins
    rng = np.random.default_rng(21)
    for trial in range(200):
        n = int(rng.integers(1, 400))
        k = int(rng.integers(1, 60))
        t = np.rint(rng.exponential(rng.uniform(0.5, 40), n))
        if trial % 5 == 0:
            t[:] = t[0]                                      # one value only
        for integer in (True, False):
            src = t if integer else t + rng.random(n) * 0.5
            bins = time_bins(src, k, integer)
            assert bins[0] == src.min() and np.all(np.diff(bins) > 0)
            if bins.size == 1:
                continue
            b = np.searchsorted(bins, src, side="right") - 1
            assert np.bincount(b, minlength=bins.size).min() >= k
            if integer:
                assert np.diff(np.r_[bins, src.max() + 1]).min() >= 3


def test_coarsened_moves_every_dense_monthly_time_and_keeps_bin_order():
    rng = np.random.default_rng(22)
    n, k = 6000, 50
    months = np.minimum(np.floor(rng.exponential(18, n)), 71)    # dense integer months
    status = (rng.random(n) < 0.6).astype(float)
    age = rng.integers(30, 95, n).astype(float)
    X = np.stack([age, months, status], axis=1)
    kinds = ["int", "int", "categorical"]
    res = condense(X, kinds, k, status=2, time_col=1, survival_times="coarsened", seed=3)
    per = condense(X, kinds, k, status=2, time_col=1, survival_times="perturbed", seed=3)
    assert res.survival_times == "coarsened"
    from deid.methods.condensation.release_values import time_bins
    bins = time_bins(X[:, 1], k, True)
    rel, unr = res.synthetic[:, 1], res.synthetic_unrounded[:, 1]
    moved, moved_perturbed, rows = 0, 0, 0
    for c in range(res.n_clusters):
        mine = res.synthetic_cluster_id == c
        orig = np.sort(X[res.cluster_id == c, 1])
        got = rel[mine][np.argsort(unr[mine], kind="stable")]
        assert np.all(np.diff(got) >= 0)                      # within-cluster rank order
        assert np.array_equal(np.searchsorted(bins, got, side="right"),
                              np.searchsorted(bins, orig, side="right"))   # same bins
        if orig[0] != orig[-1]:
            moved += int((got != orig).sum())
            rows += orig.size
        p_mine = per.synthetic_cluster_id == c
        p_got = np.sort(per.synthetic[p_mine, 1])
        moved_perturbed += int((p_got != np.sort(X[per.cluster_id == c, 1])).sum())
    # every time moves (coarsened_times below); after sorting, a moved value may land on
    # another rank's original (dense data), so about half the ranks differ, against almost
    # none with "perturbed" (no room between months)
    assert moved >= 0.3 * rows and moved > 5 * max(moved_perturbed, 1)
    from deid.methods.condensation.release_values import coarsened_times
    order = np.lexsort((X[:, 1], res.cluster_id))
    draws = coarsened_times(X[order, 1], res.cluster_id[order], X[:, 1],
                            np.random.default_rng(0), True, k)
    sizes = np.bincount(res.cluster_id)
    ptp = np.maximum.reduceat(X[order, 1], np.r_[0, np.cumsum(sizes)[:-1]]) != \
        np.minimum.reduceat(X[order, 1], np.r_[0, np.cumsum(sizes)[:-1]])
    varying = np.repeat(ptp, sizes)
    assert np.all(draws[varying] != X[order, 1][varying])     # never the value itself
    assert np.array_equal(rel, np.rint(rel))
    assert rel.min() >= X[:, 1].min() and rel.max() <= X[:, 1].max()
    verify(X, kinds, res, k, status=2, time_col=1)
    again = condense(X, kinds, k, status=2, time_col=1, survival_times="coarsened", seed=3)
    assert np.array_equal(again.synthetic, res.synthetic)


def test_coarsened_dense_times_draw_from_the_bins_rows():
    from deid.methods.condensation.release_values import coarsened_times, time_bins
    rng = np.random.default_rng(24)
    months = np.minimum(np.floor(rng.exponential(6, 20000)), 71)   # dense, skewed months
    clusters = np.arange(months.size) % 200                        # no cluster is constant
    order = np.lexsort((months, clusters))
    t, cl = months[order], clusters[order]
    draws = coarsened_times(t, cl, months, rng, True, 100)
    assert np.all(draws != t)                                      # never itself
    dense = t <= 20                                                # no free integer there
    assert np.isin(draws[dense], months).all()                     # another row's time
    bins = time_bins(months, 100, True)
    assert np.array_equal(np.searchsorted(bins, draws, side="right"),
                          np.searchsorted(bins, t, side="right"))  # its own bin
    # the bin's distribution, not uniform over its integers: the skew survives
    assert abs(draws.mean() - t.mean()) < 0.05 * t.std()
    for value in (0.0, 1.0):                                       # bin [0, 2]: by counts
        others = months[(months <= 2) & (months != value)]
        assert abs(draws[t == value].mean() - others.mean()) < 0.05


def test_coarsened_float_and_sparse_integer_times_release_no_source_time():
    rng = np.random.default_rng(23)
    n = 1500
    for integer in (False, True):
        t = rng.exponential(500.0, n)
        t = np.rint(t * 3) if integer else t                  # sparse integers (days)
        X = np.stack([rng.normal(60, 10, n), t, (rng.random(n) < 0.5)], axis=1)
        kinds = ["float", "int" if integer else "float", "categorical"]
        res = condense(X, kinds, 30, status=2, time_col=1, survival_times="coarsened", seed=5)
        released = res.synthetic[:, 1]
        assert np.isin(released, X[:, 1]).mean() < 0.01      # free values of the bin
        verify(X, kinds, res, 30, status=2, time_col=1)


def test_coarsened_keeps_a_cluster_constant_time():
    original = np.array([7, 7, 7, 1, 2, 3, 4, 5, 6], dtype=float)
    cluster = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1])
    out = reassign_survival_times(original, np.arange(9.0), cluster, "coarsened",
                                  np.random.default_rng(0), integer=True, bin_rows=3)
    assert np.all(out[:3] == 7)                               # constant cluster kept
    assert np.all(np.diff(out[3:]) >= 0) and set(out[3:]) <= set(range(1, 8))


def test_categorical_round_trip_and_permissible_values():
    X, kinds = registry(3000, seed=15)
    X[:, 3] = X[:, 3] * 10 + 7                               # arbitrary category codes
    coded, layout = cd._code_attributes(X, kinds, list(range(8)))
    from deid.methods.condensation.release_values import grouping_of
    cat = [j for j, kd in enumerate(kinds) if kd == "categorical"]
    for cid in (np.zeros(len(X), dtype=np.int64), np.arange(len(X)) // 7):
        for decoding in ("counts", "argmax"):
            back = cd._decode(coded, layout, X, cid, grouping_of(cid), decoding)
            assert np.array_equal(back[:, cat], X[:, cat])   # code -> decode is the identity
            assert np.allclose(back, X, rtol=1e-12, atol=1e-9)
    res = condense(X, kinds, 40, status=7, time_col=6, seed=0)
    for j, kd in enumerate(cd.released_kinds(kinds, 6, res.survival_times)):   # a ranked time: float
        assert np.isin(res.synthetic[:, j], np.unique(X[:, j])).all() or kd != "categorical"
        assert res.synthetic[:, j].min() >= X[:, j].min()
        assert res.synthetic[:, j].max() <= X[:, j].max()
        if kd == "int":
            assert np.array_equal(res.synthetic[:, j], np.rint(res.synthetic[:, j]))


def test_category_counts_kept_per_cluster():
    X, kinds = registry(3000, seed=28)
    res = condense(X, kinds, 40, status=7, time_col=6, seed=2)
    argmax = condense(X, kinds, 40, status=7, time_col=6, seed=2, categories="argmax")
    cat = [j for j, kd in enumerate(kinds) if kd == "categorical"]
    verify_condensation(X, res.cluster_id, res.synthetic, res.synthetic_cluster_id, 40,
                        count_columns=cat)
    with pytest.raises(DeidError):       # argmax loses minority categories somewhere
        verify_condensation(X, argmax.cluster_id, argmax.synthetic,
                            argmax.synthetic_cluster_id, 40, count_columns=cat)
    for j in cat:                        # so the whole table's marginals are exact too
        assert np.array_equal(np.sort(res.synthetic[:, j]), np.sort(X[:, j]))


def test_decode_categories_by_scores():
    from deid.methods.condensation.release_values import decode_categories, grouping_of
    cid = np.array([0, 0, 0, 0, 1, 1, 1])
    codes = np.array([0, 0, 1, 2, 1, 1, 1])              # cluster 0: two 0s, one 1, one 2
    scores = np.array([[.9, .1, 0], [.2, .7, .1], [.5, .4, .1], [.1, .1, .8],
                       [.6, .3, .1], [.9, 0, .1], [.1, .1, .8]])
    out = decode_categories(scores, codes, cid, grouping_of(cid), "counts")
    assert out.tolist() == [0, 1, 0, 2, 1, 1, 1]
    assert decode_categories(scores, codes, cid, grouping_of(cid), "argmax").tolist() == \
        [0, 1, 0, 2, 0, 0, 2]


def test_constant_columns_stay_constant():
    X, kinds = registry(1200, seed=16)
    X[:, 0] = 61                                             # constant everywhere
    X[:, 4] = 1                                              # constant categorical
    res = condense(X, kinds, 30, status=7, time_col=6, seed=0)
    assert np.all(res.synthetic[:, 0] == 61) and np.all(res.synthetic[:, 4] == 1)
    # a column constant inside a cluster (but not overall) stays that constant
    for c in range(res.n_clusters):
        src = X[res.cluster_id == c]
        rel = res.synthetic[res.synthetic_cluster_id == c]
        for j in range(8):
            if np.ptp(src[:, j]) == 0:
                assert np.all(rel[:, j] == src[0, j])


def test_all_rows_identical():
    X = np.tile([[3.0, 1.0, 7.0, 0.0]], (250, 1))
    kinds = ["int", "categorical", "float", "categorical"]
    for kw in ({}, {"status": 3, "time_col": 2}, {"algorithm": "original"}):
        res = condense(X, kinds, 20, seed=0, **kw)
        assert res.cluster_size.min() >= 20 and res.n_clusters == 12
        assert np.array_equal(res.synthetic, X)


def test_n_between_k_and_2k_is_one_cluster():
    X, kinds = registry(57, seed=17)
    res = condense(X, kinds, 30, seed=0)
    assert res.n_clusters == 1 and res.cluster_size.tolist() == [57]
    verify(X, kinds, res, 30)


# --------------------------------------------------------------------------------------------
# Alg. 1 baseline, reproducibility, errors
# --------------------------------------------------------------------------------------------

def test_original_algorithm_is_alg1():
    X, kinds = registry(1000, seed=18)
    res = condense(X, kinds, 25, status=7, time_col=6, algorithm="original", seed=0,
                   block_rows=None)
    assert res.survival_times is None and np.allclose(res.weights, 1 / 8)
    assert res.n_blocks == 1 and res.n_clusters == 40
    assert res.cluster_size.min() >= 25
    assert np.all(res.cluster_status == -1)                  # no status split
    groups = kmeans.seed_groups(np.random.default_rng(0).normal(size=(103, 2)), 10,
                                np.random.default_rng(1))
    assert sorted(np.bincount(groups))[:7] == [10] * 7 and np.bincount(groups).sum() == 103
    verify(X, kinds, res, 25)


def test_same_seed_same_release_and_other_seed_differs():
    X, kinds = registry(2500, seed=19)
    a = condense(X, kinds, 40, status=7, time_col=6, seed=11, block_rows=600)
    b = condense(X, kinds, 40, status=7, time_col=6, seed=11, block_rows=600)
    c = condense(X, kinds, 40, status=7, time_col=6, seed=12, block_rows=600)
    for field in ("cluster_id", "synthetic", "synthetic_cluster_id", "synthetic_unrounded"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.synthetic, c.synthetic)
    g = condense(X, kinds, 40, status=7, time_col=6, seed=np.random.default_rng(5))
    h = condense(X, kinds, 40, status=7, time_col=6, seed=np.random.default_rng(5))
    assert np.array_equal(g.synthetic, h.synthetic)


def test_threads_do_not_change_the_release():
    X, kinds = registry(4000, seed=26)
    a = condense(X, kinds, 30, status=7, time_col=6, seed=3, block_rows=500)
    b = condense(X, kinds, 30, status=7, time_col=6, seed=3, block_rows=500, workers=2)
    assert np.array_equal(a.synthetic, b.synthetic) and np.array_equal(a.cluster_id, b.cluster_id)


def test_paper_rebalance_only():
    X, kinds = registry(3000, seed=27)
    res = condense(X, kinds, 30, status=7, time_col=6, seed=3, rebalance_rounds=0)
    assert res.cluster_size.min() >= 30
    verify(X, kinds, res, 30, status=7, time_col=6)


def test_release_rows_are_shuffled():
    X, kinds = registry(1000, seed=20)
    res = condense(X, kinds, 25, seed=0)
    assert not np.all(np.diff(res.synthetic_cluster_id) >= 0)


BAD_INPUTS = [
    (dict(k=1), INVALID_PARAMETER_VALUE),
    (dict(k=2.5), INVALID_PARAMETER_VALUE),
    (dict(k=True), INVALID_PARAMETER_VALUE),
    (dict(weights={6: 1.5}), INVALID_PARAMETER_VALUE),
    (dict(weights={6: -0.1}), INVALID_PARAMETER_VALUE),
    (dict(weights={6: 0.7, 0: 0.6}), INVALID_PARAMETER_VALUE),
    (dict(weights={7: 0.2}), INVALID_PARAMETER_VALUE),
    (dict(weights=float("nan")), INVALID_PARAMETER_VALUE),
    (dict(status=7, time_col=None), INVALID_PARAMETER_VALUE),
    (dict(status=7, time_col=7), INVALID_PARAMETER_VALUE),
    (dict(time_col=1), INVALID_PARAMETER_VALUE),             # categorical time
    (dict(survival_times="exact"), INVALID_PARAMETER_VALUE),
    (dict(algorithm="fancy"), INVALID_PARAMETER_VALUE),
    (dict(algorithm="original", weights={6: 0.5}), INVALID_PARAMETER_VALUE),
    (dict(algorithm="original", survival_times="original"), INVALID_PARAMETER_VALUE),
    (dict(seed=-1), INVALID_PARAMETER_VALUE),
    (dict(block_rows=0), INVALID_PARAMETER_VALUE),
    (dict(block_rows="big"), INVALID_PARAMETER_VALUE),
    (dict(max_iter=0), INVALID_PARAMETER_VALUE),
    (dict(rebalance_rounds=-1), INVALID_PARAMETER_VALUE),
    (dict(workers=0), INVALID_PARAMETER_VALUE),
    (dict(categories="mode"), INVALID_PARAMETER_VALUE),
]


@pytest.mark.parametrize("override,sqlstate", BAD_INPUTS)
def test_bad_arguments(override, sqlstate):
    X, kinds = registry(200, seed=21)
    kw = dict(k=20, status=7, time_col=6)
    kw.update(override)
    k = kw.pop("k")
    with pytest.raises(DeidError) as err:
        condense(X, kinds, k, **kw)
    assert err.value.sqlstate == sqlstate and err.value.hint


def test_data_errors_leak_no_values_and_no_small_counts():
    X, kinds = registry(200, seed=22)
    cases = []
    bad_status = X.copy()
    bad_status[5, 7] = 3.14159
    cases.append((bad_status, dict(status=7, time_col=6), INVALID_PARAMETER_VALUE))
    small = X.copy()
    small[:, 7] = 0
    small[:13, 7] = 1                                        # 13 < k rows with status 1
    cases.append((small, dict(status=7, time_col=6), PRIVACY_MODEL_UNSATISFIABLE))
    nan = X.copy()
    nan[3, 2] = np.nan
    cases.append((nan, {}, NULL_VALUE_NOT_ALLOWED))
    inf = X.copy()
    inf[3, 0] = np.inf
    cases.append((inf, {}, NULL_VALUE_NOT_ALLOWED))
    frac = X.copy()
    frac[0, 0] = 44.123
    cases.append((frac, {}, INVALID_PARAMETER_VALUE))         # 'int' column not integral
    cases.append((X[:17], {}, PRIVACY_MODEL_UNSATISFIABLE))    # fewer than k rows
    for data, kw, sqlstate in cases:
        with pytest.raises(DeidError) as err:
            condense(data, kinds, 20, seed=0, **kw)
        e = err.value
        assert e.sqlstate == sqlstate and e.hint
        text = " ".join(str(t) for t in (e.message, e.hint, e.detail) if t)
        for leak in ("3.14", "44.1", "13", "17"):
            assert leak not in text.lower(), (leak, text)


def test_kinds_must_match_columns():
    X, kinds = registry(100, seed=23)
    with pytest.raises(DeidError) as err:
        condense(X, kinds[:-1], 10)
    assert err.value.sqlstate == INVALID_PARAMETER_VALUE
    with pytest.raises(DeidError):
        condense(X, ["text"] + kinds[1:], 10)


def test_exact_path_refuses_huge_subsets(monkeypatch):
    monkeypatch.setattr(cd, "EXACT_MAX_ROWS", 100)
    X, kinds = registry(300, seed=24)
    with pytest.raises(DeidError) as err:
        condense(X, kinds, 10, block_rows=None)
    assert err.value.sqlstate == INVALID_PARAMETER_VALUE and "auto" in err.value.hint


# --------------------------------------------------------------------------------------------
# the independent verifier
# --------------------------------------------------------------------------------------------

def test_verifier_imports_nothing_from_methods():
    path = pathlib.Path(__file__).resolve().parents[3] / "python_udfs/deid/verify/shared/cluster_moments.py"
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert "methods" not in (node.module or "")
            assert node.level == 0
        if isinstance(node, ast.Import):
            assert all("methods" not in a.name for a in node.names)


def _tamper_cases(X, res):
    syn, cid, unr = res.synthetic, res.synthetic_cluster_id, res.synthetic_unrounded
    moved = unr.copy()
    moved[0, 0] += 1.0
    status_flip = syn.copy()
    status_flip[0, 7] = 1 - status_flip[0, 7]
    times = syn.copy()
    times[0, 6] = X[:, 6].max() + 1
    merged = res.cluster_id.copy()
    merged[merged == 1] = 0
    tiny = res.cluster_id.copy()
    tiny[:3] = res.n_clusters + 5
    return [
        dict(moment_values=moved),                                   # moments broken
        dict(released=status_flip),                                  # status count changed
        dict(released=times, moment_values=unr),                     # times not original
        dict(released=syn[1:], released_cluster=cid[1:], moment_values=unr[1:]),  # row lost
        dict(membership=tiny),                                       # a cluster below k
        dict(membership=merged),                                     # sizes differ
        dict(membership=(np.r_[np.arange(len(X)), 0], np.r_[res.cluster_id, 0])),  # twice
        dict(membership=(np.arange(1, len(X)), res.cluster_id[1:])),  # a row in none
        dict(released=syn + 1000.0, moment_values=unr, check_ranges=True),  # out of range
        dict(released=syn + 0.5, moment_values=unr, integer_columns=[0]),   # non-integral
    ]


def test_verifier_catches_tampering():
    X, kinds = registry(800, seed=25)
    res = condense(X, kinds, 20, status=7, time_col=6, survival_times="original", seed=0)
    base = dict(source=X, membership=res.cluster_id, released=res.synthetic,
                released_cluster=res.synthetic_cluster_id, k=20, status_col=7, time_col=6,
                survival_times="original", moment_columns=[0, 6],
                moment_values=res.synthetic_unrounded)
    report = verify_condensation(**base)
    assert report["clusters"] == res.n_clusters and report["min_cluster_size"] >= 20
    # the catalog's (rows, clusters) form is accepted too
    verify_condensation(**{**base, "membership": (np.arange(800)[::-1],
                                                  res.cluster_id[::-1])})
    for change in _tamper_cases(X, res):
        with pytest.raises(DeidError) as err:
            verify_condensation(**{**base, **change})
        assert err.value.sqlstate == VERIFICATION_FAILED and err.value.hint
    with pytest.raises(DeidError) as err:
        verify_condensation(**{**base, "released": res.synthetic[:, :3]})
    assert err.value.sqlstate == INVALID_PARAMETER_VALUE


def test_values_far_from_zero_with_a_tiny_spread():
    """Hypothesis found it: values near 1e6 with spreads of 0.05 cannot keep a cluster's
    variance to 1e-9 of itself in float64 (eps * 1e6 = 2e-10 per value); the verifier's
    tolerance follows the raw values' magnitude, so the release is accepted."""
    import numpy as np
    from deid.methods.condensation.condense import condense
    from deid.verify.shared.cluster_moments import verify_condensation
    x = np.array([1000001.03675258, 1000002.46485443, 1000000.99131123, 999996.09052831,
                  1000002.7160676, 1000001.33912372, 999998.38914029, 1000001.74335431,
                  1000001.09371719, 1000000.88239749, 1000000.08526672, 1000001.64013896,
                  999997.79063774, 999999.51127016, 999998.55364206, 1000001.79653864,
                  1000000.11916632, 999999.12262975, 999997.65427461, 999999.22842328,
                  1000000.02442654]).reshape(-1, 1)
    r = condense(x, ["float"], 3, algorithm="improved", block_rows=None, seed=1)
    verify_condensation(x, r.cluster_id, r.synthetic, r.synthetic_cluster_id, 3,
                        moment_columns=[0], moment_values=r.synthetic_unrounded)
