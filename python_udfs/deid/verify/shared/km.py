"""Independent check of a disassociated release (paper 003: Def. 1, Guarantee 1, Figs. 4, 10).

Written from the paper, not from ``deid.methods``: it imports nothing from that package, and
its itemset counting is its own (every j-subset of every subrecord is listed with
``itertools.combinations`` index tables and counted by sorting), so a bug in the method cannot
hide itself here.

:func:`verify_km` checks, from the released pieces plus the record -> cluster membership and
the source records:
  * every cluster has >= k records (and the sizes agree with the membership);
  * every record chunk and every shared chunk is k^m-anonymous: each itemset of <= m codes
    that occurs in a subrecord of the chunk occurs in >= k of its subrecords;
  * the release is faithful, record for record through the membership:
      - within a cluster, a code is placed once: in one record chunk's domain, in the item
        chunk, or in the domain of one shared chunk covering the cluster;
      - every (cluster, code) of the source is placed, and record-chunk and item-chunk codes
        occur in the cluster (no invented code); every domain code occurs in its chunk;
      - the subrecords of a record chunk are, as a multiset, the projections of the
        cluster's records on its domain (one per record, empty ones included); the non-empty
        stored subrecords of a shared chunk are the non-empty projections of the records of
        its clusters, and it stores at most one subrecord per record (empty ones implied).
    Together these say that the multiset of (cluster, code) occurrences in record chunks,
    shared chunks and item chunks is the source's (item chunks hide their counts by design,
    so there the check is that the code occurs in the cluster and nowhere else in it).

Failures raise :class:`deid.errors.DeidError` with SQLSTATE ``VERIFICATION_FAILED`` (DE002);
messages name chunk and cluster numbers but never a code value or a count below k.
"""

import itertools

import numpy as np

from deid.errors import DeidError, INVALID_PARAMETER_VALUE, VERIFICATION_FAILED

__all__ = ["verify_km", "RELEASE_FIELDS"]

RELEASE_FIELDS = (
    "cluster_size", "chunk_cluster", "chunk_domain_offsets", "chunk_domain_codes",
    "chunk_subrecords", "subrecord_offsets", "subrecord_codes", "item_offsets", "item_codes",
    "shared_cluster_offsets", "shared_cluster_ids", "shared_domain_offsets",
    "shared_domain_codes", "shared_subrecords", "shared_subrecord_offsets",
    "shared_subrecord_codes")

_HINT = ("The release was rolled back; nothing was written.  The disassociated data failed "
         "the independent check, which points to a bug in the method or an altered release: "
         "please report it with the request.")
_COMBINATION_BUDGET = 1 << 24


