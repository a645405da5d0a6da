"""Per-cluster synthetic data through PCA, with exact moments (paper 004 Alg. 3, Prop. 1).

004 Alg. 3 rotates a cluster C_j into its principal components Z_1..Z_p (step 1), draws new
normal components Z'_i with the size, mean and deviation of Z_i (step 2), combines them (step
3) and rotates back (step 4).  The paper says the means and covariances "are preserved"; with
independent normal draws that holds only in expectation (papers/README.md, Known pitfalls).

Moment-exact variant (beyond the paper).  For a cluster with n rows, mean mu and centred rows
A (n, p), let A^T A = V diag(lam) V^T (PCA, Alg. 3 step 1).  Draw G (n, r) standard normal
(step 2), *whiten* it: centre its columns and orthonormalise them (G_c = Q R with R's
diagonal positive, so that Q is Haar-distributed; R from the Cholesky factor of G_c^T G_c,
or a QR decomposition when G_c is not tall enough to be well conditioned); Q's columns are
orthonormal and orthogonal to the all-ones vector.  *Colour* it: Z' = Q diag(sqrt(lam)) has
column means exactly 0 and Z'^T Z' = diag(lam) exactly, i.e. each Z'_i has exactly the mean
and variance of Z_i and the Z'_i are exactly uncorrelated (steps 2-3).  Rotating back (step 4)

    C'_j = mu + Z' V^T,   so   mean(C'_j) = mu   and   (C'_j - mu)^T (C'_j - mu) = A^T A,

i.e. the synthetic cluster has the original mean vector and covariance matrix up to floating-
point rounding (about 1e-15 relative to each column's variance: every column is synthesised
in units of its own within-cluster spread, then scaled back).

Fewer rows than attributes (n <= p).  The centred cluster spans at most n - 1 dimensions.
Prop. 1 (the transpose trick): the eigenvectors u of the n x n matrix A A^T give those of
A^T A as A^T u, with the same eigenvalues.  We use the n - 1 leading u (the dropped one has
eigenvalue 0: A A^T always has the all-ones vector in its null space) and colour with their
coefficients U^T A = diag(sqrt(lam)) V^T, which needs no division by sqrt(lam) (so null
directions cost nothing); the whitened draws then have r = n - 1 columns.  With n > p the direct
p x p decomposition is used (r = p <= n - 1).  :func:`pca_direct` and :func:`pca_transpose`
expose both decompositions (they agree; tested).

Limit of exactness: a cluster's mean and covariance determine a 2-row cluster up to the order
of its rows, so a 2-row cluster (possible only with k = 2) is released as its source
rows; with n >= 3 rows the synthetic rows are mu + O A for a random orthogonal O on the
(n - 1)-dimensional centred space, new rows with the same first two moments.

Columns constant within a cluster are reproduced exactly (their centred values are set to
0 and the constant written back).

Clusters are processed in batches of equal size: stacked (g, n, p) arrays, one batched
``np.linalg.eigh`` and one batched Cholesky (or QR) per size (numpy >= 1.22 gufuncs).
"""

import numpy as np

from ...errors import DeidError, INVALID_PARAMETER_VALUE

# Rows per batched call: bounds the temporaries of very common cluster sizes.
_BATCH_ROWS = 1 << 16


def pca_direct(centered):
    """PCA of stacked centred clusters ``(g, n, p)`` through the p x p matrices A^T A.

    Returns ``(eigenvalues (g, p), components (g, p, p))``, eigenvalues of A^T A (= (n-1) x the
    covariance) in descending order, components as columns.
    """
    gram = np.matmul(np.swapaxes(centered, 1, 2), centered)
    lam, vec = np.linalg.eigh(gram)
    return lam[:, ::-1], vec[:, :, ::-1]


def pca_transpose(centered):
    """PCA through the n x n matrices A A^T (004 Prop. 1, the transpose trick).

    Returns ``(eigenvalues (g, n), components (g, p, n))`` in descending order; component i is
    A^T u_i / ||A^T u_i|| (Prop. 1), or 0 where the eigenvalue is (numerically) 0.
    """
    small = np.matmul(centered, np.swapaxes(centered, 1, 2))
    lam, u = np.linalg.eigh(small)
    lam, u = lam[:, ::-1], u[:, :, ::-1]
    comps = np.matmul(np.swapaxes(centered, 1, 2), u)               # A^T u, (g, p, n)
    norms = np.sqrt(np.einsum("gpi,gpi->gi", comps, comps))
    tiny = norms <= 1e-12 * np.maximum(norms.max(axis=1, keepdims=True), 1e-300)
    comps = np.divide(comps, norms[:, None, :], out=np.zeros_like(comps),
                      where=~tiny[:, None, :])
    return lam, comps


