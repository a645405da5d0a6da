"""A re-release of a growing source by disassociation keeps the earlier release's clusters.

Why: 003's clusters are not crowds of k (k^m bounds the supports of itemsets, not who is in
a cluster), so the composition rule (log/composition.py, rule (b)) refuses any regrouping of
records already released. HORPART over the grown table splits differently, and refining's
shared chunks join neighbouring clusters, so a fresh run regroups almost every month.

What is kept: every record of an earlier cluster (kept_groups.split: only whole clusters)
stays in it, and the clusters keep their order, so VERPART makes the same record chunks and
item chunks. Refining runs inside *segments*: runs of consecutive clusters refined apart.
The earlier release's segments are kept as they were (the same clusters, codes and order:
the same shared chunks), and the new records, clustered among themselves by HORPART, form
one more segment. Every shared chunk so lies within the old records or within the new ones:
read together, the two releases differ by the new segment alone, itself k^m-anonymous.

A record whose codes changed since (or a kept cluster's records that do not make the same
chunks any more) would change what its cluster publishes: each segment's digest -- of what
it publishes, in labels, order-free, so it tells a reader nothing the release does not --
is logged with the release (metrics "kept") and compared on the next re-release; a
mismatch is refused, without falling back to a fresh clustering (which could rebuild the
same clusters and publish the change).
"""
import hashlib
import json
from dataclasses import dataclass

import numpy as np

from ...errors import DeidError, PRIVACY_MODEL_UNSATISFIABLE
from .. import kept_groups
from ..kept_groups import digest, label_hashes, mix, mixed
from .horpart import HorizontalPartition, horpart
from .itemsets import take_records
from .refine import Occurrences, Pairs, SharedChunks, refine

CHANGED = "a released record's codes changed since an earlier release"
CHANGED_HINT = ("A record's codes changed, or a record was deleted, since the earlier release "
                "whose clusters this one keeps: release the records that did not change, or "
                "ask for a fresh clustering (options.regroup), which the composition rule judges.")
FEW_NEW = "fewer than k records are new since the earlier release"
FEW_NEW_HINT = ("Release again once at least k records have been added, or ask for a fresh "
                "clustering (options.regroup), which the composition rule judges.")


@dataclass(frozen=True)
class Kept:
    """The clusters a re-release keeps, as disassociate() takes them."""
    group: np.ndarray       # int64 per record: its kept cluster 0..n_kept-1, or -1 (new)
    segment: np.ndarray     # int64 per kept cluster: its refining segment (non-decreasing)
    digests: tuple          # the earlier release's digest per segment (str), in order
    whole: bool = True      # every earlier cluster is here (none lost a record or vanished)

    @property
    def n_kept(self):
        return int(self.segment.size)


