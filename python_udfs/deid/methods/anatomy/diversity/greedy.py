"""001 Fig. 6 (the independent row set C of Theorems 4-5) for many groups at once.

The greedy scans each group's rows by ascending total frequency (Fig. 6 lines 1-3, ties in
input order) and keeps a row when it shares no sensitive value with the rows kept so far
(lines 4-8).  Here every group is processed together with numpy:

* :func:`_independent_count` -- the number of rows of C per group (no column limits),
  optionally stopping at ``max_l``; large groups are scanned in rounds of frequency
  thresholds;
* :func:`_scan_sorted` / :func:`_lockstep` -- one round: the first rows of every group in
  lockstep (one row of every group per step), the rest by windows;
* :func:`_independent_rows` -- the window scan, which also returns which rows form C (the
  starting set of the column-wise check of Figs. 7-8, :mod:`.column_wise`).

Every variant gives exactly the sequential greedy's answer (checked against
:func:`.reference.greedy_trace` by the tests).
"""

from dataclasses import dataclass

import numpy as np

from ....segments import ranges
from .common import _NO_LIMIT, _order_by_group_then, _sampled_thresholds

LOCKSTEP_STEPS = 256


class _Sorted:
    """Rows in Fig. 6 order, read lazily: position p is row order[p]."""

    def __init__(self, order, gid, pks):
        self.order, self.gid, self.pks = order, gid, pks

    def group(self, pos):
        return self.gid[self.order[pos]]

    def keys(self, pos):
        rows = self.order[pos]
        return [pk[rows] for pk in self.pks]


@dataclass
class _CountScan:
    """State of :func:`_independent_count`, carried from round to round (updated in place)."""
    gid: np.ndarray           # group of each row
    pair_keys: list           # per attribute: the (group, value) pair of each row
    n_pairs: list             # per attribute: number of pairs
    target: np.ndarray        # int64 (G,): stop a group at this many rows of C
    used: list                # per attribute: bool per pair, value held by a row of C
    count: np.ndarray         # int64 (G,): rows of C so far


def _independent_count(gid, freq, pair_keys, n_pairs, gsize, *, n_groups, max_l):
    """001 Fig. 6 for all groups without column limits: the number of rows of C per group,
    stopping at ``max_l`` (None: no limit).  Same result as :func:`_independent_rows`.

    ``freq``: total frequency f of each row (Fig. 6 lines 1-2); ``pair_keys``: per attribute,
    the (group, value) pair of each row, ``n_pairs`` pairs.  The greedy scans each group's
    rows by increasing f (ties: input order).  With a limit it usually stops long before the
    end of a large group, so large groups scan their rows in rounds: the rows with
    below < f <= top (thresholds per group; the first one estimated from a 1/16 sample, then
    doubled while the group needs more rows).  Each round is an exact slice of the group's
    Fig. 6 order and continues from the greedy's state, so the result is the sequential
    greedy's.
    """
    G = n_groups
    limit = _NO_LIMIT if max_l is None else int(max_l)
    scan = _CountScan(gid=gid, pair_keys=pair_keys, n_pairs=n_pairs,
                      target=np.full(G, limit, dtype=np.int64),
                      used=[np.zeros(p, dtype=bool) for p in n_pairs],
                      count=np.zeros(G, dtype=np.int64))
    count, target = scan.count, scan.target
    if limit <= 0:
        return count
    top = None
    if max_l is not None:
        window = 6 * limit + 8
        big = gsize > 4 * window
        if big.any():
            # first threshold per big group from a 1/16 sample of the rows: the lowest buckets
            # of f (relative to the group's size) holding about 2 x window sampled-and-scaled
            # rows
            top = np.full(G, _NO_LIMIT, dtype=np.int64)
            top[big] = _sampled_thresholds(gid, freq, gsize, big, len(pair_keys), 16, 256,
                                           2 * window)
    if top is None:
        _scan_sorted(None, freq, scan)
        return count
    # rows with below < f <= top, in rounds; a group's threshold doubles while it needs more
    below = np.full(G, -1, dtype=np.int64)
    scanned = np.zeros(G, dtype=np.int64)
    while True:
        if G == 1:
            in_round = freq <= top[0]
            if below[0] >= 0:
                in_round &= freq > below[0]
        else:
            in_round = freq <= np.take(top, gid)
            if below.max() >= 0:
                in_round &= freq > np.take(below, gid)
        scanned += _scan_sorted(np.flatnonzero(in_round), freq, scan)
        more = (count < target) & (scanned < gsize)
        if not more.any():
            return count
        below = np.where(more, top, _NO_LIMIT)
        top = np.where(more, np.minimum(2 * top, _NO_LIMIT), _NO_LIMIT)


