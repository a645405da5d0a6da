"""The condensation kernel's faster steps give exactly the results of the loops they replaced
(004 Alg. 2 steps 2a-2c): releases for a seed must not change with an optimisation.

* :func:`deid.methods.rebalance.rebalance` (step 2c on a shrinking list of donor rows, one
  partition over it per short cluster) against the per-cluster loop of 87d0847, kept here as
  the reference, on random, tie-heavy, all-equal, skewed, empty-cluster and k-means inputs;
* :func:`deid.methods.kmeans.cross_products` (einsum) against the explicit sum over the
  attributes in order, and against ``@`` (the reference BLAS's dgemm sums in the same order).
"""

import numpy as np
from hypothesis import given, settings, strategies as st

from deid.methods.condensation import kmeans
from deid.methods.condensation.rebalance import rebalance
from fixtures.rebalance_inputs import rebalance_inputs


def reference_rebalance(features, labels, centers, k):
    """004 Alg. 2 steps 2b-2c as main 87d0847 computed them (one pass over all rows per
    short cluster)."""
    n_clusters = centers.shape[0]
    labels = np.array(labels, dtype=np.int64, copy=True)
    sizes = np.bincount(labels, minlength=n_clusters)
    if sizes.min() >= k:
        return labels
    sq_dist = kmeans.sq_distances(np.ascontiguousarray(features.T),
                                  np.einsum("ij,ij->i", features, features), centers)
    for j in np.argsort(sizes, kind="stable"):
        need = k - int(sizes[j])
        if need <= 0:
            break
        surplus = np.maximum(sizes - k, 0)
        sq = np.where(surplus[labels] > 0, sq_dist[j], np.inf)
        short = min(sq.size, 4 * need + 32)
        chosen = np.zeros(0, dtype=np.int64)
        if short < sq.size:
            cutoff = np.partition(sq, short - 1)[short - 1]
            pool = np.flatnonzero(sq <= cutoff)
            chosen = _reference_pick(pool[np.argsort(sq[pool], kind="stable")], labels,
                                     surplus, need)
        if chosen.size < need:
            pool = np.flatnonzero(np.isfinite(sq))
            chosen = _reference_pick(pool[np.argsort(sq[pool], kind="stable")], labels,
                                     surplus, need)
        sizes -= np.bincount(labels[chosen], minlength=n_clusters)
        labels[chosen] = j
        sizes[j] += chosen.size
    return labels


def _reference_pick(pool, labels, surplus, need):
    out, taken = [], np.zeros_like(surplus)
    for row in pool.tolist():                      # the greedy scan, one row at a time
        d = labels[row]
        if surplus[d] > 0 and taken[d] < surplus[d]:
            taken[d] += 1
            out.append(row)
            if len(out) == need:
                break
    return np.asarray(out, dtype=np.int64)




@settings(max_examples=1500, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 30), st.integers(1, 40),
       st.sampled_from(["random", "ties", "few_values", "one_cluster", "skewed", "equal",
                        "kmeans", "duplicate_centers"]))
def test_rebalance_equals_reference_loop(seed, k, s, shape):
    f, labels, centers = rebalance_inputs(np.random.default_rng(seed), k, s, shape)
    assert np.array_equal(rebalance(f, labels, centers, k),
                          reference_rebalance(f, labels, centers, k))


def test_rebalance_equals_reference_on_exact_blocks():
    # n = s * k exactly (every k-d block of the default condensation): every donor ends at k,
    # the donor caps bind on most visits and the candidate lists run dry
    rng = np.random.default_rng(11)
    for trial in range(30):
        k, s = int(rng.integers(3, 40)), int(rng.integers(2, 40))
        f = rng.normal(size=(s * k, 4)) * np.r_[1.0, 0.5, 3.0, 0.1]
        labels, centers = kmeans.weighted_kmeans(f, s, np.random.default_rng(trial), 5)
        assert np.array_equal(rebalance(f, labels, centers, k),
                              reference_rebalance(f, labels, centers, k))


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 60), st.integers(0, 20), st.integers(1, 400))
def test_cross_products_sum_in_order(seed, c, p, n):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(c, p)) * 10.0 ** rng.integers(-3, 4)
    b_t = np.ascontiguousarray(rng.normal(size=(n, p)).T) * 10.0 ** rng.integers(-3, 4)
    got = kmeans.cross_products(a, b_t)
    ordered = np.zeros((c, n))
    for col in range(p):                           # the definition: products added in order
        ordered += a[:, col, None] * b_t[col]
    if n >= 2:
        assert np.array_equal(got, ordered)
    assert np.allclose(got, a @ b_t, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(ordered).max()))


def test_distances_equal_matrix_product_here():
    """On this platform's BLAS (reference dgemm: the same order) the einsum distances are
    bit for bit the matrix product's, which releases of earlier versions used."""
    rng = np.random.default_rng(5)
    for c, p, n in [(35, 9, 3500), (2, 1, 2), (40, 12, 257), (1, 9, 1000), (17, 3, 1)]:
        a, b_t = rng.normal(size=(c, p)), rng.normal(size=(p, n))
        if not np.array_equal(a @ b_t, ((a[:, :, None] * b_t[None]).cumsum(axis=1))[:, -1]):
            continue                               # another BLAS (blocked, FMA): not comparable
        assert np.array_equal(kmeans.cross_products(a, b_t), a @ b_t)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["months", "days", "wide", "floats",
                                                   "negative", "zeros"]))
def test_distinct_counts_equal_unique(seed, kind):
    from deid.methods.condensation.release_values import distinct_counts
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    if kind == "months":
        x = rng.integers(0, 121, n).astype(float)
    elif kind == "days":
        x = rng.integers(1, 4000, n).astype(float)
    elif kind == "wide":
        x = rng.integers(0, 10**9, n).astype(float)
    elif kind == "floats":
        x = np.round(rng.exponential(30, n), 1)
    elif kind == "negative":
        x = rng.integers(-50, 50, n).astype(float)
    else:
        x = rng.choice([0.0, -0.0, 1.0, 2.0], n)
    values, counts, repeats_sorted = distinct_counts(x)
    u, c = np.unique(x, return_counts=True)
    assert np.array_equal(values, u) and np.array_equal(counts, c)
    if repeats_sorted:
        assert np.array_equal(np.repeat(values, counts), np.sort(x))
        assert not np.signbit(np.repeat(values, counts)).any()
