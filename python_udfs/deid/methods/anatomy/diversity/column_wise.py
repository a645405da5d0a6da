"""001 Figs. 7-8: the L-diversity check with column-wise limits (Def. 7, Theorem 6).

Starting from Fig. 6's independent row set C (:mod:`.greedy`), Fig. 7 adds the remaining
rows of a group in ascending total frequency and keeps a row iff the certificate x(C) does
not drop; Fig. 8 is the paper's worked example (the tests replay it).  x(C) is computed with
the strict form of Theorem 6 (package docstring, deviation 1):
``x(C) = 1 + max{j : T_j(C) < |C|}``, T_j the largest total frequency of j values with at
most L_i from attribute i, kept from an incrementally merged top list (001 "Complexity").

* :func:`_column_targets` -- the per-group search target and when reaching it means
  ``UNBOUNDED_L`` (deviation 3);
* :func:`_grow_column_wise` -- Fig. 7 lines 1-14 for many groups at once (deviation 2).
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ....segments import ranges
from .common import _NO_LIMIT
from .greedy import _Sorted

PHASE2_MAX_SCAN = 1 << 16        # Fig. 7: candidate rows examined after Fig. 6 (per group) ...
PHASE2_MAX_KEEP = 1024           # ... and rows added to C
PHASE2_MAX_WIDTH = 128           # Fig. 7: length of the top-frequency list (caps the certificate)


def _column_targets(caps, counts, pgroups, sizes, G, target):
    """Per-group search target under column limits and whether reaching it means 'unbounded'.

    If some attribute i has L_i >= its number of distinct values d_i, deleting all of it is
    allowed, so no certificate can exceed min d_i.  Otherwise every allowed deletion set has at
    most S = sum_i min(L_i, d_i) values, and certifying S + 1 means no allowed set deletes the
    group (UNBOUNDED_L).
    """
    best = np.full(G, _NO_LIMIT, dtype=np.int64)
    total = np.zeros(G, dtype=np.int64)
    for a, cnt in enumerate(counts):
        present = np.flatnonzero(cnt)
        grp = present // max(int(sizes[a]), 1) if pgroups[a] is None else pgroups[a][present]
        distinct = np.bincount(grp, minlength=G).astype(np.int64)
        deletable = caps[a] >= distinct
        best = np.where(deletable, np.minimum(best, distinct), best)
        total += np.minimum(caps[a], distinct)
    unbounded = best == _NO_LIMIT
    limit = np.where(unbounded, total + 1, best)
    unbounded &= limit <= target
    return np.minimum(target, limit), unbounded


@dataclass
class _Fig6Scan:
    """Every group's rows in Fig. 6 order and the C that Fig. 6 found (Fig. 7 line 1)."""
    rows: _Sorted             # sorted position -> row, its group, its pair keys
    n_pairs: list             # per attribute: number of (group, value) pairs
    group_start: np.ndarray   # int64 (G,): first sorted position of each group
    group_size: np.ndarray    # int64 (G,): rows of each group
    picked: np.ndarray        # bool per sorted position: the row is in Fig. 6's C


class _Trial(NamedTuple):
    """x(C + row) of candidate rows, one per entry, and what committing the row stores."""
    certified: np.ndarray     # x(C + row), capped at the target
    pairs: np.ndarray         # (N, s): global (attribute, group, value) ids of the row
    top_pair: np.ndarray      # (N, W): the merged top list after adding the row ...
    top_attr: np.ndarray      # ... the attribute of each entry ...
    top_count: np.ndarray     # ... and its frequency in C + row

    def select(self, idx):
        return _Trial(*(field[idx] for field in self))


