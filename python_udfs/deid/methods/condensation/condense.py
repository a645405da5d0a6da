"""Condensation: synthetic rows that keep each cluster's statistics (paper 004).

:func:`condense` is the pure kernel of the condensation method (no SQL, no plpy):

* ``algorithm="improved"`` -- 004 Alg. 2.  Step 1: split the rows by vital status (only when
  ``status``/``time_col`` are given).  Step 2a: weighted k-means into floor(n_i / k) clusters per
  status subset, weight ``w`` on the survival time and the rest shared equally by the other
  attributes (:func:`.kmeans.weighted_kmeans`).  Steps 2b-2c: rebalance to >= k rows per
  cluster (:mod:`.rebalance`, where the guarantee is argued).  Step 2.d.i: per-cluster synthesis
  through PCA, Alg. 3 / Prop. 1 (:mod:`.pca_synthesis`), status kept.  Step 2.d.ii: survival
  times by within-cluster rank, step 2.d.iii: permissible values (:mod:`.release_values`).  Without survival columns: plain condensation (k-means +
  rebalancing + synthesis), no status split, no time reassignment.
* ``algorithm="original"`` -- 004 Alg. 1, Aggarwal's condensation, the paper's baseline:
  random seeds with their k-1 nearest rows (:func:`.kmeans.seed_groups`), equal weights, every
  column (status and time included) synthesised; step 7 = permissible values.

Deviations from 004 (each also noted where it is implemented):

1. Scale (not in 004): :func:`partition_blocks` first cuts each status subset into blocks by a
   k-d median split over the weighted features (:func:`.kmeans.kd_blocks`: blocks of at most
   ``block_rows`` rows, each >= k rows, cut at multiples of k so the blocks form floor(n_i/k)
   clusters in total); Alg. 2 steps 2a-2c (or Alg. 1 steps 1-4, same blocks) then run inside
   every block (:func:`cluster_block`, a block's own seed stream).  ``block_rows=None`` is the
   exact, unblocked algorithm (allowed up to ``EXACT_MAX_ROWS`` rows per subset).
2. Attributes are standardised before distances (numeric: whole-table z-score; categorical:
   one-hot block, scaled to total variance 1), so that 004's weights mean what they say whatever
   the units.  The one-hot block of 004 sec. 3.1 ("binary dummy variables") is stored in an
   orthonormal basis of its (L-1)-dimensional span (same distances and moments, one column
   less).  Decoding (step 2.d.iii) gives each cluster exactly its source category counts,
   rows chosen by their synthetic one-hot scores (``categories="counts"``; the plain argmax,
   ``"argmax"``, under-represents every cluster's minority categories).
3. Step 2a: k-means++ seeds from a seeded generator (004 does not say; R's kmeans uses random
   centers); Lloyd's algorithm with Hamerly's bounds for at most ``max_iter`` rounds (5; R's
   default is 10, 004 sec. 3.4), then the rebalanced rounds of 4.
4. Steps 2b-2c: a donor never gives more than its surplus over k (the printed step can push a
   donor below k); afterwards ``rebalance_rounds`` rebalanced Lloyd rounds (re-centre, re-assign,
   rebalance; keep the lowest within-cluster sum of squares) repair most of the tightness step
   2c loses (see :mod:`.rebalance`; 0 rounds = the paper).
5. Step 2.d.i / Alg. 3: moment-exact synthesis -- whitened, then coloured draws, so each
   synthetic cluster's mean vector and covariance matrix equal the source cluster's up to
   rounding (Alg. 3 matches them only in expectation); clusters with n <= p rows use Prop. 1
   in their own span (:mod:`.pca_synthesis`).  A 2-row cluster (k = 2 only) is thereby
   released as its source rows: its mean and covariance fix it.
6. Step 2.d.ii: ``survival_times="original"`` is the paper as printed.  The default
   ``"recode"`` releases every time as the value of its bin, bins of >= k rows per vital status
   (a time k rows of a status share is its own bin; sparser times merged with their
   neighbours), handed out by rank of the synthetic time: every released (time, status) pair
   stands for >= k source rows, nothing moves at random, and the order of all times is the
   source's up to the bins (:mod:`.survival_recode`).  ``"ranked"`` moves every source time
   strictly into the half gap below it, ties broken events first: it releases the exact order
   of all times and, on whole-number times, ceil() gives every time back
   (:func:`.release_values.ranked_times`).  ``"coarsened"`` (the default before "recode")
   moves every time to another value of its bin of >= k source rows at random, which biases
   the Cox model of a large table; ``"perturbed"`` moves every time inside its own cell between
   the midpoints to the cluster's neighbouring distinct times (on dense integer months ~98 % of
   the times stay).  Measured in bench/eval_condensation (docs/condensation-evaluation.md).
7. Step 2.d.iii / Alg. 1 step 7: integers rounded, numbers clipped to the column's observed
   range, a column constant within a cluster released as that constant.  Rounding, clipping and
   2.d.ii come after synthesis, so exact moments hold for ``synthetic_unrounded``.
8. Alg. 1 loops "for i = 0 to s" (s + 1 rounds); we form the s = n // k groups the text
   describes.  As in 004's baseline, Alg. 1 synthesises every column, status and time included.
9. Released rows are in a seeded random order and carry their cluster id (for the catalog).
10. Rare records (not in 004; a rare source record copied into the release re-identifies it): the plug-in generalizes every categorical value held
   by fewer than k source rows before this kernel runs, and moves every released row that
   equals a source row shared by fewer than k rows afterwards (:mod:`.rare_values`);
   ``synthetic_unrounded`` stays moment-exact.
"""

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple
import time

