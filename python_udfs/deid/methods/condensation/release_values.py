"""From synthetic to released values (paper 004 Alg. 2 steps 2.d.ii-iii).

* :func:`reassign_survival_times` -- step 2.d.ii.  004 keeps the Cox risk sets by giving the
  synthetic rows of every cluster the cluster's original survival times, by rank of the
  synthetic time.  That puts every original time back into the release: with Alg. 2 as
  printed, anonymeter singled patients out through ``time == x``.  Option
  "original" is the paper; the default "recode" releases every time as its bin's value, bins
  of >= k rows per status (:mod:`.survival_recode`); "ranked" moves every time just below
  itself (the exact order, and on whole-unit times the values, stay recoverable); the older
  "coarsened" moves every time inside its bin of >= k source rows (rank order kept within
  clusters and, at the bin grain, across the table); "perturbed" moves every time inside its own cell between its cluster's neighbouring
  times, which on dense integer times leaves it where it is.
* :func:`decode_categories` -- step 2.d.iii for categorical columns: a permissible category
  from the synthetic one-hot block.  "counts" (default) gives every cluster exactly its source
  category counts (the counts are the one-hot block's mean, which the moment-exact synthesis
  keeps anyway), choosing the rows by their synthetic scores; "argmax" is the plain argmax,
  which under-represents a cluster's minority categories.
* :func:`keep_cluster_constants`, :func:`permissible` -- step 2.d.iii for the rest: a column
  constant within a cluster is released as that constant; integers rounded, numbers clipped
  to the column's observed range.
"""

import numpy as np

from .survival_recode import recoded_times

# Integer times: free integers (no source row has them) are listed when the column's range
# has at most this many integers.
_FREE_INTEGERS_LIMIT = 1 << 24
DECODINGS = ("counts", "argmax")


def reassign_survival_times(original, synthetic, cluster_id, mode, rng, integer=False,
                            grouping=None, bin_rows=None, status=None):
    """004 Alg. 2 step 2.d.ii: survival times by within-cluster rank of the synthetic time.

    In every cluster the synthetic rows are ranked by their synthetic time (ties by position);
    the row of rank r gets the r-th smallest of the cluster's *released times*:

    * ``"recode"`` (the default): every source time replaced by its bin's value, bins of >=
      ``bin_rows`` rows per status (:mod:`.survival_recode`); no random move;
    * ``"ranked"``: every source time moved just below itself (:func:`ranked_times`);
    * ``"original"`` (004 as printed): the cluster's original times, so every original time is
      released exactly (and the risk sets of 004 sec. 3.2 are unchanged);
    * ``"perturbed"``: with v_1 < ... < v_d the cluster's distinct original times, each row
      of value v_j gets a uniform draw from v_j's *cell*, the interval between the midpoints
      (v_{j-1} + v_j) / 2 and (v_j + v_{j+1}) / 2 (an end cell mirrors its one half-width; cells
      are clipped to the column's observed range).  Cells are disjoint and ordered, so the
      within-cluster rank order is kept (ties among equal originals aside), and a cell holds no
      other original time of the cluster; the draw is never v_j itself (for floats it almost
      surely equals no source time at all).  Integer times split the integers strictly between
      two neighbours between their cells and draw from the cell's *free* integers (held by no
      source row), else from its integers other than v_j; a cell with neither (neighbours 1
      apart on both sides, e.g. dense monthly data, where v_j is shared anyway) keeps v_j.  A
      cluster whose times are all equal keeps them (a constant stays constant; >= k rows
      share it).

    * ``"coarsened"``: the time column is cut into *bins* of consecutive values, each holding
      >= ``bin_rows`` source rows (the method's k) and, for integer times, >= 3 integers
      (:func:`time_bins`).  Each source time is replaced by a draw from its own bin, never
      itself: a free integer of the bin (held by no source row) if there is one, else the
      time of another source row of the bin with a different time (drawn from the bin's rows,
      so dense, skewed times keep their shape within the bin); floats uniformly over the bin's
      span.  The cluster's draws are then
      given out by rank of the synthetic time.  So the order of the times across the whole
      table is kept at the grain of the bins (the Cox risk sets up to a bin), every time moves
      (dense monthly data included, where ``"perturbed"`` has no room), and a released time
      only names a bin of >= k source rows.  A cluster whose times are all equal keeps them.

    ``original``/``synthetic``: float64 (n,) times of the source rows and of the synthetic rows
    (both indexed like ``cluster_id``); returns the released times, indexed the same way.
    ``grouping``: :func:`grouping_of` of ``cluster_id`` if already at hand.
    """
    n = original.size
    out = np.empty(n, dtype=np.float64)
    if n == 0:
        return out
    order, sizes, starts = grouping if grouping is not None else grouping_of(cluster_id)
    by_synthetic = order[segment_argsort(synthetic[order], sizes, starts)]
    if mode in ("ranked", "recode"):
        moved = (ranked_times(original, rng, status) if mode == "ranked" else
                 recoded_times(original, status, bin_rows, integer))[order]
        out[by_synthetic] = moved[segment_argsort(moved, sizes, starts)]
        return out
    by_original = order[segment_argsort(original[order], sizes, starts)]
    if mode == "original":
        out[by_synthetic] = original[by_original]
        return out
    if mode == "coarsened":
        moved = coarsened_times(original[by_original], cluster_id[by_original], original, rng,
                                integer, bin_rows)
        out[by_synthetic] = moved[segment_argsort(moved, sizes, starts)]
        return out
    moved = _perturbed_times(original, original[by_original], cluster_id[by_original], rng,
                             integer)
    out[by_synthetic] = moved[segment_argsort(moved, sizes, starts)]
    return out


