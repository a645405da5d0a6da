"""VERPART (003 Fig. 9): split one cluster vertically into k^m-anonymous record chunks.

Fig. 9, for a cluster P:
  * lines 2-4: codes with support < k in P go to the item chunk (domain T_T);
  * line 5: the other codes are ordered: codes of one utility constraint form a group sorted
    by decreasing support, groups by decreasing support of their first code (a code in no
    constraint is a group of its own; ties go to the smaller code id);
  * lines 8-20: chunk domains T_1, T_2, ... are built greedily: a code t joins the current
    domain T_cur when the projection of P on T_cur + {t} is k^m-anonymous (line 12); then
    codes of a constraint other than the first code's, of which only some were added, are
    taken out again (lines 15-17) so that a later chunk can hold the whole constraint.

The k^m test of line 12 is incremental: T_cur is k^m-anonymous already, so only the itemsets
containing t are new, and {t} + I (|I| <= m - 1) occurs in s subrecords exactly when I occurs
in s of the records having t.  So T_cur + {t} is k^m-anonymous iff s(t) >= k and the records
having t, projected on T_cur, are k^(m-1)-anonymous.  For m = 2 that is "every pair {t, c},
c in T_cur, has support 0 or >= k", read from one pair count per cluster; larger m add an
Apriori check on the records having t (itemsets.is_km_anonymous).

Deviations and readings of the text:
  * Line 16 says a code t is removed when its constraint u differs from the first code's and
    "not all diagnosis codes of u are added to T_cur"; the prose (item ii) says "all codes in
    u have also been assigned".  The worked example (692.71 leaves C_1 because 695.10 of u_2
    did not fit) follows line 16, and so do we.  "All codes of u" is read as the codes of u
    still unassigned in this cluster (T_remain): codes of u absent from the cluster or in the
    item chunk could never be added.
  * If the first code of T_cur is in no constraint, every partly-added constraint is removed.

:func:`verpart` is the per-cluster function (one cluster, the figure as written).
:func:`verpart_groups` runs lines 5-20 for many clusters (or joint clusters, refine.py) at
once: supports, pair supports and the line-5 order come from a few numpy sorts over all of
them, and only the greedy of lines 8-20 runs per cluster, in Python over candidate codes.
"""

from collections import Counter

import numpy as np

from . import itemsets


