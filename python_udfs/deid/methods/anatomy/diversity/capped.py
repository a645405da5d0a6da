"""001 Fig. 6 capped at a limit, without column limits: the fast path of the ">= L" test.

min(|C|, ``limit``) for every group, where C is Fig. 6's independent row set (Theorems 4-5).
This is what the partition's acceptor asks for every candidate split (anatomy, 001 Fig. 5
``Split``), so it avoids sorting and scanning the rows a group never needs: thresholds of
the total frequency cut each group's Fig. 6 order into rounds, and a round stops as soon as
the group reaches the limit.  Same answer as the sequential greedy
(:func:`.reference.greedy_trace`) and as the uncapped :mod:`.greedy` path.
"""

from dataclasses import dataclass

import numpy as np

from ....segments import ranges
from .common import (_NO_LIMIT, _index_dtype, _order_by_group_then, _order_grouped_then,
                     _sampled_thresholds)

CAPPED_LOCAL_PAIRS = 1 << 21     # (group, value) tables above this: work in group order


def _capped_fits(G, sizes, n):
    """Whether :func:`_capped_count` can index (group, value) pairs directly."""
    return G * max(int(np.max(sizes)), 1) <= max(8 * n, 1 << 22)


@dataclass
class _CappedScan:
    """State of the capped greedy, carried from round to round (updated in place)."""
    gid: np.ndarray           # group of each row (the layout's index dtype)
    cols: list                # per attribute: the value of each row
    sizes: list               # per attribute: number of values (pair = group * size + value)
    target: np.ndarray        # int64 (G,): the limit of each group
    used: list                # per attribute: bool per pair, value held by a row of C
    first_at: list            # per attribute: int32 scratch per pair (first occurrence)
    count: np.ndarray         # int64 (G,): rows of C so far


def _capped_count(gid, dense, sizes, G, gsize, limit, grouped=False):
    """001 Fig. 6 without column limits, capped: min(|C|, ``limit``) for every group.

    Same answer as the sequential greedy (the tests compare it with :func:`greedy_trace`):

    * Fig. 6 lines 1-2: the total frequency f of every row from one histogram of
      (group, value) per attribute.  When those tables are large, the rows are first put in
      group order (stable, so each group keeps its rows in input order and the tie order of
      Fig. 6 line 3 is unchanged): the histogram and f then touch one group's small part of
      the table at a time instead of the whole table at random.  ``grouped``: the rows
      already are in group order (each group's rows in input order).
    * Fig. 6 lines 3-8 in rounds: a round takes, for every group still short of ``limit``, its
      rows with below < f <= top (inclusive thresholds never split rows of equal f), sorts
      them by (group, f, row) and continues the greedy from the state (values used, count)
      of the earlier rounds.  Every round is therefore exactly the next slice of each group's
      Fig. 6 order.  The first threshold of a group aims at an eighth of its rows (at
      least 4 x ``limit``; estimated from a histogram of f, on a 1/16 sample for large
      groups); it doubles while a group needs more rows.  Thresholds only affect speed.
      Groups of at most 8 x ``limit`` rows take all their rows in the first round.  Rows
      already in group order are sorted by :func:`_order_grouped_then` (one 16-bit radix
      pass per run of groups).
    * A round's sorted rows are scanned in windows of each group's order (:func:`_pick_windows`:
      the first 3 x ``limit`` rows, then windows twice as long), a window only for the groups
      still short of ``limit`` (the greedy typically needs 12-16 % of a large group, about
      2-3 x ``limit`` rows of a small one).
    * Inside a window (:func:`_pick_sorted`) every row whose values do not occur in any
      earlier live row of its group is certainly picked by the sequential greedy, so all of
      them are taken at once and the rows sharing a value with them die; repeat.  Every
      repetition picks at least one row in every group still below ``limit``, so a window
      takes at most ``limit`` repetitions, and each goes over the window's live rows only (a
      large group, which takes few rows per repetition, does not rescan its whole round).
    """
    # intp (pair) indices: numpy casts any other index type to intp at every gather, scatter
    # and bincount of the scan (measured faster than 32-bit keys despite the larger arrays)
    index_t = np.intp
    gid, cols, grouped = _layout(gid, dense, sizes, G, gsize, index_t, grouped)
    freq, n_pairs = _row_frequencies(gid, cols, sizes, G, gsize, index_t)
    count = np.zeros(G, dtype=np.int64)
    if limit <= 0:
        return count
    scan = _CappedScan(gid=gid, cols=cols, sizes=[max(int(v), 1) for v in sizes],
                       target=np.full(G, limit, dtype=np.int64),
                       used=[np.zeros(p, dtype=bool) for p in n_pairs],
                       first_at=[np.empty(p, dtype=np.int32) for p in n_pairs],
                       count=count)
    top = _first_thresholds(gid, freq, gsize, limit, len(dense))
    sort = _order_grouped_then if grouped else _order_by_group_then
    gstart = np.cumsum(gsize) - gsize
    scanned = np.zeros(G, dtype=np.int64)
    # first round: every row with f <= its group's first threshold
    rows = np.flatnonzero(freq <= (top[0] if G == 1 else np.take(top, gid)))
    rows, per_group = _sort_round(rows, gid, freq, G, sort)
    scanned += per_group
    fresh = True
    while True:
        _pick_windows(rows, per_group, limit, scan, fresh)
        fresh = False
        more = (count < scan.target) & (scanned < gsize)
        if not more.any():
            return np.minimum(count, limit)
        # next round: the groups short of the limit, with below < f <= top (doubled)
        below = np.where(more, top, _NO_LIMIT)
        top = np.where(more, np.minimum(2 * top, _NO_LIMIT), _NO_LIMIT)
        if grouped:
            rows = ranges(gstart[more], gsize[more])
        else:
            rows = np.flatnonzero(np.take(more, gid))
        row_freq = freq[rows]
        row_gid = gid[rows]
        rows = rows[(row_freq > np.take(below, row_gid)) & (row_freq <= np.take(top, row_gid))]
        rows, per_group = _sort_round(rows, gid, freq, G, sort)
        scanned += per_group