import numpy as np

from ...errors import DeidError, INVALID_PARAMETER_VALUE, PRIVACY_MODEL_UNSATISFIABLE
from . import kmeans, pca_synthesis, rebalance as rebalance_mod
from . import release_values

from .inputs import (ALGORITHMS, _invalid, _is_int, _check_table, _check_survival,
                     _check_survival_times, _attribute_weights, _check_block_rows, _check_count)
EXACT_MAX_ROWS = 50_000            # block_rows=None (exact k-means) up to this many rows

# independent random streams, derived from the seed (SeedSequence spawn keys)
_STREAM_CLUSTER, _STREAM_SYNTH, _STREAM_TIMES, _STREAM_ORDER = 1, 2, 3, 4


@dataclass
class CondensationResult:
    cluster_id: np.ndarray            # int64 (n,): cluster of each source row, 0..n_clusters-1
    n_clusters: int
    synthetic: np.ndarray             # float64 (n, m): released rows, permissible values,
    #                                   seeded random order
    synthetic_cluster_id: np.ndarray  # int64 (n,): cluster of each released row
    synthetic_unrounded: np.ndarray   # float64 (n, m): same rows before steps 2.d.ii-iii
    #                                   (numeric columns moment-exact per cluster)
    cluster_size: np.ndarray          # int64 (n_clusters,)
    cluster_status: np.ndarray        # int64 (n_clusters,): vital status, -1 without split
    cluster_block: np.ndarray         # int64 (n_clusters,): k-d block the cluster came from
    cluster_mean: np.ndarray          # float64 (n_clusters, m): source means (NaN: categorical)
    cluster_sd: np.ndarray            # float64 (n_clusters, m): source SDs, ddof=1 (NaN: cat.)
    n_blocks: int
    algorithm: str
    survival_times: object            # "recode", "ranked", "coarsened", "perturbed", "original" or None
    weights: np.ndarray               # float64 (m,): clustering weight of each column
    timings: dict = field(default_factory=dict)
    time_col: object = None           # the survival time's column index (with the split)
    close_rows: object = None         # distance_guard: (rows next to a source row before,
    #                                   after the redraws)


@dataclass(frozen=True)
class CondenseOptions:
    """How condense() runs (each field is described in its docstring); pass one, or its fields
    as keywords."""
    status: int = None
    time_col: int = None
    weights: object = None
    survival_times: str = None
    algorithm: str = "improved"
    seed: object = 0
    block_rows: object = "auto"
    max_iter: int = kmeans.DEFAULT_MAX_ITER
    rebalance_rounds: int = rebalance_mod.DEFAULT_ROUNDS
    categories: str = "counts"
    workers: int = 1
    progress: object = None           # progress(fraction of the blocks clustered), or None
    distance_guard: int = 0
    kept: object = None               # methods.kept_groups.Split: rows keeping earlier clusters


