"""Independent verification of a condensation release (paper 004) before it commits.

Written from the paper, not from the method: this module imports nothing from
``deid.methods`` and shares no code with it, so a bug in the method cannot hide here.

:func:`verify_condensation` checks, from the source rows, the cluster membership the method
claims and the released synthetic rows with their cluster ids:

1. every source row is in exactly one cluster (004 sec. 3.1: the clusters partition D);
2. every cluster has >= k source rows (004 Def. 1, k-indistinguishability; Alg. 2 step 2c);
3. each cluster releases exactly as many rows as it has source rows (Alg. 3: |C'_j| = |C_j|);
4. on the ``moment_columns``, each released cluster's mean vector and covariance matrix equal
   the source cluster's within the stated tolerance (Alg. 2 step 2.d.i, Alg. 3 "the means and
   the covariances among the attributes are preserved"), see below;
5. with a status column, the status counts of each cluster are unchanged (Alg. 2 step 2.d.i:
   "the survival status attribute is not changed"); the same for any ``count_columns`` (e.g.
   categorical columns decoded with their cluster's category counts);
6. with ``survival_times="original"``, each cluster's released survival times are exactly its
   source times as a multiset (Alg. 2 step 2.d.ii as printed); with ``"ranked"``, each
   cluster's r-th smallest released time lies strictly inside the cell of its r-th smallest
   source time -- with v_1 < ... < v_d the table's distinct source times, v_j's cell is
   ((v_{j-1} + v_j) / 2, v_j), v_1's (v_1, (3 v_1 + v_2) / 4) -- so no released time equals a source
   time and the order of the times is the source's, within clusters and across the table;
7. optionally: released values inside each column's observed source range, integer columns
   integral (step 2.d.iii, permissible values).

Tolerance of check 4 (``rtol``, default 1e-9).  Columns are put in units of the whole source
table (z = (x - mean) / sd over all source rows; a column with sd 0 keeps unit 1).  For a
cluster with source mean mu, covariance C (ddof = 1), largest absolute value M over its source rows and moment columns
(uncentred, in units of the table's sd: the floating-point floor is relative to the raw values), and scale = max(max_j C_jj, 1e-6 * M^2), the released moments must
satisfy max |C' - C| <= rtol * scale and max |mu' - mu| <= rtol * (M + sqrt(scale)).  That is
1e-9 relative to the cluster's largest variance, except for a cluster whose spread is below 1e-3
of its magnitude, where floating-point representation itself limits what can be matched.

Every failure raises :class:`deid.errors.DeidError` with SQLSTATE ``VERIFICATION_FAILED``
(DE002) naming the first failing cluster id; messages carry no data value and no row count
below k.  Malformed input raises ``INVALID_PARAMETER_VALUE``.  On success a dict report.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from deid.errors import DeidError, INVALID_PARAMETER_VALUE, VERIFICATION_FAILED

DEFAULT_RTOL = 1e-9

_HINT = ("The release was rolled back; nothing was written.  The condensation output failed "
         "the independent check, which points to a bug in the method: please report it.")


@dataclass(frozen=True)
class Checks:
    """What verify_condensation checks besides partition and sizes (see its docstring); pass
    one, or its fields as keywords."""
    status_col: int = None
    time_col: int = None
    survival_times: str = None
    moment_columns: tuple = ()
    moment_values: object = None
    rtol: float = DEFAULT_RTOL
    count_columns: tuple = ()
    check_ranges: bool = False
    integer_columns: tuple = ()


def _ranked_cell(column, times):
    """(lo, hi) of the open cell of each of ``times`` (source values of ``column``), None for
    a column of one distinct value: check 6."""
    v = np.unique(column)
    if v.size < 2:
        return None
    gap = np.diff(v)
    lo, hi = np.r_[v[0], v[1:] - gap / 2.0], np.r_[v[0] + gap[0] / 4.0, v[1:]]
    j = np.searchsorted(v, times)
    return lo[j], hi[j]


def verify_condensation(source, membership, released, released_cluster, k, checks=None,
                        **chosen):
    """Verify a condensation release; return a report dict or raise DeidError (DE002).
    ``checks``: a :class:`Checks`, or its fields as keywords (``chosen``).

    ``source``: (n, m) source rows.  ``membership``: the cluster id of each source row (1-D,
    length n), or a pair ``(rows, clusters)`` of equal-length arrays (the catalog's form: one
    entry per membership).  ``released``: (r, m) released rows; ``released_cluster``: (r,) their
    cluster ids.  ``moment_values``: (r, m) values on which the moments are checked (e.g. the
    method's values before rounding), by default ``released``.  ``status_col``/``time_col``:
    column indices.  ``survival_times``: "original" enables check 6.  ``count_columns``: columns
    whose value counts per cluster must be unchanged.
    """
    c = checks if checks is not None else Checks(**chosen)
    source = _matrix(source, "source")
    released = _matrix(released, "released")
    n, m = source.shape
    if released.shape[1] != m:
        _bad("released rows must have the source's columns")
    k = _positive_int(k, "k")
    cluster_of_row = _membership(membership, n)
    released_cluster = _ids(released_cluster, "released_cluster")
    if released_cluster.size != released.shape[0]:
        _bad("released_cluster must give one cluster id per released row")
    moment_columns = [_column(j, m, "moment column") for j in c.moment_columns]
    moment_values = released if c.moment_values is None else _matrix(c.moment_values,
                                                                      "moment_values")
    if moment_values.shape != released.shape:
        _bad("moment_values must have the shape of the released rows")

    groups = _check_sizes(cluster_of_row, released_cluster, k)               # 1-3
    sizes = groups.sizes
    report = {"rows": int(n), "released_rows": int(released.shape[0]),
              "clusters": int(groups.ids.size), "k": k,
              "min_cluster_size": int(sizes.min()) if groups.ids.size else 0,
              "max_cluster_size": int(sizes.max()) if groups.ids.size else 0}
    if moment_columns and n:                                                 # 4
        mean_err, cov_err = _check_moments(source[:, moment_columns],
                                           moment_values[:, moment_columns],
                                           groups.src_index, groups.rel_index, groups.ids,
                                           c.rtol)
        report.update(moment_columns=len(moment_columns), rtol=c.rtol,
                      max_mean_error=mean_err, max_cov_error=cov_err)
    _check_counts(source, released, groups, c)                               # 5
    if c.status_col is not None:
        report["status_checked"] = True
    if c.count_columns:
        report["count_columns"] = len(c.count_columns)
    if c.survival_times in ("original", "ranked"):                           # 6
        _check_times(source, released, groups, c)
        report["times_checked"] = True if c.survival_times == "original" else "ranked"
    if c.check_ranges and n:                                                 # 7
        _check_ranges(source, released)
        report["ranges_checked"] = True
    _check_integral(released, [_column(j, m, "integer column") for j in c.integer_columns])
    return report


class _Groups(NamedTuple):
    ids: np.ndarray                   # the cluster ids, sorted
    src_index: np.ndarray             # each source row's index into ids
    rel_index: np.ndarray             # each released row's index into ids
    sizes: np.ndarray                 # source rows per cluster


def _check_sizes(cluster_of_row, released_cluster, k):
    """Checks 1-3: partition, sizes >= k, each cluster releases its size in rows (clusters
    compared by id)."""
    ids, src_index = _unique(cluster_of_row)
    src_index = src_index.reshape(-1)
    sizes = np.bincount(src_index, minlength=ids.size)
    if ids.size and sizes.min() < k:
        bad = ids[np.flatnonzero(sizes < k)[0]]
        _fail(f"cluster {bad} has fewer than k = {k} source rows (004 Def. 1)")
    rel_ids, rel_index = _unique(released_cluster)
    rel_index = rel_index.reshape(-1)
    if rel_ids.size != ids.size or not np.array_equal(rel_ids, ids):
        missing = np.setxor1d(ids, rel_ids)
        _fail(f"cluster {missing[0]} is released without source rows or not released at all")
    rel_sizes = np.bincount(rel_index, minlength=ids.size)
    if not np.array_equal(rel_sizes, sizes):
        bad = ids[np.flatnonzero(rel_sizes != sizes)[0]]
        _fail(f"cluster {bad} releases a different number of rows than it has source rows "
              "(004 Alg. 3)")
    return _Groups(ids, src_index, rel_index, sizes)


def _check_counts(source, released, groups, c):
    """Check 5: the status counts (and those of ``count_columns``) of every cluster kept."""
    n, m = source.shape
    counted = ([] if c.status_col is None else [_column(c.status_col, m, "status_col")]) + \
        [_column(j, m, "count column") for j in c.count_columns]
    for s in counted:
        what = "vital-status" if s == c.status_col else f"column {s} value"
        src_values, src_codes = _unique(source[:, s])
        pos = _positions(src_values, released[:, s])
        if n and not np.all(src_values[pos] == released[:, s]):
            _fail(f"column {s} releases a value that does not occur in the source")
        g, v = groups.ids.size, src_values.size
        before = np.bincount(groups.src_index * v + src_codes.reshape(-1), minlength=g * v)
        after = np.bincount(groups.rel_index * v + pos, minlength=g * v)
        if not np.array_equal(before, after):
            bad = groups.ids[np.flatnonzero(before != after)[0] // v]
            _fail(f"cluster {bad} changes its {what} counts (004 Alg. 2 step 2.d.i)")


def _check_times(source, released, groups, c):
    """Check 6: survival times per cluster, by rank: the original multiset, or each in its
    rank's cell."""
    if c.time_col is None:
        _bad(f"survival_times={c.survival_times!r} needs time_col")
    t = _column(c.time_col, source.shape[1], "time_col")
    src_index, rel_index = groups.src_index, groups.rel_index
    src_sorted = source[np.lexsort((source[:, t], src_index)), t]
    rel_sorted = released[np.lexsort((released[:, t], rel_index)), t]
    cells = _ranked_cell(source[:, t], src_sorted) if c.survival_times == "ranked" else None
    if cells is None:                       # 'original', or one distinct time: as is
        kept = rel_sorted == src_sorted
    else:
        kept = ((rel_sorted > cells[0]) & (rel_sorted < cells[1])
                & ~np.isin(rel_sorted, source[:, t]))
    if not kept.all():
        bad = groups.ids[np.sort(src_index)[np.flatnonzero(~kept)[0]]]
        _fail(f"cluster {bad} does not release its original survival times "
              "(004 Alg. 2 step 2.d.ii)" if c.survival_times == "original" else
              f"cluster {bad} releases a survival time outside its rank's cell "
              "(survival_times 'ranked')")


def _check_ranges(source, released):
    """Check 7: released values inside each column's observed source range."""
    lo, hi = source.min(axis=0), source.max(axis=0)
    outside = (released.min(axis=0) < lo) | (released.max(axis=0) > hi)    # per column
    if outside.any():
        _fail(f"column {int(np.flatnonzero(outside)[0])} releases values "
              "outside its observed range (004 Alg. 2 step 2.d.iii)")


def _check_integral(released, integral):
    """Check 7: the ``integral`` columns hold whole numbers."""
    if integral:
        values = released[:, integral]
        whole = (values == np.rint(values)).all(axis=0)
        if not whole.all():
            _fail(f"integer column {integral[int(np.flatnonzero(~whole)[0])]} releases "
                  "non-integral values (004 Alg. 2 step 2.d.iii)")


def _check_moments(src, rel, src_index, rel_index, ids, rtol):
    """Per-cluster means and covariances in whole-table units; (max mean err, max cov err),
    each relative to its cluster's tolerance scale.  The rows are put in cluster order (every
    cluster holds as many released as source rows: check 3), so the per-cluster sums are
    segment sums and the covariances one batched matrix product per cluster size."""
    g = ids.size
    centre = src.mean(axis=0)
    unit = src.std(axis=0)
    unit[unit == 0] = 1.0
    counts = np.bincount(src_index, minlength=g)
    starts = np.cumsum(counts) - counts
    src = src[_grouped(src_index, g)]
    zs = (src - centre) / unit
    zr = (rel[_grouped(rel_index, g)] - centre) / unit
    mu_s = np.add.reduceat(zs, starts, axis=0) / counts[:, None]
    mu_r = np.add.reduceat(zr, starts, axis=0) / counts[:, None]
    zs -= np.repeat(mu_s, counts, axis=0)                  # centred within the cluster
    zr -= np.repeat(mu_r, counts, axis=0)
    # float64 holds a value to about eps * |x| of the RAW value: a table whose values sit far
    # from zero (1e6 +- 1) cannot match a tiny spread to 1e-9 of itself, so the magnitude is
    # that of the uncentred values, in whole-table units
    magnitude = (np.maximum.reduceat(np.abs(src), starts, axis=0) / unit).max(axis=1)
    denom = np.maximum(counts - 1.0, 1.0)[:, None, None]
    cov_s = _cluster_grams(zs, counts, starts) / denom
    cov_r = _cluster_grams(zr, counts, starts) / denom
    variance = np.diagonal(cov_s, axis1=1, axis2=2).max(axis=1)
    scale = np.maximum(variance, 1e-6 * magnitude ** 2)
    mean_err = np.abs(mu_r - mu_s).max(axis=1)
    cov_err = np.abs(cov_r - cov_s).reshape(g, -1).max(axis=1)
    mean_tol = rtol * (magnitude + np.sqrt(scale))
    cov_tol = rtol * scale
    bad_mean = mean_err > mean_tol
    if bad_mean.any():
        _fail(f"cluster {ids[np.flatnonzero(bad_mean)[0]]} does not keep its mean vector "
              f"within rtol = {rtol:g} (004 Alg. 3)")
    bad_cov = cov_err > cov_tol
    if bad_cov.any():
        _fail(f"cluster {ids[np.flatnonzero(bad_cov)[0]]} does not keep its covariance matrix "
              f"within rtol = {rtol:g} (004 Alg. 3)")
    rel_mean = mean_err / np.where(mean_tol > 0, mean_tol / rtol, 1.0)
    rel_cov = cov_err / np.where(cov_tol > 0, cov_tol / rtol, 1.0)
    return float(rel_mean.max(initial=0.0)), float(rel_cov.max(initial=0.0))


def _grouped(index, g):
    """Rows in order of their cluster index (stable: row order within a cluster); 16-bit keys
    when they fit (numpy's radix sort, the same order)."""
    keys = index.astype(np.uint16) if g <= 1 << 16 else index
    return np.argsort(keys, kind="stable")


def _cluster_grams(centred, counts, starts):
    """(g, q, q): centred^T centred of every cluster's rows (rows in cluster order), one
    batched matrix product per distinct cluster size."""
    g, q = counts.size, centred.shape[1]
    out = np.empty((g, q, q))
    for size in np.unique(counts).tolist():
        which = np.flatnonzero(counts == size)
        block = centred[starts[which][:, None] + np.arange(size)]        # (g_s, size, q)
        out[which] = np.matmul(np.swapaxes(block, 1, 2), block)
    return out


def _unique(values):
    """np.unique(values, return_inverse=True) -- (sorted distinct values, index of each value)
    -- in O(n) through a presence table when the values are integers of a short range (cluster
    ids, status, category codes); by sorting otherwise."""
    v = np.asarray(values)
    if v.size and (v.dtype.kind in "iu" or np.array_equal(v, np.rint(v))):
        lo, hi = v.min(), v.max()
        if hi - lo < max(2 * v.size, 1024):
            offset = (v - lo).astype(np.int64)
            present = np.bincount(offset) > 0
            remap = np.cumsum(present) - 1
            return (lo + np.flatnonzero(present)).astype(v.dtype), remap[offset]
    uniq, inverse = np.unique(v, return_inverse=True)
    return uniq, inverse.reshape(-1)


def _positions(values, x):
    """Index into the sorted distinct ``values`` of every ``x`` where it occurs (elsewhere an
    index whose value differs from x: callers compare ``values[pos] == x``).  A table of the
    range when the values are integers of a short range (codes, status); binary search
    otherwise."""
    if values.size and x.size and np.array_equal(values, np.rint(values)) \
            and values[-1] - values[0] < max(2 * x.size, 1024):
        lo, span = values[0], int(values[-1] - values[0]) + 1
        table = np.zeros(span, dtype=np.int64)
        table[(values - lo).astype(np.int64)] = np.arange(values.size)
        return table[np.clip(x - lo, 0, span - 1).astype(np.int64)]
    return np.minimum(np.searchsorted(values, x), max(values.size - 1, 0))


# ---------------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------------

def _fail(message):
    raise DeidError(VERIFICATION_FAILED, message, hint=_HINT)


def _bad(message):
    raise DeidError(INVALID_PARAMETER_VALUE, message,
                    hint="pass the source rows, the membership and the released rows "
                         "of one release")


def _matrix(x, name):
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        _bad(f"{name} must be numeric")
    if a.ndim != 2:
        _bad(f"{name} must be a 2-D array")
    if not np.isfinite(a).all():
        _bad(f"{name} contains NULL/NaN/infinite values")
    return a


def _ids(x, name):
    a = np.asarray(x)
    if a.ndim != 1:
        _bad(f"{name} must be one-dimensional")
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.dtype.kind == "f":
        if not np.isfinite(a).all() or not np.array_equal(a, np.rint(a)):
            _bad(f"{name} must hold integers")
    elif a.dtype.kind not in "iu":
        _bad(f"{name} must hold integers")
    a = a.astype(np.int64)
    if a.min() < 0:
        _bad(f"{name} must hold non-negative cluster ids")
    return a


def _membership(membership, n):
    """Cluster id of every source row; every row must appear exactly once."""
    if isinstance(membership, tuple) and len(membership) == 2:
        rows, clusters = _ids(membership[0], "membership rows"), _ids(membership[1],
                                                                     "membership clusters")
        if rows.size != clusters.size:
            _bad("membership rows and clusters must have equal length")
        if rows.size and rows.max() >= n:
            _fail("the membership names a row that is not a source row")
        seen = np.bincount(rows, minlength=n)
        if n and seen.max(initial=0) > 1:
            _fail(f"source row {int(np.flatnonzero(seen > 1)[0])} is in more than one cluster")
        if n and seen.min() == 0:
            _fail(f"source row {int(np.flatnonzero(seen == 0)[0])} is in no cluster")
        out = np.empty(n, dtype=np.int64)
        out[rows] = clusters
        return out
    out = _ids(membership, "membership")
    if out.size != n:
        _fail("the membership does not give exactly one cluster for every source row")
    return out


def _column(c, m, name):
    if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, np.integer)) \
            or not 0 <= c < m:
        _bad(f"{name} must be a column index")
    return int(c)


def _positive_int(v, name):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1:
        _bad(f"{name} must be a positive integer")
    return int(v)
