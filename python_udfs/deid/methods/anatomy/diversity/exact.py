"""Exact minimum number of value deletions that delete a whole group (001 Theorem 3).

Deciding L-diversity (001 Defs. 6-7) is a minimum set cover / hitting-set problem over the
RID sets of the values, NP-hard by Theorem 3, which is why the release path uses the greedy
certificate of Figs. 6-8.  :func:`exact_min_deletions` solves it by branch and bound for tests
and small groups (at most ``EXACT_MAX_ROWS`` distinct rows, ``EXACT_MAX_NODES`` nodes).
"""

import numpy as np

from ....errors import DeidError, INVALID_PARAMETER_VALUE
from .common import _NO_LIMIT, as_codes, column_caps

EXACT_MAX_ROWS = 48              # exact search: at most this many distinct rows per group ...
EXACT_MAX_NODES = 200_000        # ... and this many search nodes


def exact_min_deletions(codes, column_l=None):
    """Exact minimum number of (attribute, value) deletions that delete every row.

    Branch and bound over the hitting-set formulation (001 Theorem 3), honouring the column
    limits; returns ``UNBOUNDED_L`` when the limits make it impossible.  Groups with more than
    ``EXACT_MAX_ROWS`` distinct rows, or searches exceeding ``EXACT_MAX_NODES`` nodes, raise
    DeidError(INVALID_PARAMETER_VALUE).
    """
    codes = as_codes(codes)
    s = codes.shape[1]
    caps = column_caps(column_l, s)
    caps = [int(c) for c in caps] if caps is not None else [_NO_LIMIT] * s
    rows = np.unique(codes, axis=0) if codes.shape[0] else codes
    n_rows = rows.shape[0]
    if n_rows == 0:
        return 0
    if n_rows > EXACT_MAX_ROWS:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"exact L check is limited to {EXACT_MAX_ROWS} distinct rows, "
                        f"got {n_rows}",
                        hint="use certified_l() / greedy_check() for larger groups")
    search = _HittingSetSearch(rows, caps)
    search.search((1 << n_rows) - 1, 0, list(caps))
    return int(search.best)


class _HittingSetSearch:
    """Branch and bound: items are the allowed (attribute, value) pairs, each a bit mask of
    the distinct rows holding it; find the fewest items covering every row with at most
    ``caps[a]`` items of attribute a."""

    def __init__(self, rows, caps):
        self.item_attr, self.item_mask = [], []
        self.row_items = [[] for _ in range(rows.shape[0])]
        for a in range(rows.shape[1]):
            if caps[a] == 0:
                continue
            for v in np.unique(rows[:, a]):
                members = np.flatnonzero(rows[:, a] == v)
                item = len(self.item_mask)
                self.item_attr.append(a)
                self.item_mask.append(sum(1 << int(i) for i in members))
                for i in members:
                    self.row_items[int(i)].append(item)
        self.best = _NO_LIMIT
        self.nodes = 0

    def uncovered_rows(self, uncovered, left):
        """(row, its bit, its items still allowed by `left`) of every uncovered row."""
        rem = uncovered
        while rem:
            low = rem & -rem
            rem ^= low
            i = low.bit_length() - 1
            yield i, low, [it for it in self.row_items[i] if left[self.item_attr[it]] > 0]

    def lower_bound(self, uncovered, left):
        # rows pairwise sharing no allowed item each need their own deletion
        bound, blocked = 0, 0
        for _, low, items in self.uncovered_rows(uncovered, left):
            if not items:
                return None                         # row cannot be deleted any more
            hit = 0
            for it in items:
                hit |= self.item_mask[it]
            if not blocked & low:
                bound += 1
                blocked |= hit
        return bound

    def search(self, uncovered, depth, left):
        self.nodes += 1
        if self.nodes > EXACT_MAX_NODES:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"exact L check exceeded {EXACT_MAX_NODES} search nodes",
                            hint="use certified_l() / greedy_check() for this group")
        if uncovered == 0:
            self.best = min(self.best, depth)
            return
        bound = self.lower_bound(uncovered, left)
        if bound is None or depth + bound >= self.best:
            return
        # branch on the uncovered row with the fewest allowed items
        pick_items = None
        for _, _, items in self.uncovered_rows(uncovered, left):
            if pick_items is None or len(items) < len(pick_items):
                pick_items = items
        pick_items.sort(key=lambda it: -bin(self.item_mask[it] & uncovered).count("1"))
        for it in pick_items:
            a = self.item_attr[it]
            left[a] -= 1
            self.search(uncovered & ~self.item_mask[it], depth + 1, left)
            left[a] += 1
