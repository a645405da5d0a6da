"""A reconstruction that keeps utility constraints together (beyond 003): one data set D' of
I(D^A) (003 Fig. 5) in which, per cluster, the pieces of the release that hold codes of one
utility constraint (003 Sec. 3.1; e.g. one ICD-9 3-digit category) land on the same record
where the release allows it.

Why: VERPART keeps a constraint's codes in one chunk when it can, but k^m-anonymity splits a
record's same-constraint codes across chunks when the pair is rarer than k in its cluster (a
code in a record chunk and a rare one in the item or a shared chunk).  The random deal of
003 Fig. 5 then gives the two halves to different records and over-counts the records that
match the constraint (003 Def. 3, MRE below zero).  Every D' consistent with the release is
an equally valid reading of it (003 Sec. 4), so one that co-locates the halves is as private
as the random one and keeps the constraint's count.

The draw (pure numpy, no SQL; the same release, policy and seed give the same D'):
  1. the random deal of :func:`disassociate.draw_slots` with ``numpy.random.default_rng(seed)``;
  2. a constraint is *split* in a cluster when its codes are in two or more pieces reachable
     from it: record chunks of the cluster, the shared subrecords the deal put into it
     (grouped by shared chunk), and item-chunk codes (each code a piece).  Clusters without
     a split constraint keep the random deal;
  3. per cluster with one, a greedy matching: its record chunks, the one with most
     subrecords holding a split constraint first (its random deal kept), then the others,
     then the shared groups: each subrecord holding split constraints, most constraints
     first, goes to the free record that holds most of them already (random among ties);
     the remaining subrecords go to the remaining free records at random (a record chunk
     stays a bijection onto the cluster's records, a shared group goes to distinct records);
  4. each item-chunk code of a split constraint goes to a record holding the constraint
     (random among ties), the others stay where the deal put them (one record each).
Shared subrecords keep the cluster the random deal chose.  Every piece is used exactly once,
so D' is consistent with the release (tests/unit/disassociation/test_constrained_reconstruction.py checks
it on random, tie-heavy, skewed and degenerate releases).
"""
import numpy as np

from ..errors import DeidError, INVALID_PARAMETER_VALUE
from ..methods.disassociation.disassociate import Slots, assemble, check_int, draw_slots


def constrained_reconstruct(result, seed, constraint_of_code, colocate=1.0):
    """D' of the disassociated release ``result`` (the arrays of DisassociationResult) with
    the pieces of each utility constraint co-located per cluster (module docstring).
    ``constraint_of_code``: int64 (n_codes,), the constraint of each code or -1;
    ``colocate``: the probability in [0, 1] that a piece of a split constraint follows its
    constraint (0: the random deal of 003 Fig. 5, 1: every piece).  Item-chunk codes go on
    one record each (``reconstruct``'s default)."""
    seed = check_int(seed, "seed", 0, "the seed of the reconstruction")
    if isinstance(colocate, bool) or not isinstance(colocate, (int, float, np.floating)) \
            or not 0.0 <= colocate <= 1.0:
        raise DeidError(INVALID_PARAMETER_VALUE, "colocate must be a number in [0, 1]",
                        hint="0 deals the chunks at random (003 Fig. 5); 1 puts the pieces of "
                             "one utility constraint on one record wherever the release allows")
    rng = np.random.default_rng(seed)
    slots = draw_slots(result, rng, "one")
    size = np.asarray(result.cluster_size, dtype=np.int64)
    occ = _occurrences(result, slots, np.asarray(constraint_of_code, dtype=np.int64), size)
    if occ is None or colocate <= 0:
        return assemble(result, slots)
    start = np.r_[0, np.cumsum(size)].astype(np.int64)
    sub, shared, item = slots.subrecord.copy(), slots.shared.copy(), slots.item.copy()
    chunk_first = np.asarray(result.chunk_subrecords, dtype=np.int64)
    members = _shared_groups(result, slots.shared, size)
    # one segment per (cluster, piece): record chunks of a cluster most-loaded first
    cluster, kind, index, piece, col = occ
    seg_key = np.r_[True, (cluster[1:] != cluster[:-1]) | (piece[1:] != piece[:-1])]
    seg_start = np.flatnonzero(seg_key)
    seg_end = np.r_[seg_start[1:], cluster.size]
    seg_cluster, seg_kind, seg_piece = cluster[seg_start], kind[seg_start], piece[seg_start]
    distinct = np.r_[True, seg_key[1:] | (index[1:] != index[:-1])]
    weight = np.add.reduceat(distinct.astype(np.int64), seg_start)
    order = np.lexsort((seg_piece, -weight, seg_kind, seg_cluster))
    anchor = np.zeros(seg_start.size, dtype=bool)
    head = np.r_[True, seg_cluster[order][1:] != seg_cluster[order][:-1]]
    anchor[order[head & (seg_kind[order] == 0)]] = True     # its random deal is kept
    width = np.zeros(size.size, dtype=np.int64)
    np.maximum.at(width, cluster, col + 1)
    n_chunks = chunk_first.size - 1
    held, current = None, -1
    for g in order.tolist():
        c, kd, lo, hi = int(seg_cluster[g]), int(seg_kind[g]), int(seg_start[g]), int(seg_end[g])
        n, base = int(size[c]), int(start[c])
        if c != current:
            held, current = np.zeros((n, int(width[c])), dtype=bool), c
        if kd == 2:
            u = int(col[lo])
            score = 0.5 * rng.random(n)
            if rng.random() < colocate:
                score += held[:, u]
            r = int(np.argmax(score))
            item[index[lo]] = base + r
            held[r, u] = True
            continue
        if kd == 0:
            j = int(seg_piece[g])
            ids = np.arange(chunk_first[j], chunk_first[j + 1])
        else:
            ids = members[(c, int(seg_piece[g]) - n_chunks)]
        sig = np.zeros((ids.size, held.shape[1]), dtype=bool)
        sig[np.searchsorted(ids, index[lo:hi]), col[lo:hi]] = True
        if anchor[g]:
            local = sub[ids] - base
        else:
            local = _greedy(sig, held, rng, colocate)
            if kd == 0:
                sub[ids] = base + local
            else:
                shared[ids] = base + local
        held[local] |= sig
    return assemble(result, Slots(sub, shared, item, slots.item_code))


