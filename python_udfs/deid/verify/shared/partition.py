"""The release is a partition of the source rows (001 Def. 1).

001 Def. 1: "A partition consists of several subsets of T, such that each
record in T belongs to exactly one subset" -- the groups.  Checked from the
stored (group, row) memberships against the rids of the source relation;
this catches the pitfall of 001 Fig. 5 lines 9-10 (a split that recurses
into one child only drops the other child's rows).
"""

import numpy as np

from .failures import _bad, _examples, _fail
from .readers import _int_array


def check_partition(group_rids, all_rids, group_id=None):
    """Every source row is in exactly one group (001 Def. 1).

    ``group_rids`` holds the rid of every (group, row) membership of the
    release, ``all_rids`` the rids of the source relation (after the
    request's selection).  Fails on a rid that is in no group (a dropped
    row, the pitfall of 001 Fig. 5 line 9-10), in two groups or twice in one
    group, and on a rid that is not in the source.  ``group_id`` (optional,
    aligned with ``group_rids``) only makes the messages name the groups.

    Returns ``{"rows": N, "memberships": n}``.
    """
    g = _int_array(group_rids, "group_rids")
    a = _int_array(all_rids, "all_rids")
    gid = None
    if group_id is not None:
        gid = _int_array(group_id, "group_id")
        if gid.size != g.size:
            _bad(f"group_id has {gid.size} entries but group_rids has {g.size}")
    if _same_rids_dense(g, a):
        return {"rows": int(a.size), "memberships": int(g.size)}
    sa = np.sort(a)
    if sa.size > 1 and np.any(sa[1:] == sa[:-1]):
        dup = np.unique(sa[1:][sa[1:] == sa[:-1]])
        _bad(f"all_rids contains duplicate row ids ({_examples(dup)}); the source "
             f"rids must be unique")
    sg = np.sort(g)
    if sg.size == sa.size and np.array_equal(sg, sa):
        return {"rows": int(sa.size), "memberships": int(g.size)}

    def where(rids):
        if gid is None:
            return ""
        m = np.isin(g, rids)
        return f" (groups {_examples(np.unique(gid[m]))})"

    # duplicated memberships
    if sg.size > 1:
        same = sg[1:] == sg[:-1]
        if np.any(same):
            dup = np.unique(sg[1:][same])
            _fail(f"row id {dup[0]} is in more than one group or twice in a group "
                  f"(001 Def. 1: each record belongs to exactly one group){where(dup[:1])}",
                  detail=f"{dup.size} duplicated row ids: {_examples(dup)}")
    unknown = sg[~np.isin(sg, sa, assume_unique=True)]
    if unknown.size:
        _fail(f"row id {unknown[0]} is in the release but not in the source relation"
              f"{where(unknown[:1])}",
              detail=f"{unknown.size} unknown row ids: {_examples(unknown)}")
    missing = sa[~np.isin(sa, sg, assume_unique=True)]
    _fail(f"row id {missing[0]} of the source is in no group (001 Def. 1: each record "
          f"belongs to exactly one group; a split must not drop rows)",
          detail=f"{missing.size} missing row ids: {_examples(missing)}")


def _same_rids_dense(g, a):
    """True when ``g`` and ``a`` hold the same rids, each once, decided in
    O(n) by counting when the rids span a compact range; False means "not
    shown" (the sorting path then decides and names the problem)."""
    if a.size == 0 or g.size != a.size:
        return False
    lo, hi = int(a.min()), int(a.max())
    if hi - lo >= 2 * a.size + 1024 or int(g.min()) < lo or int(g.max()) > hi:
        return False
    ca = np.bincount(a - lo, minlength=hi - lo + 1)
    if ca.max() > 1:
        return False
    return bool(np.array_equal(np.bincount(g - lo, minlength=hi - lo + 1), ca))