def verify_km(release, source_offsets, source_codes, k, m, cluster_of_record=None):
    """Check a disassociated release against its source (module docstring).

    ``release``: a mapping or object with the arrays of :data:`RELEASE_FIELDS` (the layout of
    deid.methods.disassociation.DisassociationResult) and, unless ``cluster_of_record`` is
    given, ``cluster_of_record``.  ``source_offsets``/``source_codes``: the source records as
    CSR.  Returns a dict of figures; raises DeidError (DE002) on the first violation.
    """
    get = release.get if isinstance(release, dict) else (lambda f: getattr(release, f))
    r = {f: _int_array(get(f), f) for f in RELEASE_FIELDS}
    membership = _int_array(get("cluster_of_record") if cluster_of_record is None
                            else cluster_of_record, "cluster_of_record")
    src_offsets = _int_array(source_offsets, "source_offsets")
    src_codes = _int_array(source_codes, "source_codes")
    k, m = int(k), int(m)
    n_chunks, n_shared = _check_layout(r, src_offsets, src_codes)
    n = src_offsets.size - 1
    size, shared_owner = _check_clusters(r, membership, n, k)
    subs, width = _check_domains(r, src_codes)
    p_key, p_label, own = _placements(r, shared_owner, width)
    src_row = _owner(src_offsets)
    src_pairs, src_pair_of = _check_placed(
        p_key, own, _unique_by_cluster(membership[src_row] * width + src_codes, membership,
                                       src_offsets), width)
    src_label = p_label[np.searchsorted(p_key, src_pairs)][src_pair_of]
    del src_pair_of, src_pairs, p_key, p_label, own
    _check_projections(src_label, src_row, src_codes, subs, n, n_chunks + n_shared + 1, width)
    del src_label, src_row
    min_support = _least_itemset_support(subs.label, subs.offsets, subs.codes, m, width,
                                         n_chunks + n_shared)
    _check_km_support(min_support, r["chunk_cluster"], n_shared, k, m)
    occurring = min_support[min_support < np.iinfo(np.int64).max]
    n_clusters = r["cluster_size"].size
    return {"n_records": int(n), "n_clusters": int(n_clusters),
            "min_cluster_size": int(size.min()) if n_clusters else 0,
            "n_record_chunks": int(n_chunks), "n_shared_chunks": int(n_shared),
            "n_item_codes": int(r["item_codes"].size),
            "n_subrecords": int(r["subrecord_offsets"].size - 1),
            "n_shared_subrecords": int(r["shared_subrecord_offsets"].size - 1), "k": k, "m": m,
            "min_itemset_support": int(occurring.min()) if occurring.size else None}


def _check_layout(r, src_offsets, src_codes):
    """Every CSR array well formed and the release's arrays of one shape together: (number of
    record chunks, number of shared chunks)."""
    _check_csr(src_offsets, src_codes, "the source records")
    for offs, vals, what in (
            ("chunk_domain_offsets", "chunk_domain_codes", "record chunk domains"),
            ("chunk_subrecords", None, "record chunk subrecords"),
            ("subrecord_offsets", "subrecord_codes", "subrecords"),
            ("item_offsets", "item_codes", "item chunks"),
            ("shared_cluster_offsets", "shared_cluster_ids", "shared chunk clusters"),
            ("shared_domain_offsets", "shared_domain_codes", "shared chunk domains"),
            ("shared_subrecords", None, "shared chunk subrecords"),
            ("shared_subrecord_offsets", "shared_subrecord_codes", "shared subrecords")):
        _check_csr(r[offs], r[vals] if vals else None, what)
    n_chunks, n_shared = r["chunk_cluster"].size, r["shared_cluster_offsets"].size - 1
    _require(r["chunk_domain_offsets"].size == n_chunks + 1
             and r["chunk_subrecords"].size == n_chunks + 1
             and r["chunk_subrecords"][-1] == r["subrecord_offsets"].size - 1
             and r["item_offsets"].size == r["cluster_size"].size + 1
             and r["shared_domain_offsets"].size == n_shared + 1
             and r["shared_subrecords"].size == n_shared + 1
             and r["shared_subrecords"][-1] == r["shared_subrecord_offsets"].size - 1,
             "the release's arrays do not fit together")
    return n_chunks, n_shared


