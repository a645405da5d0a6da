"""Rebalance k-means clusters so that every cluster has >= k rows (paper 004 Alg. 2 steps 2b-2c).

Step 2b sorts the clusters by ascending size; step 2c gives every cluster C_j with fewer than
k rows the ``k - |C_j|`` rows closest to C_j's center among the clusters with more than k rows.

Deviation (a correction, not a change of intent): as printed, step 2c may take so many rows
from one donor that the donor falls below k.  Here a donor gives at most its *surplus*
(size - k) rows, so a donor never drops below k.

Guarantee and termination.  Let the block (or status subset) hold n rows in s clusters with
n >= s * k (true for every block of :func:`.kmeans.kd_blocks` and for s = n // k).  Then
total surplus - total deficit = sum(size - k) = n - s*k >= 0, so whenever a cluster still
lacks d rows, the clusters with surplus hold at least d movable rows.  The loop visits each
cluster once, in ascending order of its size at the start:

* a deficient cluster takes exactly its deficit from donors' surplus and ends with exactly k
  rows; it is never a donor afterwards (surplus 0);
* a donor only loses surplus rows, so it keeps >= k rows;
* so after the visit of every deficient cluster, no cluster is below k, and the loop stops
  after at most s visits.  A visit of a cluster lacking d rows looks at the rows of the
  clusters that still have surplus (kept as one shrinking list: a row leaves it when it moves
  or its donor reaches k), first among its 4d + 32 nearest (one partition), then among all
  when the donor caps exhaust those, so a visit always finds its rows.  Ties (equal
  distances, e.g. all rows equal) go by row position; the result is deterministic, and the
  same as scanning all n rows on every visit (tests/unit/condensation/test_condensation_exact_kernels.py).

Empty clusters (duplicate k-means seeds, all-equal rows) are deficient clusters like any
other: they take the k rows nearest their (stale) center.

:func:`refine_rebalanced` (beyond the paper): step 2c can pull rows into a short cluster from
far away (on registry-like data it raised the within-cluster sum of squares by 40-150 % over
k-means' own).  A few *rebalanced Lloyd rounds* repair most of it: recompute the centers of the
rebalanced clusters, re-assign every row to its nearest center, rebalance again (steps 2b-2c);
the labels with the smallest sum of squares are kept.  Every candidate went through
:func:`rebalance`, so the >= k guarantee and termination (a fixed number of rounds) hold.
"""

import numpy as np

from ...errors import DeidError, INVALID_PARAMETER_VALUE
from .kmeans import nearest_of, sq_distances

DEFAULT_ROUNDS = 3


def rebalance(features, labels, centers, k, sq_dist=None):
    """Return new int64 labels in which every one of the ``len(centers)`` clusters has >= k rows.

    ``features``: float64 (n, p), the clustering features (weights applied); ``labels``: int64
    (n,) in ``0..s-1``; ``centers``: float64 (s, p), the k-means centers (004 step 2c measures
    "closest to the center of C_j" against them; they are not updated as rows move);
    ``sq_dist``: the (s, n) squared distances of the rows to ``centers`` if already computed.
    Requires n >= s * k.
    """
    n_clusters = centers.shape[0]
    labels = np.array(labels, dtype=np.int64, copy=True)
    if labels.size < n_clusters * k:
        raise DeidError(INVALID_PARAMETER_VALUE, "too many clusters for the rows to rebalance",
                        hint="form at most n // k clusters from n rows")
    sizes = np.bincount(labels, minlength=n_clusters)
    if sizes.min() >= k:
        return labels
    if sq_dist is None:
        sq_dist = sq_distances(np.ascontiguousarray(features.T),
                               np.einsum("ij,ij->i", features, features), centers)
    # step 2b: the short clusters in ascending order of size (ties: lowest index).  A short
    # cluster never gives rows (surplus 0), so its size and need are known before its visit.
    visits = np.argsort(sizes, kind="stable")[:np.count_nonzero(sizes < k)]
    needs = (k - sizes[visits]).tolist()
    # a visit only lowers donors' surplus by what it takes and leaves the visited cluster at
    # exactly k (surplus 0): the surplus is kept up to date instead of recomputed from sizes
    surplus = np.maximum(sizes - k, 0)
    rows = np.flatnonzero(surplus[labels] > 0)             # the donors' rows, in row order
    donor = labels[rows]
    for j, need in zip(visits.tolist(), needs):             # step 2c
        at, taken = nearest_capped(sq_dist[j].take(rows), donor, surplus, need)
        labels[rows.take(at)] = j
        surplus -= taken
        keep = surplus.take(donor) > 0                      # donors still with surplus...
        keep[at] = False                                    # ...and rows not just moved
        rows, donor = rows[keep], donor[keep]
    return labels


