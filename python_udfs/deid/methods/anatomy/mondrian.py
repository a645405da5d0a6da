"""k-d median partition of the quasi-identifiers (paper 001 Fig. 5, after LeFevre et al. 2006).

:func:`partition` implements 001 Fig. 5's ``Split``: z-score every quasi-identifier (001
"Overview": subtract the mean, divide by the standard deviation), pick the attribute with the
widest normalised range in the current group, split at the median (left = values <= median,
right = values > median) and recurse while the children satisfy the model.

The tree is built level by level for all nodes at once.  Every quasi-identifier is replaced by
its dense rank (value order) once; the active rows are kept ordered by node (each node one
contiguous run of rows, in input order).  Per level and attribute, one segment reduction
gives every node's minimum and maximum rank; for the attribute a node tries (widest first,
the next one only if that fails), one histogram of (node, rank) over each node's rank range
(or, when that would be too large, one sort of those keys) gives its lower median and the
sizes of both cuts -- so a level counts about one attribute per row, not all of them.  A
split is a stable partition of the node's rows by side.  Acceptors therefore always see a
child's rows as one run in input order, so an order-sensitive check (the greedy L check breaks
ties by row order) gives the same answer whichever attribute produced the child.

Deviations from 001 Fig. 5 (see also papers/README.md "Known pitfalls"):

1. Fig. 5 lines 5-10 recurse into a child that satisfies the model even when its sibling does
   not, which drops the sibling's rows from the partition (Def. 1 needs every row in a group).
   Here a split is taken only if BOTH children have >= K rows and ``accept`` both; otherwise
   the node tries the next attribute (in decreasing normalised range; attributes whose range
   is 0 cannot split), and becomes a group if none works.
2. Ties: the paper's cut ``<= median`` can leave the right side below K (or empty) when many
   rows share the median value.  For each attribute we try the paper's cut first and then the
   nearest other distinct value, i.e. ``< median`` (left = rows below the median value).  Any
   cut further away is even more unbalanced, so if neither leaves K rows on both sides (or
   neither is accepted) the attribute is skipped.
3. The median of an even-sized node is the lower median (the value at position (n-1)//2).
4. Normalisation uses the whole table's mean and standard deviation; only the attribute choice
   depends on it (z-scoring does not change the order of values).
5. Group ids are numbered by first appearance in the input row order.
"""

import numpy as np

from ...segments import ranges, segment_ids

from ...errors import (DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED,
                       PRIVACY_MODEL_UNSATISFIABLE)


