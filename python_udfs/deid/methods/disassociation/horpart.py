"""HORPART (003 Fig. 8): split the records into clusters of similar diagnosis codes.

A part D of more than ``max_cluster_size`` records is split on a code a into D1 (records with
a) and D2 (the rest); D1 continues with a ignored and the utility constraint u of a, D2 with
no constraint.  The code is chosen as in Fig. 8 lines 3-10: the most frequent code of u, else
the most frequent code of any constraint (u becomes its constraint), else the most frequent
code.

Implementation: the recursion runs level by level over all open parts at once with numpy
(supports of every (part, code) from one bincount), and within a level each part's chain of
D2 splits is followed to its end: D2's supports are D's minus D1's, so a split costs only the
occurrences of the records it peels off (a level-by-level recursion re-reads every D2 at each
depth, ~40x the data on INFORMS-like input).  No Python loop runs over records or parts; the
clusters are those of the plain recursion (the tests compare with a literal Fig. 8).

Lower bound (not in 003): no cluster has fewer than k records.
  * A split is accepted only if both sides keep >= k records: the chosen code is the most
    frequent one, in the tier order above, whose support s satisfies k <= s <= |D| - k.  A
    code held by every record of D is skipped: it is either in ``ignore`` already (every
    record of D1 has the codes it was split on) or a split on it would leave D2 empty, which
    Fig. 8 turns into an empty cluster.
  * A part with no such code and more than ``max_cluster_size`` records is cut into
    q = min(ceil(|D| / max_cluster_size), floor(|D| / k)) pieces of near-equal size (records in
    lexicographic order of their codes, so records sharing leading codes stay together).
  Proof that every cluster has >= k records: the input has n >= k records; an accepted split
  gives two parts of >= k records; a cut gives q <= |D| / k pieces of size >= floor(|D| / q)
  >= k.  A part becomes a cluster when it has <= max_cluster_size records, when q <= 1, or as
  a piece of a cut, so every cluster descends from the input through these steps only.
  Upper bound: a cluster has at most max(max_cluster_size, 2k - 1) records (pieces of a cut
  with q = floor(|D| / k) < ceil(|D| / max_cluster_size) have at most 2k - 1 records, and no
  part below 2k records can be split).

Other deviations: a part is a cluster when |D| <= max_cluster_size (Fig. 8 line 2 says
``<``; the parameter is a maximum).  Ties between codes of equal support go to the smaller
code id.  Choosing a code never changes u to the constraint of a code held by every record
(Fig. 8 would, through a split with an empty D2).

The clusters are numbered in depth-first order of the splits (D1 before D2), so consecutive
clusters were separated late: refining (refine.py) joins consecutive clusters.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .itemsets import take_records


@dataclass
class HorizontalPartition:
    cluster_of_record: np.ndarray   # int64 (n_records,): cluster of each input record
    record_order: np.ndarray        # int64 (n_records,): record ids grouped by cluster
    cluster_start: np.ndarray       # int64 (n_clusters + 1,): cluster c is
    #                                 record_order[cluster_start[c]:cluster_start[c + 1]]

    @property
    def n_clusters(self):
        return self.cluster_start.size - 1


def horpart(offsets, codes, n_codes, k, max_cluster_size, constraint_of_code):
    """003 Fig. 8 with a lower bound of k records per cluster (module docstring).

    ``offsets``/``codes``: validated CSR records (int64); ``constraint_of_code``: int64
    (n_codes,), the utility constraint of each code or -1.  Needs n_records >= k >= 2 and
    max_cluster_size >= k.
    """
    n = offsets.size - 1
    D = max(int(n_codes), 1)
    record_len = np.diff(offsets)
    order = np.arange(n, dtype=np.int64)          # records, grouped by part (in DFS order)
    seg_start = np.array([0, n], dtype=np.int64)  # part p is order[seg_start[p]:seg_start[p+1]]
    seg_u = np.array([-1], dtype=np.int64)        # the constraint u of each part, -1 if none
    seg_done = np.array([False])                  # the part is a cluster
    parts_per_block = max(1, _CELL_BUDGET // D)
    records = _Records(offsets, codes, record_len)
    rule = _Rule(constraint_of_code, D, k, max_cluster_size)
    while True:
        sizes = np.diff(seg_start)
        seg_done |= sizes <= max_cluster_size
        active = np.flatnonzero(~seg_done)
        if active.size == 0:
            break
        lens = sizes[active]
        first = _offsets(lens)
        pos = np.arange(first[-1], dtype=np.int64) + np.repeat(seg_start[active] - first[:-1],
                                                               lens)
        recs = order[pos]
        child = np.empty(pos.size, dtype=np.int64)
        kids = []
        for b0 in range(0, active.size, parts_per_block):
            b1 = min(active.size, b0 + parts_per_block)
            p0, p1 = first[b0], first[b1]
            block_child, block_kids = _split_parts(
                records, recs[p0:p1], lens[b0:b1], seg_u[active[b0:b1]], rule)
            child[p0:p1] = block_child
            block_kids[0] += b0
            kids.append(block_kids)
        kid_part, kid_index, kid_size, kid_u, kid_done = (np.concatenate(c) for c in zip(*kids))
        by_kid = np.lexsort((kid_index, kid_part))
        kid_part, kid_size, kid_u, kid_done = (kid_part[by_kid], kid_size[by_kid],
                                               kid_u[by_kid], kid_done[by_kid])
        n_kids = np.bincount(kid_part, minlength=active.size)
        kid_base = _offsets(n_kids)[:-1]
        part_of_pos = np.repeat(np.arange(active.size, dtype=np.int64), lens)
        order[pos] = recs[np.argsort(kid_base[part_of_pos] + child, kind="stable")]

        # the new part list: untouched parts, and the children of the active ones in place
        n_children = np.ones(sizes.size, dtype=np.int64)
        n_children[active] = n_kids
        in_active = np.repeat(~seg_done, n_children)
        new_sizes = np.repeat(sizes, n_children)
        new_sizes[in_active] = kid_size
        seg_u = np.repeat(seg_u, n_children)
        seg_u[in_active] = kid_u
        seg_done = np.repeat(seg_done, n_children)
        seg_done[in_active] = kid_done
        seg_start = _offsets(new_sizes)

    cluster_of_position = np.repeat(np.arange(seg_start.size - 1, dtype=np.int64),
                                    np.diff(seg_start))
    cluster_of_record = np.empty(n, dtype=np.int64)
    cluster_of_record[order] = cluster_of_position
    return HorizontalPartition(cluster_of_record=cluster_of_record, record_order=order,
                               cluster_start=seg_start)


# (part x code) support cells held at once
_CELL_BUDGET = 1 << 22


class _Records(NamedTuple):
    """The validated CSR records and each record's length."""
    offsets: np.ndarray
    codes: np.ndarray
    length: np.ndarray


