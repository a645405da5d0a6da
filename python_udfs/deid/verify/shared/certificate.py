"""Per-group proven L-diversity (001 Def. 6 (2) / Def. 7 (2)): sound lower
bounds on the least number of admissible deletions that delete every row.

Checking L-diversity exactly is NP-hard (001 Theorem 3: minimum set cover
over the RID sets).  :func:`_certify` takes, per group, the best of

* the frequency bound of 001 Lemma 1 / Theorem 6 (corrected, see
  ``check_kl``) on the whole group (:func:`_frequency_bound`), and
* the greedy certificate of 001 Figs. 6-8 (``greedy.py``), run only on the
  groups the frequency bound leaves undecided,

and an upper bound (deleting every value of one admissible attribute) that
skips hopeless groups and gives a counterexample.
"""

import numpy as np

from .arrays import _repeat, _stable_argsort_by
from .caps import _INF
from .greedy import _VECTOR_MAX_GROUP, _greedy


def _certify(rs, caps, L, vector_max=_VECTOR_MAX_GROUP):
    """Per-group proven diversity (see check_kl); values >= L mean "passed".

    Returns (cert (G,), ub (G,), ub_attr (G,), admissible distinct values
    (G,)).  ``ub`` is an upper bound (the size of a real admissible cover:
    all values of one attribute), used to skip hopeless groups and to give
    a counterexample.
    """
    gcode, acode, lens, sizes, G = rs.gcode, rs.acode, rs.lens, rs.sizes, rs.G
    m = caps.size
    nd = np.bincount(gcode * m + acode, minlength=G * m).reshape(G, m)
    adm = np.minimum(nd, caps[None, :]).sum(axis=1)
    cover = np.where(nd <= caps[None, :], nd, _INF)
    ub_attr = np.argmin(cover, axis=1)
    ub = cover[np.arange(G), ub_attr]

    cert = _frequency_bound(gcode, acode, lens, sizes, caps, G)
    if L <= 1:
        return np.maximum(cert, 1), ub, ub_attr, adm
    need = (cert < L) & (ub >= L)
    if not np.any(need):
        return cert, ub, ub_attr, adm

    groups = np.flatnonzero(need)
    cert[groups] = np.maximum(cert[groups], _greedy(rs, caps, L, groups, vector_max))
    return cert, ub, ub_attr, adm


def _frequency_bound(gcode, acode, lens, sizes, caps, G):
    """001 Lemma 1 / Theorem 6 (corrected, see check_kl) on whole groups.

    Deleting j values deletes at most S_j rows, S_j = the j largest RID-set
    sizes with at most L_i from attribute i (taking the largest first is
    optimal: the admissible value sets form a matroid).  The group needs at
    least min{j : S_j >= |G|} deletions; _INF if even all admissible values
    fall short.
    """
    e = gcode.size
    w = int(lens.max()) + 1
    if G * w < 2 ** 62:
        o = _stable_argsort_by(gcode, w - 1 - lens, G, w)
    else:
        o = np.lexsort((-lens, gcode))
    # entries by group, largest RID set first; drop those beyond L_i
    keep = np.ones(e, dtype=bool)
    ao = acode[o]
    for a in np.flatnonzero(caps < _INF):
        pos = np.flatnonzero(ao == a)
        ga = gcode[o[pos]]
        start = np.flatnonzero(np.r_[True, ga[1:] != ga[:-1]])
        rank = np.arange(pos.size) - np.repeat(start, np.diff(np.r_[start, pos.size]))
        keep[pos[rank >= caps[a]]] = False
    o2 = o[keep]
    del o, ao, keep
    cert = np.full(G, _INF, dtype=np.int64)
    if o2.size == 0:
        return cert
    g2 = gcode[o2]
    cs = np.cumsum(lens[o2])
    gstart = np.flatnonzero(np.r_[True, g2[1:] != g2[:-1]])
    glen = np.diff(np.r_[gstart, g2.size])
    cs -= _repeat(np.r_[0, cs[gstart[1:] - 1]], glen)        # cumulated within each group
    hit = np.flatnonzero(cs >= sizes[g2])
    if hit.size:
        hg = g2[hit]
        first = np.flatnonzero(np.r_[True, hg[1:] != hg[:-1]])
        h = hit[first]
        cert[hg[first]] = h - gstart[np.searchsorted(gstart, h, side="right") - 1] + 1
    return cert