def parameters_key(k, m, max_cluster_size, utility):
    """What decides the chunks of a cluster besides its records: a re-release keeps clusters
    only of an earlier release made with the same key."""
    text = json.dumps([int(k), int(m), int(max_cluster_size), utility or []], sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def kept_of(rid, earlier, key):
    """The Kept of the records `rid` against the earlier release `earlier`
    (kept_groups.KeptGroups, with its logged segments) -- None when there is nothing to keep
    or the earlier release was made with other parameters (another key)."""
    logged = getattr(earlier, "logged", None) or {}
    if earlier is None or logged.get("key") != key:
        return None
    s = kept_groups.split(rid, earlier)
    if s.n_kept == 0:
        return None
    runs = [int(n) for n, _ in logged.get("runs", [])]
    # the segment of each earlier label (labels are the cluster ids 1..n, in release order)
    bounds = np.cumsum(runs)
    present = np.unique(kept_groups.labels_of(rid, earlier)[s.group >= 0])
    segment = np.searchsorted(bounds, present - 1, side="right").astype(np.int64)
    return Kept(s.group, segment, tuple(d for _, d in logged.get("runs", [])),
                present.size == np.unique(earlier.labels).size)


def check_counts(kept, k):
    """Fewer than k new records cannot make a cluster of their own (refused: the rows wait
    for the next release). A fresh clustering is not tried: it would put released records in
    a cluster with fewer than k new ones, or regroup them, which the rule refuses."""
    fresh = int(np.count_nonzero(kept.group < 0))
    if 0 < fresh < k:
        e = DeidError(PRIVACY_MODEL_UNSATISFIABLE, FEW_NEW, hint=FEW_NEW_HINT,
                      data_dependent=True)
        e.no_fresh_grouping = True
        raise e


def check_unchanged(kept, digests):
    """Every kept segment publishes what it published before (digests: this run's, per
    segment); else refused, with no fresh clustering after."""
    n_old = len(kept.digests)
    same = n_old <= len(digests) and tuple(digests[:n_old]) == kept.digests and \
        (kept.segment.size == 0 or int(kept.segment.max()) < n_old)
    if not same:
        e = DeidError(PRIVACY_MODEL_UNSATISFIABLE, CHANGED if kept.whole else kept_groups.MISSING,
                      hint=CHANGED_HINT, data_dependent=True)
        e.no_fresh_grouping = True
        raise e


# ------------------------------------------------------------------ clusters and segments

def partition(offsets, codes, n_codes, k, max_cluster_size, constraint_of_code, kept):
    """HORPART, or for a re-release (``kept``) the kept clusters first, in their order, then
    HORPART over the new records alone; and the refining segment of each cluster."""
    if kept is None or kept.n_kept == 0:
        part = horpart(offsets, codes, n_codes, k, max_cluster_size, constraint_of_code)
        return part, np.zeros(part.n_clusters, np.int64)
    group = np.asarray(kept.group, np.int64)
    old = np.flatnonzero(group >= 0)
    old = old[np.argsort(group[old], kind="stable")]
    sizes = [np.bincount(group[old], minlength=kept.n_kept)]
    orders = [old]
    new = np.flatnonzero(group < 0)
    if new.size:
        sub_offsets, sub_codes = take_records(offsets, codes, new)
        p = horpart(sub_offsets, sub_codes, n_codes, k, max_cluster_size, constraint_of_code)
        orders.append(new[p.record_order])
        sizes.append(np.diff(p.cluster_start))
    order, size = np.concatenate(orders), np.concatenate(sizes).astype(np.int64)
    cluster_of_record = np.empty(order.size, np.int64)
    cluster_of_record[order] = np.repeat(np.arange(size.size, dtype=np.int64), size)
    top = int(kept.segment.max()) + 1 if kept.segment.size else 0
    segment = np.r_[kept.segment, np.full(size.size - kept.n_kept, top)].astype(np.int64)
    return HorizontalPartition(cluster_of_record, order, np.r_[0, np.cumsum(size)]), segment


def refine_segments(cluster_start, occ, pairs, D, k, m, constraint_of_code,
                    max_joint_clusters, segment):
    """refine() on each run of clusters of one segment apart (a kept segment makes the
    shared chunks it made before); shared chunks numbered segment after segment."""
    cuts = np.r_[0, np.flatnonzero(np.diff(segment)) + 1, segment.size]
    if cuts.size <= 2:
        return refine(cluster_start, occ, pairs, D, k, m, constraint_of_code,
                      max_joint_clusters)
    pair_shared = np.full(pairs.cluster.size, -1, np.int64)
    pieces, n_shared = [], 0
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        pa, pb = np.searchsorted(pairs.cluster, [a, b])
        oa, ob = np.searchsorted(occ.position, cluster_start[[a, b]])
        sub_occ = Occurrences(occ.position[oa:ob] - cluster_start[a], occ.code[oa:ob],
                              occ.pair[oa:ob] - pa)
        sub_pairs = Pairs(pairs.cluster[pa:pb] - a, pairs.code[pa:pb], pairs.support[pa:pb],
                          pairs.chunk[pa:pb])
        got, shared = refine(cluster_start[a:b + 1] - cluster_start[a], sub_occ, sub_pairs, D,
                             k, m, constraint_of_code, max_joint_clusters)
        pair_shared[pa:pb] = np.where(got >= 0, got + n_shared, -1)
        pieces.append(shared.with_clusters(shared.cluster_ids + a))
        n_shared += shared.n_shared
    return pair_shared, SharedChunks.joined(pieces)


# ------------------------------------------------------------------ digests
def _set_sums(offsets, codes, lab):
    """Per subrecord: the wrapping sum of its codes' mixed label hashes (order-free)."""
    values = mix(lab[np.asarray(codes, np.int64)]) if len(codes) else np.zeros(0, np.uint64)
    out = np.zeros(len(offsets) - 1, np.uint64)
    with np.errstate(over="ignore"):
        np.add.at(out, np.repeat(np.arange(out.size), np.diff(offsets)), values)
    return out


def segment_digests(r, segment_of_cluster, chunk_local, labels):
    """The digest of what each segment publishes (its clusters' sizes, record chunks, item
    chunks and shared chunks), with clusters numbered within their segment; one str per
    segment, in segment order. `r`: a DisassociationResult; `chunk_local`: each record
    chunk's id within its cluster."""
    seg = np.asarray(segment_of_cluster, np.int64)
    n_seg = int(seg.max()) + 1 if seg.size else 0
    first = np.r_[0, np.flatnonzero(np.diff(seg)) + 1] if seg.size else np.zeros(0, np.int64)
    start = first[np.searchsorted(first, np.arange(seg.size), side="right") - 1] \
        if seg.size else first
    local = np.arange(seg.size) - start                    # a cluster's index in its segment
    lab = label_hashes(labels)
    parts = [(seg, mixed(1, local, r.cluster_size))]
    per_chunk = np.diff(r.chunk_subrecords)
    sub_chunk = np.repeat(np.arange(per_chunk.size), per_chunk)
    sub_cluster = np.asarray(r.chunk_cluster, np.int64)[sub_chunk]
    parts.append((seg[sub_cluster], mixed(2, local[sub_cluster], np.asarray(chunk_local)[sub_chunk],
                                       _set_sums(r.subrecord_offsets, r.subrecord_codes, lab))))
    item_cluster = np.repeat(np.arange(seg.size), np.diff(r.item_offsets))
    parts.append((seg[item_cluster], mixed(3, local[item_cluster],
                                        lab[np.asarray(r.item_codes, np.int64)])))
    parts.append(_shared_parts(r, seg, local, lab))
    return [digest(np.sort(np.concatenate([h[s == i] for s, h in parts])))
            for i in range(n_seg)]


def _shared_parts(r, seg, local, lab):
    """(segment, element hash) of each stored subrecord of a shared chunk: its joint
    cluster (local ids) and its codes (a joint cluster's chunks have disjoint domains)."""
    span = np.diff(r.shared_cluster_offsets)
    ids = np.asarray(r.shared_cluster_ids, np.int64)
    owner = np.repeat(np.arange(span.size), span)
    joint = np.zeros(span.size, np.uint64)
    with np.errstate(over="ignore"):
        np.add.at(joint, owner, mix(local[ids].astype(np.uint64) + np.uint64(7)))
    chunk_seg = np.full(span.size, -1, np.int64)
    chunk_seg[owner] = seg[ids]
    n_sub = np.diff(r.shared_subrecords)
    sub_owner = np.repeat(np.arange(span.size), n_sub)
    sums = _set_sums(r.shared_subrecord_offsets, r.shared_subrecord_codes, lab)
    return chunk_seg[sub_owner], mixed(4, joint[sub_owner], sums)