def as_qi(qi):
    """Quasi-identifiers as a float64 (n, d) array; NaN/inf are rejected."""
    arr = np.asarray(qi, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise DeidError(INVALID_PARAMETER_VALUE, "quasi-identifiers must be a 2-D array",
                        hint="pass one numeric column per quasi-identifier")
    if not np.isfinite(arr).all():
        raise DeidError(NULL_VALUE_NOT_ALLOWED,
                        "quasi-identifiers contain NULL/NaN/infinite values",
                        hint="encode NULL quasi-identifier values as a code before partitioning",
                        data_dependent=True)
    return np.ascontiguousarray(arr)


def check_k(K):
    if isinstance(K, (bool, np.bool_)) or not isinstance(K, (int, np.integer)) or K < 1:
        raise DeidError(INVALID_PARAMETER_VALUE, f"K must be a positive integer, got {K!r}",
                        hint="K is the minimum number of rows per group")
    return int(K)


def _dense_ranks(col):
    """Dense rank (0..R-1, in value order; in the smallest integer type holding R) of every
    entry and the R distinct values.

    Integral columns with a moderate range are ranked by counting; others by np.unique."""
    col = np.ascontiguousarray(col)
    lo, hi = col.min(), col.max()
    if hi - lo < _COUNT_RANGE and max(abs(lo), abs(hi)) < 2.0**52 \
            and np.array_equal(col, np.floor(col)):
        off = (col - lo).astype(np.int64)
        present = np.bincount(off, minlength=int(hi - lo) + 1) > 0
        remap = np.cumsum(present)
        remap -= 1
        remap = remap.astype(_rank_t(int(remap[-1]) + 1))
        return remap[off], lo + np.flatnonzero(present).astype(np.float64)
    vals, rk = np.unique(col, return_inverse=True)
    return rk.astype(_rank_t(vals.size)), vals


_COUNT_RANGE = 1 << 22
_NO_CUT = np.iinfo(np.int32).max        # threshold of a node that is not split on an attribute


def partition(qi, K, accept=None, *, accept_groups=None, payload=None):
    """001 Fig. 5 (tie-safe, row-preserving): group id 0..G-1 of every row.

    ``qi``: float64 (n, d), categorical attributes as integer codes in hierarchy/sort order.
    ``accept(child_row_indices) -> bool`` is called for each candidate child (rows in input
    order); ``accept_groups(rows, child_id, n_children) -> bool array`` is the vectorised
    variant: ``rows`` holds the integer row indices of all candidate children of one round,
    grouped by child (``child_id``, 0..n_children-1, is non-decreasing) and in input order
    within each child.  A split is taken only if both children have >= K rows and every given
    acceptor agrees.  ``payload`` (optional, first axis the n rows): ``accept_groups`` then
    gets ``payload[rows]`` in place of ``rows`` -- carried with the rows from level to level,
    so it is gathered in node order instead of by row id across the whole table (pass it
    without keeping a reference: the partition drops the input order after the first level).
    Every row lands in exactly one group and every group has >= K rows.
    """
    qi = as_qi(qi)
    K = check_k(K)
    n, d = qi.shape
    if n < K:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE,
                        f"the rows cannot form a group of K = {K} rows",
                        detail=f"{n} row(s)",
                        hint="Lower K, or widen the selection to release more rows.",
                        data_dependent=True)
    if d == 0 or n < 2 * K:
        return np.zeros(n, dtype=np.int64)
    std = qi.std(axis=0)
    scale = np.where(std > 0, 1.0 / np.where(std > 0, std, 1.0), 0.0)
    tree = _Tree(qi, scale, K, accept, accept_groups, payload)
    del payload                                        # the tree's now (reordered level by level)
    group, n_leaves = tree.run()
    del tree
    first = np.full(n_leaves, n, dtype=np.int64)
    first[group[::-1]] = np.arange(n - 1, -1, -1)      # last write wins: first appearance
    relabel = np.empty(n_leaves, dtype=np.int64)
    relabel[np.argsort(first, kind="stable")] = np.arange(n_leaves)
    return relabel[group]


