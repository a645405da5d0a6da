"""Moment-exact Alg. 3 synthesis (paper 004) on random, degenerate and low-row clusters."""

import numpy as np
from hypothesis import given, settings, strategies as st

from deid.methods.condensation import pca_synthesis as ps

RTOL = 1e-9


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 40), st.integers(1, 14),
       st.sampled_from(["random", "ties", "rank_one", "constant_cols", "scaled"]))
def test_synthesis_moments_fuzz(seed, n_rows, p, shape):
    rng = np.random.default_rng(seed)
    g = int(rng.integers(1, 4))
    if shape == "ties":
        x = rng.integers(0, 2, (g, n_rows, p)).astype(float)
    elif shape == "rank_one":
        x = rng.normal(size=(g, n_rows, 1)) * rng.normal(size=(g, 1, p))
    else:
        x = rng.normal(size=(g, n_rows, p))
    if shape == "constant_cols":
        x[:, :, ::2] = 3.0
    if shape == "scaled":
        x = x * 10.0 ** rng.uniform(-3, 3, p) + 10.0 ** rng.uniform(-3, 4, p)
    syn = ps.synthesize_batch(x, rng)
    assert syn.shape == x.shape
    for i in range(g):
        a, b = x[i], syn[i]
        ca, cb = np.cov(a.T, ddof=1).reshape(p, p), np.cov(b.T, ddof=1).reshape(p, p)
        magnitude = np.abs(a).max()
        scale = max(np.abs(np.diag(ca)).max(), 1e-6 * magnitude ** 2)
        assert np.abs(cb - ca).max() <= RTOL * scale
        assert np.abs(b.mean(0) - a.mean(0)).max() <= RTOL * (magnitude + np.sqrt(scale))
        const = np.ptp(a, axis=0) == 0
        assert np.array_equal(b[:, const], a[:, const])


def test_clusters_of_mixed_sizes_keep_positions():
    rng = np.random.default_rng(3)
    sizes = [5, 5, 9, 30, 2, 9]
    cid = rng.permutation(np.repeat(np.arange(len(sizes)), sizes))
    x = rng.normal(size=(cid.size, 6))
    syn = ps.synthesize_clusters(x, cid, np.random.default_rng(0))
    for c in range(len(sizes)):
        a, b = x[cid == c], syn[cid == c]
        assert np.abs(np.cov(b.T) - np.cov(a.T)).max() <= RTOL * np.abs(np.cov(a.T)).max()


def test_same_generator_state_same_draws():
    x = np.random.default_rng(0).normal(size=(4, 20, 3))
    a = ps.synthesize_batch(x, np.random.default_rng(7))
    b = ps.synthesize_batch(x, np.random.default_rng(7))
    assert np.array_equal(a, b)


def test_whitened_draws_are_orthonormal_and_centred():
    q = ps.whitened_draws(np.random.default_rng(1), 3, 25, 6)
    for i in range(3):
        assert np.allclose(q[i].T @ q[i], np.eye(6), atol=1e-13)
        assert np.allclose(q[i].sum(axis=0), 0, atol=1e-13)


def test_synthesis_in_place_overwrites_the_input_with_the_same_rows():
    """The kernel synthesises into its coded matrix (one (n, p) matrix alive, not two): the
    rows are those of a separate output, bit for bit, for clusters of several sizes."""
    from deid.methods.condensation.pca_synthesis import synthesize_clusters
    rng = np.random.default_rng(3)
    cluster = np.r_[np.repeat(np.arange(30), 7), np.repeat(np.arange(30, 40), 12), [40] * 3]
    rng.shuffle(cluster)
    coded = rng.normal(size=(cluster.size, 5))
    apart = synthesize_clusters(coded, cluster, np.random.default_rng(9))
    inside = coded.copy()
    same = synthesize_clusters(inside, cluster, np.random.default_rng(9), in_place=True)
    assert same is inside
    assert np.array_equal(inside, apart)