def _scan_sorted(rows, freq, scan):
    """Continue Fig. 6 over ``rows`` (None: all rows; ascending), sorted by (group, f, row):
    the first LOCKSTEP_STEPS rows of every group in lockstep, the rest by windows.  Updates
    ``scan.used`` and ``scan.count``; returns the number of rows given per group."""
    G = scan.count.size
    gid = scan.gid
    if rows is None:
        row_gid, row_freq = gid, freq
    else:
        row_gid, row_freq = gid[rows], freq[rows]
    order = _order_by_group_then(row_gid, row_freq, G)
    if rows is not None:
        order = rows[order]
    size = np.bincount(row_gid, minlength=G).astype(np.int64)
    start = np.cumsum(size) - size
    steps = _lockstep(order, start, size, scan)
    more = (scan.count < scan.target) & (size > steps)
    if more.any():
        srt = _Sorted(order, gid, scan.pair_keys)
        rest = np.where(more, size - steps, 0)
        scan.count[:], _ = _independent_rows(srt, scan.n_pairs, start + steps, rest, G,
                                             scan.target, used=scan.used, count=scan.count)
    return size


def _lockstep(order, start, size, scan):
    """Fig. 6 on the first rows of the sorted segments (``order``, one segment per group at
    ``start`` with ``size`` rows), one row of every active group per step (rows of distinct
    groups never share a (group, value) pair).  Returns the number of steps taken (every
    group's rows before that position have been scanned)."""
    count, target, used = scan.count, scan.target, scan.used
    groups = np.flatnonzero((size > 0) & (count < target))
    if groups.size == 0:
        return 0
    groups = groups[np.argsort(-size[groups], kind="stable")]     # longest segment first
    depth = min(LOCKSTEP_STEPS, int(size[groups[0]]))
    finite = bool((target[groups] < _NO_LIMIT).any())
    seg_start, neg_size = start[groups], -size[groups]
    for step in range(depth):
        if finite and step and step % 4 == 0:
            keep = count[groups] < target[groups]
            if not keep.all():
                groups, seg_start, neg_size = groups[keep], seg_start[keep], neg_size[keep]
                if groups.size == 0:
                    return depth
        n_long = int(np.searchsorted(neg_size, -step, "left"))   # groups with > step rows
        if n_long == 0:
            return depth
        step_groups = groups[:n_long]
        rows = order[seg_start[:n_long] + step]
        pair_keys = [pk[rows] for pk in scan.pair_keys]
        free = ~used[0][pair_keys[0]]
        for a in range(1, len(pair_keys)):
            free &= ~used[a][pair_keys[a]]
        if finite:
            free &= count[step_groups] < target[step_groups]
        for a, key in enumerate(pair_keys):
            used[a][key[free]] = True
        count[step_groups[free]] += 1
    return depth


def _independent_rows(srt, npairs, gstart, gsize, G, target, used=None, count=None):
    """001 Fig. 6 for all groups: rows (in sorted order) sharing no value, up to ``target``.

    Rows are scanned in windows of each group's sorted order.  Inside a window, every alive row
    whose values do not occur in any earlier alive row of its group is certainly picked by the
    sequential greedy, so all of them are taken at once; rows conflicting with the picks die.
    Returns (count per group, picked mask over sorted positions).  ``used`` (values taken, per
    attribute, updated in place) and ``count`` continue an earlier scan of the same groups.
    """
    n = srt.order.size
    count = np.zeros(G, dtype=np.int64) if count is None else count.copy()
    picked = np.zeros(n, dtype=bool)
    if used is None:
        used = [np.zeros(p, dtype=bool) for p in npairs]
    first_at = [np.empty(p, dtype=np.int32) for p in npairs]
    finite = bool((target < _NO_LIMIT).any())
    active = (gsize > 0) & (target > 0)
    lo = 0
    width = int(min(max(int(target.max()), 4), 64))
    while True:
        groups = np.flatnonzero(active)
        if groups.size == 0:
            break
        hi = lo + width
        pos = ranges(gstart[groups] + lo, np.minimum(gsize[groups], hi) - lo)
        pair_keys = srt.keys(pos)
        alive = np.ones(pos.size, dtype=bool)
        for a, key in enumerate(pair_keys):
            alive &= ~used[a][key]
        pos, pos_group = pos[alive], srt.group(pos[alive])
        pair_keys = [key[alive] for key in pair_keys]
        while pos.size:
            idx = np.arange(pos.size, dtype=np.int32)
            sure = np.ones(pos.size, dtype=bool)
            for a, key in enumerate(pair_keys):
                first_at[a][key[::-1]] = idx[::-1]     # last write wins: first occurrence
                sure &= first_at[a][key] == idx
            picked[pos[sure]] = True
            for a, key in enumerate(pair_keys):
                used[a][key[sure]] = True
            count += np.bincount(pos_group[sure], minlength=G)
            rest = ~sure
            if finite:
                rest &= count[pos_group] < target[pos_group]
            for a, key in enumerate(pair_keys):
                rest &= ~used[a][key]
            pos, pos_group = pos[rest], pos_group[rest]
            pair_keys = [key[rest] for key in pair_keys]
        active &= (gsize > hi) & (count < target)
        lo = hi
        width *= 2
    return count, picked