class _Tree:
    """Level-by-level state: the active rows ordered by node (each node a contiguous segment,
    its rows in input order) with the rank of each of their quasi-identifier values; per node
    its size and the rank range [lo, hi] of each attribute (a superset of its values, made
    exact when the node is examined).

    ``lab`` (the node of each row, built once per level by :func:`.segments.segment_ids`) turns
    per-node values into per-row values with one gather from a small table.  A split is a
    stable partition of the candidate rows by side: first the left children of all split
    nodes (in node order), then all their right children, so every child is again a contiguous
    segment with its rows in input order.  Ranks are stored in the smallest integer type that
    holds them; a payload (the packed sensitive codes of anatomy) moves with the rows like
    them.  Group ids are int32 while the tree is built (int64 only in the result)."""

    def __init__(self, qi, scale, K, accept, accept_groups, payload=None):
        n, d = qi.shape
        self.K, self.d, self.scale = K, d, scale
        self.accept, self.accept_groups = accept, accept_groups
        # the payload of the active rows, in their order (only accept_groups reads it)
        self.pay = None if payload is None or accept_groups is None else payload
        self.idx_t = np.int32 if n < 2**31 - 1 else np.int64
        self.rk, self.vals = [], []
        for j in range(d):
            r, v = _dense_ranks(qi[:, j])              # the smallest type: fewer bytes per pass
            self.rk.append(r)
            self.vals.append(v)
        self.R = np.array([v.size for v in self.vals], dtype=np.int64)
        self.rid = np.arange(n, dtype=self.idx_t)
        self.group = np.empty(n, dtype=self.idx_t)
        self.n_leaves = 0
        self.size = np.array([n], dtype=np.int64)
        self.lo = np.zeros((1, d), dtype=np.int64)
        self.hi = (self.R - 1).reshape(1, d)

    # ---------------------------------------------------------------------------------------
    def run(self):
        while self.size.size:
            self._level()
        return self.group, self.n_leaves

    def _level(self):
        N, d, K = self.size.size, self.d, self.K
        size = self.size
        start = np.cumsum(size) - size
        self.lab = segment_ids(size)                       # node of each row (intp: no
        #                                                    index casts at its gathers)
        width = np.zeros((N, d))
        med = np.zeros((N, d), dtype=np.int64)
        c0 = np.zeros((N, d), dtype=np.int64)
        c1 = np.zeros((N, d), dtype=np.int64)
        for j in range(d):
            if np.array_equal(self.lo[:, j], self.hi[:, j]):
                continue                                   # constant in every node
            mn = np.minimum.reduceat(self.rk[j], start)
            mx = np.maximum.reduceat(self.rk[j], start)
            self.lo[:, j], self.hi[:, j] = mn, mx
            width[:, j] = (self.vals[j][mx] - self.vals[j][mn]) * self.scale[j]
        have = np.zeros((N, d), dtype=bool)                # med, c0, c1 known (node, attribute)
        order = np.argsort(-width, axis=1, kind="stable")  # Fig. 5 line 1: widest range first
        cut = np.zeros(N, dtype=np.int64)
        dim = np.zeros(N, dtype=np.int64)
        thr = np.full(N, _NO_CUT, dtype=np.int64)
        pending = np.ones(N, dtype=bool)
        rows_idx = np.arange(N)
        rounds = []                                        # candidate splits (_Round)
        won_in = np.full(N, -1, dtype=np.int64)            # the round whose split a node takes
        check = self.accept is not None or self.accept_groups is not None
        for rank in range(d):
            j_r = order[:, rank]
            live = pending & (width[rows_idx, j_r] > 0)
            if not live.any():
                break
            for j in np.unique(j_r[live]).tolist():        # the medians this rank needs
                want = np.flatnonzero(live & (j_r == j) & ~have[:, j])
                if want.size:
                    med[want, j], c0[want, j], c1[want, j] = self._stats(j, want, start)
                    have[want, j] = True
            for variant in (0, 1):                         # 0: <= median (paper), 1: < median
                cand = (c0 if variant == 0 else c1)[rows_idx, j_r]
                nodes = np.flatnonzero(pending & live & (cand >= K) & (size - cand >= K))
                if nodes.size == 0:
                    continue
                t = med[nodes, j_r[nodes]] - variant
                if check:
                    rnd = self._split(nodes, j_r[nodes], t, cand[nodes], start)
                    good = self._accepted(rnd)
                    won_in[nodes[good]] = len(rounds)
                    rounds.append(rnd)
                else:
                    good = np.ones(nodes.size, dtype=bool)
                won = nodes[good]
                cut[won] = cand[won]
                dim[won] = j_r[won]
                thr[won] = t[good]
                pending[won] = False
        if not check:
            split = np.flatnonzero(cut > 0)
            if split.size:
                rounds.append(self._split(split, dim[split], thr[split], cut[split], start))
                won_in[split] = 0
        self.lab = None                                    # not needed until the next level
        self._apply(cut, dim, thr, start, rounds, won_in)

    # ---------------------------------------------------------------------------------------
    def _stats(self, j, nodes, start):
        """For attribute j and the given nodes (ascending; their rank bounds lo, hi exact):
        the lower-median rank, the rows <= median and the rows < median (from a histogram of
        (node, rank) over each node's rank range, or from the sorted keys when that is too
        large)."""
        size = self.size[nodes]
        if nodes.size == self.size.size:                   # every node: every active row
            rk, lab = self.rk[j], self.lab
        else:
            rk = self.rk[j][ranges(start[nodes], size)]
            lab = segment_ids(size)
        first = np.cumsum(size) - size                     # the nodes' rows, back to back
        lo = self.lo[nodes, j]
        w = self.hi[nodes, j] - lo + 1
        off = np.cumsum(w) - w
        total = int(off[-1] + w[-1])
        base = off - lo
        m0 = (size - 1) // 2
        if total <= 2 * self.rid.size + (1 << 16):
            key = base.take(lab)                           # intp: bincount casts nothing
            key += rk
            c = np.bincount(key, minlength=total)
            del key
            np.cumsum(c, out=c)                            # in place: one table, not two
            mb = np.searchsorted(c, first + m0, "right")
            below = np.where(mb > 0, c[np.maximum(mb - 1, 0)], 0)    # rows before bin mb
            k0 = c[mb] - first
            return mb - base, k0, below - first
        key = base.astype(_int_t(total + int(self.R[j]), 1)).take(lab)
        key += rk
        s = np.sort(key)
        mk = s[first + m0]
        k0 = np.searchsorted(s, mk, "right") - first
        k1 = np.searchsorted(s, mk, "left") - first
        return mk - base, k0, k1

    def _split(self, nodes, dims, thr, cut, start):
        """The candidate split of ``nodes`` (ascending) on attributes ``dims`` at rank
        thresholds ``thr`` (``cut`` rows go left), as a :class:`_Round`."""
        N = self.size.size
        sizes = self.size[nodes]
        csize = np.concatenate([cut, sizes - cut])
        if 4 * int(sizes.sum()) < self.rid.size:           # few rows: gather them
            pos = ranges(start[nodes], sizes).astype(self.idx_t, copy=False)
            right = self._right(nodes, dims, thr, lambda j: self.rk[j][pos],
                                lambda t: t.take(segment_ids(sizes)))
            return _Round(nodes, pos[np.concatenate([np.flatnonzero(~right),
                                                     np.flatnonzero(right)])], csize)
        # every active row; rows of other nodes get a threshold no rank exceeds
        def thr_of(t):
            full = np.full(N, np.iinfo(t.dtype).max, dtype=t.dtype)
            full[nodes] = t
            return full.take(self.lab)
        right = self._right(nodes, dims, thr, lambda j: self.rk[j], thr_of)
        left = ~right
        if nodes.size < N:
            on = np.zeros(N, dtype=bool)
            on[nodes] = True
            left &= on.take(self.lab)
        order = np.concatenate([np.flatnonzero(left), np.flatnonzero(right)])
        return _Round(nodes, order.astype(self.idx_t, copy=False), csize)

    @staticmethod
    def _right(nodes, dims, thr, rk_of, per_row):
        """Whether each row goes right: rank > threshold of its node's split attribute.  For
        each attribute j, nodes split on another attribute get the type's maximum, which no
        rank exceeds (a threshold is below the attribute's largest rank)."""
        right = None
        for j in np.unique(dims).tolist():
            r = rk_of(j)
            t = np.where(dims == j, thr, np.iinfo(r.dtype).max).astype(r.dtype)
            r = r > per_row(t)
            if right is None:
                right = r
            else:
                right |= r
        return right

    def _accepted(self, rnd):
        """Which candidate splits both children pass (the acceptors get each child's rows as
        one contiguous run, in input order)."""
        k = rnd.nodes.size
        good = np.ones(k, dtype=bool)
        if self.pay is None or self.accept is not None:
            rows = rnd.rows = self.rid[rnd.order]
        if self.accept_groups is not None:               # (with a payload, rows come later:
            child = segment_ids(rnd.csize, self.idx_t)     # _apply gathers the winners')
            ok = np.asarray(self.accept_groups(
                rows if self.pay is None else self.pay[rnd.order], child, 2 * k), dtype=bool)
            good &= ok[:k] & ok[k:]
        if self.accept is not None:
            bounds = np.concatenate([[0], np.cumsum(rnd.csize)])
            for i in np.flatnonzero(good):
                for c in (i, k + i):
                    if not self.accept(rows[bounds[c]:bounds[c + 1]].astype(np.int64)):
                        good[i] = False
                        break
        return good

    def _apply(self, cut, dim, thr, start, rounds, won_in):
        """Split the nodes with a cut, turn the others (and children below 2K rows) into
        groups, and reorder the active rows by their new nodes."""
        K = self.K
        size = self.size
        keep_pos, keep_rows, leaf_rows, leaf_sizes = [], [], [], []
        new_size, parent, side = [], [], []
        for r, rnd in enumerate(rounds):
            k = rnd.nodes.size
            won = np.tile(won_in[rnd.nodes] == r, 2)
            if not won.any():
                continue
            rows = self.rid[rnd.order] if rnd.rows is None else rnd.rows
            big = rnd.csize >= 2 * K
            keep = won & big
            leaf = won & ~big
            child = segment_ids(rnd.csize) if not keep.all() else None
            if keep.all():
                keep_pos.append(rnd.order)
                keep_rows.append(rows)
            elif keep.any():
                m = keep.take(child)
                keep_pos.append(rnd.order[m])
                keep_rows.append(rows[m])
            if leaf.any():
                leaf_rows.append(rows[leaf.take(child)])
                leaf_sizes.append(rnd.csize[leaf])
            kept = np.flatnonzero(keep)
            new_size.append(rnd.csize[kept])
            parent.append(rnd.nodes[kept % k])
            side.append(kept >= k)
        leaf_nodes = np.flatnonzero(cut == 0)
        if leaf_nodes.size:
            leaf_rows.append(self.rid[ranges(start[leaf_nodes], size[leaf_nodes])])
            leaf_sizes.append(size[leaf_nodes])
        if leaf_rows:
            ls = np.concatenate(leaf_sizes)
            labels = segment_ids(ls, self.idx_t)
            labels += self.idx_t(self.n_leaves)
            self.group[np.concatenate(leaf_rows)] = labels
            self.n_leaves += ls.size
        self.size = np.concatenate(new_size) if new_size else np.zeros(0, dtype=np.int64)
        if not keep_pos:
            return
        # the new nodes' rank bounds
        parent = np.concatenate(parent)
        right = np.concatenate(side)
        lo = self.lo[parent]
        hi = self.hi[parent]
        pj = dim[parent]
        pt = thr[parent]
        r = np.arange(parent.size)
        hi[r[~right], pj[~right]] = pt[~right]
        lo[r[right], pj[right]] = pt[right] + 1
        self.lo, self.hi = lo, hi
        # the rows in their new order
        pos = keep_pos[0] if len(keep_pos) == 1 else np.concatenate(keep_pos)
        self.rid = keep_rows[0] if len(keep_rows) == 1 else np.concatenate(keep_rows)
        pos = pos.astype(np.intp, copy=False)             # one index cast, not one per attribute
        self.rk = [np.take(r_, pos) for r_ in self.rk]
        if self.pay is not None:
            self.pay = np.take(self.pay, pos)


class _Round:
    """One round of candidate splits: ``nodes`` (ascending), ``order`` -- the positions of
    their rows, reordered as all left children (in node order) then all right children, each
    child in input order -- ``csize``, the 2k children's sizes in that order (child i is the
    left child of nodes[i], child k + i its right child), and ``rows`` (the row ids in that
    order, once gathered)."""

    def __init__(self, nodes, order, csize):
        self.nodes, self.order, self.csize = nodes, order, csize
        self.rows = None


def _int_t(a, b):
    return np.int32 if a * b < 2**31 - 1 else np.int64


def _rank_t(n_values):
    """Smallest integer type holding the ranks 0..n_values-1."""
    return np.uint8 if n_values <= 256 else np.int16 if n_values <= 32768 else np.int32