def whitened_draws(rng, n_groups, n_rows, n_cols):
    """``(n_groups, n_rows, n_cols)`` normal draws whitened per group: every column has mean
    exactly 0 (up to rounding), the columns are orthonormal.  Needs n_cols <= n_rows - 1."""
    draws, transform = whitening(rng, n_groups, n_rows, n_cols)
    return draws if transform is None else np.matmul(draws, transform)


def whitening(rng, n_groups, n_rows, n_cols):
    """Centred normal draws G (g, n, r) and a transform T (g, r, r) with G T orthonormal
    (T is None when G itself is).  G T is the Q of the thin QR decomposition G = Q R with
    R's diagonal positive, which is Haar-distributed.  With n >= 4r, T = R^-1 comes from the
    Cholesky factor of G^T G = R^T R (cheap; G is then well conditioned); otherwise Q comes
    from a QR decomposition."""
    draws = rng.standard_normal((n_groups, n_rows, n_cols))
    draws -= draws.mean(axis=1, keepdims=True)
    if n_rows >= 4 * n_cols:
        gram = np.matmul(np.swapaxes(draws, 1, 2), draws)
        factor = np.linalg.cholesky(gram)                            # lower, = R^T
        return draws, np.swapaxes(np.linalg.inv(factor), 1, 2)      # R^-1 = L^-T
    q, r = np.linalg.qr(draws)
    signs = np.sign(np.diagonal(r, axis1=1, axis2=2))
    signs[signs == 0] = 1.0
    return q * signs[:, None, :], None


def nearest_distances(rows, source, exclude_self=False):
    """(g, n) distance of every row of ``rows`` (g, n, p) to its nearest row of ``source``
    (g, m, p), cluster by cluster; ``exclude_self``: rows is source, a row is not its own."""
    d2 = (np.einsum("gnp,gnp->gn", rows, rows)[:, :, None]
          + np.einsum("gmp,gmp->gm", source, source)[:, None, :]
          - 2.0 * np.matmul(rows, np.swapaxes(source, 1, 2)))
    if exclude_self:
        d2[:, np.arange(rows.shape[1]), np.arange(rows.shape[1])] = np.inf
    return np.sqrt(np.maximum(d2.min(axis=2), 0.0))


def guard_distances(clusters, synthetic, rounds, draw):
    """Redraw (within the moment constraints) the clusters whose synthetic rows lie closer to
    a source row of the cluster than a held-out record would: the threshold of a cluster is the
    median distance of its source rows to their nearest other source row (leave one out, the
    distance a new record of the same population has).  ``draw()`` makes a new moment-exact
    synthesis of the batch (another random rotation); up to ``rounds`` redraws, each cluster
    keeps its draw with the fewest rows under its threshold (the first among equals).  Returns
    (synthetic, rows under the threshold before, after)."""
    threshold = np.median(nearest_distances(clusters, clusters, exclude_self=True), axis=1)
    close = (nearest_distances(synthetic, clusters) < threshold[:, None]).sum(axis=1)
    before = int(close.sum())
    for _ in range(rounds):
        if not close.any():
            break
        again = draw()
        count = (nearest_distances(again, clusters) < threshold[:, None]).sum(axis=1)
        better = count < close
        synthetic[better] = again[better]
        close = np.where(better, count, close)
    return synthetic, before, int(close.sum())