def _check_clusters(r, membership, n, k):
    """Clusters: the membership covers the ``n`` source records, the sizes agree with it, each
    holds >= k records, and the chunks' clusters are released ones: (cluster sizes, the shared
    chunk of each entry of shared_cluster_ids)."""
    n_clusters = r["cluster_size"].size
    n_chunks, n_shared = r["chunk_cluster"].size, r["shared_cluster_offsets"].size - 1
    _require(membership.size == n, "the membership does not cover the source records")
    _require(membership.size == 0 or (membership.min() >= 0 and membership.max() < n_clusters),
             "the membership names a cluster that is not released")
    size = np.bincount(membership, minlength=n_clusters)
    _require(np.array_equal(size, r["cluster_size"]),
             "released cluster sizes disagree with the membership")
    if n_clusters and size.min() < k:
        raise DeidError(VERIFICATION_FAILED,
                        f"cluster {int(np.argmin(size))} has fewer than k = {k} records",
                        hint=_HINT)
    _require(n_chunks == 0 or (r["chunk_cluster"].min() >= 0
                               and r["chunk_cluster"].max() < n_clusters),
             "a record chunk belongs to no released cluster")
    _require(np.array_equal(np.diff(r["chunk_subrecords"]), size[r["chunk_cluster"]]),
             "a record chunk does not hold one subrecord per record of its cluster")
    shared_owner = np.repeat(np.arange(n_shared), np.diff(r["shared_cluster_offsets"]))
    ids = r["shared_cluster_ids"]
    _require(ids.size == 0 or (ids.min() >= 0 and ids.max() < n_clusters),
             "a shared chunk names a cluster that is not released")
    _require(np.unique(shared_owner * max(n_clusters, 1) + ids).size == ids.size,
             "a shared chunk names a cluster twice")
    joint_size = np.bincount(shared_owner, weights=size[ids], minlength=n_shared)
    _require(np.all(np.diff(r["shared_subrecords"]) <= joint_size),
             "a shared chunk holds more subrecords than its clusters have records")
    return size, shared_owner


class _Subrecords:
    """Every subrecord, record chunks' then shared chunks', as CSR with its chunk's label (a
    shared chunk's label: the number of record chunks + its index)."""

    def __init__(self, label, offsets, codes):
        self.label, self.offsets, self.codes = label, offsets, codes


def _check_domains(r, src_codes):
    """Every subrecord lies in its chunk's domain, codes sorted and unique, and every domain
    code occurs in a subrecord of its chunk: (the subrecords, the packing width of a code)."""
    n_chunks, n_ssub = r["chunk_cluster"].size, r["shared_subrecord_offsets"].size - 1
    label_of_sub = np.r_[_owner(r["chunk_subrecords"]), n_chunks + _owner(r["shared_subrecords"])]
    if n_ssub:
        sub_offsets = np.r_[r["subrecord_offsets"],
                            r["subrecord_offsets"][-1] + r["shared_subrecord_offsets"][1:]]
        sub_codes = np.r_[r["subrecord_codes"], r["shared_subrecord_codes"]]
    else:                              # no shared subrecord: the record chunks' arrays, no copy
        sub_offsets, sub_codes = r["subrecord_offsets"], r["subrecord_codes"]
    _check_sorted_sets(sub_offsets, sub_codes, "a subrecord")
    dom_offsets = np.r_[r["chunk_domain_offsets"],
                        r["chunk_domain_offsets"][-1] + r["shared_domain_offsets"][1:]]
    dom_codes = np.r_[r["chunk_domain_codes"], r["shared_domain_codes"]]
    _check_sorted_sets(dom_offsets, dom_codes, "a chunk domain")
    _check_sorted_sets(r["item_offsets"], r["item_codes"], "an item chunk")
    width = 1 + max([int(a.max()) for a in (src_codes, dom_codes, r["item_codes"], sub_codes)
                     if a.size] + [0])
    occ_label = np.repeat(label_of_sub, np.diff(sub_offsets))
    in_domain = occ_label * width + sub_codes
    del occ_label                      # (each occurrence-sized temporary goes once used)
    # chunk by chunk, each subrecord's codes ascending: runs a stable sort merges quickly
    in_domain.sort(kind="stable")
    in_domain = in_domain[np.r_[True, in_domain[1:] != in_domain[:-1]]] if in_domain.size \
        else in_domain
    domain_keys = _owner(dom_offsets) * width + dom_codes
    _require(np.array_equal(in_domain, domain_keys),
             "a subrecord holds a code outside its chunk's domain, or a domain code occurs "
             "in no subrecord of its chunk")
    return _Subrecords(label_of_sub, sub_offsets, sub_codes), width