def _perturbed_times(original, values, clusters, rng, integer):
    """``"perturbed"`` (:func:`reassign_survival_times`): a draw from its cell for every time
    of ``values`` (the source times in cluster order, sorted within each cluster, with their
    ``clusters``); ``original``: all source times (the column's range and free integers)."""
    n = values.size
    new_run = np.r_[True, (clusters[1:] != clusters[:-1]) | (values[1:] != values[:-1])]
    run_of_row = np.cumsum(new_run) - 1
    run_value, run_cluster = values[new_run], clusters[new_run]
    has_prev = np.r_[False, run_cluster[1:] == run_cluster[:-1]]
    has_next = np.r_[run_cluster[:-1] == run_cluster[1:], False]
    gap_prev = np.where(has_prev, run_value - np.r_[run_value[:1], run_value[:-1]], 0.0)
    gap_next = np.where(has_next, np.r_[run_value[1:], run_value[-1:]] - run_value, 0.0)
    col_lo, col_hi = original.min(), original.max()
    if integer:
        below = gap_prev // 2                      # integers strictly between: split
        above = (gap_next - 1) // 2
        above = np.where(has_next, np.maximum(above, 0), 0)
    else:
        below, above = gap_prev / 2.0, gap_next / 2.0
    below = np.where(has_prev, below, above)       # end cells mirror their one side
    above = np.where(has_next, above, below)
    lo = np.maximum(run_value - below, col_lo)[run_of_row]
    hi = np.minimum(run_value + above, col_hi)[run_of_row]
    u = rng.random(n)
    if integer:
        choices = np.rint(hi - lo).astype(np.int64)     # integers of [lo, hi] other than v
        drawn = lo + np.floor(u * choices)
        drawn += drawn >= values
        moved = np.where(choices > 0, drawn, values)
        moved = _prefer_free(moved, original, col_lo, col_hi, lo, hi, u)
    else:
        moved = lo + u * (hi - lo)
        stuck = (moved == values) & (hi > lo)
        moved[stuck] = np.where(hi[stuck] > values[stuck], (values[stuck] + hi[stuck]) / 2,
                                (lo[stuck] + values[stuck]) / 2)
    return moved