def nearest_capped(sq, donor, surplus, need):
    """Step 2c for one short cluster: positions of the first ``need`` candidates in order of
    (``sq``, position), no donor giving more than its surplus; and the rows taken per donor.

    ``sq``: squared distances of the candidates (the rows of the donors, in row order) to the
    short cluster's center; ``donor``: their clusters; ``surplus``: max(size - k, 0) per
    cluster (> 0 for every donor).  Looks among the ``4 * need + 32`` nearest candidates
    first (all tied with the last included: a prefix of the order) and among all when the
    donors' caps leave too few there.  Picking "the first in order under caps" from a prefix
    of an order gives the same positions as from the whole order whenever the prefix yields
    enough.
    Returns ``(positions int64 (need,), taken int64 (s,))``.
    """
    short = 4 * need + 32
    if sq.size > short:
        cutoff = np.partition(sq, short - 1)[short - 1]
        near = np.flatnonzero(sq <= cutoff)
        near = near[np.argsort(sq.take(near), kind="stable")]
        at, taken = _first_under_caps(near, donor.take(near), surplus, need)
        if at.size == need:
            return at, taken
    near = np.argsort(sq, kind="stable")
    return _first_under_caps(near, donor.take(near), surplus, need)


def refine_rebalanced(features, labels, centers, k, rounds=DEFAULT_ROUNDS):
    """Rebalance (steps 2b-2c), then ``rounds`` rebalanced Lloyd rounds; int64 labels of the
    candidate with the smallest within-cluster sum of squares (ties: the earliest)."""
    features_t = np.ascontiguousarray(features.T)
    row_sq = np.einsum("ij,ij->i", features, features)
    best = rebalance(features, labels, centers, k)
    best_sse, counts, sums = _sse(features, row_sq, best, centers.shape[0])
    current = best
    for _ in range(int(rounds)):
        centers = _means(centers, counts, sums)     # cluster_means of current, sums reused
        sq_dist = sq_distances(features_t, row_sq, centers)
        nearest = nearest_of(sq_dist)
        current = rebalance(features, nearest, centers, k, sq_dist=sq_dist)
        sse, counts, sums = _sse(features, row_sq, current, centers.shape[0])
        if sse < best_sse:
            best, best_sse = current, sse
        if np.array_equal(nearest, current):
            break                        # already balanced k-means fixed point
    return best


def _sse(features, row_sq, labels, n_clusters):
    counts = np.bincount(labels, minlength=n_clusters)
    p = features.shape[1]
    sums = np.bincount((labels[:, None] * p + np.arange(p)).ravel(), weights=features.ravel(),
                       minlength=n_clusters * p).reshape(n_clusters, p)
    filled = counts > 0
    sse = float(row_sq.sum() - (np.einsum("ij,ij->i", sums, sums)[filled]
                                / counts[filled]).sum())
    return sse, counts, sums


def _means(centers, counts, sums):
    """:func:`.kmeans.cluster_means` from the counts and sums :func:`_sse` already formed."""
    out = centers.copy()
    filled = counts > 0
    out[filled] = sums[filled] / counts[filled, None]
    return out


def _first_under_caps(pool, donors, surplus, need):
    """The first ``need`` entries of ``pool`` (in order of preference; ``donors`` their
    clusters), no donor giving more than its ``surplus`` (fewer if the caps run out); and
    the entries taken per donor."""
    taken = np.bincount(donors[:need], minlength=surplus.size)
    if (taken <= surplus).all():
        return pool[:need], taken                          # no cap binds (the usual case)
    # rank of each candidate among the candidates of its own donor, in pool order
    by_donor = np.argsort(donors, kind="stable")
    donor_sorted = donors[by_donor]
    position = np.arange(pool.size)
    run_head = np.ones(pool.size, dtype=bool)
    run_head[1:] = donor_sorted[1:] != donor_sorted[:-1]
    run_start = np.maximum.accumulate(np.where(run_head, position, 0))
    rank = np.empty(pool.size, dtype=np.int64)
    rank[by_donor] = position - run_start
    under = np.flatnonzero(rank < surplus[donors])[:need]
    return pool[under], np.bincount(donors[under], minlength=surplus.size)