def _placements(r, shared_owner, width):
    """Where each (cluster, code) is placed, sorted by its key cluster * width + code: (keys,
    labels: a record chunk, a shared chunk (n_chunks + its index) or -1 for the item chunk,
    whether the placement is the cluster's own: a record chunk or its item chunk). A code
    placed twice in one cluster fails."""
    n_chunks, ids = r["chunk_cluster"].size, r["shared_cluster_ids"]
    chunk_of_dom = _owner(r["chunk_domain_offsets"])
    place_cluster = [r["chunk_cluster"][chunk_of_dom], _owner(r["item_offsets"])]
    place_code = [r["chunk_domain_codes"], r["item_codes"]]
    place_label = [chunk_of_dom, np.full(r["item_codes"].size, -1)]
    # shared domains expanded over their clusters: one (cluster, code) per cluster and code
    dom_len = np.diff(r["shared_domain_offsets"])
    per_entry = dom_len[shared_owner]
    entry = np.repeat(np.arange(ids.size), per_entry)
    nth = np.arange(entry.size) - np.repeat(_offsets_of(per_entry)[:-1], per_entry)
    place_cluster.append(ids[entry])
    place_code.append(r["shared_domain_codes"][
        r["shared_domain_offsets"][shared_owner[entry]] + nth])
    place_label.append(n_chunks + shared_owner[entry])
    p_key = np.concatenate(place_cluster) * width + np.concatenate(place_code)
    p_label = np.concatenate(place_label)
    own = p_label < n_chunks                      # record chunk or item chunk placements
    order = np.argsort(p_key, kind="stable")
    p_key, p_label, own = p_key[order], p_label[order], own[order]
    dup = np.flatnonzero(p_key[1:] == p_key[:-1])
    if dup.size:
        raise DeidError(VERIFICATION_FAILED, f"cluster {int(p_key[dup[0]] // width)} places a "
                        "code in more than one chunk", hint=_HINT)
    return p_key, p_label, own


def _check_placed(p_key, own, src_pairs, width):
    """The source's (cluster, code) pairs (``src_pairs``: the distinct pairs, each
    occurrence's index among them) placed exactly: each one somewhere, and no record-chunk or
    item-chunk code that none of the cluster's records has. Returns ``src_pairs``."""
    src_pairs, src_pair_of = src_pairs
    placed = _in_sorted(p_key, src_pairs)
    if not placed.all():
        raise DeidError(VERIFICATION_FAILED, f"cluster {int(src_pairs[~placed][0] // width)} "
                        "has a code that is in none of its chunks", hint=_HINT)
    real = _in_sorted(src_pairs, p_key[own])
    if not real.all():
        raise DeidError(VERIFICATION_FAILED, f"cluster {int(p_key[own][~real][0] // width)} "
                        "releases a code that none of its records has", hint=_HINT)
    return src_pairs, src_pair_of


def _unique_by_cluster(pairs, membership, offsets):
    """np.unique(pairs, return_inverse=True) of the occurrences' keys cluster * width + code:
    taken record by record in cluster order first, the keys come nearly sorted (a cluster's
    records one after the other, each one's codes ascending), which a stable sort (runs
    merged) orders several times faster than a shuffle."""
    lengths = np.diff(offsets)
    by_cluster = np.argsort(membership, kind="stable")
    take = lengths[by_cluster]
    perm = np.repeat(offsets[:-1][by_cluster] - _offsets_of(take)[:-1], take) + \
        np.arange(pairs.size, dtype=np.int64)
    del take, by_cluster
    order = perm[np.argsort(pairs[perm], kind="stable")]
    del perm
    ordered = pairs[order]
    new = np.r_[True, ordered[1:] != ordered[:-1]] if ordered.size else np.zeros(0, bool)
    inverse = np.empty(pairs.size, np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], inverse