def _shared_groups(result, shared_slot, size):
    """{(cluster, shared chunk): the ids (ascending) of its subrecords the deal put there}."""
    if not shared_slot.size:
        return {}
    cluster = np.repeat(np.arange(size.size), size)[shared_slot]
    owner = np.repeat(np.arange(result.n_shared), np.diff(result.shared_subrecords))
    order = np.lexsort((np.arange(owner.size), owner, cluster))
    key = cluster[order] * max(result.n_shared, 1) + owner[order]
    head = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.r_[head[1:], key.size]
    return {(int(cluster[order[h]]), int(owner[order[h]])): order[h:e]
            for h, e in zip(head.tolist(), ends.tolist())}


def _greedy(sig, held, rng, colocate):
    """Distinct records (rows of ``held``) for the subrecords (rows of ``sig``): those holding
    constraints, most first, each with probability ``colocate`` to the free record sharing
    most of them (random among ties, else a random free record), the others to the
    remaining free records at random."""
    n = held.shape[0]
    out = np.full(sig.shape[0], -1, dtype=np.int64)
    count = sig.sum(axis=1)
    rel = np.flatnonzero(count)
    rel = rel[np.lexsort((rng.random(rel.size), -count[rel]))]
    follow = rng.random(rel.size) < colocate
    score = (sig[rel].astype(np.int64) @ held.T.astype(np.int64)) * follow[:, None] \
        + 0.5 * rng.random((rel.size, n))
    for t, i in enumerate(rel.tolist()):
        r = int(np.argmax(score[t]))
        out[i] = r
        score[:, r] = -1.0
    free = np.ones(n, dtype=bool)
    free[out[rel]] = False
    rest = np.flatnonzero(out < 0)
    out[rest] = rng.permutation(np.flatnonzero(free))[:rest.size]
    return out


def _occurrences(result, slots, constraint_of_code, size):
    """The occurrences of split constraints as arrays sorted by cluster: (cluster, kind
    (0 record-chunk subrecord, 1 shared subrecord, 2 item code), index of the subrecord or
    item code, piece (chunk, shared chunk or item code), column of the constraint in its
    cluster); None when no constraint is split anywhere."""
    cluster_of_record = np.repeat(np.arange(size.size, dtype=np.int64), size)
    sub_off = np.asarray(result.subrecord_offsets, dtype=np.int64)
    n_sub = sub_off.size - 1
    chunk_of_sub = np.repeat(np.arange(result.chunk_cluster.size),
                             np.diff(result.chunk_subrecords))
    sub_of_occ = np.repeat(np.arange(n_sub), np.diff(sub_off))
    sh_off = np.asarray(result.shared_subrecord_offsets, dtype=np.int64)
    sh_owner = np.repeat(np.arange(result.n_shared), np.diff(result.shared_subrecords))
    sh_of_occ = np.repeat(np.arange(sh_off.size - 1), np.diff(sh_off))
    item_cluster = np.repeat(np.arange(size.size), np.diff(result.item_offsets))
    n_items = item_cluster.size
    n_chunks = result.chunk_cluster.size
    cluster = np.concatenate([
        np.asarray(result.chunk_cluster, dtype=np.int64)[chunk_of_sub[sub_of_occ]],
        cluster_of_record[slots.shared[sh_of_occ]], item_cluster]).astype(np.int64)
    kind = np.repeat(np.array([0, 1, 2], dtype=np.int64),
                     [sub_of_occ.size, sh_of_occ.size, n_items])
    index = np.concatenate([sub_of_occ, sh_of_occ, np.arange(n_items)]).astype(np.int64)
    piece = np.concatenate([chunk_of_sub[sub_of_occ], n_chunks + sh_owner[sh_of_occ],
                            n_chunks + result.n_shared + np.arange(n_items)]).astype(np.int64)
    code = np.concatenate([result.subrecord_codes, result.shared_subrecord_codes,
                           result.item_codes]).astype(np.int64)
    constraint = constraint_of_code[code] if code.size else code
    keep = constraint >= 0
    cluster, kind, index, piece, constraint = (a[keep] for a in (cluster, kind, index, piece,
                                                                  constraint))
    if not cluster.size:
        return None
    n_u = int(constraint.max()) + 1
    pair = cluster * n_u + constraint
    pieces = np.unique(pair * (piece.max() + 1) + piece) // (piece.max() + 1)
    pair_ids, n_pieces = np.unique(pieces, return_counts=True)
    split = pair_ids[n_pieces >= 2]
    keep = np.isin(pair, split)
    if not keep.any():
        return None
    cluster, kind, index, piece, pair = (a[keep] for a in (cluster, kind, index, piece, pair))
    split_cluster = split // n_u
    col_of_split = np.arange(split.size) - np.searchsorted(split_cluster, split_cluster)
    col = col_of_split[np.searchsorted(split, pair)]
    order = np.lexsort((index, piece, cluster))
    return cluster[order], kind[order], index[order], piece[order], col[order]
