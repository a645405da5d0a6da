"""The greedy L-diversity certificate of 001 Figs. 6-8, per group.

* 001 Fig. 6: a set C of rows pairwise without common sensitive values,
  taken in ascending order of total frequency (ties by rid), is
  |C|-diverse (Theorem 4, with Def. 7: :func:`_disjoint_cert`), and so is
  the group (Theorem 5).
* 001 Figs. 7-8: the remaining rows are added in the same order; a row is
  kept while the Lemma 1 bound on the grown C (the x largest frequencies,
  at most L_i from attribute i: :func:`_top_sums`) still proves the
  diversity reached so far, and the proven level rises while it can.

Two implementations with the same result: :func:`_greedy_vectorised` runs
groups of up to ``_VECTOR_MAX_GROUP`` rows in lock-step with numpy,
:func:`certify_group_scalar` one group at a time in plain Python (large
groups, and the reference the vectorised path is tested against).
"""

import numpy as np

from .arrays import _repeat, _runs, _stable_argsort_by, _unsort
from .caps import _INF

# Groups larger than this run the greedy certificate one row at a time in
# plain Python instead of in lock-step with all other groups: lock-step costs
# one numpy round per row position, so one huge group would dominate.
_VECTOR_MAX_GROUP = 1024


def _greedy(rs, caps, L, groups, vector_max=_VECTOR_MAX_GROUP):
    """001 Fig. 6 then Figs. 7-8 for ``groups`` (codes); returns the proven
    diversity of each (>= L: certified).  Groups up to ``vector_max`` rows
    run in lock-step (vectorised), larger ones one by one."""
    G, sizes, lens = rs.G, rs.sizes, rs.lens
    out = np.zeros(groups.size, dtype=np.int64)
    if groups.size == 0:
        return out
    if L <= 1:
        return out + 1            # any non-empty group needs one deletion
    # the rows in 001 Fig. 6 line 3 order: ascending total frequency
    # f(r) = sum of f(v) over the row's values, ties by rid (rows arrive in
    # rid order; the sort is stable). Rows of groups not asked for only cost
    # their place in the sort: they are dropped first when they are most rows.
    rg, ents = rs.row_g, rs.row_ent
    if 2 * groups.size < G:
        want = np.zeros(G, dtype=bool)
        want[groups] = True
        rsel = np.flatnonzero(want[rg])
        rg = rg[rsel]
        ents = np.take(ents, rsel, axis=0)
        del rsel
    ftot = lens[ents[:, 0]]
    for a in range(1, ents.shape[1]):
        ftot += lens[ents[:, a]]
    o = _stable_argsort_by(rg, ftot, G, int(ftot.max()) + 1)     # by group, then f(r)
    del ftot
    starts = np.zeros(G + 1, dtype=np.int64)          # each group's rows, in that order
    np.cumsum(np.bincount(rg, minlength=G), out=starts[1:])
    ents = np.take(ents, o, axis=0)                   # rows of entries: one gather (not ents[o])
    del o
    vec = sizes[groups] <= vector_max
    if np.any(vec):
        out[vec] = _greedy_vectorised(groups[vec], starts, ents, lens.size, caps, L, sizes)
    capl = caps.tolist()
    for j in np.flatnonzero(~vec):
        g = groups[j]
        out[j] = certify_group_scalar(ents[starts[g]:starts[g + 1]].tolist(), capl, L)
    return out