def ranked_cells(original):
    """The open cell of every source time for ``"ranked"``: with v_1 < ... < v_d the distinct
    source times and g_j = v_j - v_{j-1}, v_j's cell is the half gap below it,
    (v_j - g_j / 2, v_j), for j >= 2, and v_1's is (v_1, v_1 + g_2 / 4) (nothing lies below the
    smallest time).  Returns float64 (lo, hi) per distinct time and the index of every row's
    time, or None when the column holds fewer than 2 distinct values (it is released as is).
    The cells are disjoint, ordered like their times and hold no source time; every time but
    the smallest moves down by g_j / 4 on average, so a model of the time sees a near-constant
    shift."""
    values = distinct_counts(original)[0]
    if values.size < 2:
        return None
    gap = np.diff(values)
    lo = np.r_[values[0], values[1:] - gap / 2.0]
    hi = np.r_[values[0] + gap[0] / 4.0, values[1:]]
    return lo, hi, np.searchsorted(values, original)


def ranked_times(original, rng, status=None):
    """``"ranked"`` times of the source rows: every time moved strictly inside its cell
    (:func:`ranked_cells`), so the order of all times across the table is kept, and no released
    time equals any source time; a threshold at a source time v_j >= v_2 splits the released
    times as it splits the source times (t > v_j iff moved > v_j).  Ties are broken events
    first (the Cox risk set counts a censored row at an event's time as at risk): a cell's
    events draw uniformly from its lower part, in proportion to their number, its censored rows
    from the upper part; within each part at random."""
    n = original.size
    cells = ranked_cells(original)
    if cells is None:
        return original.astype(np.float64, copy=True)
    lo, hi, j = cells
    u = rng.random(n)
    if status is None:
        a, b = lo[j], hi[j]
    else:
        event = np.asarray(status) == 1
        share = np.bincount(j, weights=event, minlength=lo.size) / np.bincount(j, minlength=lo.size)
        split = (lo + (hi - lo) * share)[j]
        a = np.where(event, lo[j], split)
        b = np.where(event, split, hi[j])
    moved = a + u * (b - a)
    stuck = (moved <= a) | (moved >= b)                  # never an end point (rounding, u = 0)
    moved[stuck] = (a[stuck] + b[stuck]) / 2.0
    return moved


def time_bins(original, bin_rows, integer):
    """Bins of the time column for ``"coarsened"``: sorted bin starts (float64), each bin
    [start_b, start_{b+1}) holding >= ``bin_rows`` source rows and spanning >= 3 integers
    (integer times) or >= 2 distinct values (floats); a short last bin joins the one before.
    One bin (the whole range) when the column cannot be cut."""
    return _bins(*distinct_counts(original)[:2], bin_rows, integer)


def distinct_counts(original):
    """``np.unique(original, return_counts=True)`` and whether ``np.repeat`` of them is
    ``np.sort(original)``: by counting when the values are non-negative integers of a short
    range (times in days or months), O(n), the same arrays, True; by sorting otherwise, False
    (a run of equal values may mix 0.0 and -0.0)."""
    if original.size:
        lo, hi = original.min(), original.max()
        if hi - lo < max(2 * original.size, 1024) and not np.signbit(original).any() \
                and np.array_equal(original, np.rint(original)):
            counts = np.bincount((original - lo).astype(np.int64))
            present = np.flatnonzero(counts)
            return lo + present.astype(np.float64), counts[present], True
    return (*np.unique(original, return_counts=True), False)


def _bins(values, counts, bin_rows, integer):
    cum = np.cumsum(counts)
    span = 3 if integer else 1
    starts, p = [], 0
    while p < values.size:
        starts.append(p)
        before = cum[p - 1] if p else 0
        nxt = int(np.searchsorted(cum, before + bin_rows, side="left")) + 1
        if integer:
            nxt = max(nxt, int(np.searchsorted(values, values[p] + span, side="left")))
        else:
            nxt = max(nxt, p + 2)
        p = nxt
    if len(starts) > 1:
        last = starts[-1]
        short = (cum[-1] - (cum[last - 1] if last else 0) < bin_rows
                 or (integer and values[-1] - values[last] + 1 < span)
                 or (not integer and values.size - last < 2))
        if short:
            starts.pop()
    return values[np.asarray(starts, dtype=np.int64)]