class Job(NamedTuple):
    """One block of the per-block step: its status value, its rows, and its path (status
    subset, block) that seeds its random stream."""
    status: int
    rows: np.ndarray
    path: tuple


def condense(X, kinds, k, options=None, **chosen):
    """Condense the rows of ``X`` into clusters of >= k rows and synthesise them (004 Alg. 1/2).
    ``options``: a :class:`CondenseOptions`, or its fields as keywords (``chosen``).

    ``X``: (n, m) numbers; categorical columns hold any numeric codes.  ``kinds``: one of
    "float", "int", "categorical" per column.  ``status``/``time_col``: column indices of the
    vital status (values 0/1) and the survival time (numeric), both or neither.  ``weights``:
    ``{column: w}`` with w in [0, 1] and sum <= 1 (the other clustering attributes share the
    rest equally) or a number (the weight of ``time_col``); default ``{time_col: 0.5}`` with
    survival columns, equal weights otherwise; not allowed with ``algorithm="original"`` (equal
    weights).  ``survival_times``: "recode" (default with survival columns), "ranked",
    "coarsened", "perturbed" or "original".
    ``seed``: int >= 0 or numpy Generator.  ``block_rows``: "auto" (about 40 clusters per
    block), an int, or None (exact, unblocked).  ``max_iter``: Lloyd rounds of step 2a (>= 1);
    ``rebalance_rounds``: rebalanced Lloyd rounds after step 2c (0 = the paper).
    ``categories``: "counts" (each cluster keeps its category counts) or "argmax" (step
    2.d.iii decoding, :func:`.release_values.decode_categories`).  ``workers``:
    threads for the per-block step (numpy releases the GIL in its kernels); the result does not
    depend on it.  ``progress``: called with the fraction of the blocks clustered, or None.

    Raises DeidError: INVALID_PARAMETER_VALUE for bad arguments, NULL_VALUE_NOT_ALLOWED for
    NaN/inf, PRIVACY_MODEL_UNSATISFIABLE when the table or a status subset has fewer than k rows.
    """
    t_start = time.perf_counter()
    o = options if options is not None else CondenseOptions(**chosen)
    X, kinds, k = _check_table(X, kinds, k)
    s = _settings(o, X, kinds, k)
    # the clustering features are the coded matrix scaled in place; it is coded again for the
    # synthesis once the clustering is done (one (n, p) matrix alive at a time, same values)
    features, layout = _code_attributes(X, kinds, s.attrs)
    features *= _feature_scale(features, layout, s.weights)
    timings = {"validate_code": time.perf_counter() - t_start}

    # Alg. 2 step 1 (status split), then the partition step: k-d blocks of every subset
    t0 = time.perf_counter()
    jobs = partition_blocks(features, s.subsets, k, s.block_rows)
    timings["partition"] = time.perf_counter() - t0

    # the per-block step: Alg. 2 steps 2a-2c (or Alg. 1 steps 1-4), blocks independent
    t0 = time.perf_counter()
    kept = _kept_clusters(X, s.status if s.split else None, o.kept, k)
    clusters = _cluster_jobs(features, jobs, k, s, o.progress, kept)
    timings["cluster"] = time.perf_counter() - t0
    del features, jobs

    # Alg. 2 step 2.d.i / Alg. 1 steps 5-6: moment-exact Alg. 3 per cluster
    t0 = time.perf_counter()
    guard = [0, 0]
    synthetic_coded = _synthesize(X, layout, clusters.cluster_id, s, guard)
    timings["synthesize"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    released, unrounded, grouping = _release_values(X, kinds, k, s, synthetic_coded, layout,
                                                    clusters.cluster_id)
    del synthetic_coded, layout
    order = _rng(s.base_seed, _STREAM_ORDER).permutation(X.shape[0])
    cluster_size = grouping[1]
    mean, sd = _cluster_stats(X, kinds, clusters.cluster_id, clusters.n_clusters, cluster_size)
    released = np.take(released, order, axis=0)      # one (n, m) copy alive at a time
    unrounded = np.take(unrounded, order, axis=0)
    timings["decode"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_start
    return CondensationResult(
        cluster_id=clusters.cluster_id, n_clusters=clusters.n_clusters, synthetic=released,
        synthetic_cluster_id=clusters.cluster_id[order], synthetic_unrounded=unrounded,
        cluster_size=cluster_size, cluster_status=clusters.status, cluster_block=clusters.block,
        cluster_mean=mean, cluster_sd=sd, n_blocks=clusters.n_blocks, algorithm=s.algorithm,
        survival_times=s.survival_times if s.split else None,
        weights=s.weights, timings=timings, time_col=s.time_col if s.split else None,
        close_rows=tuple(guard) if s.distance_guard else None)


class _Settings(NamedTuple):
    """condense()'s options, checked, with what follows from them and the table."""
    status: object
    time_col: object
    algorithm: str
    split: bool                       # 004 Alg. 2 step 1: the rows split by vital status
    survival_times: object
    weights: np.ndarray               # float64 (m,): clustering weight of each column
    base_seed: int
    block_rows: object
    categories: str
    workers: int
    max_iter: int
    rebalance_rounds: int
    distance_guard: int
    subsets: list                     # [(status value or -1, int64 rows)]
    attrs: list                       # the clustering attributes (column indices)


def _settings(o, X, kinds, k):
    """Every option of ``o`` checked against the (checked) table; DeidError on a bad one."""
    m = X.shape[1]
    status, time_col, algorithm = o.status, o.time_col, o.algorithm
    if algorithm not in ALGORITHMS:
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown condensation algorithm {algorithm!r}",
                        hint="use 'improved' (004 Alg. 2) or 'original' (004 Alg. 1)")
    survival = _check_survival(X, kinds, status, time_col)
    split = survival and algorithm == "improved"
    survival_times = _check_survival_times(o.survival_times, survival, algorithm)
    attr_weights = _attribute_weights(o.weights, m, status if split else None, time_col,
                                      survival, algorithm)
    base_seed = _base_seed(o.seed)
    block_rows = _check_block_rows(o.block_rows, k)
    if o.categories not in release_values.DECODINGS:
        _invalid(f"unknown categories decoding {o.categories!r}",
                 "use 'counts' (default) or 'argmax'")
    workers = _check_count(o.workers, "workers", 1, "threads for the per-block step")
    max_iter = _check_count(o.max_iter, "max_iter", 1, "Lloyd rounds of 004 Alg. 2 step 2a")
    rebalance_rounds = _check_count(o.rebalance_rounds, "rebalance_rounds", 0,
                                    "rebalanced Lloyd rounds after step 2c; 0 = the paper")
    subsets = _new_subsets(X, status if split else None, k, o.kept)
    if block_rows is None and max([rows.size for _, rows in subsets] or [0]) > EXACT_MAX_ROWS:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"exact (unblocked) condensation is limited to {EXACT_MAX_ROWS} rows "
                        "per status subset",
                        hint="use block_rows='auto' (k-d blocks) for larger tables")
    distance_guard = _check_count(o.distance_guard, "distance_guard", 0,
                                  "redraws of a cluster with rows next to a source row")
    return _Settings(status, time_col, algorithm, split, survival_times, attr_weights,
                     base_seed, block_rows, o.categories, workers, max_iter, rebalance_rounds,
                     distance_guard, subsets,
                     [j for j in range(m) if not (split and j == status)])


