"""Every group (or condensation cluster) has at least k rows.

* 001 Def. 4 (K-anonymity) and Def. 6 condition (1): "each group G_i in the
  partition contains at least K records".
* 004 Def. 1 (k-indistinguishability) and Alg. 2 step 2c: condensation
  clusters are rebalanced to at least k records.

Checked from the stored group id of every row.
"""

import numpy as np

from .failures import _examples, _fail
from .readers import _count_param, _int_array


def check_group_sizes(group_id, k):
    """Every group has at least k rows (001 Def. 4, Def. 6 condition (1)).

    ``group_id`` is the group of every row (one entry per row).  Returns
    ``{"groups": G, "rows": n, "min_size": smallest group}`` (``min_size`` is
    None for an empty release).
    """
    res, _, _ = _sizes_check(group_id, k, "group", "001 Def. 4")
    return res


def check_group_counts(counts, k):
    """check_group_sizes for rows given as counts: group i (its position) has counts[i] rows,
    i.e. check_group_sizes(np.repeat(np.arange(len(counts)), counts), k) without that array
    (e.g. the counts of a GROUP BY on the stored release).  Same summary, same failure."""
    counts = _int_array(counts, "counts")
    k = _count_param(k, "k")
    if counts.size and counts.min() < 0:
        _fail("a group count is negative")
    ids = np.flatnonzero(counts)
    counts = counts[ids]
    if ids.size == 0:
        return {"groups": 0, "rows": 0, "min_size": None}
    _below_k(ids, counts, k, "group", "001 Def. 4")
    return {"groups": int(ids.size), "rows": int(counts.sum()), "min_size": int(counts.min())}


def check_cluster_sizes(cluster_id, k):
    """Every condensation cluster has at least k records (004 sec. 3,
    Def. 1: k-indistinguishability; Alg. 2 step 2c rebalances to >= k).

    Same as :func:`check_group_sizes`; returns ``{"clusters": G, "groups": G,
    "rows": n, "min_size": ..}``.
    """
    res, _, _ = _sizes_check(cluster_id, k, "cluster", "004 Def. 1")
    res["groups"] = res["clusters"]
    return res


def _sizes_check(group_id, k, noun, cite):
    """The shared check: (summary, distinct ids, their row counts); fails
    naming the smallest id below k.  ``noun`` ("group", "cluster") names the
    input and the summary keys, ``cite`` the definition in the message."""
    gid = _int_array(group_id, f"{noun}_id")
    k = _count_param(k, "k")
    if gid.size == 0:
        return {f"{noun}s": 0, "rows": 0, "min_size": None}, None, None
    ids, counts = np.unique(gid, return_counts=True)
    _below_k(ids, counts, k, noun, cite)
    return {f"{noun}s": int(ids.size), "rows": int(gid.size),
            "min_size": int(counts.min())}, ids, counts


def _below_k(ids, counts, k, noun, cite):
    """Fail naming the first id (ids ascending) with fewer than k rows."""
    small = np.flatnonzero(counts < k)
    if small.size:
        i = small[0]
        _fail(f"{noun} {ids[i]} has {counts[i]} rows, fewer than k = {k} ({cite})",
              detail=f"{small.size} of {ids.size} {noun}s are below k; "
                     f"first: {_examples([f'{ids[j]} ({counts[j]} rows)' for j in small])}")