class _Rule(NamedTuple):
    """What a split may do: each code's utility constraint (or -1), the code count D, the
    least records per side k and the most records of a cluster."""
    constraint_of_code: np.ndarray
    D: int
    k: int
    max_size: int


class _Level(NamedTuple):
    """A block of parts at one level: each position's part, the positions' records as CSR
    (their occurrences), and the inverted index of the (part, code) keys."""
    part_of_pos: np.ndarray
    occ_offsets: np.ndarray
    occ_codes: np.ndarray
    key_start: np.ndarray             # where the positions of (code, part) start in pos_by_key
    pos_by_key: np.ndarray            # the positions by code, then part (code * B + part)


def _split_parts(records, recs, lens, part_u, rule):
    """One level of Fig. 8 for a block of parts, following each part's D2 chain to its end.

    Splitting D on a gives D1 (recursed into later, u = constraint of a) and D2, which is
    split again at once with u = {} (Fig. 8 line 13): D2's supports are D's minus D1's, so
    every step costs only the occurrences of the records it peels off.  The chain ends when
    the rest has <= max_size records (a cluster) or no code can split it (it is cut).
    Returns (child index of each position within its part, children table: part, index,
    size, u, final), children in depth-first order.
    """
    B, D = lens.size, rule.D
    part_of_pos = np.repeat(np.arange(B, dtype=np.int64), lens)
    occ_offsets, occ_codes = take_records(records.offsets, records.codes, recs)
    occ_pos = np.repeat(np.arange(recs.size, dtype=np.int64), records.length[recs])
    occ_key = part_of_pos[occ_pos] * D + occ_codes
    all_support = np.bincount(occ_key, minlength=B * D)
    del occ_key
    # inverted index: positions by (code, part). The occurrences come with their parts in
    # order, so a stable sort by the code alone groups them by (code, part): a counting
    # (radix) sort of 16-bit codes, not a comparison sort of (part, code) keys; each group
    # starts where the counts of the (code, part) cells before it end
    by_code = np.argsort(occ_codes.astype(np.uint16) if D <= 1 << 16 else occ_codes,
                         kind="stable")
    key_start = _offsets(all_support.reshape(B, D).T.ravel())
    level = _Level(part_of_pos, occ_offsets, occ_codes, key_start, occ_pos[by_code])
    del occ_pos, by_code                             # (peak memory: the level's largest arrays)
    out = _Children(remaining=lens.copy(), child=np.full(recs.size, -1, dtype=np.int64),
                    n_peeled=np.zeros(B, dtype=np.int64), kids=[[], [], [], [], []])
    _peel_chains(records, recs, level, all_support, part_u.copy(), rule, out)
    del all_support
    _cut_rests(level, out, rule)
    return out.child, [np.concatenate(c) for c in out.kids]


