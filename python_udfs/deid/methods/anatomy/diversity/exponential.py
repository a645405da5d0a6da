"""The Exponential-L baseline of 001's experiments (after Machanavajjhala et al. 2006).

001 "Experimental Evaluation": a group is Exponential-L diverse when every sensitive
attribute has at least L distinct values among the rows sharing any one combination of the
other attributes' values (so a group needs >= L^s rows).  001 runs the same Split (Fig. 5)
with this check instead of Fig. 6.  The level of each group is computed from a presence cube
(group x value_0 x ... x value_{s-1}) when it is small, else by sorting distinct tuples.
"""

import numpy as np

from .common import _NO_LIMIT, _group_ids, as_codes, dense_columns


def exponential_l_dense(gid, dense, sizes, n_groups):
    """Largest L such that, in each group, every sensitive attribute has >= L distinct values
    among the rows sharing any one combination of the other attributes' values (internal)."""
    n = gid.size
    G = int(n_groups)
    if n == 0 or G == 0:
        return np.zeros(G, dtype=np.int64)
    gid = gid.astype(np.int64)
    shape = [G] + [max(int(v), 1) for v in sizes]
    if np.prod(np.array(shape, dtype=float)) <= 1 << 24:
        level = _exponential_l_cube(gid, dense, shape)
    else:
        level = _exponential_l_sorted(gid, dense, sizes, G)
    level[np.bincount(gid, minlength=G) == 0] = 0
    return level


def _exponential_l_cube(gid, dense, shape):
    """Exponential-L level per group from the presence cube group x value_0 x ... x
    value_{s-1} (``shape``)."""
    s = len(dense)
    G = shape[0]
    key = gid.copy()
    for a in range(s):
        key *= shape[a + 1]
        key += dense[a]
    cube = np.zeros(int(np.prod(shape)), dtype=bool)
    cube[key] = True
    cube = cube.reshape(shape)
    level = np.full(G, _NO_LIMIT, dtype=np.int64)
    for a in range(s):
        per_combo = cube.sum(axis=a + 1).reshape(G, -1)
        worst = np.where(per_combo > 0, per_combo, _NO_LIMIT).min(axis=1)
        level = np.minimum(level, worst)
    return level


def _exponential_l_sorted(gid, dense, sizes, G):
    """Exponential-L level per group from the distinct (group, tuple) rows (any size)."""
    s = len(dense)
    level = np.full(G, _NO_LIMIT, dtype=np.int64)
    # one id per distinct (group, full tuple)
    tup = gid.copy()
    for a in range(s):
        tup = _combine(tup, dense[a], sizes[a])
    uniq_rows = np.unique(tup, return_index=True)[1]
    uniq_gid = gid[uniq_rows]
    uniq_codes = np.stack([np.asarray(c, dtype=np.int64)[uniq_rows] for c in dense], axis=1)
    for a in range(s):
        others = uniq_gid.copy()
        for b in range(s):
            if b != a:
                others = _combine(others, uniq_codes[:, b], sizes[b])
        # distinct tuples = distinct (others, value of a): count per "others" combination
        key_ids, inv = np.unique(others, return_inverse=True)
        per_combo = np.bincount(inv, minlength=key_ids.size)
        combo_group = np.zeros(key_ids.size, dtype=np.int64)
        combo_group[inv] = uniq_gid
        worst = np.full(G, _NO_LIMIT, dtype=np.int64)
        np.minimum.at(worst, combo_group, per_combo)
        level = np.minimum(level, worst)
    return level


def _combine(ids, col, size):
    """Dense ids of (ids, col) pairs (re-densified to stay within int64)."""
    size = max(int(size), 1)
    top = int(ids.max()) + 1 if ids.size else 1
    if top * size < (1 << 62):
        key = ids * size + col
    else:
        _, ids = np.unique(ids, return_inverse=True)
        key = ids.astype(np.int64) * size + col
    _, inv = np.unique(key, return_inverse=True)
    return inv.astype(np.int64)


def exponential_l_per_group(group_id, codes, *, n_groups=None):
    """Exponential-L level of each group (the model of 001's baseline; >= L^s rows needed)."""
    codes = as_codes(codes)
    gid, G = _group_ids(group_id, codes.shape[0], n_groups)
    dense, sizes = dense_columns(codes)
    return exponential_l_dense(gid, dense, sizes, G)