def coarsened_times(values, clusters, original, rng, integer, bin_rows):
    """Draws of ``"coarsened"`` for ``values`` (source times, cluster-major, sorted within each
    cluster; ``clusters`` their cluster ids): a value of the same bin, never the value itself."""
    n = values.size
    col_lo, col_hi = original.min(), original.max()
    distinct, counts, repeats_sorted = distinct_counts(original)
    bins = _bins(distinct, counts, max(int(bin_rows or 1), 1), integer)
    b = np.searchsorted(bins, values, side="right") - 1
    lo = bins[b]
    u = rng.random(n)
    if integer:
        hi = np.r_[bins[1:] - 1, col_hi][b]
        # no free integer in the bin (dense times): another source row's time of the bin,
        # drawn from the bin's rows whose time differs (the bin's distribution, not uniform
        # over its integers, so dense skewed times keep their shape)
        ranked = np.repeat(distinct, counts) if repeats_sorted else np.sort(original)
        rank_left = _rank_table(original, col_lo, col_hi)
        if rank_left is None:
            first = np.searchsorted(ranked, lo, side="left")
            stop = np.searchsorted(ranked, hi, side="right")
            same_lo = np.searchsorted(ranked, values, side="left")
            same_hi = np.searchsorted(ranked, values, side="right")
        else:                                       # the same positions, by table lookup
            def at(x):
                return rank_left[(x - col_lo).astype(np.int64)]
            first, stop = at(lo), at(hi + 1)
            same_lo, same_hi = at(values), at(values + 1)
        others = (stop - first) - (same_hi - same_lo)
        pick = first + np.floor(u * others).astype(np.int64)
        pick += np.where(pick >= same_lo, same_hi - same_lo, 0)
        moved = np.where(others > 0, ranked[np.minimum(pick, ranked.size - 1)], values)
        moved = _prefer_free(moved, original, col_lo, col_hi, lo, hi, u)
    else:
        hi = np.r_[bins[1:], col_hi][b]
        moved = lo + u * (hi - lo)
        stuck = (moved == values) & (hi > lo)
        moved[stuck] = (values[stuck] + np.where(hi[stuck] > values[stuck], hi[stuck],
                                                 lo[stuck])) / 2
    # a cluster whose times are all equal keeps them (a constant stays constant)
    new = np.r_[True, clusters[1:] != clusters[:-1]]
    start = np.flatnonzero(new)
    seg = np.cumsum(new) - 1
    end = np.r_[start[1:], n] - 1
    constant = (values[start] == values[end])[seg]
    return np.where(constant, values, moved)


def _rank_table(original, col_lo, col_hi):
    """For integer times of a short range: t[x - col_lo] = number of source times < x, for x in
    [col_lo, col_hi + 1] (= np.searchsorted(np.sort(original), x, "left")); None otherwise."""
    span = int(col_hi - col_lo) + 1
    if span > max(2 * original.size, 1024) or not np.array_equal(original, np.rint(original)):
        return None
    counts = np.bincount((original - col_lo).astype(np.int64), minlength=span)
    return np.concatenate([[0], np.cumsum(counts)])


def _prefer_free(moved, original, col_lo, col_hi, lo, hi, u):
    """Where an integer of [lo, hi] that no source row holds exists, a draw among those
    (u in [0, 1) per row) replaces ``moved``: a released time then equals no source time."""
    free = _free_integers(original, col_lo, col_hi)
    if not free.size:
        return moved
    first = np.searchsorted(free, lo, side="left")
    n_free = np.searchsorted(free, hi, side="right") - first
    pick = np.minimum(first + np.floor(u * n_free).astype(np.int64), free.size - 1)
    return np.where(n_free > 0, free[pick], moved)


def _free_integers(original, col_lo, col_hi):
    """Sorted integers of [col_lo, col_hi] that no source time equals (empty if too many)."""
    span = int(col_hi - col_lo)
    if span + 1 > _FREE_INTEGERS_LIMIT:
        return np.zeros(0)
    free = np.ones(span + 1, dtype=bool)
    free[(original - col_lo).astype(np.int64)] = False
    return col_lo + np.flatnonzero(free).astype(np.float64)