def _check_projections(src_label, src_row, src_codes, subs, n, n_labels, width):
    """Record for record: the subrecords are the projections of the records on the chunks'
    domains (each source occurrence's chunk label ``src_label``; -1: the item chunk)."""
    chunked = src_label >= 0
    exp_label, exp_row, exp_code = src_label[chunked], src_row[chunked], src_codes[chunked]
    del chunked
    # by (record, chunk, code): one packed key when it fits in int64, sorted and unpacked
    # (a sort of the keys moves 8 bytes per occurrence where an argsort and three gathers
    # move 32). Record-major, the keys come nearly sorted (records in order, each one's codes
    # ascending), which a stable sort (runs merged) orders several times faster than a
    # chunk-major key's shuffle; the groups are the same, the multiset compare below
    # does not depend on their order
    if float(n_labels) * max(n, 1) * width < 2.0 ** 62:
        key = (exp_row * n_labels + exp_label) * width + exp_code
        del exp_label, exp_row, exp_code
        key.sort(kind="stable")
        exp_row_label, exp_code = np.divmod(key, width)
        del key
        exp_row, exp_label = np.divmod(exp_row_label, n_labels)
        del exp_row_label
    else:
        order = np.lexsort((exp_code, exp_row, exp_label))
        exp_label, exp_row, exp_code = exp_label[order], exp_row[order], exp_code[order]
        del order
    new = np.r_[True, (exp_label[1:] != exp_label[:-1]) | (exp_row[1:] != exp_row[:-1])] \
        if exp_label.size else np.zeros(0, dtype=bool)
    exp_offsets = np.r_[np.flatnonzero(new), exp_label.size]
    got_len = np.diff(subs.offsets)
    keep = got_len > 0
    got_offsets = np.r_[0, np.cumsum(got_len[keep])]
    if not _same_multiset(exp_label[new], exp_offsets, exp_code,
                          subs.label[keep], got_offsets, subs.codes, (n_labels, width)):
        raise DeidError(VERIFICATION_FAILED, "the subrecords of a chunk are not the "
                        "projections of its cluster's records", hint=_HINT)


def _check_km_support(min_support, chunk_cluster, n_shared, k, m):
    """k^m-anonymity of every record chunk and shared chunk (``min_support``: per chunk, the
    least support of an itemset of <= m codes that occurs in it)."""
    n_chunks = chunk_cluster.size
    if n_chunks + n_shared and min_support.min() < k:
        bad = int(np.argmin(min_support))
        where = (f"record chunk {bad} (cluster {int(chunk_cluster[bad])})"
                 if bad < n_chunks else f"shared chunk {bad - n_chunks}")
        raise DeidError(VERIFICATION_FAILED, f"{where} is not {k}^{m}-anonymous: an itemset "
                        f"of at most {m} codes occurs in fewer than k subrecords", hint=_HINT)


# --------------------------------------------------------------------------------------------

def verify_stored_km(release, k, m, cluster_of_record):
    """Re-verification of a stored release without its source (deid.verify_release): every
    cluster has >= k records and as many as the stored membership gives it, every record chunk
    holds one subrecord per record of its cluster, and every record chunk and shared chunk is
    k^m-anonymous (003 Def. 1). The multiset against the source needs the source's records:
    it was checked before the release committed."""
    get = release.get if isinstance(release, dict) else (lambda f: getattr(release, f))
    r = {f: _int_array(get(f), f) for f in RELEASE_FIELDS}
    membership = _int_array(cluster_of_record, "cluster_of_record")
    size, n_clusters = r["cluster_size"], r["cluster_size"].size
    _require(membership.size == 0 or (membership.min() >= 0 and membership.max() < n_clusters),
             "the membership names a cluster the release does not have")
    _require(np.array_equal(np.bincount(membership, minlength=n_clusters), size),
             "the clusters' sizes differ from the stored membership")
    if n_clusters and size.min() < k:
        raise DeidError(VERIFICATION_FAILED, f"a cluster has fewer than k = {k} records", hint=_HINT)
    n_chunks, n_shared = r["chunk_cluster"].size, r["shared_subrecords"].size - 1
    _require(np.array_equal(np.diff(r["chunk_subrecords"]), size[r["chunk_cluster"]]),
             "a record chunk does not hold one subrecord per record of its cluster")
    label_of_sub = np.r_[np.repeat(np.arange(n_chunks), np.diff(r["chunk_subrecords"])),
                         n_chunks + np.repeat(np.arange(max(n_shared, 0)),
                                              np.diff(r["shared_subrecords"]))]
    sub_lengths = np.r_[np.diff(r["subrecord_offsets"]), np.diff(r["shared_subrecord_offsets"])]
    sub_offsets = np.r_[0, np.cumsum(sub_lengths)]
    sub_codes = np.r_[r["subrecord_codes"], r["shared_subrecord_codes"]]
    _require(label_of_sub.size == sub_lengths.size, "the chunks' subrecord counts are inconsistent")
    width = int(sub_codes.max()) + 1 if sub_codes.size else 1
    least = _least_itemset_support(label_of_sub, sub_offsets, sub_codes, m, width,
                                   n_chunks + max(n_shared, 0))
    if least.size and least.min() < k:
        raise DeidError(VERIFICATION_FAILED, f"a chunk is not {k}^{m}-anonymous", hint=_HINT)
    occurring = least[least < np.iinfo(np.int64).max]
    return {"mode": "stored only (the multiset against the source was checked before commit)",
            "n_records": int(membership.size), "n_clusters": int(n_clusters),
            "min_cluster_size": int(size.min()) if n_clusters else 0, "k": k, "m": m,
            "min_itemset_support": int(occurring.min()) if occurring.size else None}


