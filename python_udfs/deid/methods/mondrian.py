"""k-d median partition of the quasi-identifiers (paper 001 Fig. 5, after LeFevre et al. 2006).

:func:`partition` implements 001 Fig. 5's ``Split``: z-score every quasi-identifier (001
"Overview": subtract the mean, divide by the standard deviation), pick the attribute with the
widest normalised range in the current group, split at the median (left = values <= median,
right = values > median) and recurse while the children satisfy the model.

The tree is built level by level for all nodes at once: every quasi-identifier keeps a list of
the active rows sorted by that attribute inside each node (one argsort per attribute at the
start), and each split stably partitions those lists, so medians and ranges are read off the
lists without sorting again.  One more list keeps each node's rows in input order: acceptors
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


def _first_not_below(values, lst, lo, hi, bound, strict):
    """Vectorised binary search: first position p in [lo, hi) of ``lst`` (sorted by value inside
    each segment) with values[lst[p]] >= bound (> bound if strict); hi if none."""
    lo = lo.copy()
    hi = hi.copy()
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) // 2
        v = values[lst[np.minimum(mid, lst.size - 1)]]
        below = (v <= bound) if strict else (v < bound)
        go_right = open_ & below
        go_left = open_ & ~below
        lo = np.where(go_right, mid + 1, lo)
        hi = np.where(go_left, mid, hi)


def _argsort_column(col):
    """Stable argsort of one quasi-identifier; integral columns use numpy's uint16 radix sort
    on 16-bit digits of (value - min), others a stable comparison sort."""
    n = col.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = col.min(), col.max()
    if hi - lo < 2.0**48 and np.array_equal(col, np.floor(col)):
        key = (col - lo).astype(np.int64)
        perm = np.argsort(key.astype(np.uint16), kind="stable")
        for shift in range(16, int(hi - lo).bit_length(), 16):
            perm = perm[np.argsort((key[perm] >> shift).astype(np.uint16), kind="stable")]
        return perm
    return np.argsort(col, kind="stable")


def partition(qi, K, accept=None, *, accept_groups=None):
    """001 Fig. 5 (tie-safe, row-preserving): group id 0..G-1 of every row.

    ``qi``: float64 (n, d), categorical attributes as integer codes in hierarchy/sort order.
    ``accept(child_row_indices) -> bool`` is called for each candidate child (rows in input
    order); ``accept_groups(rows, child_id, n_children) -> bool array`` is the vectorised
    variant (``rows``: integer row indices of all candidate children of one round, in input
    order within each child; ``child_id``: integer child of each row, 0..n_children-1).  A
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
    std = qi.std(axis=0) if n else np.zeros(d)
    scale = np.where(std > 0, 1.0 / np.where(std > 0, std, 1.0), 0.0)
    cols = [np.ascontiguousarray(qi[:, j]) for j in range(d)]
    idx_t = np.int32 if n < 2**31 - 1 else np.int64
    # lists[j] (j < d): rows of every node sorted by attribute j; lists[d]: in input order.
    lists = np.empty((d + 1, n), dtype=idx_t)
    for j in range(d):
        lists[j] = _argsort_column(cols[j])
    lists[d] = np.arange(n, dtype=idx_t)
    group = np.full(n, -1, dtype=np.int64)
    n_leaves = 0
    start = np.zeros(1, dtype=np.int64)
    size = np.full(1, n, dtype=np.int64)
    while start.size:
        cut, dim, width = _choose_splits(cols, lists, scale, start, size, K, accept,
                                         accept_groups)
        split = cut > 0
        leaf = np.flatnonzero(~split)
        if leaf.size:                                  # Fig. 5 line 10: add the group to P
            pos = ranges(start[leaf], size[leaf])
            group[lists[d][pos]] = np.repeat(np.arange(n_leaves, n_leaves + leaf.size),
                                             size[leaf])
            n_leaves += leaf.size
        node = np.flatnonzero(split)
        if node.size == 0:
            break
        lists, start, size = _apply_splits(lists, start[node], size[node], cut[node],
                                           dim[node], width[node], n)
    first = np.full(n_leaves, n, dtype=np.int64)
    first[group[::-1]] = np.arange(n - 1, -1, -1)      # last write wins: first appearance
    relabel = np.empty(n_leaves, dtype=np.int64)
    relabel[np.argsort(first, kind="stable")] = np.arange(n_leaves)
    return relabel[group]


def _choose_splits(cols, lists, scale, start, size, K, accept, accept_groups):
    """For every node: left-child size of the chosen cut (0 = leaf) and the split attribute."""
    nn = start.size
    d = len(cols)
    end = start + size
    width = np.zeros((nn, d))
    for j in range(d):
        width[:, j] = (cols[j][lists[j][end - 1]] - cols[j][lists[j][start]]) * scale[j]
    order = np.argsort(-width, axis=1, kind="stable")  # Fig. 5 line 1: widest range first
    cut = np.zeros(nn, dtype=np.int64)
    dim = np.full(nn, -1, dtype=np.int64)
    pending = size >= 2 * K
    rows_idx = np.arange(nn)
    for rank in range(d):
        j_r = order[:, rank]
        live = pending & (width[rows_idx, j_r] > 0)
        if not live.any():
            break
        for variant in (0, 1):                         # 0: <= median (paper), 1: < median
            cand = np.zeros(nn, dtype=np.int64)
            for j in range(d):
                nodes = np.flatnonzero(live & pending & (j_r == j))
                if nodes.size:
                    cand[nodes] = _median_cut(cols[j], lists[j], start[nodes], size[nodes],
                                              variant)
            nodes = np.flatnonzero(pending & live & (cand >= K) & (size - cand >= K))
            if nodes.size == 0:
                continue
            good = _accepted(lists, j_r[nodes], start[nodes], size[nodes], cand[nodes],
                             accept, accept_groups, cols[0].size)
            won = nodes[good]
            cut[won] = cand[won]
            dim[won] = j_r[won]
            pending[won] = False
    return cut, dim, width