class _Clusters(NamedTuple):
    cluster_id: np.ndarray            # int64 (n,)
    n_clusters: int
    status: np.ndarray                # int64 (n_clusters,): the status subset of each cluster
    block: np.ndarray                 # int64 (n_clusters,): the block of each cluster
    n_blocks: int


def _cluster_jobs(features, jobs, k, s, progress, kept):
    """The per-block step over every block (threads when ``s.workers`` > 1; the result does
    not depend on it), numbered block after block after the clusters a re-release keeps
    (``kept``: _kept_clusters' triple)."""
    def run(job):
        return cluster_block(features[job.rows], k, _rng(s.base_seed, _STREAM_CLUSTER, *job.path),
                             s.algorithm, s.max_iter, s.rebalance_rounds)

    def report(labels):
        # in the calling thread only (the progress callback may talk to the server)
        block_labels.append(labels)
        if progress is not None:
            progress(len(block_labels) / len(jobs))

    block_labels = []
    if s.workers > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(s.workers) as pool:
            for labels in pool.map(run, jobs):
                report(labels)
    else:
        for job in jobs:
            report(run(job))
    cluster_id, status_of_cluster, block_of_cluster = kept
    next_cluster = len(status_of_cluster)
    for b, (job, labels) in enumerate(zip(jobs, block_labels)):
        count = int(labels.max()) + 1
        cluster_id[job.rows] = labels + next_cluster
        status_of_cluster.extend([job.status] * count)
        block_of_cluster.extend([b] * count)
        next_cluster += count
    return _Clusters(cluster_id, next_cluster, np.asarray(status_of_cluster, dtype=np.int64),
                     np.asarray(block_of_cluster, dtype=np.int64), len(jobs))