def _greedy_vectorised(groups, starts, ents, e, caps, L, sizes):
    """001 Fig. 6 then Figs. 7-8, in lock-step over ``groups``: step t looks
    at the t-th row (in Fig. 6 order) of every group still undecided.
    Same result as :func:`certify_group_scalar` group by group."""
    m = ents.shape[1]
    K = L - 1
    capK = np.minimum(caps, K)
    gsize = sizes[groups]
    order = np.argsort(-gsize, kind="stable")
    groups, gsize = groups[order], gsize[order]
    gstart = starts[groups]
    neg = -gsize

    # --- Fig. 6: greedy value-disjoint set C; stop at L rows (line 8)
    used = np.zeros(e, dtype=bool)
    inC = np.zeros(ents.shape[0], dtype=bool)
    csize = np.zeros(groups.size, dtype=np.int64)
    for t in range(int(gsize[0])):
        na = int(np.searchsorted(neg, -t, side="left"))   # groups with size > t
        act = np.flatnonzero(csize[:na] < L)
        if act.size == 0:
            break
        r = gstart[act] + t
        E = np.take(ents, r, axis=0)
        ok = ~used[E].any(axis=1)
        r, E = r[ok], E[ok]
        used[E.ravel()] = True
        inC[r] = True
        csize[act[ok]] += 1
    cert = _disjoint_cert(csize, caps)
    todo = np.flatnonzero(cert < L)
    if todo.size == 0:
        return _unsort(cert, order)

    # --- Figs. 7-8 on the groups C did not certify.  Per group and
    # attribute we keep the K = L-1 largest frequencies in C with their
    # value ids (Bf, Be); S_1..S_K follow from them.
    nt = todo.size
    tl = gsize[todo]
    it = np.int32 if ents.shape[0] < 2 ** 31 - 1 else np.int64     # row positions
    loc = _runs(tl, 0, it)
    r = np.arange(tl.sum(), dtype=it)              # row t of group j: gstart[j] + t
    r -= _repeat(np.cumsum(tl) - tl - gstart[todo], tl, it)
    c_mask = inC[r]
    rc, lc = r[c_mask], loc[c_mask]
    slot = np.arange(rc.size) - np.repeat(np.cumsum(csize[todo]) - csize[todo], csize[todo])
    fC = np.zeros(e, dtype=np.int64)
    ents_c = np.take(ents, rc, axis=0)
    fC[ents_c.ravel()] = 1
    Bf = np.zeros((nt, m, K), dtype=np.int64)
    Be = np.full((nt, m, K), -1, dtype=np.int64)
    Be[lc[:, None], np.arange(m)[None, :], slot[:, None]] = ents_c
    del ents_c
    Bf[lc[:, None], np.arange(m)[None, :], slot[:, None]] = 1
    cand = r[~c_mask]                                   # by group, in Fig. 6 order
    ncand = tl - csize[todo]
    cstart = np.cumsum(ncand) - ncand
    o2 = np.argsort(-ncand, kind="stable")
    ncand, cstart = ncand[o2], cstart[o2]
    Bf, Be = np.take(Bf, o2, axis=0), np.take(Be, o2, axis=0)
    x = cert[todo][o2]
    sz = csize[todo][o2]
    negc = -ncand
    for t in range(int(ncand[0])):
        na = int(np.searchsorted(negc, -t, side="left"))
        act = np.flatnonzero(x[:na] < L)
        if act.size == 0:
            break
        E = np.take(ents, cand[cstart[act] + t], axis=0)    # (A, m): line 6
        fnew = fC[E] + 1
        bf = np.take(Bf, act, axis=0)
        be = np.take(Be, act, axis=0)
        inb = be == E[:, :, None]
        has = inb.any(axis=2)
        slot_min = bf.argmin(axis=2)
        minval = np.take_along_axis(bf, slot_min[:, :, None], axis=2)[:, :, 0]
        where = np.where(has, inb.argmax(axis=2), slot_min)
        ai, mi = np.nonzero(has | (fnew > minval))
        si = where[ai, mi]
        bf[ai, mi, si] = fnew[ai, mi]
        be[ai, mi, si] = E[ai, mi]
        S = _top_sums(bf, capK, K)                          # line 7
        newx = 1 + (S < (sz[act] + 1)[:, None]).sum(axis=1)
        acc = newx >= x[act]                                # lines 8-9
        ga = act[acc]
        Bf[ga] = bf[acc]
        Be[ga] = be[acc]
        fC[E[acc].ravel()] += 1
        sz[ga] += 1
        x[ga] = newx[acc]                                   # lines 11-12
    back = np.empty_like(o2)
    back[o2] = np.arange(nt)
    cert[todo] = np.maximum(cert[todo], x[back])
    return _unsort(cert, order)


