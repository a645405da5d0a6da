"""Disassociation of diagnosis-code sets for k^m-anonymity (paper 003, Loukides et al. 2014).

:func:`disassociate` is DISASSOCIATION (003 Fig. 6):
  1. HORPART (Fig. 8, horpart.py) splits the records into clusters of similar codes;
  2. VERPART (Fig. 9, verpart.py) splits every cluster into k^m-anonymous record chunks and an
     item chunk (codes with support < k in the cluster);
  3. refining (Fig. 10, refine.py) moves codes that are rare in each of several clusters but
     have support >= k together into shared chunks of joint clusters.
Every subrecord list is then shuffled with ``numpy.random.default_rng(seed)``.  Each
(record, code) occurrence ends up in exactly one record chunk, one shared chunk or the item
chunk of the record's cluster.  :func:`reconstruct` draws one data set D' of I(D^A) (Fig. 5).

Guarantee 1 (an attacker knowing up to m codes S of a record r finds >= k candidate records
in some D' in I(D^A)) holds because every cluster has >= k records and every record chunk and
shared chunk is k^m-anonymous: each code of S is in exactly one chunk reachable from r's
cluster P (a record chunk of P, a shared chunk whose joint cluster contains P, or P's item
chunk); each such record or shared chunk has >= k subrecords containing its part of S; and a
D' may deal those subrecords to the same k records of P (a shared chunk's subrecords may go
to any record of its joint cluster) and put S's item-chunk codes on them too.
deid.verify.km re-checks the premises independently; the fuzz tests enumerate
reconstructions of tiny inputs to check the guarantee itself.

Deviations from 003 (details in each module):
  * HORPART: no cluster has fewer than k records (a split must leave >= k records on both
    sides; a part that no code can split so is cut into pieces of >= k records); a part is a
    cluster when |D| <= max_cluster_size (Fig. 8 line 2 says <); clusters may have up to
    max(max_cluster_size, 2k - 1) records; codes held by every record of a part are skipped;
    ties go to the smaller code id.
  * VERPART: lines 15-17 follow the pseudo-code ("not all codes of u"), not the prose, as the
    worked example does; "all codes of u" means those of u still unassigned in the cluster.
  * HORPART: parts that no code can split are cut in lexicographic order of their codes.
  * Refining: 003 does not say how joint clusters are found.  Within aligned blocks of 2, 4,
    8, ... consecutive clusters (HORPART depth-first order), bottom-up, up to
    ``max_joint_clusters`` (default: no limit), the occurrences of a code still in item
    chunks are pooled; once they number >= k, the clusters holding them form its joint
    cluster, and codes with the same joint cluster are split into shared chunks by VERPART.
  * A shared chunk stores its non-empty subrecords only; it stands for one subrecord per
    record of its clusters (the empty ones are implied by the cluster sizes).  Record chunks
    store every subrecord, empty ones included.
  * Codes must be unique within a record: repeated diagnoses are mapped to distinct codes
    beforehand (003 Sec. 7.1).
  * :func:`reconstruct` puts each item-chunk code on one random record of its cluster by
    default (``item_support="uniform"``: on 1..min(k - 1, |P|) records, the supports the
    release allows); 003 allows any non-empty subset.

Inputs are CSR arrays (see :func:`disassociate`); nothing here loops over records in Python.
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...errors import (DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED,
                       PRIVACY_MODEL_UNSATISFIABLE, VERIFICATION_FAILED)
from . import itemsets
from .horpart import horpart
from .kept import partition, refine_segments
from .refine import Occurrences, Pairs, refine
from .verpart import verpart_groups


@dataclass
class DisassociationResult:
    """The disassociated data set D^A as flat arrays (CSR pieces).

    Clusters are 0..n_clusters-1; record chunks 0..n_chunks-1, grouped by cluster, in the
    order VERPART creates them; shared chunks 0..n_shared-1.  Every ``*_offsets`` array has
    one more entry than the things it delimits.
    """
    k: int
    m: int
    n_codes: int
    seed: int
    cluster_of_record: np.ndarray      # int64 (n_records,): membership (audit only)
    cluster_size: np.ndarray           # int64 (n_clusters,)
    chunk_cluster: np.ndarray          # int64 (n_chunks,): cluster of each record chunk
    chunk_domain_offsets: np.ndarray   # int64 (n_chunks + 1,) into chunk_domain_codes
    chunk_domain_codes: np.ndarray     # int64: domain of each record chunk, sorted codes
    chunk_subrecords: np.ndarray       # int64 (n_chunks + 1,): record chunk j holds
    #                                    subrecords chunk_subrecords[j] .. [j + 1] - 1, one
    #                                    per record of its cluster, shuffled, empty included
    subrecord_offsets: np.ndarray      # int64 (n_subrecords + 1,) into subrecord_codes
    subrecord_codes: np.ndarray        # int64: codes of each subrecord, sorted
    item_offsets: np.ndarray           # int64 (n_clusters + 1,) into item_codes
    item_codes: np.ndarray             # int64: item chunk of each cluster, sorted codes
    shared_cluster_offsets: np.ndarray  # int64 (n_shared + 1,) into shared_cluster_ids
    shared_cluster_ids: np.ndarray     # int64: the clusters of each shared chunk
    shared_domain_offsets: np.ndarray  # int64 (n_shared + 1,) into shared_domain_codes
    shared_domain_codes: np.ndarray    # int64: domain of each shared chunk, sorted codes
    shared_subrecords: np.ndarray      # int64 (n_shared + 1,): the non-empty subrecords of
    #                                    shared chunk s, shuffled
    shared_subrecord_offsets: np.ndarray  # int64 (n_shared_subrecords + 1,)
    shared_subrecord_codes: np.ndarray    # int64
    record_ids: Optional[np.ndarray] = None   # ids of the input records, if given
    segment_of_cluster: Optional[np.ndarray] = None  # int64 (n_clusters,): the refining
    #                                    segment of each cluster (kept.py; all 0 without kept)

    @property
    def n_clusters(self):
        return self.cluster_size.size

    @property
    def n_chunks(self):
        return self.chunk_cluster.size

    @property
    def n_shared(self):
        return self.shared_cluster_offsets.size - 1

    def cluster(self, c):
        """Cluster c as plain data: size, record chunks (domain and subrecords as CSR),
        item chunk, and the ids of the shared chunks that cover it."""
        chunks = []
        for j in np.flatnonzero(self.chunk_cluster == c).tolist():
            lo, hi = self.chunk_subrecords[j], self.chunk_subrecords[j + 1]
            offs = self.subrecord_offsets[lo:hi + 1]
            chunks.append({
                "domain": self.chunk_domain_codes[
                    self.chunk_domain_offsets[j]:self.chunk_domain_offsets[j + 1]],
                "offsets": offs - offs[0],
                "codes": self.subrecord_codes[offs[0]:offs[-1]]})
        owner = np.repeat(np.arange(self.n_shared), np.diff(self.shared_cluster_offsets))
        return {"size": int(self.cluster_size[c]), "record_chunks": chunks,
                "item_chunk": self.item_codes[self.item_offsets[c]:self.item_offsets[c + 1]],
                "shared_chunks": owner[self.shared_cluster_ids == c].tolist()}

    def shared_chunk(self, s):
        """Shared chunk s as plain data: clusters, domain, non-empty subrecords as CSR."""
        lo, hi = self.shared_subrecords[s], self.shared_subrecords[s + 1]
        offs = self.shared_subrecord_offsets[lo:hi + 1]
        return {"clusters": self.shared_cluster_ids[
                    self.shared_cluster_offsets[s]:self.shared_cluster_offsets[s + 1]],
                "domain": self.shared_domain_codes[
                    self.shared_domain_offsets[s]:self.shared_domain_offsets[s + 1]],
                "offsets": offs - offs[0],
                "codes": self.shared_subrecord_codes[offs[0]:offs[-1]]}


@dataclass
class Reconstruction:
    offsets: np.ndarray               # int64 (n_records + 1,)
    codes: np.ndarray                 # int64, sorted within each record
    cluster_of_record: np.ndarray     # int64 (n_records,): records are grouped by cluster


def disassociate(offsets, codes, n_codes, k, m, *, max_cluster_size=None, constraints=None,
                 seed=0, record_ids=None, max_joint_clusters=None, kept=None):
    """003 Fig. 6 DISASSOCIATION: a k^m-anonymous disassociated release.

    ``offsets``: int64 (n_records + 1,), ``codes``: integer code ids 0..n_codes-1, sorted
    or not but unique within each record (empty records allowed); ``k`` >= 2, ``m`` >= 1;
    ``max_cluster_size``: HORPART's maxClusterSize (default 2k, 003 footnote 3), >= k;
    ``constraints``: the utility policy U, a list of disjoint lists of code ids; ``seed``:
    the shuffle seed (the same seed gives the same release); ``record_ids``: optional ids of
    the records, kept in the result; ``max_joint_clusters``: joint clusters of refining lie
    in aligned blocks of at most this many clusters (None: no limit; 1: no refining);
    ``kept``: a re-release's kept clusters (kept.Kept): they come first, as they were, the
    new records are clustered among themselves, and refining stays within segments.
    Raises DeidError (SQLSTATE and hint) on bad input, PRIVACY_MODEL_UNSATISFIABLE with fewer
    than k records.
    """
    k, m, n_codes, max_cluster_size, seed, max_joint_clusters = _checked_parameters(
        k, m, n_codes, max_cluster_size, seed, max_joint_clusters)
    offsets, codes = validated_records(offsets, codes, n_codes)
    n = offsets.size - 1
    if record_ids is not None:
        record_ids = np.asarray(record_ids)
        if record_ids.shape != (n,):
            raise DeidError(INVALID_PARAMETER_VALUE, "record_ids must have one id per record",
                            hint="pass the ids in the order of the records")
    if n < k:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE, "the data set has fewer than k records",
                        hint="lower k or release more records", data_dependent=True)
    constraint_of_code = constraint_ids(constraints, n_codes)
    D = max(n_codes, 1)

    part, segment = partition(offsets, codes, n_codes, k, max_cluster_size,
                              constraint_of_code, kept)
    cluster_start = part.cluster_start
    cluster_size = np.diff(cluster_start)
    n_clusters = cluster_size.size
    if n_clusters > (np.iinfo(np.int64).max // D) // 4:
        raise DeidError(INVALID_PARAMETER_VALUE, "too many clusters for the code domain",
                        hint="use fewer distinct codes or a larger max_cluster_size")
    if cluster_size.min() < k:
        raise DeidError(VERIFICATION_FAILED, "HORPART made a cluster with fewer than k records",
                        hint="this is a bug in deid; please report it")
    occ, pairs, cluster_of_position = _cluster_tables(offsets, codes, part.record_order,
                                                      cluster_size, D, k, m,
                                                      constraint_of_code)
    pair_shared, shared = refine_segments(cluster_start, occ, pairs, D, k, m,
                                          constraint_of_code, max_joint_clusters, segment)
    rng = np.random.default_rng(seed)
    rec = _record_chunks(rng, cluster_start, cluster_of_position, occ, pairs)
    shr = _shared_chunks(rng, shared, n, occ, pair_shared)
    item_rows = (pairs.chunk < 0) & (pair_shared < 0)
    return DisassociationResult(
        k=k, m=m, n_codes=n_codes, seed=seed,
        cluster_of_record=part.cluster_of_record, cluster_size=cluster_size,
        item_offsets=_offsets(np.bincount(pairs.cluster[item_rows], minlength=n_clusters)),
        item_codes=pairs.code[item_rows], record_ids=record_ids, segment_of_cluster=segment,
        **rec, **shr)



def _checked_parameters(k, m, n_codes, max_cluster_size, seed, max_joint_clusters):
    """The integer parameters of disassociate, checked (max_cluster_size: 2k by default)."""
    k = check_int(k, "k", 2, "k is the least number of candidate records (003 Def. 1)")
    m = check_int(m, "m", 1, "m is the number of codes an attacker may know (003 Def. 1)")
    n_codes = check_int(n_codes, "n_codes", 0, "the code ids are 0..n_codes-1")
    if max_cluster_size is None:
        max_cluster_size = 2 * k
    max_cluster_size = check_int(max_cluster_size, "max_cluster_size", k,
                                  "HORPART's maxClusterSize must be at least k (003 fn. 3)")
    seed = check_int(seed, "seed", 0, "the seed of the subrecord shuffle")
    if max_joint_clusters is not None:
        max_joint_clusters = check_int(max_joint_clusters, "max_joint_clusters", 1,
                                        "joint clusters of refining join 2..this many clusters")
    return k, m, n_codes, max_cluster_size, seed, max_joint_clusters


def _cluster_tables(offsets, codes, record_order, cluster_size, D, k, m, constraint_of_code):
    """The occurrences of the records in HORPART's cluster order and the (cluster, code) table
    with each code's support and, for the codes of support >= k, its record chunk (VERPART on
    every cluster, Fig. 9); and the cluster of each record position."""
    n = offsets.size - 1
    n_clusters = cluster_size.size
    # occurrences of the records in cluster order
    ordered_offsets, occ_code = itemsets.take_records(offsets, codes, record_order)
    occ_position = itemsets.row_of_occurrence(ordered_offsets)
    cluster_of_position = np.repeat(np.arange(n_clusters, dtype=np.int64), cluster_size)
    occ_key = cluster_of_position[occ_position] * D + occ_code
    sorted_key = np.sort(occ_key)
    head = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]]) \
        if sorted_key.size else np.zeros(0, dtype=np.int64)
    pair_key = sorted_key[head]
    pair_support = np.diff(np.r_[head, sorted_key.size]).astype(np.int64)
    pair_cluster, pair_code = pair_key // D, pair_key % D
    occ_pair = np.searchsorted(pair_key, occ_key)
    del occ_key, sorted_key, head                 # (peak memory)

    # VERPART on every cluster: codes of support >= k go to record chunks (Fig. 9)
    frequent = pair_support >= k
    keep = frequent[occ_pair]
    kept_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(occ_position[keep], minlength=n), out=kept_offsets[1:])
    pair_chunk = np.full(pair_key.size, -1, dtype=np.int64)
    kept_codes = occ_code[keep]
    del keep
    _, _, _, chunk = verpart_groups(cluster_of_position, kept_offsets, kept_codes, D, k, m,
                                    constraint_of_code)
    del kept_codes, kept_offsets
    pair_chunk[frequent] = chunk
    return (Occurrences(occ_position, occ_code, occ_pair),
            Pairs(pair_cluster, pair_code, pair_support, pair_chunk), cluster_of_position)


def reconstruct(result, seed, *, item_support="one"):
    """One data set D' of I(D^A) (003 Fig. 5), as CSR records grouped by cluster.

    Each record chunk's subrecords are dealt to the records of its cluster in a random
    order, each shared chunk's non-empty subrecords to distinct random records of its
    joint cluster, and each item-chunk code to one random record of its cluster
    (``item_support="one"``) or to 1..min(k - 1, |P|) of them, uniformly
    (``"uniform"``).  The same result and seed give the same D'.
    """
    if item_support not in ("one", "uniform"):
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown item_support {item_support!r}",
                        hint="use 'one' or 'uniform'")
    seed = check_int(seed, "seed", 0, "the seed of the reconstruction")
    rng = np.random.default_rng(seed)
    return assemble(result, draw_slots(result, rng, item_support))


@dataclass
class Slots:
    """Where a reconstruction puts every piece of the release: the record (0..n-1, records
    grouped by cluster) of each record-chunk subrecord, of each non-empty shared subrecord,
    and of each placed item-chunk code (``item_code``: its index into ``item_codes``)."""
    subrecord: np.ndarray
    shared: np.ndarray
    item: np.ndarray
    item_code: np.ndarray


def draw_slots(result, rng, item_support="one"):
    """The random deal of :func:`reconstruct` as :class:`Slots` (003 Fig. 5)."""
    size = np.asarray(result.cluster_size, dtype=np.int64)
    start = _offsets(size)
    # record chunks: a random bijection between subrecords and the records of the cluster
    per_chunk = np.diff(result.chunk_subrecords)
    new_index = _shuffle_within(result.chunk_subrecords, rng)
    chunk_of_sub = np.repeat(np.arange(per_chunk.size), per_chunk)
    slot_of_sub = start[result.chunk_cluster[chunk_of_sub]] + (
        new_index - result.chunk_subrecords[chunk_of_sub])
    # shared chunks: non-empty subrecords to distinct random records of the joint cluster
    # (the records of its clusters in a random order; the first ones get the subrecords)
    ids = np.asarray(result.shared_cluster_ids, dtype=np.int64)
    owner = np.repeat(np.arange(result.n_shared), np.diff(result.shared_cluster_offsets))
    span = size[ids]
    entry = np.repeat(np.arange(ids.size), span)
    slot = start[ids[entry]] + np.arange(entry.size) - np.repeat(_offsets(span)[:-1], span)
    slot_owner = owner[entry]
    slot = slot[_random_order_within(slot_owner, rng)]
    first_slot = _offsets(np.bincount(slot_owner, minlength=result.n_shared))[:-1]
    n_sub = np.diff(result.shared_subrecords)
    sub_owner = np.repeat(np.arange(result.n_shared), n_sub)
    sub_slot = slot[first_slot[sub_owner] + np.arange(sub_owner.size)
                    - np.repeat(result.shared_subrecords[:-1], n_sub)]
    # item chunks: distinct random records of the cluster
    item_cluster = np.repeat(np.arange(size.size), np.diff(result.item_offsets))
    n_slots = size[item_cluster]
    if item_support == "one":
        return Slots(slot_of_sub, sub_slot, start[item_cluster] + np.floor(
            rng.random(item_cluster.size) * n_slots).astype(np.int64),
            np.arange(item_cluster.size, dtype=np.int64))
    count = 1 + np.floor(rng.random(item_cluster.size)
                         * np.minimum(result.k - 1, n_slots)).astype(np.int64)
    # the first `count` records of a random order of the cluster's records
    item_of = np.repeat(np.arange(item_cluster.size), n_slots)
    local = np.arange(item_of.size) - np.repeat(_offsets(n_slots)[:-1], n_slots)
    rank = np.empty(item_of.size, dtype=np.int64)
    rank[_random_order_within(item_of, rng)] = local
    take = rank < count[item_of]
    return Slots(slot_of_sub, sub_slot, start[item_cluster[item_of[take]]] + local[take],
                 item_of[take])


def assemble(result, slots):
    """The Reconstruction that puts every piece where ``slots`` says."""
    size = np.asarray(result.cluster_size, dtype=np.int64)
    slot = np.concatenate([
        np.repeat(slots.subrecord, np.diff(result.subrecord_offsets)),
        np.repeat(slots.shared, np.diff(result.shared_subrecord_offsets)), slots.item])
    code = np.concatenate([
        np.asarray(result.subrecord_codes, dtype=np.int64),
        np.asarray(result.shared_subrecord_codes, dtype=np.int64),
        np.asarray(result.item_codes, dtype=np.int64)[slots.item_code]])
    width = max(int(result.n_codes), 1)
    key = np.sort(slot * width + code)                                 # by record, then code
    n_records = int(size.sum())
    return Reconstruction(
        offsets=_offsets(np.bincount(key // width, minlength=n_records)), codes=key % width,
        cluster_of_record=np.repeat(np.arange(size.size, dtype=np.int64), size))


# -- input checks -----------------------------------------------------------------------------

def validated_records(offsets, codes, n_codes):
    """CSR records as int64 arrays with codes sorted within each record; raises DeidError for
    NULL, negative, out-of-range or repeated codes and malformed offsets.  Messages never
    show a code value."""
    codes = _as_code_array(codes, "codes")
    offsets = np.asarray(offsets)
    if offsets.ndim != 1 or offsets.size < 1 or not np.issubdtype(offsets.dtype, np.integer):
        raise DeidError(INVALID_PARAMETER_VALUE, "offsets must be a 1-D integer array",
                        hint="offsets has n_records + 1 entries, starting at 0")
    offsets = offsets.astype(np.int64)
    if offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != codes.size:
        raise DeidError(INVALID_PARAMETER_VALUE, "offsets do not delimit the codes",
                        hint="offsets must start at 0, never decrease and end at len(codes)")
    if codes.size and codes.max() >= n_codes:
        raise DeidError(INVALID_PARAMETER_VALUE, "a code id is not below n_codes",
                        hint="code ids must be 0..n_codes-1")
    row = itemsets.row_of_occurrence(offsets)
    same_row = row[1:] == row[:-1]
    step = np.diff(codes)
    if np.any(same_row & (step <= 0)):
        codes = codes[np.lexsort((codes, row))]
        if np.any(same_row & (np.diff(codes) == 0)):
            raise DeidError(INVALID_PARAMETER_VALUE, "a record holds the same code twice",
                            hint="codes must be unique within a record; map repeated "
                                 "diagnoses to distinct codes first (003 Sec. 7.1)")
    return offsets, codes


def constraint_ids(constraints, n_codes):
    """int64 (n_codes,): the utility constraint (index in ``constraints``) of each code, or -1.
    Raises DeidError when constraints overlap or hold invalid code ids."""
    constraint_of_code = np.full(n_codes, -1, dtype=np.int64)
    if constraints is None:
        return constraint_of_code
    if isinstance(constraints, (str, bytes)):
        raise DeidError(INVALID_PARAMETER_VALUE, "constraints must be a list of code lists",
                        hint="pass the utility policy U as a list of lists of code ids")
    for i, members in enumerate(constraints):
        if isinstance(members, (str, bytes)) or not hasattr(members, "__iter__"):
            raise DeidError(INVALID_PARAMETER_VALUE, "constraints must be a list of code lists",
                            hint="pass the utility policy U as a list of lists of code ids")
        ids = np.unique(_as_code_array(list(members), "constraint codes"))
        if ids.size and ids.max() >= n_codes:
            raise DeidError(INVALID_PARAMETER_VALUE, "a constraint code id is not below "
                            "n_codes", hint="code ids must be 0..n_codes-1")
        if np.any(constraint_of_code[ids] >= 0):
            raise DeidError(INVALID_PARAMETER_VALUE, "utility constraints overlap",
                            hint="the constraints of a utility policy must be disjoint "
                                 "(003 Sec. 3.1): put each code in at most one constraint")
        constraint_of_code[ids] = i
    return constraint_of_code


def _as_code_array(values, what):
    arr = np.asarray(values)
    if arr.dtype == object:
        if any(v is None for v in arr.ravel().tolist()):
            raise DeidError(NULL_VALUE_NOT_ALLOWED, f"{what} contain NULL",
                            hint="remove NULL codes (or the rows holding them) first")
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise DeidError(INVALID_PARAMETER_VALUE, f"{what} must be integer code ids",
                            hint="map the codes to ids 0..n_codes-1 first") from None
    if arr.size == 0:
        arr = arr.astype(np.int64)
    if arr.ndim != 1:
        raise DeidError(INVALID_PARAMETER_VALUE, f"{what} must be a 1-D array",
                        hint="pass the codes of all records one after the other")
    if np.issubdtype(arr.dtype, np.floating):
        if np.isnan(arr).any():
            raise DeidError(NULL_VALUE_NOT_ALLOWED, f"{what} contain NULL",
                            hint="remove NULL codes (or the rows holding them) first")
        if np.any(arr != np.floor(arr)):
            raise DeidError(INVALID_PARAMETER_VALUE, f"{what} must be integer code ids",
                            hint="map the codes to ids 0..n_codes-1 first")
    elif not np.issubdtype(arr.dtype, np.integer):
        raise DeidError(INVALID_PARAMETER_VALUE, f"{what} must be integer code ids",
                        hint="map the codes to ids 0..n_codes-1 first")
    if arr.size and arr.min() < 0:
        raise DeidError(INVALID_PARAMETER_VALUE, f"{what} hold a negative id",
                        hint="code ids must be 0..n_codes-1")
    return arr.astype(np.int64)


def check_int(value, name, least, hint):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < least:
        raise DeidError(INVALID_PARAMETER_VALUE, f"{name} must be an integer >= {least}",
                        hint=hint)
    return int(value)


# -- assembly ---------------------------------------------------------------------------------

def _offsets(counts):
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _random_order_within(group, rng):
    """Indices of ``group`` (non-negative ints < 2**31) grouped by group value, in a random
    order within each group: one sort of (group << 32) + a random 32-bit key."""
    key = (np.asarray(group, dtype=np.int64) << 32) + rng.integers(
        0, 1 << 32, len(group), dtype=np.int64)
    return np.argsort(key)


def _shuffle_within(seg_offsets, rng):
    """New index of every item when the items of each segment are put in a random order."""
    n = int(seg_offsets[-1])
    seg_of = np.repeat(np.arange(seg_offsets.size - 1), np.diff(seg_offsets))
    new_index = np.empty(n, dtype=np.int64)
    new_index[_random_order_within(seg_of, rng)] = np.arange(n, dtype=np.int64)
    return new_index


def _record_chunks(rng, cluster_start, cluster_of_position, occurrences, pairs):
    occ_position, occ_code, occ_pair = occurrences.position, occurrences.code, occurrences.pair
    pair_cluster, pair_code, pair_chunk = pairs.cluster, pairs.code, pairs.chunk
    in_chunk = pair_chunk >= 0
    width = int(pair_chunk.max()) + 1 if in_chunk.any() else 1
    chunk_ids, chunk_of_row = np.unique(pair_cluster[in_chunk] * width + pair_chunk[in_chunk],
                                        return_inverse=True)
    chunk_cluster = chunk_ids // width
    by_chunk = np.lexsort((pair_code[in_chunk], chunk_of_row))
    domain_codes = pair_code[in_chunk][by_chunk]
    domain_offsets = _offsets(np.bincount(chunk_of_row, minlength=chunk_ids.size))
    cluster_size = np.diff(cluster_start)
    chunk_subrecords = _offsets(cluster_size[chunk_cluster])
    global_chunk = np.full(pair_chunk.size, -1, dtype=np.int64)
    global_chunk[in_chunk] = chunk_of_row
    occ_chunk = global_chunk[occ_pair]
    del global_chunk                              # (each temporary goes once used: peak memory)
    occ = np.flatnonzero(occ_chunk >= 0)
    position = occ_position[occ]
    sub = chunk_subrecords[occ_chunk[occ]]
    del occ_chunk
    sub += position - cluster_start[cluster_of_position[position]]
    del position
    sub = _shuffle_within(chunk_subrecords, rng)[sub]
    order = np.argsort(sub, kind="stable")
    codes = occ_code[occ][order]
    del occ, order
    return {"chunk_cluster": chunk_cluster, "chunk_domain_offsets": domain_offsets,
            "chunk_domain_codes": domain_codes, "chunk_subrecords": chunk_subrecords,
            "subrecord_offsets": _offsets(np.bincount(sub, minlength=int(chunk_subrecords[-1]))),
            "subrecord_codes": codes}


def _shared_chunks(rng, shared, n_positions, occurrences, pair_shared):
    occ_position, occ_code, occ_pair = occurrences.position, occurrences.code, occurrences.pair
    occ_shared = pair_shared[occ_pair]
    occ = np.flatnonzero(occ_shared >= 0)
    key = occ_shared[occ] * max(n_positions, 1) + occ_position[occ]
    order = np.argsort(key, kind="stable")
    key, occ = key[order], occ[order]
    head = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key[:0]
    sub_of_occ = np.cumsum(np.r_[True, key[1:] != key[:-1]]) - 1 if key.size else key[:0]
    sub_shared = key[head] // max(n_positions, 1)
    subrecords = _offsets(np.bincount(sub_shared, minlength=shared.n_shared))
    new_sub = _shuffle_within(subrecords, rng)[sub_of_occ]
    order = np.argsort(new_sub, kind="stable")
    return {"shared_cluster_offsets": shared.cluster_offsets,
            "shared_cluster_ids": shared.cluster_ids,
            "shared_domain_offsets": shared.domain_offsets,
            "shared_domain_codes": shared.domain_codes, "shared_subrecords": subrecords,
            "shared_subrecord_offsets": _offsets(np.bincount(new_sub, minlength=head.size)),
            "shared_subrecord_codes": occ_code[occ][order]}
