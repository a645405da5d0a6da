"""Clustering step of condensation (paper 004): k-d blocking, weighted k-means, Alg. 1 groups.

Three pure-numpy pieces, all over a float64 (n, p) matrix of *clustering features*: every
attribute already standardised and multiplied by the square root of its weight, so that plain
Euclidean distance on the features is 004 Alg. 2 step 2a's weighted Euclidean distance.

* :func:`kd_blocks` -- the scaling step (not in 004): cut the rows into blocks with recursive
  principal-axis (or k-d median) cuts so that k-means can run inside each block.  It is a function of the features only
  (deterministic, no seed), separate from the per-block step, so blocks can run on shards.
* :func:`weighted_kmeans` -- Lloyd's k-means with seeded k-means++ initialisation (004 Alg. 2
  step 2a cites k-means [68]; k-means++ is our choice of initialisation), with Hamerly's
  bounds to skip distance computations that cannot change an assignment.
* :func:`seed_groups` -- 004 Alg. 1 steps 1-4 (Aggarwal's condensation): random seed, its k-1
  nearest rows, remove, repeat; leftovers go to the nearest group.

Rebalancing to >= k rows per cluster (Alg. 2 steps 2b-2c) is :mod:`.rebalance`.

Every random step takes a ``numpy.random.Generator``; equal inputs and generator states give
equal outputs.  Ties go to the lowest center index (assignment) or the lowest row position.
Distances use the expanded form |x|^2 - 2 x.c + |c|^2 with the cross products laid out
(centers, rows) (:func:`cross_products`: einsum, which sums over the attributes in the order of
the reference BLAS's matrix product that numpy links here -- the same bits, in less time).
"""

import numpy as np

# Lloyd rounds before rebalancing; :func:`.rebalance.refine_rebalanced` continues with rebalanced
# rounds (R's kmeans default iter.max, which 004 sec. 3.4 cites, is 10).
DEFAULT_MAX_ITER = 5
# Bounds are compared with this slack so that rounding never skips a row that should move.
_BOUND_SLACK = 1.0 - 1e-9
_SPREAD_SAMPLE = 4096


def kd_blocks(features, k, block_rows, split="principal"):
    """Partition rows into blocks by recursive cuts; ``int64 (n,)`` block id per row.

    A block with more than ``block_rows`` rows and at least ``2k`` rows is cut in two:

    * ``split="principal"`` (default): project the block's rows on its principal axis (top
      eigenvector of the covariance) and cut the projections at the multiple of k, within the
      central half, that minimises the two sides' summed squared deviations (a one-dimensional
      two-means cut; ties between equal cuts go to the one nearest the middle).  Axis and cut
      are estimated on at most ``_SPREAD_SAMPLE`` evenly spaced rows of the block;
    * ``split="median"``: the k-d median cut along the feature with the largest variance.

    In both, with ``q = n_b // k``, the lower side gets a multiple of k rows and each side >= k:

    * every block has >= k rows whenever n >= k and can form ``n_b // k >= 1`` clusters of >= k
      rows;
    * the blocks together form exactly as many clusters as the unblocked data (sum of
      ``n_b // k`` equals ``n // k``);
    * a block that cannot be cut (fewer than 2k rows) is a leaf whatever its size, so blocks
      have between k and ``max(block_rows, 2k - 1)`` rows.

    Ties never block a cut: the cut is by position in value order, not by value (blocks are a
    computational device, not a privacy partition).  ``block_rows=None`` gives one block (the
    exact, unblocked algorithm).  Blocks are numbered depth-first, lower side first.
    On registry-like data the principal cut gave clusters as tight as unblocked k-means and
    the median cut 5-20 % looser (bench/condensation/bench_condensation_kernel.py).
    """
    n = features.shape[0]
    block_id = np.zeros(n, dtype=np.int64)
    if block_rows is None or n <= block_rows or n < 2 * k:
        return block_id
    if features.shape[1] == 0:                   # no attribute varies: cut by position
        features = np.zeros((n, 1))
    if split == "principal":
        cut = _principal_cut
        features = features.astype(np.float32)  # halves the memory traffic; only ranks matter
    else:
        cut = _median_cut
    leaves = []
    stack = [np.arange(n, dtype=np.int64)]
    while stack:
        rows = stack.pop()
        if rows.size <= block_rows or rows.size < 2 * k:
            leaves.append(rows)
            continue
        lower, upper = cut(features, rows, k)
        stack.append(upper)
        stack.append(lower)
    for b, rows in enumerate(leaves):
        block_id[rows] = b
    return block_id