class _Children(NamedTuple):
    """What a level's splits build, in place: records left in each part, the child of each
    position (-1: not yet), children per part, the children table (part, index, size, u,
    final)."""
    remaining: np.ndarray
    child: np.ndarray
    n_peeled: np.ndarray
    kids: list


def _peel_chains(records, recs, level, all_support, u, rule, out):
    """Follow every part's chain of D2 splits (``out``: :class:`_Children`, in place)."""
    D, k, max_size, constraint_of_code = rule.D, rule.k, rule.max_size, rule.constraint_of_code
    remaining, child, n_peeled, kids = out.remaining, out.child, out.n_peeled, out.kids
    B = remaining.size
    part_of_pos = level.part_of_pos
    constrained = constraint_of_code >= 0
    chaining = np.flatnonzero(remaining > max_size)  # parts still being split
    support = all_support.reshape(B, D)[chaining]
    row_of_part = np.full(B, -1, dtype=np.int64)
    while chaining.size:
        chosen = _choose_codes(support, remaining[chaining], u[chaining],
                               constraint_of_code, constrained, k)
        rows = np.flatnonzero(chosen >= 0)
        if rows.size == 0:
            break
        go, a = chaining[rows], chosen[rows]
        lo, hi = level.key_start[a * B + go], level.key_start[a * B + go + 1]
        at = np.arange(hi.sum() - lo.sum(), dtype=np.int64) + np.repeat(lo - _offsets(
            hi - lo)[:-1], hi - lo)
        peel = level.pos_by_key[at]
        peel = peel[child[peel] < 0]                 # records with a still in the part
        child[peel] = n_peeled[part_of_pos[peel]]
        size = support[rows, a]
        for col, val in zip(kids, (go, n_peeled[go], size, constraint_of_code[a],
                                   np.zeros(go.size, dtype=bool))):
            col.append(val)
        n_peeled[go] += 1
        remaining[go] -= size
        u[go] = -1
        # D2's supports: subtract the peeled records' codes
        row_of_part[chaining] = np.arange(chaining.size)
        p_len = records.length[recs[peel]]
        p_occ = np.arange(p_len.sum(), dtype=np.int64) + np.repeat(
            level.occ_offsets[peel] - _offsets(p_len)[:-1], p_len)
        cell = np.repeat(row_of_part[part_of_pos[peel]], p_len) * D + level.occ_codes[p_occ]
        support -= np.bincount(cell, minlength=support.size).reshape(support.shape)
        keep = rows[remaining[go] > max_size]
        chaining, support = chaining[keep], support[keep]