def verpart(offsets, codes, k, m, constraint_of_code):
    """003 Fig. 9 on one cluster.

    ``offsets``/``codes``: the cluster's records as CSR (int64, codes sorted and unique in a
    record); ``constraint_of_code``: int64 (n_codes,), the constraint of each code or -1.
    Returns (domains, item_codes): the record chunk domains T_1..T_v in the order Fig. 9
    creates them (each an int64 array of sorted codes) and the item chunk domain T_T.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    domain, local = np.unique(codes, return_inverse=True)
    support = np.bincount(local, minlength=domain.size)
    frequent = support >= k                                        # lines 2-4
    keep = frequent[local]
    row = itemsets.row_of_occurrence(offsets)
    kept_offsets = np.zeros(offsets.size, dtype=np.int64)
    np.cumsum(np.bincount(row[keep], minlength=offsets.size - 1), out=kept_offsets[1:])
    _, pair_code, _, pair_chunk = verpart_groups(
        np.zeros(offsets.size - 1, dtype=np.int64), kept_offsets, codes[keep],
        constraint_of_code.size, k, m, constraint_of_code)
    n_chunks = int(pair_chunk.max()) + 1 if pair_chunk.size else 0
    domains = [pair_code[pair_chunk == j] for j in range(n_chunks)]
    return domains, domain[~frequent]


def verpart_groups(row_group, offsets, codes, n_codes, k, m, constraint_of_code):
    """Fig. 9 lines 5-20 for every group (cluster or joint cluster) at once.

    ``row_group``: int64 (n_rows,), non-decreasing group id of each record; ``offsets``/
    ``codes``: the records restricted to codes of support >= k in their group.  Returns
    (pair_group, pair_code, pair_support, pair_chunk), one entry per (group, code), sorted by
    group then code; pair_chunk is the index (0, 1, ...) of the record chunk of the code in
    its group, in creation order.
    """
    D = max(int(n_codes), 1)
    lengths = np.diff(offsets)
    key = np.repeat(row_group, lengths) * D + codes
    sorted_key = np.sort(key, kind="stable")     # rows in group order, codes ascending: runs
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]]) \
        if sorted_key.size else np.zeros(0, dtype=np.int64)
    pair_key = sorted_key[starts]
    pair_support = np.diff(np.r_[starts, sorted_key.size]).astype(np.int64)
    pair_group, pair_code = pair_key // D, pair_key % D
    pair_chunk = np.full(pair_key.size, -1, dtype=np.int64)
    if pair_key.size == 0:
        return pair_group, pair_code, pair_support, pair_chunk
    occ_pair = np.searchsorted(pair_key, key)
    del key, sorted_key                                            # (peak memory)
    group_head = np.flatnonzero(np.r_[True, pair_group[1:] != pair_group[:-1]])
    group_end = np.r_[group_head[1:], pair_key.size]
    in_order = _fig9_order(pair_group, pair_code, pair_support, constraint_of_code)
    rank = np.empty(pair_key.size, dtype=np.int64)                 # position in line-5 order
    rank[in_order] = np.arange(pair_key.size) - np.repeat(group_head, group_end - group_head)

    single = group_end - group_head == 1
    pair_chunk[group_head[single]] = 0
    multi = np.flatnonzero(~single)
    if multi.size == 0:
        return pair_group, pair_code, pair_support, pair_chunk
    if m >= 2:
        first, second = itemsets.record_pairs(offsets)
        pair_of_pairs = occ_pair[first] * pair_key.size
        del first
        pair_of_pairs += occ_pair[second]
        del second
        pair_of_pairs.sort(kind="stable")        # group by group: runs (the same values)
        head = np.flatnonzero(np.r_[True, pair_of_pairs[1:] != pair_of_pairs[:-1]]) \
            if pair_of_pairs.size else np.zeros(0, dtype=np.int64)
        count = np.diff(np.r_[head, pair_of_pairs.size])
        bad = pair_of_pairs[head[count < k]]                      # pairs with 1 <= s < k
        bad_a, bad_b = bad // pair_key.size, bad % pair_key.size
        bad_at = np.searchsorted(bad_a, group_head)
        bad_to = np.searchsorted(bad_a, group_end)
    if m <= 2:                      # no pair of codes conflicts: all codes in one chunk
        calm = multi[(bad_to[multi] - bad_at[multi]) == 0] if m == 2 else multi
        size = group_end[calm] - group_head[calm]
        pair_chunk[np.repeat(group_head[calm], size) + np.arange(size.sum()) - np.repeat(
            np.cumsum(size) - size, size)] = 0
        multi = np.setdiff1d(multi, calm, assume_unique=True)
    row_head = np.searchsorted(row_group, pair_group[group_head])
    row_end = np.searchsorted(row_group, pair_group[group_head], side="right")
    occ_rank = rank[occ_pair]
    constraint = constraint_of_code[pair_code]
    for g in multi.tolist():
        lo, hi = int(group_head[g]), int(group_end[g])
        d = hi - lo
        by_rank = np.empty(d, dtype=np.int64)
        by_rank[rank[lo:hi]] = np.arange(lo, hi)
        masks = [0] * d
        test = None
        if m >= 2:
            a0, a1 = int(bad_at[g]), int(bad_to[g])
            for a, b in zip(rank[bad_a[a0:a1]].tolist(), rank[bad_b[a0:a1]].tolist()):
                masks[a] |= 1 << b
                masks[b] |= 1 << a
        if m >= 3:
            r0, r1 = int(row_head[g]), int(row_end[g])
            sub_offsets = offsets[r0:r1 + 1] - offsets[r0]
            matrix = itemsets.incidence_matrix(
                sub_offsets, occ_rank[offsets[r0]:offsets[r1]], d)
            test = _extension_test(matrix, k, m)
        chunk = greedy_chunks(constraint[by_rank].tolist(), masks, test)
        pair_chunk[by_rank] = chunk
    return pair_group, pair_code, pair_support, pair_chunk


def greedy_chunks(constraint, masks, can_extend=None):
    """Fig. 9 lines 6-20 on codes 0..d-1 given in line-5 order.

    ``constraint[t]``: constraint id of code t or -1; ``masks[t]``: bit c set when the pair
    {t, c} occurs in 1..k-1 records (t and c may never share a chunk when m >= 2);
    ``can_extend(cur, t)``: the full k^m test of T_cur + {t} beyond pairs (m >= 3), or None.
    Returns the chunk index of each code.
    """
    d = len(constraint)
    if can_extend is None and not any(masks):
        return [0] * d                    # every code fits with every other: one chunk
    chunk = [-1] * d
    remaining = list(range(d))
    n_chunks = 0
    while remaining:
        cur, cur_mask = [], 0
        for t in remaining:                                        # lines 10-14
            if masks[t] & cur_mask:
                continue
            if can_extend is not None and cur and not can_extend(cur, t):
                continue
            cur.append(t)
            cur_mask |= 1 << t
        first = constraint[cur[0]]                                 # lines 15-17
        unassigned = Counter(constraint[t] for t in remaining if constraint[t] >= 0)
        added = Counter(constraint[t] for t in cur if constraint[t] >= 0)
        cur = [t for t in cur if constraint[t] < 0 or constraint[t] == first
               or added[constraint[t]] == unassigned[constraint[t]]]
        for t in cur:                                              # lines 18-20
            chunk[t] = n_chunks
        n_chunks += 1
        remaining = [t for t in remaining if chunk[t] < 0]
    return chunk


def _extension_test(matrix, k, m):
    """Line 12 for m >= 3: the records having t, projected on T_cur, are k^(m-1)-anonymous
    (pairs {t, c} are already excluded through the masks)."""
    def can_extend(cur, t):
        rows = matrix[:, t]
        return itemsets.is_km_anonymous(matrix[rows][:, cur], k, m - 1)
    return can_extend


def _fig9_order(pair_group, pair_code, pair_support, constraint_of_code):
    """Row indices in Fig. 9 line-5 order within each group: constraint groups by decreasing
    support of their first (most frequent) code, codes of a group by decreasing support;
    a code in no constraint is a group of its own; ties go to the smaller code id."""
    constraint = constraint_of_code[pair_code]
    n_constraints = int(constraint_of_code.max()) + 1 if constraint_of_code.size else 0
    member = np.where(constraint >= 0, constraint, n_constraints + pair_code)
    by_member = np.lexsort((pair_code, -pair_support, member, pair_group))
    g, mem = pair_group[by_member], member[by_member]
    head = np.r_[True, (g[1:] != g[:-1]) | (mem[1:] != mem[:-1])]
    run = np.cumsum(head) - 1
    lead_support = np.empty(pair_code.size, dtype=np.int64)
    lead_code = np.empty(pair_code.size, dtype=np.int64)
    lead_support[by_member] = pair_support[by_member][head][run]
    lead_code[by_member] = pair_code[by_member][head][run]
    return np.lexsort((pair_code, -pair_support, member, lead_code, -lead_support, pair_group))
