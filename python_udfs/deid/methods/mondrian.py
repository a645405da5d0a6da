"""k-d median partition of the quasi-identifiers (paper 001 Fig. 5, after LeFevre et al. 2006).

:func:`partition` implements 001 Fig. 5's ``Split``: z-score every quasi-identifier (001
"Overview": subtract the mean, divide by the standard deviation), pick the attribute with the
widest normalised range in the current group, split at the median (left = values <= median,
right = values > median) and recurse while the children satisfy the model.

The tree is built level by level for all nodes at once.  Every quasi-identifier is replaced by
its dense rank (value order) once; the active rows stay in input order, each labelled with its
node.  Per level and attribute, one histogram of (node, rank) over each node's known rank range
(or, when that would be too large, one sort of those keys) gives every node's minimum, maximum,
lower median and the sizes of both cuts; a split just relabels the rows.  Acceptors therefore
always see a child's rows in input order, so an order-sensitive check (the greedy L check
breaks ties by row order) gives the same answer whichever attribute produced the child.

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

from .segments import ranges

from ..errors import (DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED,
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
                        hint="encode NULL quasi-identifier values as a code before partitioning")
    return np.ascontiguousarray(arr)


def check_k(K):
    if isinstance(K, (bool, np.bool_)) or not isinstance(K, (int, np.integer)) or K < 1:
        raise DeidError(INVALID_PARAMETER_VALUE, f"K must be a positive integer, got {K!r}",
                        hint="K is the minimum number of rows per group")
    return int(K)


def _dense_ranks(col):
    """Dense rank (int32, 0..R-1, in value order) of every entry and the R distinct values.

    Integral columns with a moderate range are ranked by counting; others by np.unique."""
    col = np.ascontiguousarray(col)
    lo, hi = col.min(), col.max()
    if hi - lo < _COUNT_RANGE and max(abs(lo), abs(hi)) < 2.0**52 \
            and np.array_equal(col, np.floor(col)):
        off = (col - lo).astype(np.int64)
        present = np.bincount(off, minlength=int(hi - lo) + 1) > 0
        remap = (np.cumsum(present) - 1).astype(np.int32)
        return remap[off], lo + np.flatnonzero(present).astype(np.float64)
    vals, rk = np.unique(col, return_inverse=True)
    return rk.astype(np.int32), vals


_COUNT_RANGE = 1 << 22
_NO_CUT = np.iinfo(np.int32).max        # threshold of a node that is not split on an attribute


def partition(qi, K, accept=None, *, accept_groups=None):
    """001 Fig. 5 (tie-safe, row-preserving): group id 0..G-1 of every row.

    ``qi``: float64 (n, d), categorical attributes as integer codes in hierarchy/sort order.
    ``accept(child_row_indices) -> bool`` is called for each candidate child (rows in input
    order); ``accept_groups(rows, child_id, n_children) -> bool array`` is the vectorised
    variant (``rows``: integer row indices of all candidate children of one round, ascending
    -- so in input order within each child; ``child_id``: integer child of each row,
    0..n_children-1).  A
    split is taken only if both children have >= K rows and every given acceptor agrees.
    Every row lands in exactly one group and every group has >= K rows.
    """
    qi = as_qi(qi)
    K = check_k(K)
    n, d = qi.shape
    if n < K:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE,
                        f"{n} rows cannot form a group of K = {K} rows",
                        hint="lower K or release more rows")
    if d == 0 or n < 2 * K:
        return np.zeros(n, dtype=np.int64)
    std = qi.std(axis=0)
    scale = np.where(std > 0, 1.0 / np.where(std > 0, std, 1.0), 0.0)
    tree = _Tree(qi, scale, K, accept, accept_groups)
    group, n_leaves = tree.run()
    first = np.full(n_leaves, n, dtype=np.int64)
    first[group[::-1]] = np.arange(n - 1, -1, -1)      # last write wins: first appearance
    relabel = np.empty(n_leaves, dtype=np.int64)
    relabel[np.argsort(first, kind="stable")] = np.arange(n_leaves)
    return relabel[group]


class _Tree:
    """Level-by-level state: the active rows (input order) with their node and the rank of
    each of their quasi-identifier values; per node its size and the rank range [lo, hi] of
    each attribute (a superset of its values, made exact when the node is examined).

    Rows of nodes that became groups point to a sink node (index N) until they are compacted
    away at the end of the level.  Ranks are stored in the smallest integer type that holds
    them."""

    def __init__(self, qi, scale, K, accept, accept_groups):
        n, d = qi.shape
        self.K, self.d, self.scale = K, d, scale
        self.accept, self.accept_groups = accept, accept_groups
        self.idx_t = np.int32 if n < 2**31 - 1 else np.int64
        self.rk, self.vals = [], []
        for j in range(d):
            r, v = _dense_ranks(qi[:, j])
            self.rk.append(r.astype(_rank_t(v.size), copy=False))  # fewer bytes per pass
            self.vals.append(v)
        self.R = np.array([v.size for v in self.vals], dtype=np.int64)
        self.rid = np.arange(n, dtype=self.idx_t)
        self.lab = np.zeros(n, dtype=self.idx_t)
        self.group = np.empty(n, dtype=np.int64)
        self.n_leaves = 0
        self.n_sink = 0
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
        width = np.zeros((N, d))
        med = np.zeros((N, d), dtype=np.int64)
        c0 = np.zeros((N, d), dtype=np.int64)
        c1 = np.zeros((N, d), dtype=np.int64)
        for j in range(d):
            if np.array_equal(self.lo[:, j], self.hi[:, j]):
                continue                                   # constant in every node
            mn, mx, med[:, j], c0[:, j], c1[:, j] = self._stats(j, start)
            self.lo[:, j], self.hi[:, j] = mn, mx
            width[:, j] = (self.vals[j][mx] - self.vals[j][mn]) * self.scale[j]
        order = np.argsort(-width, axis=1, kind="stable")  # Fig. 5 line 1: widest range first
        cut = np.zeros(N, dtype=np.int64)
        dim = np.zeros(N, dtype=np.int64)
        thr = np.full(N, _NO_CUT, dtype=np.int64)
        pending = np.ones(N, dtype=bool)
        rows_idx = np.arange(N)
        for rank in range(d):
            j_r = order[:, rank]
            live = pending & (width[rows_idx, j_r] > 0)
            if not live.any():
                break
            for variant in (0, 1):                         # 0: <= median (paper), 1: < median
                cand = (c0 if variant == 0 else c1)[rows_idx, j_r]
                nodes = np.flatnonzero(pending & live & (cand >= K) & (size - cand >= K))
                if nodes.size == 0:
                    continue
                t = med[nodes, j_r[nodes]] - variant
                good = self._accepted(nodes, j_r[nodes], t, cand[nodes])
                won = nodes[good]
                cut[won] = cand[won]
                dim[won] = j_r[won]
                thr[won] = t[good]
                pending[won] = False
        self._apply(cut, dim, thr)

    # ---------------------------------------------------------------------------------------
    def _stats(self, j, start):
        """Per node, for attribute j: min rank, max rank, lower-median rank, rows <= median,
        rows < median (from a histogram of (node, rank), or from the sorted keys)."""
        N = self.size.size
        size = self.size
        R = int(self.R[j])
        na = self.lab.size
        budget = 2 * na + (1 << 16)
        lo, hi = self.lo[:, j], self.hi[:, j]
        if (N + 1) * R <= budget:
            key = self.lab * _int_t(N + 1, R)(R)
            key += self.rk[j]
            base = np.arange(N, dtype=np.int64) * R
            total = N * R
            n_bins = (N + 1) * R
        else:
            w = hi - lo + 1
            off = np.cumsum(w) - w
            total = int(off[-1] + w[-1])
            base_t = np.empty(N + 1, dtype=np.int64)
            base_t[:N] = off - lo
            base_t[N] = total
            base = base_t[:N]
            key = base_t.astype(_int_t(total + R, 1), copy=False)[self.lab]
            key += self.rk[j]
            n_bins = total + R
        m0 = (size - 1) // 2
        if n_bins <= budget:
            h = np.bincount(key, minlength=n_bins)[:total]
            c = np.cumsum(h)
            mn = np.searchsorted(c, start, "right")
            mx = np.searchsorted(c, start + size, "left")
            mb = np.searchsorted(c, start + m0, "right")
            k0 = c[mb] - start
            k1 = k0 - h[mb]
            return mn - base, mx - base, mb - base, k0, k1
        s = np.sort(key)
        mk = s[start + m0]
        k0 = np.searchsorted(s, mk, "right") - start
        k1 = np.searchsorted(s, mk, "left") - start
        return s[start] - base, s[start + size - 1] - base, mk - base, k0, k1

    def _right(self, lab, rk_of, dim, thr, N):
        """For rows with nodes ``lab``: whether the row goes to the right child, given each
        node's split attribute and threshold (``_NO_CUT``: not split).  One lookup of the row's
        threshold; with several split attributes, also of its attribute."""
        cut = thr != _NO_CUT
        dims = np.unique(dim[cut]).tolist()
        if not dims:
            return np.zeros(lab.size, dtype=bool)
        t = np.full(N + 1, _NO_CUT, dtype=np.int32)
        t[:N][cut] = thr[cut]
        t_row = t[lab]
        if len(dims) == 1:
            return rk_of(dims[0]) > t_row
        a = np.full(N + 1, -1, dtype=np.int16)
        a[:N][cut] = dim[cut]
        a_row = a[lab]
        right = np.zeros(lab.size, dtype=bool)
        for j in dims:
            r = rk_of(j) > t_row
            r &= a_row == j
            right |= r
        return right

    def _accepted(self, nodes, dims, thr, cut):
        """Which candidate splits both children pass."""
        k = nodes.size
        good = np.ones(k, dtype=bool)
        if self.accept is None and self.accept_groups is None:
            return good
        N = self.size.size
        pos = np.full(N + 1, -1, dtype=self.idx_t)
        pos[nodes] = np.arange(k, dtype=self.idx_t)
        if k == N and self.n_sink == 0:
            lab, rows = self.lab, self.rid

            def rk_of(j):
                return self.rk[j]
        else:
            idx = np.flatnonzero(pos[self.lab] >= 0)
            lab, rows = self.lab[idx], self.rid[idx]

            def rk_of(j):
                return self.rk[j][idx]
        dim_t = np.zeros(N, dtype=np.int64)
        thr_t = np.full(N, _NO_CUT, dtype=np.int64)
        dim_t[nodes] = dims
        thr_t[nodes] = thr
        right = self._right(lab, rk_of, dim_t, thr_t, N)
        child = pos[lab]
        child += child
        child += right
        # children's rows in input order (the greedy L check breaks ties by row order)
        if self.accept_groups is not None:
            ok = np.asarray(self.accept_groups(rows, child, 2 * k), dtype=bool)
            good &= ok[0::2] & ok[1::2]
        if self.accept is not None:
            o = np.argsort(child, kind="stable")
            rows, child = rows[o].astype(np.int64), child[o]
            bounds = np.searchsorted(child, np.arange(2 * k + 1))
            for i in np.flatnonzero(good):
                for c in (2 * i, 2 * i + 1):
                    if not self.accept(rows[bounds[c]:bounds[c + 1]]):
                        good[i] = False
                        break
        return good

    def _apply(self, cut, dim, thr):
        """Split the nodes with a cut, turn the others (and children below 2K rows) into
        groups, and move the rows to their new nodes."""
        N, K, d = self.size.size, self.K, self.d
        size = self.size
        split = np.flatnonzero(cut > 0)
        S = split.size
        csize = np.empty(2 * S, dtype=np.int64)
        csize[0::2] = cut[split]
        csize[1::2] = size[split] - cut[split]
        keep = csize >= 2 * K
        P = int(np.count_nonzero(keep))
        # codes: 0..P-1 new node, P sink, P+1+i group i of this level
        cleaf = np.flatnonzero(~keep)
        code_child = np.empty(2 * S, dtype=np.int64)
        code_child[keep] = np.arange(P)
        code_child[cleaf] = P + 1 + np.arange(cleaf.size)
        leaf_nodes = np.flatnonzero(cut == 0)
        n_new_leaves = cleaf.size + leaf_nodes.size
        code = np.full(2 * (N + 1), P, dtype=self.idx_t)
        code[2 * split] = code_child[0::2]
        code[2 * split + 1] = code_child[1::2]
        code[2 * leaf_nodes] = P + 1 + cleaf.size + np.arange(leaf_nodes.size)

        def rk_of(j):
            return self.rk[j]
        right = self._right(self.lab, rk_of, dim, thr, N)
        newlab = self.lab + self.lab
        newlab += right
        newlab = code[newlab]
        if n_new_leaves:
            rows = np.flatnonzero(newlab > P)
            self.group[self.rid[rows]] = newlab[rows] + (self.n_leaves - P - 1)
            newlab[rows] = P
            self.n_leaves += n_new_leaves
            self.n_sink += rows.size
        self.lab = newlab
        # the new nodes: sizes and rank bounds
        parent = np.repeat(split, 2)[keep]
        side = np.tile(np.array([0, 1]), S)[keep]
        self.size = csize[keep]
        lo = self.lo[parent]
        hi = self.hi[parent]
        pj = dim[parent]
        pt = thr[parent]
        r = np.arange(P)
        left = side == 0
        hi[r[left], pj[left]] = pt[left]
        lo[r[~left], pj[~left]] = pt[~left] + 1
        self.lo, self.hi = lo, hi
        if P == 0:
            return
        if self.n_sink:
            # compact the active rows at once: the next round then passes the same ``rid``
            # array to the acceptor for all nodes (which can reuse its per-rows gathers)
            live = np.flatnonzero(self.lab != P)
            self.lab = self.lab[live]
            self.rid = self.rid[live]
            self.rk = [r_[live] for r_ in self.rk]
            self.n_sink = 0


def _int_t(a, b):
    return np.int32 if a * b < 2**31 - 1 else np.int64


def _rank_t(n_values):
    """Smallest integer type holding the ranks 0..n_values-1."""
    return np.uint8 if n_values <= 256 else np.int16 if n_values <= 32768 else np.int32