def _synthesize(X, layout, cluster_id, s, guard):
    """004 Alg. 2 step 2.d.i / Alg. 1 steps 5-6: the synthetic coded rows (moment-exact
    Alg. 3 per cluster); ``guard`` receives the distance guard's counts."""
    coded = coded_matrix(X, layout)
    return pca_synthesis.synthesize_clusters(
        coded, cluster_id, _rng(s.base_seed, _STREAM_SYNTH), guard_rounds=s.distance_guard,
        guard_counts=guard, in_place=True)


def _release_values(X, kinds, k, s, synthetic_coded, layout, cluster_id):
    """Decoded synthetic rows, status kept (2.d.i), survival times (2.d.ii) and permissible
    values (2.d.iii): (released, unrounded, grouping), rows in source order."""
    grouping = release_values.grouping_of(cluster_id)
    unrounded = _decode(synthetic_coded, layout, X, cluster_id, grouping, s.categories)
    if s.split:
        unrounded[:, s.status] = X[:, s.status]      # the status is not synthesised (2.d.i)
    release_values.keep_cluster_constants(unrounded, X, cluster_id, grouping,
                                          skip=(s.status,) if s.split else ())
    released = unrounded.copy()
    if s.split:                                       # step 2.d.ii
        released[:, s.time_col] = release_values.reassign_survival_times(
            X[:, s.time_col], unrounded[:, s.time_col], cluster_id, s.survival_times,
            _rng(s.base_seed, _STREAM_TIMES), integer=kinds[s.time_col] == "int",
            grouping=grouping, bin_rows=k, status=X[:, s.status])
    release_values.permissible(released, X, released_kinds(kinds, s.time_col, s.survival_times))
    return released, unrounded, grouping


def released_kinds(kinds, time_col, survival_times):
    """The kinds of the released columns: under ``survival_times="ranked"`` the time is a
    float (its values lie strictly between the source's distinct times)."""
    if survival_times != "ranked" or time_col is None:
        return list(kinds)
    out = list(kinds)
    out[time_col] = "float"
    return out


def partition_blocks(features, subsets, k, block_rows):
    """The partition step (beyond 004, for scale): cut every status subset into k-d blocks.

    ``subsets``: [(status value, int64 rows)] (Alg. 2 step 1).  Returns one job per block,
    ``(status value, int64 rows of the block, seed key)``; the seed key (subset index, block
    index) makes the block's random stream independent of where and in which order the blocks
    run (:func:`cluster_block` is the per-block step).
    """
    jobs = []
    for subset_index, (status_value, rows) in enumerate(subsets):
        blocks = kmeans.kd_blocks(features[rows], k, block_rows)
        for b, block in enumerate(kmeans.rows_by_block(blocks)):
            jobs.append(Job(status_value, rows[block], (subset_index, b)))
    return jobs


def cluster_block(features, k, rng, algorithm="improved", max_iter=kmeans.DEFAULT_MAX_ITER,
                  rebalance_rounds=rebalance_mod.DEFAULT_ROUNDS):
    """The per-block step: int64 labels 0..(n_b // k) - 1, every cluster >= k rows.

    "improved": 004 Alg. 2 steps 2a-2c (weighted k-means, then rebalancing, then
    ``rebalance_rounds`` rebalanced Lloyd rounds -- 0 is the paper's single rebalance);
    "original": Alg. 1 steps 1-4.  Needs n_b >= k.  Depends only on the block's features and
    ``rng``, so a block gives the same clusters wherever it runs.
    """
    n_clusters = features.shape[0] // k
    if n_clusters <= 1:
        return np.zeros(features.shape[0], dtype=np.int64)
    if algorithm == "original":
        return kmeans.seed_groups(features, k, rng)
    labels, centers = kmeans.weighted_kmeans(features, n_clusters, rng, max_iter)
    return rebalance_mod.refine_rebalanced(features, labels, centers, k, rebalance_rounds)