def _principal_cut(features, rows, k):
    n_rows = rows.size
    block = np.take(features, rows, axis=0)
    sample = block[::max(1, n_rows // _SPREAD_SAMPLE)]
    _, axes = np.linalg.eigh(np.cov(sample.T).reshape(features.shape[1], -1))
    axis = np.ascontiguousarray(axes[:, -1], dtype=features.dtype)
    ranked = np.sort(sample @ axis).astype(np.float64)
    ranked -= ranked.mean()
    q, n_sample = n_rows // k, ranked.size
    cuts = k * np.arange(max(1, q // 4), min(q - 1, -(-3 * q // 4)) + 1)
    cuts = cuts[np.argsort(np.abs(2 * cuts - n_rows), kind="stable")]   # middle first
    # the two sides' squared deviations, estimated on the sorted sample
    on_left = np.clip(np.rint(cuts * (n_sample / n_rows)).astype(np.int64), 1, n_sample - 1)
    total, total_sq = np.cumsum(ranked), np.cumsum(ranked * ranked)
    left, left_sq = total[on_left - 1], total_sq[on_left - 1]
    right, right_sq = total[-1] - left, total_sq[-1] - left_sq
    spread = left_sq - left ** 2 / on_left + right_sq - right ** 2 / (n_sample - on_left)
    n_lower = int(cuts[np.argmin(spread)])
    split = np.argpartition(block @ axis, n_lower - 1)
    is_lower = np.zeros(n_rows, dtype=bool)
    is_lower[split[:n_lower]] = True
    return rows[is_lower], rows[~is_lower]                   # both in row order


def _median_cut(features, rows, k):
    n_rows = rows.size
    step = max(1, n_rows // _SPREAD_SAMPLE)
    dim = int(np.argmax(features[rows[::step]].var(axis=0)))
    n_lower = k * ((n_rows // k) // 2)
    split = np.argpartition(features[rows, dim], n_lower - 1)
    is_lower = np.zeros(n_rows, dtype=bool)
    is_lower[split[:n_lower]] = True
    return rows[is_lower], rows[~is_lower]                   # both in row order


def rows_by_block(block_id):
    """List of int64 row-index arrays, one per block (rows in ascending order)."""
    if block_id.size == 0:
        return []
    keys = block_id.astype(np.uint16) if block_id.max() < 1 << 16 else block_id
    order = np.argsort(keys, kind="stable")     # 16-bit keys: numpy's radix sort, same order
    cuts = np.flatnonzero(np.diff(block_id[order])) + 1
    return np.split(order, cuts)


def kmeans_plus_plus(features, n_clusters, rng, row_sq=None, features_t=None):
    """k-means++ seeding (Arthur and Vassilvitskii 2007): int64 row indices of the seeds.

    The first seed is uniform; each next one is drawn with probability proportional to the
    squared distance to the nearest seed so far.  When every row coincides with a seed (all
    distances 0, e.g. all rows equal) the next seed is uniform over all rows; duplicate seeds
    then give empty clusters, which :mod:`.rebalance` fills.
    """
    n = features.shape[0]
    if row_sq is None:
        row_sq = np.einsum("ij,ij->i", features, features)
    seeds = np.empty(n_clusters, dtype=np.int64)
    uniforms = rng.random(n_clusters)
    seeds[0] = min(int(uniforms[0] * n), n - 1)
    nearest_sq = _sq_dist_to_row(features, row_sq, seeds[0], features_t)
    for c in range(1, n_clusters):
        cum = np.cumsum(nearest_sq)
        total = cum[-1]
        if total > 0.0:
            # cum[i] > r >= cum[i-1] implies nearest_sq[i] > 0: never an existing seed
            pick = min(int(np.searchsorted(cum, uniforms[c] * total, side="right")), n - 1)
        else:
            pick = min(int(uniforms[c] * n), n - 1)
        seeds[c] = pick
        np.minimum(nearest_sq, _sq_dist_to_row(features, row_sq, pick, features_t),
                   out=nearest_sq)
    return seeds


def weighted_kmeans(features, n_clusters, rng, max_iter=DEFAULT_MAX_ITER):
    """Lloyd's k-means (004 Alg. 2 step 2a) with k-means++ seeds and Hamerly's bounds.

    Returns ``(labels int64 (n,), centers float64 (n_clusters, p))``; ``centers`` are the means
    of the final clusters (an empty cluster keeps its last center).  Stops when no label
    changes or after ``max_iter`` rounds of center updates (R's kmeans default is 10; 004 sec.
    3.4).  The weights of 004 are in the features already (columns scaled by sqrt(weight)).

    Hamerly (2010): every row keeps an upper bound on the distance to its own center and a
    lower bound on the distance to any other; after the centers move the bounds are loosened
    by the moves, and only rows whose bounds overlap (or whose upper bound exceeds half the
    distance from their center to the nearest other center) are re-assigned by computing
    distances.  The result is Lloyd's (up to floating-point ties); the saving is arithmetic.
    """
    n = features.shape[0]
    if n_clusters <= 1:
        return np.zeros(n, dtype=np.int64), features.mean(axis=0, keepdims=True)
    row_sq = np.einsum("ij,ij->i", features, features)
    features_t = np.ascontiguousarray(features.T)
    centers = features[kmeans_plus_plus(features, n_clusters, rng, row_sq, features_t)]
    labels, upper, lower = _assign(features_t, row_sq, centers)
    counts = np.bincount(labels, minlength=n_clusters)
    sums = _cluster_sums(features, labels, n_clusters)
    for _ in range(max(1, int(max_iter))):
        new_centers = centers.copy()
        filled = counts > 0
        new_centers[filled] = sums[filled] / counts[filled, None]
        step = new_centers - centers
        moved = np.sqrt(np.einsum("ij,ij->i", step, step))
        centers = new_centers
        if not moved.any():
            break
        # loosen the bounds by the center moves
        upper += moved[labels]
        top = int(np.argmax(moved))
        runner_up = np.partition(moved, n_clusters - 2)[n_clusters - 2]
        lower -= np.where(labels == top, runner_up, moved[top])
        center_gap = _pairwise_sq(centers)
        np.fill_diagonal(center_gap, np.inf)
        half_gap = 0.5 * np.sqrt(center_gap.min(axis=1))
        bound = np.maximum(half_gap[labels], lower) * _BOUND_SLACK
        check = np.flatnonzero(upper > bound)
        if check.size:
            own = features[check] - centers[labels[check]]
            upper[check] = np.sqrt(np.einsum("ij,ij->i", own, own))
            check = check[upper[check] > bound[check]]
        if check.size == 0:
            break
        new_labels, new_upper, new_lower = _assign(features_t[:, check], row_sq[check], centers)
        changed = new_labels != labels[check]
        upper[check], lower[check] = new_upper, new_lower
        if not changed.any():
            break
        rows, old, new = check[changed], labels[check[changed]], new_labels[changed]
        labels[rows] = new
        counts += np.bincount(new, minlength=n_clusters) - np.bincount(old, minlength=n_clusters)
        sums += _cluster_sums(features[rows], new, n_clusters)
        sums -= _cluster_sums(features[rows], old, n_clusters)
    return labels, cluster_means(features, labels, centers)


def _cluster_sums(features, labels, n_clusters):
    p = features.shape[1]
    flat = (labels[:, None] * p + np.arange(p)).ravel()
    return np.bincount(flat, weights=features.ravel(),
                       minlength=n_clusters * p).reshape(n_clusters, p)


def _assign(features_t, row_sq, centers):
    """Nearest center (ties: lowest index), distance to it and to the second nearest, of
    every row; ``features_t`` is the (p, n) C-contiguous transpose of the rows (the layout
    for which numpy's matrix product is fastest here).  Distances are laid out (centers, rows)
    so that the minimum over centers is a vectorised reduction across rows."""
    sq = sq_distances(features_t, row_sq, centers)
    n_clusters, n = sq.shape
    labels = nearest_of(sq)
    best = sq[labels, np.arange(n)]
    if n_clusters > 1:
        sq[labels, np.arange(n)] = np.inf
        second = np.sqrt(sq.min(axis=0))
    else:
        second = np.full(n, np.inf)
    return labels, np.sqrt(best), second


def nearest_of(sq):
    """int64 row index of the smallest entry of every column of ``sq`` (c, n), ties to the
    lowest index: argmin returns the first occurrence of the minimum (the distances are
    finite, so the minimum is an entry's own value) in one pass instead of one per center."""
    return sq.argmin(axis=0).astype(np.int64, copy=False)


def cluster_means(features, labels, centers):
    """Mean of every cluster's rows; an empty cluster keeps its row of ``centers``."""
    n_clusters = centers.shape[0]
    counts = np.bincount(labels, minlength=n_clusters)
    sums = _cluster_sums(features, labels, n_clusters)
    out = centers.copy()
    filled = counts > 0
    out[filled] = sums[filled] / counts[filled, None]
    return out


def sq_distances(features_t, row_sq, centers):
    """Squared distances laid out (c, n), clipped at 0 (expanded form; one matrix product)."""
    # (-2 c) @ x equals -2 (c @ x) bit for bit: scaling by a power of two commutes with
    # rounding, so the scaling is folded into the (small) centers instead of a pass over (c, n)
    sq = cross_products(centers * -2.0, features_t)
    sq += np.einsum("ij,ij->i", centers, centers)[:, None]
    sq += row_sq[None, :]
    np.maximum(sq, 0.0, out=sq)
    return sq


def cross_products(a, b_t):
    """``a @ b_t`` for ``a`` (c, p) and ``b_t`` (p, n), every entry summed over p in order.

    ``np.einsum`` without ``optimize`` accumulates ``a[:, l] * b_t[l]`` for l = 0, 1, ..., p-1
    into a zeroed (c, n) array, row-contiguous (each product rounded, then added): exactly the
    loop order of the reference BLAS's dgemm, which numpy's ``@`` calls here, so the distances
    are bit for bit those of the matrix product, at about 0.65 of its time (tested against
    the explicit loop).  A single row (n == 1) goes through ``@`` (numpy's gemv path).
    """
    if b_t.ndim == 2 and b_t.shape[1] >= 2:
        return np.einsum("cl,ln->cn", a, b_t)
    return a @ b_t


def _pairwise_sq(points):
    sq = np.einsum("ij,ij->i", points, points)
    out = points @ points.T
    out *= -2.0
    out += sq[:, None]
    out += sq[None, :]
    return np.maximum(out, 0.0)


def nearest_center(features, centers):
    """int64 index of the nearest center of every row (ties: the lowest index)."""
    row_sq = np.einsum("ij,ij->i", features, features)
    return _assign(np.ascontiguousarray(features.T), row_sq, centers)[0]


def seed_groups(features, k, rng):
    """004 Alg. 1 steps 1-4 (Aggarwal's condensation), int64 group label per row.

    ``s = n // k`` times: draw a random seed among the remaining rows, group it with its k-1
    nearest remaining rows (ties by row position), remove the group.  The < k leftover rows go
    to the group with the nearest centroid (step 4, "closest cluster").  Every group has >= k
    rows.  Deviation: Alg. 1 step 2 loops "for i = 0 to s", one round more than the s groups
    the text describes; we form s groups.
    """
    n = features.shape[0]
    s = n // k
    labels = np.full(n, -1, dtype=np.int64)
    remaining = np.arange(n, dtype=np.int64)
    for g in range(s):
        seed_pos = int(rng.integers(remaining.size))
        sq = _sq_dist_to(features[remaining], features[remaining[seed_pos]])
        sq[seed_pos] = -1.0                       # the seed itself comes first
        take = np.argsort(sq, kind="stable")[:k]
        labels[remaining[take]] = g
        keep = np.ones(remaining.size, dtype=bool)
        keep[take] = False
        remaining = remaining[keep]
    if remaining.size:
        grouped = labels >= 0
        counts = np.bincount(labels[grouped], minlength=s)
        centroids = _cluster_sums(features[grouped], labels[grouped], s) / counts[:, None]
        labels[remaining] = nearest_center(features[remaining], centroids)
    return labels


def _sq_dist_to_row(features, row_sq, i, features_t=None):
    """Squared distances of all rows to row i (expanded form, clipped at 0); ``features_t``:
    the (p, n) C-contiguous transpose, if at hand (einsum over it sums over the attributes in
    order, bit for bit the matrix-vector product, and faster; see :func:`cross_products`)."""
    if features_t is not None and features.shape[0] >= 2:
        sq = np.einsum("ln,l->n", features_t, features[i] * -2.0)   # -2 folded: exact
    else:
        sq = features @ features[i]
        sq *= -2.0
    sq += row_sq
    sq += row_sq[i]
    return np.maximum(sq, 0.0, out=sq)


def _sq_dist_to(features, point):
    diff = features - point
    return np.einsum("ij,ij->i", diff, diff)