def _top_sums(bf, capK, K):
    """S_1..S_K (A, K) from per-attribute top-K buffers bf (A, m, K): the
    cumulated K largest frequencies with at most capK[a] from attribute a."""
    A, m, _ = bf.shape
    parts = []
    for a in range(m):
        c = int(capK[a])
        if c <= 0:
            continue
        col = bf[:, a, :]
        if c < K:
            col = -np.sort(-col, axis=1)[:, :c]
        parts.append(col)
    if not parts:
        return np.zeros((A, K), dtype=np.int64)
    flat = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
    if flat.shape[1] > K:
        flat = -np.partition(-flat, K - 1, axis=1)[:, :K]
    cs = np.cumsum(-np.sort(-flat, axis=1), axis=1)
    if cs.shape[1] < K:
        cs = np.concatenate([cs, np.repeat(cs[:, -1:], K - cs.shape[1], axis=1)], axis=1)
    return cs


def _disjoint_cert(csize, caps):
    """Diversity of a set C of pairwise value-disjoint rows (001 Theorem 4,
    with Def. 7): each deletion removes at most one row of C, and at most
    sum_i min(L_i, |C|) deletions can touch C; _INF if that is below |C|."""
    reach = np.minimum(caps[None, :], csize[:, None]).sum(axis=1)
    return np.where(reach >= csize, csize, _INF)


def certify_group_scalar(rows, caps, L):
    """One group's certificate, one row at a time (large groups; the
    reference the vectorised path is tested against).

    ``rows``: for each row of the group, in 001 Fig. 6 line 3 order
    (ascending total frequency), the ids of its values, one per sensitive
    attribute in a fixed attribute order (ids unique per attribute and
    value).  ``caps[a]``: L_a of 001 Def. 7, or a number >= L when the
    attribute is unconstrained.  Returns the proven diversity; the search
    stops once L is proven, so any value >= L means "certified L-diverse".
    """
    if L <= 1:
        return 1
    K = L - 1
    m = len(caps)
    capK = [min(int(c), K) for c in caps]
    # 001 Fig. 6
    used = set()
    C = []
    for i, r in enumerate(rows):
        if not any(v in used for v in r):
            C.append(i)
            used.update(r)
            if len(C) >= L:
                break
    c = len(C)
    if sum(min(int(k), c) for k in caps) < c:
        return int(_INF)
    if c >= L:
        return c
    # 001 Figs. 7-8
    x = c
    fC = {v: 1 for i in C for v in rows[i]}
    bufs = [[[rows[i][a], 1] for i in C] for a in range(m)]
    inC = set(C)
    size = c
    for i, r in enumerate(rows):
        if i in inC:
            continue
        new = [[p[:] for p in b] for b in bufs]
        for a, v in enumerate(r):
            f = fC.get(v, 0) + 1
            b = new[a]
            for p in b:
                if p[0] == v:
                    p[1] = f
                    break
            else:
                if len(b) < K:
                    b.append([v, f])
                else:
                    j = min(range(K), key=lambda q: b[q][1])
                    if f > b[j][1]:
                        b[j] = [v, f]
        top = []
        for a in range(m):
            top.extend(sorted((p[1] for p in new[a]), reverse=True)[:capK[a]])
        top.sort(reverse=True)
        s, newx = 0, 1
        for j in range(K):
            s += top[j] if j < len(top) else 0
            if s >= size + 1:
                break
            newx += 1
        if newx >= x:
            bufs = new
            for v in r:
                fC[v] = fC.get(v, 0) + 1
            size += 1
            x = newx
            if x >= L:
                break
    return x