# ---------------------------------------------------------------------------------------------
# coding, decoding and permissible values
# ---------------------------------------------------------------------------------------------

def _code_attributes(X, kinds, attrs):
    """Coded matrix (n, p) and its layout [(column, kind, first, stop, info)].

    Numeric: whole-table z-score (sd 0 -> 1), info = (mean, sd).  Categorical with L observed
    levels: the one-hot block of 004 sec. 3.1 ("binary dummy variables") written in an
    orthonormal basis of the L - 1 dimensional space it spans (one-hot minus 1/L, times a
    Helmert-type basis H, L x (L - 1)); info = (levels, H, level index of every row).  Distances, means and covariances
    are those of the one-hot block (an isometry), with one coordinate less per attribute."""
    n = X.shape[0]
    layout, p = [], 0
    for j in attrs:
        if kinds[j] == "categorical":
            levels, codes = _factorize(X[:, j])
            basis = _simplex_basis(levels.size)
            layout.append((j, "categorical", p, p + basis.shape[1],
                           (levels, basis, _small_ints(codes, levels.size))))
            p += basis.shape[1]
        else:
            col = X[:, j]
            mean = col.mean() if n else 0.0
            sd = col.std() if n else 0.0
            layout.append((j, kinds[j], p, p + 1, (mean, sd if sd > 0 else 1.0)))
            p += 1
    return coded_matrix(X, layout, p), layout


def coded_matrix(X, layout, p=None):
    """The coded (n, p) matrix of ``X`` under ``layout`` (:func:`_code_attributes`)."""
    p = layout[-1][3] if p is None and layout else (p or 0)
    coded = np.empty((X.shape[0], p))
    for j, kind, first, stop, info in layout:
        if kind == "categorical":
            for c in range(stop - first):       # a column at a time: no (n, L) temporary
                coded[:, first + c] = info[1][:, c][info[2]]
        else:
            np.subtract(X[:, j], info[0], out=coded[:, first])
            coded[:, first] /= info[1]
    return coded


def _factorize(col):
    """(sorted distinct values, int64 index of each value)."""
    if col.size and np.array_equal(col, np.rint(col)):
        lo, hi = col.min(), col.max()
        if hi - lo < 1 << 20:
            offset = (col - lo).astype(np.int64)
            present = np.bincount(offset) > 0
            remap = np.cumsum(present) - 1
            return lo + np.flatnonzero(present).astype(np.float64), remap[offset]
    levels, codes = np.unique(col, return_inverse=True)
    return levels, codes.astype(np.int64)


def _simplex_basis(n_levels):
    """L x (L-1) matrix with orthonormal columns orthogonal to the all-ones vector."""
    if n_levels <= 1:
        return np.zeros((max(n_levels, 1), 0))
    centred = np.eye(n_levels) - 1.0 / n_levels
    q, r = np.linalg.qr(centred[:, :-1])
    return q * np.where(np.diagonal(r) < 0, -1.0, 1.0)


def _feature_scale(coded, layout, attr_weights):
    """Per coded column factor making Euclidean distance 004's weighted distance (step 2a):
    every attribute has total variance 1 before its weight is applied."""
    scale = np.ones(coded.shape[1])
    for j, kind, first, stop, _ in layout:
        root = np.sqrt(attr_weights[j])
        if kind == "categorical" and stop > first:
            total_var = float(coded[:, first:stop].var(axis=0).sum())
            root /= np.sqrt(total_var) if total_var > 0 else 1.0
        scale[first:stop] = root
    return scale


def _decode(synthetic_coded, layout, X, cluster_id, grouping, decoding):
    """Synthetic values in the table's units; categories by :func:`.release_values.
    decode_categories` from the synthetic one-hot block (step 2.d.iii).  The categories are
    decoded before the (n, m) output exists (less alive at the decoding's peak)."""
    decoded = {}
    for j, kind, first, stop, info in layout:
        if kind == "categorical":
            levels, basis, codes = info
            # one-hot block minus 1/L, (n, L) as the transpose of a C-ordered (L, n) block
            scores = (basis @ synthetic_coded[:, first:stop].T).T
            decoded[j] = _small_ints(release_values.decode_categories(
                scores, codes, cluster_id, grouping, decoding), levels.size)
            del scores
    out = np.array(X, dtype=np.float64, copy=True)    # columns not coded: status (kept)
    for j, kind, first, stop, info in layout:
        if kind == "categorical":
            out[:, j] = info[0][decoded.pop(j)]
        else:
            mean, sd = info
            out[:, j] = synthetic_coded[:, first] * sd + mean
    return out


