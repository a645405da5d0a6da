"""Is a reconstructed data set D' consistent with a disassociated release (003 Fig. 5)?  Plain
Python (sets and Counters), independent of deid's code; shared by the unit tests (releases
as arrays) and the integration tests (releases as stored tables).

A release is a dict: ``sizes`` (records per cluster, clusters in order), ``chunks`` (per
record chunk: its cluster, domain and subrecords, empty ones included), ``shared`` (per
shared chunk: its clusters, domain and non-empty subrecords) and ``items`` ({cluster: item
codes}); D' is a list of code sets, its records grouped by cluster in cluster order.
"""
from collections import Counter


def inconsistencies(release, records, k, item_support="one"):
    """The ways D' departs from the release (an empty list: D' is consistent)."""
    out = []
    sizes = release["sizes"]
    if len(records) != sum(sizes):
        return [f"{len(records)} records, the clusters hold {sum(sizes)}"]
    start = [sum(sizes[:c]) for c in range(len(sizes))]
    members = [records[start[c]:start[c] + sizes[c]] for c in range(len(sizes))]
    reach = [set(release["items"].get(c, ())) for c in range(len(sizes))]
    for cluster, domain, subs in release["chunks"]:
        if len(subs) != sizes[cluster]:
            out.append(f"a chunk of cluster {cluster} has {len(subs)} subrecords")
        got = Counter(frozenset(r & set(domain)) for r in members[cluster])
        if got != Counter(frozenset(s) for s in subs):
            out.append(f"a record chunk of cluster {cluster} is not dealt one subrecord each")
        reach[cluster] |= set(domain)
    for clusters, domain, subs in release["shared"]:
        got = Counter(frozenset(r & set(domain)) for c in clusters for r in members[c])
        got.pop(frozenset(), None)
        if got != Counter(frozenset(s) for s in subs):
            out.append(f"shared chunk over {sorted(clusters)} is not dealt one subrecord each")
        for c in clusters:
            reach[c] |= set(domain)
    for c, codes in release["items"].items():
        most = 1 if item_support == "one" else min(k - 1, sizes[c])
        for code in codes:
            held = sum(code in r for r in members[c])
            if not 1 <= held <= most:
                out.append(f"an item code of cluster {c} is on {held} records")
    for c in range(len(sizes)):
        if any(not r <= reach[c] for r in members[c]):
            out.append(f"a record of cluster {c} holds a code no chunk of it releases")
    return out


def release_of(res):
    """The plain release of a DisassociationResult (its flat arrays)."""
    def csr(offs, vals, i):
        return [int(v) for v in vals[offs[i]:offs[i + 1]]]
    chunks = []
    for j in range(len(res.chunk_cluster)):
        subs = [csr(res.subrecord_offsets, res.subrecord_codes, i)
                for i in range(res.chunk_subrecords[j], res.chunk_subrecords[j + 1])]
        chunks.append((int(res.chunk_cluster[j]),
                       csr(res.chunk_domain_offsets, res.chunk_domain_codes, j), subs))
    shared = []
    for s in range(len(res.shared_cluster_offsets) - 1):
        subs = [csr(res.shared_subrecord_offsets, res.shared_subrecord_codes, i)
                for i in range(res.shared_subrecords[s], res.shared_subrecords[s + 1])]
        shared.append((csr(res.shared_cluster_offsets, res.shared_cluster_ids, s),
                       csr(res.shared_domain_offsets, res.shared_domain_codes, s), subs))
    items = {c: csr(res.item_offsets, res.item_codes, c) for c in range(len(res.cluster_size))
             if res.item_offsets[c + 1] > res.item_offsets[c]}
    return {"sizes": [int(x) for x in res.cluster_size], "chunks": chunks, "shared": shared,
            "items": items}


def records_of(rec):
    """D' (a Reconstruction) as a list of code sets."""
    return [set(int(v) for v in rec.codes[rec.offsets[i]:rec.offsets[i + 1]])
            for i in range(len(rec.offsets) - 1)]
