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


def _greedy_vectorised(groups, starts, ents, n_entries, caps, L, sizes):
    """001 Fig. 6 then Figs. 7-8, in lock-step over ``groups``: step t looks
    at the t-th row (in Fig. 6 order) of every group still undecided.
    Same result as :func:`certify_group_scalar` group by group."""
    n_attrs = ents.shape[1]
    top = L - 1
    caps_top = np.minimum(caps, top)
    group_size = sizes[groups]
    order = np.argsort(-group_size, kind="stable")
    groups, group_size = groups[order], group_size[order]
    group_start = starts[groups]
    in_c, c_size = _fig6_disjoint(ents, n_entries, group_start, group_size, L)
    certified = _disjoint_cert(c_size, caps)
    open_ = np.flatnonzero(certified < L)
    if open_.size == 0:
        return _unsort(certified, order)

    # --- Figs. 7-8 on the groups C did not certify.  Per group and
    # attribute we keep the K = L-1 largest frequencies in C with their
    # value ids (top_freq, top_entry); S_1..S_K follow from them.
    n_open = open_.size
    open_size = group_size[open_]
    pos_dtype = np.int32 if ents.shape[0] < 2 ** 31 - 1 else np.int64     # row positions
    row_group = _runs(open_size, 0, pos_dtype)
    # row t of open group j: group_start[j] + t
    rows = np.arange(open_size.sum(), dtype=pos_dtype)
    rows -= _repeat(np.cumsum(open_size) - open_size - group_start[open_], open_size, pos_dtype)
    in_c_rows = in_c[rows]
    c_rows, c_group = rows[in_c_rows], row_group[in_c_rows]
    c_slot = np.arange(c_rows.size) - np.repeat(np.cumsum(c_size[open_]) - c_size[open_],
                                                c_size[open_])
    freq_c = np.zeros(n_entries, dtype=np.int64)
    c_entries = np.take(ents, c_rows, axis=0)
    freq_c[c_entries.ravel()] = 1
    top_freq = np.zeros((n_open, n_attrs, top), dtype=np.int64)
    top_entry = np.full((n_open, n_attrs, top), -1, dtype=np.int64)
    top_entry[c_group[:, None], np.arange(n_attrs)[None, :], c_slot[:, None]] = c_entries
    del c_entries
    top_freq[c_group[:, None], np.arange(n_attrs)[None, :], c_slot[:, None]] = 1
    candidates = rows[~in_c_rows]                                   # by group, in Fig. 6 order
    n_cand = open_size - c_size[open_]
    cand_start = np.cumsum(n_cand) - n_cand
    by_cand = np.argsort(-n_cand, kind="stable")
    n_cand, cand_start = n_cand[by_cand], cand_start[by_cand]
    top_freq, top_entry = np.take(top_freq, by_cand, axis=0), np.take(top_entry, by_cand, axis=0)
    cert_x = certified[open_][by_cand]
    size_x = c_size[open_][by_cand]
    neg_cand = -n_cand
    for step in range(int(n_cand[0])):
        n_live = int(np.searchsorted(neg_cand, -step, side="left"))
        live = np.flatnonzero(cert_x[:n_live] < L)
        if live.size == 0:
            break
        entries = np.take(ents, candidates[cand_start[live] + step], axis=0)    # (A, m): line 6
        freq_new = freq_c[entries] + 1
        freq_live = np.take(top_freq, live, axis=0)
        entry_live = np.take(top_entry, live, axis=0)
        in_top = entry_live == entries[:, :, None]
        has_entry = in_top.any(axis=2)
        min_slot = freq_live.argmin(axis=2)
        min_freq = np.take_along_axis(freq_live, min_slot[:, :, None], axis=2)[:, :, 0]
        target_slot = np.where(has_entry, in_top.argmax(axis=2), min_slot)
        at_group, at_attr = np.nonzero(has_entry | (freq_new > min_freq))
        at_slot = target_slot[at_group, at_attr]
        freq_live[at_group, at_attr, at_slot] = freq_new[at_group, at_attr]
        entry_live[at_group, at_attr, at_slot] = entries[at_group, at_attr]
        top_sums = _top_sums(freq_live, caps_top, top)                          # line 7
        new_x = 1 + (top_sums < (size_x[live] + 1)[:, None]).sum(axis=1)
        accepted = new_x >= cert_x[live]                                # lines 8-9
        grown = live[accepted]
        top_freq[grown] = freq_live[accepted]
        top_entry[grown] = entry_live[accepted]
        freq_c[entries[accepted].ravel()] += 1
        size_x[grown] += 1
        cert_x[grown] = new_x[accepted]                                   # lines 11-12
    unsort = np.empty_like(by_cand)
    unsort[by_cand] = np.arange(n_open)
    certified[open_] = np.maximum(certified[open_], cert_x[unsort])
    return _unsort(certified, order)


def _fig6_disjoint(ents, n_entries, group_start, group_size, L):
    """001 Fig. 6 in lock-step over groups sorted by size, descending: the greedy set C of
    rows pairwise without a common value, stopping at L rows (line 8). (Whether each row is
    in C, |C| per group.)"""
    neg_size = -group_size
    used = np.zeros(n_entries, dtype=bool)
    in_c = np.zeros(ents.shape[0], dtype=bool)
    c_size = np.zeros(group_size.size, dtype=np.int64)
    for step in range(int(group_size[0])):
        n_live = int(np.searchsorted(neg_size, -step, side="left"))   # groups with size > t
        live = np.flatnonzero(c_size[:n_live] < L)
        if live.size == 0:
            break
        rows = group_start[live] + step
        entries = np.take(ents, rows, axis=0)
        disjoint = ~used[entries].any(axis=1)
        rows, entries = rows[disjoint], entries[disjoint]
        used[entries.ravel()] = True
        in_c[rows] = True
        c_size[live[disjoint]] += 1
    return in_c, c_size


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