def _small_ints(codes, size):
    """``codes`` (indices below ``size``) in the smallest signed integer type that holds them."""
    for dtype in (np.int8, np.int16, np.int32):
        if size <= np.iinfo(dtype).max:
            return codes.astype(dtype)
    return codes.astype(np.int64)


def _cluster_stats(X, kinds, cluster_id, n_clusters, sizes):
    m = X.shape[1]
    mean = np.full((n_clusters, m), np.nan)
    sd = np.full((n_clusters, m), np.nan)
    for j in range(m):
        if kinds[j] == "categorical":
            continue
        s1 = np.bincount(cluster_id, weights=X[:, j], minlength=n_clusters)
        mean[:, j] = s1 / sizes
        dev = X[:, j] - mean[cluster_id, j]
        s2 = np.bincount(cluster_id, weights=dev * dev, minlength=n_clusters)
        sd[:, j] = np.sqrt(s2 / np.maximum(sizes - 1, 1))
    return mean, sd


# ---------------------------------------------------------------------------------------------
# validation (messages carry no data value and no row count below k)
# ---------------------------------------------------------------------------------------------

def _base_seed(seed):
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**63))
    if not _is_int(seed, 0):
        _invalid("seed must be an integer >= 0 or a Generator",
                 "the same seed reproduces the release exactly")
    return int(seed)


def _rng(base_seed, *key):
    return np.random.default_rng(np.random.SeedSequence(base_seed, spawn_key=key))


def _new_subsets(X, status, k, kept):
    """_subsets of the rows no earlier cluster keeps (all rows without `kept`): a re-release
    clusters its new rows among themselves only (methods/kept_groups.py)."""
    if kept is None or kept.n_kept == 0:
        return _subsets(X, status, k)
    new = np.flatnonzero(kept.new)
    if new.size == 0:
        return []
    return [(value, new[rows]) for value, rows in _subsets(X[new], status, k)]


def _kept_clusters(X, status, kept, k):
    """(cluster per row, -1 where still to cluster; status per kept cluster; block per kept
    cluster, -1): the clusters a re-release keeps, numbered first."""
    n = X.shape[0]
    if kept is None or kept.n_kept == 0:
        return np.full(n, -1, np.int64), [], []
    cluster_id = kept.group.astype(np.int64, copy=True)
    if np.bincount(cluster_id[cluster_id >= 0], minlength=kept.n_kept).min() < k:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE, "an earlier cluster holds fewer than k rows",
                        hint="Ask for a fresh grouping (options.regroup).", data_dependent=True)
    of = np.full(kept.n_kept, -1, np.int64)
    if status is not None:
        rows = np.flatnonzero(cluster_id >= 0)
        of[cluster_id[rows]] = X[rows, status].astype(np.int64)
    return cluster_id, of.tolist(), [-1] * kept.n_kept


def _subsets(X, status, k):
    """[(status value or -1, rows)]: 004 Alg. 2 step 1, or the whole table."""
    n = X.shape[0]
    too_few = DeidError(PRIVACY_MODEL_UNSATISFIABLE, f"the table has fewer than k = {k} rows",
                        hint="lower k or release more rows", data_dependent=True)
    if status is None:
        if n < k:
            raise too_few
        return [(-1, np.arange(n, dtype=np.int64))]
    out = []
    for value in (0, 1):
        rows = np.flatnonzero(X[:, status] == value)
        if 0 < rows.size < k:
            raise DeidError(PRIVACY_MODEL_UNSATISFIABLE,
                            f"a vital-status subset has fewer than k = {k} rows",
                            hint="004 Alg. 2 condenses each status apart: lower k, release "
                                 "more rows, or condense without survival columns",
                            data_dependent=True)
        if rows.size:
            out.append((value, rows.astype(np.int64)))
    if not out:
        raise too_few
    return out