class _TopLists:
    """Fig. 7 state of the groups being grown ("lanes" 0..n_lanes-1): per lane |C|, x(C)
    and the list of the ``width`` most frequent allowed values of C; per (attribute, group,
    value) its count in C.  Only the new row's values can change rank, so a candidate row is
    evaluated by merging them into the lane's list (001 Fig. 7 "Complexity")."""

    def __init__(self, n_lanes, sorted_rows, n_pairs, target, caps, width):
        s = len(sorted_rows.pks)
        self.sorted_rows = sorted_rows
        self.target = target                       # per lane: stop at x = target
        self.caps = caps
        self.width = int(width)
        self.pair_offset = np.concatenate([[0], np.cumsum(n_pairs)[:-1]]).astype(np.int64)
        self.count_in_c = np.zeros(int(np.sum(n_pairs)), dtype=np.int64)
        shape = (n_lanes, self.width)
        self.top_pair = np.full(shape, -1, dtype=np.int64)   # merged top list: global pair id
        self.top_attr = np.full(shape, -1, dtype=np.int64)   # attribute of the entry
        self.top_count = np.zeros(shape, dtype=np.int64)     # its frequency in C
        self.size = np.zeros(n_lanes, dtype=np.int64)        # |C|
        self.certified = np.zeros(n_lanes, dtype=np.int64)   # x(C)
        self.limited = [a for a in range(s) if caps[a] < self.width]
        self.attr_ids = np.arange(s, dtype=np.int64)
        self.slot = np.arange(self.width, dtype=np.int64)

    def evaluate(self, lanes, rows):
        """x(C + row) for every (lane, sorted position) pair of ``lanes`` and ``rows``."""
        new_pairs = np.stack([key + self.pair_offset[a]
                              for a, key in enumerate(self.sorted_rows.keys(rows))], axis=1)
        new_counts = self.count_in_c[new_pairs] + 1
        top_pair, top_attr, top_count, listed = self._merge(lanes, new_pairs, new_counts)
        size = self.size[lanes] + 1
        covered = np.cumsum(top_count, axis=1)               # T_1 .. T_W
        n_listed = listed.sum(axis=1)
        short = ((covered < size[:, None]) & (self.slot[None, :] < n_listed[:, None])).sum(axis=1)
        # allowed values exhausted: T_j = T_all
        short = np.where(covered[:, -1] < size, self.width, short)
        certified = 1 + np.minimum(short, self.target[lanes] - 1)
        return _Trial(certified, new_pairs, top_pair, top_attr, top_count)

    def _merge(self, lanes, new_pairs, new_counts):
        """The lanes' top lists with the new row's values merged in: (pair, attribute, count,
        listed) per slot, the ``width`` most frequent values (stable) with at most L_a from
        attribute a."""
        width = self.width
        old_pair, old_count = self.top_pair[lanes], self.top_count[lanes]
        same = old_pair[:, :, None] == new_pairs[:, None, :]      # (N, W, s)
        new_listed = same.any(axis=1)
        old_hit = same.any(axis=2)
        old_count = np.where(old_hit, (same * new_counts[:, None, :]).sum(axis=2), old_count)
        cand_pair = np.concatenate([old_pair, np.where(new_listed, -1, new_pairs)], axis=1)
        cand_attr = np.concatenate([self.top_attr[lanes],
                                    np.where(new_listed, -1, self.attr_ids[None, :])], axis=1)
        cand_count = np.concatenate([old_count, np.where(new_listed, 0, new_counts)], axis=1)
        n_cand = cand_count.shape[1]
        flat = np.argsort(-cand_count, axis=1, kind="stable")
        flat += (np.arange(lanes.size) * n_cand)[:, None]
        cand_pair = cand_pair.ravel()[flat]
        cand_attr = cand_attr.ravel()[flat]
        cand_count = cand_count.ravel()[flat]
        allowed = cand_count > 0
        for a in self.limited:                      # at most L_a values of attribute a
            is_a = cand_attr == a
            allowed &= ~is_a | (np.cumsum(is_a, axis=1) <= self.caps[a])
        allowed &= np.cumsum(allowed, axis=1) <= width
        flat = np.argsort(~allowed, axis=1, kind="stable")[:, :width]
        flat += (np.arange(lanes.size) * n_cand)[:, None]
        listed = allowed.ravel()[flat]
        return (np.where(listed, cand_pair.ravel()[flat], -1),
                np.where(listed, cand_attr.ravel()[flat], -1),
                np.where(listed, cand_count.ravel()[flat], 0),
                listed)

    def commit(self, lanes, trial):
        """Add the evaluated rows (at most one per lane) to C."""
        self.top_pair[lanes], self.top_attr[lanes], self.top_count[lanes] = \
            trial.top_pair, trial.top_attr, trial.top_count
        self.count_in_c[trial.pairs.ravel()] += 1    # distinct pairs: one row per group
        self.size[lanes] += 1
        self.certified[lanes] = trial.certified