def _median_cut(values, lst, start, size, variant):
    """Left-child size of the cut at the (lower) median: rows <= median (variant 0) or rows
    strictly below the median value (variant 1)."""
    mid = start + (size - 1) // 2
    med = values[lst[mid]]
    end = start + size
    if variant == 0:
        return _first_not_below(values, lst, mid, end, med, strict=True) - start
    return _first_not_below(values, lst, start, mid, med, strict=False) - start


def _positions(start, size, idx_t, n_active):
    """Positions (in every list) of the given nodes' segments, concatenated in node order."""
    total = int(size.sum())
    if total == n_active and start.size and start[0] == 0:
        return np.arange(total, dtype=idx_t)            # the nodes cover every position
    return ranges(start, size).astype(idx_t, copy=False)


def _children(lists, dims, start, size, cut):
    """For the nodes' segments: positions, the row at each position of the node's split list,
    and the child of that row (2i: rows <= cut of node i, 2i+1: the others)."""
    pos = _positions(start, size, lists.dtype, lists.shape[1])
    first = np.cumsum(size) - size
    marks = np.zeros(pos.size, dtype=lists.dtype)
    marks[first[1:]] = 1
    marks[first + cut] += 1
    child = np.cumsum(marks, dtype=lists.dtype)        # along each node's split list
    if np.all(dims == dims[0]):
        src = lists[int(dims[0])][pos]
    else:
        src = lists[np.repeat(dims.astype(np.intp), size), pos]
    return pos, src, child


def _accepted(lists, dims, start, size, cut, accept, accept_groups, n):
    """Which candidate splits (node segments, split attribute, left size) both children pass."""
    k = start.size
    good = np.ones(k, dtype=bool)
    if accept is None and accept_groups is None:
        return good
    # children's rows in input order (the greedy L check breaks ties by row order, so the
    # certificate of a child must not depend on the attribute it was split on)
    pos, src, child_along = _children(lists, dims, start, size, cut)
    child_of = np.empty(n, dtype=lists.dtype)
    child_of[src] = child_along
    rows = lists[-1][pos]
    child = child_of[rows]
    if accept_groups is not None:
        ok = np.asarray(accept_groups(rows, child, 2 * k), dtype=bool)
        good &= ok[0::2] & ok[1::2]
    if accept is not None:
        o = np.argsort(child, kind="stable")
        rows, child = rows[o].astype(np.int64), child[o]
        bounds = np.searchsorted(child, np.arange(2 * k + 1))
        for i in np.flatnonzero(good):
            for c in (2 * i, 2 * i + 1):
                if not accept(rows[bounds[c]:bounds[c + 1]]):
                    good[i] = False
                    break
    return good


def _apply_splits(lists, start, size, cut, dim, width, n):
    """Stable-partition every attribute's list so that each split node becomes two nodes.

    Positions are compacted to the split nodes; a node keeps its extent, its left child comes
    first.  With L_s = left rows in earlier nodes (the sum of their cuts), a left row at
    compacted position p goes to (its rank among left rows) + (right rows in earlier nodes), a
    right row to p + cut_s + L_s - (left rows before p); both offsets are per node and shared
    by all lists.  An attribute that is constant in every split node is never read again below
    them (its range stays 0; any row gives its value), so its list just copies the input-order
    list.
    """
    idx_t = lists.dtype
    pos, src, child_along = _children(lists, dim, start, size, cut)
    total = pos.size
    contiguous = total == lists.shape[1]
    first_pos = np.cumsum(size) - size
    left_before = np.cumsum(cut) - cut
    # target = right_target + left * (left_target - right_target), all int arithmetic
    right_base = np.arange(total, dtype=idx_t)
    right_base += np.repeat((cut + left_before).astype(idx_t), size)
    delta_base = np.repeat((first_pos - left_before - 1).astype(idx_t), size)
    delta_base -= right_base
    is_left = np.empty(n, dtype=bool)
    is_left[src] = (child_along & 1) == 0
    out = np.empty((lists.shape[0], total), dtype=idx_t)
    cs = np.empty(total, dtype=idx_t)
    tmp = np.empty(total, dtype=idx_t)
    d = lists.shape[0] - 1
    constant = [k for k in range(d) if not np.any(width[:, k] > 0)]
    for k in [k for k in range(d + 1) if k not in constant]:
        rows = lists[k] if contiguous else lists[k][pos]
        left = is_left[rows]
        np.cumsum(left, dtype=idx_t, out=cs)
        np.add(cs, cs, out=tmp)
        tmp += delta_base
        tmp *= left
        tmp += right_base
        tmp -= cs
        out[k][tmp] = rows
    for k in constant:
        out[k] = out[d]
    new_size = np.stack([cut, size - cut], axis=1).ravel()
    new_start = np.cumsum(new_size) - new_size
    return out, new_start, new_size