def synthesize_batch(clusters, rng):
    """Moment-exact Alg. 3 for stacked clusters of equal size: ``(g, n, p)`` -> ``(g, n, p)``."""
    n_groups, n_rows, p = clusters.shape
    mean = clusters.mean(axis=1, keepdims=True)
    centered = clusters - mean
    constant = clusters.max(axis=1) == clusters.min(axis=1)          # (g, p)
    centered[np.broadcast_to(constant[:, None, :], centered.shape)] = 0.0
    if p == 0:
        return clusters.copy()
    # each column in units of its own within-cluster spread: rounding then stays relative to
    # every column's variance, not to the cluster's largest (a near-constant numeric column
    # beside one-hot blocks kept its covariance only to ~1e-15 of the one-hots' variance).
    # synthetic = (mu +) O A for a random orthogonal O either way: the same distribution.
    spread = np.sqrt(np.einsum("gnp,gnp->gp", centered, centered))
    spread[spread == 0] = 1.0
    centered /= spread[:, None, :]
    if n_rows - 1 >= p:                                               # direct PCA
        lam, comps = pca_direct(centered)
        colour = np.sqrt(np.maximum(lam, 0.0))[:, :, None] * np.swapaxes(comps, 1, 2)
        draws, transform = whitening(rng, n_groups, n_rows, p)
    else:                                                             # Prop. 1
        small = np.matmul(centered, np.swapaxes(centered, 1, 2))
        _, u = np.linalg.eigh(small)
        lead = u[:, :, 1:]                                            # drop the null vector
        colour = np.matmul(np.swapaxes(lead, 1, 2), centered)        # U^T A, (g, n-1, p)
        draws, transform = whitening(rng, n_groups, n_rows, n_rows - 1)
    if transform is not None:
        colour = np.matmul(transform, colour)                         # whiten, then colour
    synthetic = np.matmul(draws, colour)
    synthetic -= synthetic.mean(axis=1, keepdims=True)
    synthetic *= spread[:, None, :]
    synthetic += mean
    if constant.any():
        fixed = np.broadcast_to(constant[:, None, :], synthetic.shape)
        synthetic[fixed] = np.broadcast_to(clusters[:, :1, :], synthetic.shape)[fixed]
    return synthetic


def synthesize_clusters(coded, cluster_id, rng, guard_rounds=0, guard_counts=None,
                        in_place=False):
    """Synthetic rows for every cluster (004 Alg. 2 step 2.d.i with Alg. 3).

    ``coded``: float64 (n, p), numeric attributes (ideally standardised) and one-hot blocks;
    ``cluster_id``: int64 (n,) in 0..s-1, every cluster non-empty and of >= 2 rows.
    Returns float64 (n, p): the rows of cluster c in the output (at the positions of cluster
    c's input rows) are the synthetic rows of cluster c -- synthetic rows are exchangeable,
    so position i carries no link to source row i beyond the cluster.  ``guard_rounds`` > 0:
    :func:`guard_distances` (beyond 004), the counts of synthetic rows closer to a source row
    than a held-out record before and after added to ``guard_counts`` ([before, after]).
    ``in_place``: the synthetic rows overwrite ``coded`` (a float64 array) and are returned.
    """
    coded = np.asarray(coded, dtype=np.float64)
    n = coded.shape[0]
    # each batch reads its clusters' rows (a copy) before writing them, and clusters are
    # disjoint: the output can overwrite the input (one (n, p) matrix instead of two)
    out = coded if in_place else np.empty_like(coded)
    if n == 0:
        return out
    sizes = np.bincount(cluster_id)
    if sizes.min() < 2:
        raise DeidError(INVALID_PARAMETER_VALUE, "every cluster needs at least 2 rows",
                        hint="cluster ids must be 0..s-1 with clusters of >= k >= 2 rows")
    keys = cluster_id.astype(np.uint16) if sizes.size <= 1 << 16 else cluster_id
    order = np.argsort(keys, kind="stable")     # 16-bit keys: numpy's radix sort, same order
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    for size in np.unique(sizes):
        clusters = np.flatnonzero(sizes == size)
        per_batch = max(1, _BATCH_ROWS // int(size))
        for b0 in range(0, clusters.size, per_batch):
            batch = clusters[b0:b0 + per_batch]
            rows = order[starts[batch][:, None] + np.arange(size)]    # (g, size)
            clusters_rows = coded[rows]
            made = synthesize_batch(clusters_rows, rng)
            if guard_rounds:
                made, before, after = guard_distances(
                    clusters_rows, made, guard_rounds,
                    lambda: synthesize_batch(clusters_rows, rng))
                if guard_counts is not None:
                    guard_counts[0] += before
                    guard_counts[1] += after
            out[rows] = made
    return out