def _cut_rests(level, out, rule):
    """The rest of each part: a cluster, or cut into q pieces when no code could split it
    (``out``: :class:`_Children`, in place)."""
    n_rest, child, n_peeled, kids = out.remaining, out.child, out.n_peeled, out.kids
    B, k, max_size = n_rest.size, rule.k, rule.max_size
    rest = np.flatnonzero(child < 0)
    rest_part = level.part_of_pos[rest]
    pieces = np.where(n_rest > max_size,
                      np.maximum(np.minimum(-(-n_rest // max_size), n_rest // k), 1), 1)
    local = np.zeros(rest.size, dtype=np.int64)
    cut = pieces[rest_part] >= 2
    if cut.any():
        cut_pos = rest[cut]
        local_rank = _lexicographic_rank(level.occ_offsets, level.occ_codes, cut_pos,
                                         rest_part[cut], rule.D)
        part = rest_part[cut]
        local[cut] = local_rank * pieces[part] // n_rest[part]
    child[rest] = n_peeled[rest_part] + local
    kid_part = np.repeat(np.arange(B, dtype=np.int64), pieces)
    kid_piece = np.arange(kid_part.size) - np.repeat(_offsets(pieces)[:-1], pieces)
    piece_of_rest = _offsets(pieces)[rest_part] + local
    kid_size = np.bincount(piece_of_rest, minlength=int(pieces.sum()))
    for col, val in zip(kids, (kid_part, n_peeled[kid_part] + kid_piece, kid_size,
                               np.full(kid_part.size, -1, dtype=np.int64),
                               np.ones(kid_part.size, dtype=bool))):
        col.append(val)


def _choose_codes(support, n_rec, seg_u, constraint_of_code, constrained, k):
    """Fig. 8 lines 3-10 for several parts (rows of the dense part x code ``support``): the
    code to split on, or -1 when no code leaves >= k records on both sides.  Order: tier (u's
    codes, then constrained codes, then any), then support (decreasing), then code id."""
    ok = (support >= k) & (support <= (n_rec - k)[:, None])
    in_u = (seg_u[:, None] >= 0) & (constraint_of_code[None, :] == seg_u[:, None])
    rank = np.where(in_u, 2, constrained[None, :].astype(np.int64))
    score = np.where(ok, rank * (int(n_rec.max()) + 1) + support, -1)
    best = np.argmax(score, axis=1)
    chosen = np.where(score[np.arange(best.size), best] >= 0, best, -1)
    return chosen


def _offsets(counts):
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _lexicographic_rank(occ_offsets, occ_codes, cut_pos, part_of_cut, D):
    """Rank, within its part, of each of ``cut_pos`` (sorted, grouped by part) when the records
    of a part are sorted by their first three codes (a missing code sorts last)."""
    lengths = np.diff(occ_offsets)[cut_pos]
    keys = []
    for j in range(3):
        present = lengths > j
        col = np.full(cut_pos.size, D, dtype=np.int64)
        col[present] = occ_codes[occ_offsets[cut_pos[present]] + j]
        keys.append(col)
    width = D + 1
    if (int(part_of_cut[-1]) + 1) * width ** 3 < 2 ** 62:
        # one composite key, sorted stably (cut_pos ascends): the order of the lexsort below
        key = ((part_of_cut * width + keys[0]) * width + keys[1]) * width + keys[2]
        order = np.argsort(key, kind="stable")
    else:
        order = np.lexsort((cut_pos, keys[2], keys[1], keys[0], part_of_cut))
    rank = np.empty(cut_pos.size, dtype=np.int64)
    rank[order] = np.arange(cut_pos.size, dtype=np.int64)
    return rank - np.searchsorted(part_of_cut, part_of_cut)