def grouping_of(cluster_id):
    """(rows ordered by cluster (stable), cluster sizes, start of each cluster in that order)."""
    sizes = np.bincount(cluster_id)
    keys = cluster_id.astype(np.uint16) if sizes.size <= 1 << 16 else cluster_id
    order = np.argsort(keys, kind="stable")      # 16-bit keys: numpy's radix sort, same order
    return order, sizes, np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)


def segment_argsort(grouped_keys, sizes, starts):
    """Permutation of 0..n-1 sorting ``grouped_keys`` (cluster-major) within every cluster,
    stably; clusters of equal size are sorted together as rows of one 2-D array."""
    perm = np.arange(grouped_keys.size)
    for size in np.unique(sizes):
        if size < 2:
            continue
        pos = starts[sizes == size][:, None] + np.arange(size)
        local = np.argsort(grouped_keys[pos], axis=1, kind="stable")
        perm[pos] = np.take_along_axis(pos, local, axis=1)
    return perm


def decode_categories(scores, source_codes, cluster_id, grouping, mode="counts"):
    """Category index (int64, 0..L-1) of every synthetic row from its one-hot scores (n, L).

    ``"argmax"``: the level with the largest score.  ``"counts"``: every cluster gets exactly
    its source count of each level (``source_codes``: the source rows' level indices, indexed
    like ``cluster_id``).  Levels are filled from the rarest (whole table) to the commonest;
    level l goes, within each cluster, to the still unassigned rows with the largest margin
    ``score_l - max(score of the levels not yet filled)`` (ties by position); the commonest
    level takes the rest.  A cluster's unassigned rows always suffice (the counts add up to
    the cluster's size).
    """
    n, n_levels = scores.shape
    if mode == "argmax" or n_levels <= 1 or n == 0:
        return np.argmax(scores, axis=1).astype(np.int64) if n_levels else np.zeros(n, np.int64)
    order, sizes, starts = grouping
    n_clusters = sizes.size
    target = np.bincount(cluster_id * n_levels + source_codes.astype(np.int64),
                         minlength=n_clusters * n_levels).reshape(n_clusters, n_levels)
    fill_order = np.argsort(target.sum(axis=0), kind="stable")          # rarest first
    assigned = np.full(n, -1, dtype=np.int64)
    small = np.int32 if n < 2**31 else np.int64          # positions: half the memory
    cluster_of_pos = np.repeat(np.arange(n_clusters, dtype=small), sizes)
    start_of_pos = np.repeat(starts.astype(small), sizes)
    by_level = np.ascontiguousarray(scores.T)            # (L, n): maxima across rows
    for i, level in enumerate(fill_order[:-1]):
        rest = fill_order[i + 1:]
        margin = by_level[rest[0]].copy()                  # max over the levels not yet filled
        for other in rest[1:]:
            np.maximum(margin, by_level[other], out=margin)
        np.subtract(by_level[level], margin, out=margin)
        margin[assigned >= 0] = -np.inf
        perm = segment_argsort(-margin[order], sizes, starts)           # best first
        rank = np.empty(n, dtype=np.int64)
        rank[perm] = np.arange(n) - start_of_pos[perm]
        chosen = order[rank < target[cluster_of_pos, level]]
        assigned[chosen] = level
    assigned[assigned < 0] = fill_order[-1]
    return assigned


def keep_cluster_constants(values, X, cluster_id, grouping, skip=()):
    """A column constant within a cluster is released as exactly that constant."""
    if X.size == 0:
        return
    order, _, starts = grouping
    for j in range(X.shape[1]):
        if j in skip:
            continue
        grouped = X[order, j]
        constant = np.maximum.reduceat(grouped, starts) == np.minimum.reduceat(grouped, starts)
        if constant.any():
            rows = constant[cluster_id]
            values[rows, j] = grouped[starts][cluster_id[rows]]


def permissible(values, X, kinds):
    """004 Alg. 2 step 2.d.iii: integers rounded, numbers clipped to the observed range."""
    for j, kind in enumerate(kinds):
        if kind == "categorical" or X.shape[0] == 0:
            continue
        col = values[:, j]
        if kind == "int":
            np.rint(col, out=col)
        np.clip(col, X[:, j].min(), X[:, j].max(), out=col)
        values[:, j] = col