def _grow_column_wise(groups, fig6, *, n_groups, target, caps, width):
    """001 Fig. 7 for the given groups: add rows to C in sorted order, keep a row iff the
    certificate x(C) does not drop; stop at x = ``target`` (one per group of ``groups``).
    ``fig6``: the :class:`_Fig6Scan` of all ``n_groups`` groups.  Returns the final x per
    group of ``groups``."""
    tops = _TopLists(groups.size, fig6.rows, fig6.n_pairs, target, caps, width)
    lane_of_group = np.full(n_groups, -1, dtype=np.int64)
    lane_of_group[groups] = np.arange(groups.size)
    c_size = _add_independent_rows(tops, fig6, lane_of_group)
    _add_candidates(tops, fig6, groups, lane_of_group, c_size)
    return tops.certified


def _add_independent_rows(tops, fig6, lane_of_group):
    """C from Fig. 6, added one row per lane per step (its x is computed on the way).
    Returns the number of rows of Fig. 6's C per lane."""
    n_lanes = tops.size.size
    c_pos = np.flatnonzero(fig6.picked)
    c_lane = lane_of_group[fig6.rows.group(c_pos)]
    c_pos, c_lane = c_pos[c_lane >= 0], c_lane[c_lane >= 0]
    c_size = np.bincount(c_lane, minlength=n_lanes)
    c_rank = np.arange(c_pos.size) - (np.cumsum(c_size) - c_size)[c_lane]
    for step in range(int(c_size.max(initial=0))):
        sel = c_rank == step
        lanes, rows = c_lane[sel], c_pos[sel]
        tops.commit(lanes, tops.evaluate(lanes, rows))
    return c_size


def _add_candidates(tops, fig6, groups, lane_of_group, c_size):
    """Fig. 7 lines 3-14: the remaining rows in ascending total frequency.

    Whether a candidate is kept depends only on C and the candidate, so each lane tests a
    trial of its next candidates against the same C and keeps the first one that passes (the
    rows before it are exactly the ones the sequential loop rejects).  Trials double while
    nothing passes."""
    n_lanes = groups.size
    take = np.minimum(fig6.group_size[groups], c_size + PHASE2_MAX_SCAN)
    cand_pos = ranges(fig6.group_start[groups], take)
    cand_pos = cand_pos[~fig6.picked[cand_pos]]            # candidates, lane after lane
    cand_lane = lane_of_group[fig6.rows.group(cand_pos)]
    n_cand = np.bincount(cand_lane, minlength=n_lanes)
    scan_len = np.minimum(n_cand, PHASE2_MAX_SCAN)
    cand_start = np.cumsum(n_cand) - n_cand
    cursor = np.zeros(n_lanes, dtype=np.int64)
    trial_size = np.ones(n_lanes, dtype=np.int64)
    kept = np.zeros(n_lanes, dtype=np.int64)
    certified, target = tops.certified, tops.target
    active = certified < target
    while True:
        lanes = np.flatnonzero(active & (cursor < scan_len))
        if lanes.size == 0:
            break
        per_lane = np.minimum(trial_size[lanes], scan_len[lanes] - cursor[lanes])
        trial_lane = np.repeat(lanes, per_lane)
        trial_offset = ranges(cursor[lanes], per_lane)
        trial = tops.evaluate(trial_lane, cand_pos[cand_start[trial_lane] + trial_offset])
        ok = np.flatnonzero(trial.certified >= certified[trial_lane])
        first = ok[np.unique(trial_lane[ok], return_index=True)[1]] if ok.size else ok
        won = trial_lane[first]
        if first.size:
            tops.commit(won, trial.select(first))
        kept[won] += 1
        cursor[lanes] += per_lane                       # no pass: the whole trial is rejected
        cursor[won] = trial_offset[first] + 1           # pass: resume after the kept row
        trial_size[lanes] = np.minimum(trial_size[lanes] * 2, 4096)
        trial_size[won] = 1
        active[lanes] = (certified[lanes] < target[lanes]) & (kept[lanes] < PHASE2_MAX_KEEP)
