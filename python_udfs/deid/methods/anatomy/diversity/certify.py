"""The greedy L certificate of 001 Fig. 6 (and Figs. 7-8 with column limits): entry points.

:func:`certify_dense` picks the algorithm for a batch of groups -- the capped Fig. 6 fast
path (:mod:`.capped`) for a ">= L" test without column limits, the vectorised Fig. 6
(:mod:`.greedy`) for an uncapped certificate, and Fig. 6 followed by Fig. 7
(:mod:`.column_wise`) under the limits of Def. 7 -- and :func:`certified_l_per_group`,
:func:`greedy_check` and :func:`certified_l` are the public checks built on it (sound by
001 Theorems 4-6).
"""

from typing import NamedTuple

import numpy as np

from .capped import _capped_count, _capped_fits
from .column_wise import PHASE2_MAX_WIDTH, _column_targets, _Fig6Scan, _grow_column_wise
from .common import (_NO_LIMIT, UNBOUNDED_L, _check_l, _group_ids, _index_dtype,
                     _order_by_group_then, _pair_index, as_codes, column_caps, dense_columns)
from .greedy import _independent_count, _independent_rows, _Sorted


class _PairTables(NamedTuple):
    """001 Fig. 6 lines 1-2 for all groups."""
    freq: np.ndarray          # total frequency of each row
    keys: list                # per attribute: the (group, value) pair of each row
    n_pairs: list             # per attribute: number of pairs
    pair_groups: list         # per attribute: group of each pair (None: pair // size)
    counts: list              # per attribute: rows per pair


def certify_dense(gid, dense, sizes, n_groups, caps=None, max_l=None, *, grouped=None):
    """Greedy L certificate of every group 0..n_groups-1 (internal, dense codes).

    ``gid``: int (n,), ``dense``: list of s columns from :func:`dense_columns` with column
    sizes ``sizes``; ``caps`` from :func:`column_caps`; ``max_l`` stops as soon as a group
    reaches it (the result is then min(certificate, max_l)).  ``grouped=True``: the caller
    knows ``gid`` is non-decreasing (rows in group order), which is then not checked.
    """
    n = gid.size
    G = int(n_groups)
    if n == 0 or G == 0:
        return np.zeros(G, dtype=np.int64)
    if not grouped:                                   # rows already in group order?
        grouped = G == 1 or bool((gid[1:] >= gid[:-1]).all())
    if grouped:
        gsize = np.diff(np.searchsorted(gid, np.arange(G + 1, dtype=gid.dtype)))
    else:
        gsize = np.bincount(gid, minlength=G).astype(np.int64)
    if caps is None and max_l is not None and _capped_fits(G, sizes, n):
        return _capped_count(gid, dense, sizes, G, gsize, int(max_l), grouped)
    tables = _pair_tables(gid, dense, sizes, G)
    if caps is None:                                  # Fig. 6 only: count the rows of C
        count = _independent_count(gid, tables.freq, tables.keys, tables.n_pairs, gsize,
                                   n_groups=G, max_l=max_l)
        return count if max_l is None else np.minimum(count, int(max_l))
    cert = _certify_column_wise(gid, tables, sizes, gsize, G, caps, max_l)
    if max_l is not None:
        cert = np.minimum(cert, int(max_l))
    return cert


def _pair_tables(gid, dense, sizes, G):
    """001 Fig. 6 lines 1-2: (group, value) pairs, their counts, each row's total frequency."""
    n = gid.size
    keys, n_pairs, pair_groups, counts = [], [], [], []
    freq = np.zeros(n, dtype=_index_dtype(n * len(dense)))
    gid_p = gid.astype(np.intp, copy=False)
    for a, col in enumerate(dense):
        key, n_pair, pair_group = _pair_index(gid_p, col, G, sizes[a])
        count = np.bincount(key, minlength=n_pair)
        freq += np.take(count.astype(freq.dtype, copy=False), key)
        keys.append(key)
        n_pairs.append(n_pair)
        pair_groups.append(pair_group)
        counts.append(count)
    return _PairTables(freq, keys, n_pairs, pair_groups, counts)


def _certify_column_wise(gid, tables, sizes, gsize, G, caps, max_l):
    """Fig. 6 (Fig. 7 line 1), then Fig. 7 for the groups it leaves short of their target;
    ``UNBOUNDED_L`` where the column limits forbid deleting the whole group."""
    order = _order_by_group_then(gid, tables.freq, G)    # Fig. 6 line 3 (stable)
    srt = _Sorted(order, gid, tables.keys)
    gstart = np.cumsum(gsize) - gsize
    target = np.full(G, _NO_LIMIT if max_l is None else int(max_l), dtype=np.int64)
    target, unbounded = _column_targets(caps, tables.counts, tables.pair_groups, sizes, G,
                                        target)
    count, picked = _independent_rows(srt, tables.n_pairs, gstart, gsize, G, target)
    cert = np.minimum(count, target)
    width = min(int(target[cert < target].max(initial=1)) - 1, PHASE2_MAX_WIDTH)
    need = np.flatnonzero((cert < np.minimum(target, width + 1)) & (gsize > cert))
    if need.size:
        fig6 = _Fig6Scan(rows=srt, n_pairs=tables.n_pairs, group_start=gstart,
                         group_size=gsize, picked=picked)
        cert[need] = _grow_column_wise(need, fig6, n_groups=G,
                                       target=np.minimum(target[need], width + 1),
                                       caps=caps, width=width)
    cert[unbounded & (cert >= target)] = UNBOUNDED_L
    return cert


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------

def certified_l_per_group(group_id, codes, column_l=None, *, n_groups=None, max_l=None):
    """Greedy L certificate (001 Fig. 6, or Figs. 7-8 with ``column_l``) of each group.

    Returns an int64 array of length ``n_groups`` (default: max(group_id) + 1): for group g the
    largest L for which :func:`greedy_check` on the rows of g says yes (capped at ``max_l`` if
    given, which makes a ">= L" test cheaper; ``UNBOUNDED_L`` when the column limits forbid
    deleting the whole group; 0 for an empty group).
    """
    codes = as_codes(codes)
    gid, G = _group_ids(group_id, codes.shape[0], n_groups)
    if max_l is not None:
        max_l = _check_l(max_l)
    dense, sizes = dense_columns(codes)
    caps = column_caps(column_l, codes.shape[1])
    return certify_dense(gid, dense, sizes, G, caps, max_l)


def greedy_check(codes, L, column_l=None):
    """001 Fig. 6 (and Figs. 7-8 with ``column_l``): True only if the group needs >= L deletions.

    Sound (Theorems 4-6): a True answer is always right; False may mean "could not certify".
    """
    L = _check_l(L)
    codes = as_codes(codes)
    gid = np.zeros(codes.shape[0], dtype=np.int64)
    return bool(certified_l_per_group(gid, codes, column_l, n_groups=1, max_l=L)[0] >= L)


def certified_l(codes, column_l=None):
    """Largest L for which :func:`greedy_check` says yes (the number of distinct values when
    there is one sensitive attribute and no limit)."""
    codes = as_codes(codes)
    gid = np.zeros(codes.shape[0], dtype=np.int64)
    return int(certified_l_per_group(gid, codes, column_l, n_groups=1)[0])