def _layout(gid, dense, sizes, G, gsize, index_t, grouped):
    """(group of each row, columns, whether rows are in group order) for the capped scan:
    rows in input order, or -- when the (group, value) tables are larger than
    CAPPED_LOCAL_PAIRS -- stably put in group order first."""
    if grouped:
        return gid.astype(index_t, copy=False), dense, G > 1
    if G > 1 and G * int(np.max(sizes)) > CAPPED_LOCAL_PAIRS:
        order = _order_by_group_then(gid, np.zeros(gid.size, dtype=np.uint8), G)
        local_gid = np.repeat(np.arange(G, dtype=index_t), gsize)
        return local_gid, [np.take(c, order) for c in dense], True
    return gid.astype(index_t, copy=False), dense, False


def _row_frequencies(gid, cols, sizes, G, gsize, index_t):
    """001 Fig. 6 lines 1-2: (total frequency of each row, per attribute the number of
    (group, value) pairs).  The pairs' keys are not kept: :func:`_pair_keys` recomputes the
    few the scan needs from the (small) columns."""
    s = len(cols)
    freq_t = _index_dtype(s * int(gsize.max()) + 1)
    freq = None
    n_pairs = []
    pair = np.empty(gid.size, dtype=index_t) if G > 1 else None    # one buffer for all
    for a in range(s):
        size = max(int(sizes[a]), 1)
        if G == 1:
            pair = cols[a]
        else:
            np.multiply(gid, index_t(size), out=pair)
            np.add(pair, cols[a], out=pair, casting="unsafe")
        pair_count = np.bincount(pair, minlength=G * size)
        if pair_count.size < gid.size:                  # a small table: narrow it first
            pair_count = pair_count.astype(freq_t, copy=False)
        if freq is None:
            freq = np.take(pair_count, pair).astype(freq_t, copy=False)
        else:
            np.add(freq, np.take(pair_count, pair), out=freq, casting="unsafe")
        n_pairs.append(G * size)
    return freq, n_pairs


def _pair_keys(rows, row_group, scan):
    """Per attribute, the (group, value) pair of each of ``rows`` (intp)."""
    keys = []
    for col, size in zip(scan.cols, scan.sizes):
        key = np.take(col, rows).astype(np.intp)
        if scan.count.size > 1:
            key += row_group * size
        keys.append(key)
    return keys