def _least_itemset_support(label_of_sub, sub_offsets, sub_codes, m, width, n_labels):
    """Per chunk label: the least support of an itemset of 1..m codes occurring in it (int64
    max when the chunk has no non-empty subrecord).  Lists every j-subset of every subrecord."""
    least = np.full(n_labels, np.iinfo(np.int64).max, dtype=np.int64)
    lengths = np.diff(sub_offsets)
    for j in range(1, m + 1):
        # one packed int64 key per itemset as soon as it is listed, when (label, codes) fit:
        # 8 bytes per itemset instead of 8 (j + 1) in rows plus their packed copy (1M records)
        packed = float(n_labels) * float(width) ** j < 2.0 ** 62
        rows = []
        for length in np.unique(lengths[lengths >= j]).tolist():
            subs = np.flatnonzero(lengths == length)
            table = np.array(list(itertools.combinations(range(length), j)), dtype=np.int64)
            step = max(1, _COMBINATION_BUDGET // (table.size or 1))
            for lo in range(0, subs.size, step):
                part = subs[lo:lo + step]
                codes = sub_codes[sub_offsets[part][:, None] + np.arange(length)]
                sets = codes[:, table].reshape(-1, j)
                labels = np.repeat(label_of_sub[part], table.shape[0])
                if packed:
                    key = labels
                    for col in range(j):
                        key = key * width + sets[:, col]
                    rows.append(key)
                else:
                    rows.append(np.column_stack([labels, sets]))
        if not rows:
            break
        if packed:
            key = np.concatenate(rows)
            del rows
            labels, counts = _count_keys(key, width ** j)
        else:
            labels, counts = _count_rows(np.concatenate(rows), width)
        np.minimum.at(least, labels, counts)
    return least


def _count_rows(rows, width):
    """(label, count) of every distinct row of the int64 ``rows`` (label, code, code, ...),
    codes < width.  One packed int64 key when it fits, else a lexicographic sort."""
    j = rows.shape[1] - 1
    if rows.shape[0] and float(rows[:, 0].max() + 1) * float(width) ** j < 2.0 ** 62:
        key = rows[:, 0].copy()
        for col in range(1, j + 1):
            key = key * width + rows[:, col]
        return _count_keys(key, width ** j)
    rows = rows[np.lexsort(rows.T[::-1])]
    starts = np.flatnonzero(np.r_[True, np.any(rows[1:] != rows[:-1], axis=1)])
    return rows[starts, 0], np.diff(np.r_[starts, rows.shape[0]])


def _count_keys(key, scale):
    """(label, count) of every distinct packed key label * scale + codes (sorts ``key``:
    stable, as the keys come in runs -- subrecords of one length in chunk order, each one's
    itemsets ascending -- that a stable sort merges several times faster than a quicksort)."""
    key.sort(kind="stable")
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    return key[starts] // scale, np.diff(np.r_[starts, key.size])


def _same_multiset(label_a, offsets_a, codes_a, label_b, offsets_b, codes_b, bounds=None):
    """Whether two lists of labelled code sequences are equal as multisets.  ``bounds``:
    (labels, codes) below which every label and code lies, if known: sequences short enough
    are then compared as one packed int64 key each (a sort of one column instead of a
    lexicographic sort of several)."""
    len_a, len_b = np.diff(offsets_a), np.diff(offsets_b)
    if len_a.size != len_b.size:
        return False
    for length in np.unique(np.r_[len_a, len_b]).tolist():
        ia, ib = np.flatnonzero(len_a == length), np.flatnonzero(len_b == length)
        if ia.size != ib.size:
            return False
        if bounds is not None and float(bounds[0]) * float(bounds[1]) ** length < 2.0 ** 62:
            key_a = _packed(label_a[ia], codes_a, offsets_a[ia], length, bounds[1])
            key_b = _packed(label_b[ib], codes_b, offsets_b[ib], length, bounds[1])
            key_a.sort()
            key_b.sort(kind="stable")    # the stored side comes in chunk order: runs
            if not np.array_equal(key_a, key_b):
                return False
            continue
        rows_a = np.column_stack([label_a[ia], codes_a[offsets_a[ia][:, None] + np.arange(length)]])
        rows_b = np.column_stack([label_b[ib], codes_b[offsets_b[ib][:, None] + np.arange(length)]])
        rows_a = rows_a[np.lexsort(rows_a.T[::-1])]
        rows_b = rows_b[np.lexsort(rows_b.T[::-1])]
        if not np.array_equal(rows_a, rows_b):
            return False
    return True


def _packed(labels, codes, starts, length, width):
    """label * width^length + the sequence's codes in base ``width``, one int64 per sequence
    (exact: callers check that it fits)."""
    key = labels.astype(np.int64)
    for col in range(length):
        key = key * width + codes[starts + col]
    return key


def _in_sorted(sorted_values, queries):
    """Boolean: which ``queries`` occur in the sorted array ``sorted_values``."""
    if sorted_values.size == 0:
        return np.zeros(queries.size, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_values, queries), sorted_values.size - 1)
    return sorted_values[at] == queries


