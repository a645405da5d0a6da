"""Exact search of the generalization lattice (paper 002 sec. 4.5 mentions backtracking over
alternative paths but gives no algorithm): :func:`optimal`, monotone pruning as in Flash / OLA.
See :mod:`generalize` for the reading of the paper shared with the greedy loop.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ...errors import FEATURE_NOT_SUPPORTED, DeidError
from .class_table import (ROUND as _ROUND, GeneralizationResult, _PROBE_MIN_ROWS, _Table,
                          _bincount_ok, _check_inputs, _finish, _source_groups, _unsatisfiable)

__all__ = ["optimal", "OPTIMAL_MAX_NODES"]

OPTIMAL_MAX_NODES = 2_000_000  # lattice vectors per source that optimal() agrees to search


class _Lattice:
    """Search of one source's level lattice for the cheapest k-anonymous vector.

    For the joint constraint (k over all quasi-identifiers together) the lattice is that of all attributes, ``k`` the joint
    minimum, ``also(v)`` a further monotone condition (every source k-anonymous at v), and
    ``floor`` a cost below which every vector is known to fail it."""

    def __init__(self, bottom: _Table, attrs, k, max_nodes, also=None, floor=None):
        self.attrs, self.k, self.also = attrs, k, also
        self.caps = np.array([h.cap for h in attrs], dtype=np.int64)
        n_nodes = int(np.prod(self.caps + 1, dtype=np.float64))
        if n_nodes > max_nodes:
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"the generalization lattice has {n_nodes} level vectors; the optimal search "
                            f"handles at most {max_nodes}",
                            hint="Use the greedy method, set generalization limits, or request fewer columns.")
        grids = np.indices(tuple(int(c) + 1 for c in self.caps)).reshape(len(attrs), -1).T
        self.nodes = np.ascontiguousarray(grids, dtype=np.int64)  # row-major: index = mixed radix
        self.strides = np.r_[np.cumprod((self.caps + 1)[::-1])[::-1][1:], 1].astype(np.int64)
        cost = np.zeros(len(self.nodes))
        for j, h in enumerate(attrs):
            cost += h.priority * np.asarray(h.info_loss)[self.nodes[:, j]]
        self.cost = np.round(cost, _ROUND)
        # ascending cost, then fewer steps, then lexicographic (deterministic)
        keys = [self.nodes[:, j] for j in range(len(attrs) - 1, -1, -1)]
        self.order = np.lexsort(keys + [self.nodes.sum(axis=1), self.cost])
        self.status = np.zeros(len(self.nodes), dtype=np.int8)  # 1 k-anonymous, -1 not, 0 unknown
        if floor is not None:     # a down-set: the loss never falls as a level rises
            self.status[self.cost < floor] = -1
        self.bottom = bottom
        self.cache: OrderedDict = OrderedDict()
        self.cache_cells = 0
        self.checks = 0
        self.refuted = 0

    def index(self, v) -> int:
        return int(np.dot(v, self.strides))

    def remember(self, tab):
        if not tab.is_merged or tab.levels in self.cache or not any(tab.levels):
            return
        self.cache[tab.levels] = tab
        self.cache_cells += tab.cells
        while self.cache_cells > 2 * self.bottom.cells and len(self.cache) > 1:
            _, old = self.cache.popitem(last=False)
            self.cache_cells -= old.cells

    def source_for(self, v) -> _Table:
        """The smallest cached table below v (the bottom if none)."""
        best = self.bottom
        for u, tab in self.cache.items():
            if tab.n < best.n and all(a <= b for a, b in zip(u, v)):
                best = tab
        if best.levels in self.cache:
            self.cache.move_to_end(best.levels)
        return best

    def evaluate(self, src: _Table, v):
        """(k-anonymous?, table at v) from a table below v.

        Before the O(n log n) merge, a few witness rows (smallest counts in ``src``) are looked up:
        if one of them lands in a class below k, v is refuted after O(n) work and the returned
        table is left unmerged (still exact for further roll-ups).
        """
        raw = src if src.levels == tuple(int(x) for x in v) else src.rolled(v, merge=False)
        if self.also is not None and not self.also(v):
            self.refuted += 1
            return False, raw
        if (raw.key is not None and not raw.is_merged and raw.n >= _PROBE_MIN_ROWS
                and not _bincount_ok(sum(raw.widths), raw.n)):
            for r in src.probe_rows():
                if int(raw.counts[raw.key == raw.key[r]].sum()) < self.k:
                    self.refuted += 1
                    return False, raw
        tab = raw if raw.is_merged else raw.merged()
        self.checks += 1
        return (tab.n == 0 or tab.min_count() >= self.k), tab

    def mark(self, v, feasible: bool):
        if feasible:
            self.status[np.all(self.nodes >= v, axis=1)] = 1
        else:
            self.status[np.all(self.nodes <= v, axis=1)] = -1

    def increments(self, v):
        """Movable attributes of v, cheapest weighted loss increase first (ties: listed first)."""
        inc = [(round(h.priority * (h.info_loss[int(v[j]) + 1] - h.info_loss[int(v[j])]), _ROUND), j)
               for j, h in enumerate(self.attrs) if v[j] < self.caps[j]]
        return [j for _, j in sorted(inc)]

    def climb(self, v, tab):
        """From a non-anonymous v, find a maximal non-anonymous vector above it; tag its down-set.

        Flash-style: binary search along the cheapest-increment path from v (anonymity is monotone
        on a chain), then try the other up-neighbours; repeat from any that is still non-anonymous.
        """
        while True:
            path, u = [], v
            while True:
                inc = self.increments(u)
                if not inc:
                    break
                u = u.copy()
                u[inc[0]] += 1
                if self.status[self.index(u)] == 1:
                    break
                path.append(u)
            lo, hi = -1, len(path)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                node = path[mid]
                if self.status[self.index(node)] == -1:
                    lo, tab = mid, tab.rolled(node, merge=False)
                    continue
                good, t = self.evaluate(tab, node)
                if good:
                    self.mark(node, True)
                    self.remember(t)
                    hi = mid
                else:
                    lo, tab = mid, t
            if lo >= 0:
                v = path[lo]
            moved = False
            for j in self.increments(v):
                ui = self.index(v) + int(self.strides[j])
                if self.status[ui] == 1:
                    continue
                u = v.copy()
                u[j] += 1
                if self.status[ui] == -1:
                    v, tab, moved = u, tab.rolled(u, merge=False), True
                    break
                good, tu = self.evaluate(tab, u)
                if not good:
                    v, tab, moved = u, tu, True
                    break
                self.mark(u, True)
                self.remember(tu)
            if not moved:
                break
        self.mark(v, False)
        self.remember(tab)

    def solve(self):
        top = self.caps.copy()
        good, t_top = self.evaluate(self.bottom, top)
        if not good:
            return None, t_top if t_top.is_merged else t_top.merged()
        self.mark(top, True)
        for i in self.order:
            s = self.status[i]
            if s == -1:
                continue
            v = self.nodes[i].copy()
            if s == 1:
                return v, None
            good, tab = self.evaluate(self.source_for(v), v)
            if good:
                self.mark(v, True)
                return v, None
            self.climb(v, tab)
        raise AssertionError("lattice exhausted without the top vector")  # pragma: no cover


def optimal(codes, counts, attributes, k, max_nodes: int = OPTIMAL_MAX_NODES,
            joint_k=None) -> GeneralizationResult:
    """Exact minimum of sum(priority * phi[level]) over k-anonymous level vectors within the limits.

    Same solution space and per-source k rule as :func:`greedy` (002 sec. 2, 4.5).  Sources are
    independent (disjoint attributes, separable loss), so each source's lattice is searched alone:
    vectors are visited in ascending loss (ties: fewer steps, then lexicographic); the first
    k-anonymous one is optimal.  Monotone pruning as in Flash / OLA: from a non-anonymous vector
    we climb (binary search along the cheapest-increment path, then the other up-neighbours) to a
    maximal non-anonymous vector and tag its whole down-set; every k-anonymous vector tags its
    up-set.  Class tables are rolled up from the smallest cached table below the vector; on large
    tables a few witness rows are looked up first, so most non-anonymous vectors are refuted with
    O(classes) work instead of a sort.  Exact: a vector is only ever tagged by monotonicity or by
    an exact count.  ``stats``: checks (full merges), refuted (witness refutations), lattice size.

    With ``joint_k`` every class over all attributes together must also hold >=
    joint_k rows.  The per-source optimum is kept when it does; otherwise the constraint couples
    the sources and :func:`_joint_optimal` searches the lattice of all attributes.
    """
    codes, counts, k = _check_inputs(codes, counts, attributes, k)
    groups = _source_groups(attributes)
    levels = [0] * len(attributes)
    total = int(counts.sum())
    stats = {"checks": 0, "lattice": 0}
    final = None
    for g, idx in groups:
        attrs = [attributes[j] for j in idx]
        bottom = _Table.bottom(codes[:, idx], counts, attrs, merge=True)
        lat = _Lattice(bottom, attrs, k, max_nodes)
        v, t_top = lat.solve()
        stats["checks"] += lat.checks
        stats["refuted"] = stats.get("refuted", 0) + lat.refuted
        stats["lattice"] += len(lat.nodes)
        if v is None:
            raise _unsatisfiable(k, g, len(groups), attrs, t_top.min_count(), total)
        for p, j in enumerate(idx):
            levels[j] = int(v[p])
        if len(groups) == 1:
            final = lat.source_for(v).rolled(v)
    if joint_k is not None:
        if final is None:
            final = _Table.bottom(codes, counts, attributes, merge=False).rolled(levels)
        if final.n and final.min_count() < joint_k:
            levels, final = _joint_optimal(codes, counts, attributes, groups, k, joint_k, levels,
                                           max_nodes, stats)
    return _finish(codes, counts, attributes, levels, [], final, stats)


def _joint_optimal(codes, counts, attributes, groups, k, joint_k, per_source, max_nodes, stats):
    """The cheapest vector of the lattice of ALL attributes at which every source is
    k-anonymous on its own attributes (002 sec. 2) and every class over all attributes holds >=
    joint_k rows.  Both conditions are monotone, so the search of :class:`_Lattice`
    stays exact.  The loss is separable and ``per_source`` (each source at its own optimum) is
    the cheapest vector meeting the first condition, so every vector cheaper than it fails
    (``floor``).  A source's condition at a vector is decided once per sub-vector (cached)."""
    bottoms = [(idx, _Table.bottom(codes[:, idx], counts, [attributes[j] for j in idx]))
               for _, idx in groups]
    known: dict = {}

    def sources_ok(v):
        for g, (idx, bottom) in enumerate(bottoms):
            sub = (g,) + tuple(int(v[j]) for j in idx)
            if sub not in known:
                t = bottom.rolled(sub[1:])
                known[sub] = t.n == 0 or t.min_count() >= k
            if not known[sub]:
                return False
        return True

    floor = round(sum(h.priority * h.info_loss[lv] for h, lv in zip(attributes, per_source)), _ROUND)
    lat = _Lattice(_Table.bottom(codes, counts, attributes), attributes, joint_k, max_nodes,
                   also=sources_ok, floor=floor - 10.0 ** -(_ROUND - 1))
    v, t_top = lat.solve()
    stats["checks"] += lat.checks
    stats["refuted"] = stats.get("refuted", 0) + lat.refuted
    stats["lattice"] += len(lat.nodes)
    if v is None:
        raise _unsatisfiable(joint_k, None, 1, attributes, t_top.min_count(), int(counts.sum()),
                             joint=True)
    return [int(x) for x in v], lat.source_for(v).rolled(v)