def _first_thresholds(gid, freq, gsize, limit, s):
    """First threshold of f per group: the lowest buckets of f (relative to the group's size)
    holding about ``want`` rows (an eighth of the group, at least 4 x limit; the greedy
    typically needs 10-30 %), counted on every row, or on every 16th row when the groups are
    large; groups of at most 2 x want rows take all their rows (no threshold)."""
    top = np.full(gsize.size, _NO_LIMIT, dtype=np.int64)
    want = np.maximum(4 * limit, gsize // 8)
    big = gsize > 2 * want
    if big.any():
        n_big = int(np.count_nonzero(big))
        step = 16 if gid.size >= 16 * 256 * n_big else 1
        top[big] = _sampled_thresholds(gid, freq, gsize, big, s, step, 256 if step > 1 else 32,
                                       want[big])
    return top


def _sort_round(rows, gid, freq, G, sort):
    """Fig. 6 line 3 (stable) on one round's rows: (rows sorted by (group, f, row), number of
    rows per group)."""
    row_gid = gid[rows] if G > 1 else np.zeros(rows.size, dtype=np.uint8)
    per_group = np.bincount(row_gid, minlength=G)
    return rows[sort(row_gid, freq[rows], G)], per_group


def _pick_windows(rows, per_group, limit, scan, fresh):
    """Scan one round's rows (sorted by group, f, row; ``per_group`` of each group) in windows
    of each group's order -- positions [0, w), [w, 3w), [3w, 7w) ... with w = 3 x limit --
    each only for the groups still short of their target.  Every window continues the
    greedy exactly where the previous one stopped (its rows are checked against the values
    taken), and a window's repetitions of :func:`_pick_sorted` only go over its own rows: a
    large group, which takes few rows per repetition, does not rescan its whole slice.
    ``fresh``: nothing is picked yet."""
    width = 3 * limit
    if int(per_group.max(initial=0)) <= width:
        _pick_sorted(rows, scan, fresh)
        return
    start = np.cumsum(per_group) - per_group
    lo = 0
    while True:
        groups = np.flatnonzero((per_group > lo) & (scan.count < scan.target))
        if groups.size == 0:
            return
        hi = lo + width
        if lo == 0 and groups.size == per_group.size and int(per_group.max()) <= hi:
            window = rows                                 # every row at once
        else:
            window = rows[ranges(start[groups] + lo, np.minimum(per_group[groups], hi) - lo)]
        _pick_sorted(window, scan, fresh)
        fresh = False
        lo = hi
        width *= 2


def _pick_sorted(rows, scan, fresh=False):
    """Continue 001 Fig. 6 over ``rows`` (sorted by group, f, row) until every group reaches
    its target or runs out of rows; updates ``scan.used`` (values taken) and ``scan.count``
    in place.

    A live row none of whose values occurs in an earlier live row of its group is picked by the
    sequential greedy (no earlier pick can hold its values), so all such rows are picked at
    once; rows sharing a value with a pick die.  (A pick past the target is a pick the
    uncapped greedy makes too, so min(count, target) is the capped greedy's answer.)
    ``fresh``: nothing is picked yet (every row is live)."""
    count, target, used, first_at = scan.count, scan.target, scan.used, scan.first_at
    G = count.size
    row_group = scan.gid[rows] if G > 1 else np.zeros(rows.size, dtype=np.intp)
    pair_keys = _pair_keys(rows, row_group, scan)
    live = None
    if not fresh:
        live = np.take(count < target, row_group)
        for a, key in enumerate(pair_keys):
            live &= ~np.take(used[a], key)
    while True:
        if live is not None:
            row_group = row_group[live]
            pair_keys = [key[live] for key in pair_keys]
        if row_group.size == 0:
            return
        idx = np.arange(row_group.size, dtype=np.int32)
        sure = np.ones(row_group.size, dtype=bool)
        for a, key in enumerate(pair_keys):
            first_at[a][key[::-1]] = idx[::-1]          # last write wins: first occurrence
            sure &= first_at[a][key] == idx
        picks = np.flatnonzero(sure)                    # few: index them once
        for a, key in enumerate(pair_keys):
            used[a][np.take(key, picks)] = True
        count += np.bincount(np.take(row_group, picks), minlength=G)
        live = ~sure
        live &= np.take(count < target, row_group)
        for a, key in enumerate(pair_keys):
            live &= ~np.take(used[a], key)