def _offsets_of(counts):
    out = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _owner(offsets):
    return np.repeat(np.arange(offsets.size - 1, dtype=np.int64), np.diff(offsets))


def _check_sorted_sets(offsets, codes, what):
    same = _owner(offsets)
    bad = (same[1:] == same[:-1]) & (codes[1:] <= codes[:-1])
    _require(not bad.any(), f"{what} is not a sorted set of codes")


def _check_csr(offsets, values, what):
    ok = offsets.ndim == 1 and offsets.size >= 1 and offsets[0] == 0 \
        and not np.any(np.diff(offsets) < 0)
    if ok and values is not None:
        ok = offsets[-1] == values.size and (values.size == 0 or values.min() >= 0)
    _require(ok, f"{what} are not well-formed CSR arrays")


def _int_array(values, name):
    if values is None:
        raise DeidError(INVALID_PARAMETER_VALUE, f"the release lacks {name}",
                        hint="pass every released piece (deid.verify_km.RELEASE_FIELDS)")
    arr = np.asarray(values)
    if arr.size == 0:
        return arr.reshape(-1).astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise DeidError(INVALID_PARAMETER_VALUE, f"{name} must hold integers",
                        hint="pass the released pieces as integer arrays")
    return arr.astype(np.int64)


def _require(condition, message):
    if not condition:
        raise DeidError(VERIFICATION_FAILED, message, hint=_HINT)
