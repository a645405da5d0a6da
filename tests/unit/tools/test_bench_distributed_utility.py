"""bench/distributed/distributed_utility.py: the utility of a distributed release computed over the union
of its parts (groups and clusters are per node) and the binary COPY reader."""
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "distributed"))
import distributed_utility as du  # noqa: E402

from deid.methods import metrics  # noqa: E402
from deid.methods.disassociation.disassociate import disassociate, reconstruct  # noqa: E402


def copy_image(rows):
    out = bytearray(du.SIGNATURE + struct.pack(">ii", 0, 0))
    for r in rows:
        out += struct.pack(">h", len(r))
        for v in r:
            out += struct.pack(">ii", 4, v)
    return bytes(out + struct.pack(">h", -1))


def test_parse_int4_copy_reads_columns():
    a, b = du.parse_int4_copy(copy_image([(1, -2), (300000, 7), (0, 2**31 - 1)]), 2)
    assert a.tolist() == [1, 300000, 0] and b.tolist() == [-2, 7, 2**31 - 1]
    assert [c.size for c in du.parse_int4_copy(copy_image([]), 3)] == [0, 0, 0]


def test_parse_int4_copy_refuses_other_layouts():
    with pytest.raises(ValueError):
        du.parse_int4_copy(copy_image([(1, 2)]), 3)
    with pytest.raises(ValueError):
        du.parse_int4_copy(b"COPY" + copy_image([(1,)])[4:], 1)


def test_union_ids_separate_nodes_and_agree_across_arrays():
    a, b, g = du.union_ids(([0, 0, 1, 1], [1, 2, 1, 2]), ([1, 0], [2, 1]))
    assert g == 4
    assert len(set(a.tolist())) == 4           # group 1 of node 0 is not group 1 of node 1
    assert b.tolist() == [a[3], a[0]]


def anatomy_release(group, diagnosis):
    """QIT group ids and the count table (group, value, count) of one node."""
    sg, sv, sc = metrics.sensitive_table(group, diagnosis)
    return sg, sv, sc


def test_anatomy_are_over_the_union_is_that_of_one_release_with_global_groups():
    rng = np.random.default_rng(3)
    n = 400
    source = {"age": rng.integers(0, 90, n), "sex": rng.integers(0, 2, n),
              "race": rng.integers(0, 4, n), "zip": rng.integers(0, 30, n),
              "diagnosis": rng.integers(0, 6, n)}
    node = (np.arange(n) % 2).astype(np.int64)
    local = (np.arange(n) // 2 % 20).astype(np.int64) + 1   # group ids 1..20 on each node
    qit = {"node": node, "group_id": local, **{c: source[c] for c in du.ANATOMY_QI}}
    parts = [anatomy_release(local[node == p], source["diagnosis"][node == p]) for p in (0, 1)]
    st = {"node": np.concatenate([np.full(len(parts[p][0]), p) for p in (0, 1)]),
          "group_id": np.concatenate([parts[p][0] for p in (0, 1)]),
          "diagnosis": np.concatenate([parts[p][1] for p in (0, 1)]),
          "count": np.concatenate([parts[p][2] for p in (0, 1)])}
    queries = du.anatomy_workload(source, 200, seed=5)
    got = du.anatomy_are(du.exact_counts(source, queries), n, queries, qit, st)
    # the same release on one server: global group ids node * 20 + local - 1
    glob = node * 20 + local - 1
    g, v, c = metrics.sensitive_table(glob, source["diagnosis"])
    actual = [metrics.exact_count(q, source) for q in queries]
    est = [metrics.anatomy_estimate(q, {k: source[k] for k in du.ANATOMY_QI}, glob,
                                    {"diagnosis": (g, v, c)}, 40) for q in queries]
    assert got == metrics.are(actual, est, n=n)
    assert 0 < got["all"] < 1


def as_view_rows(res, node):
    """One node's disassociation release as the coordinator's views give it (ids from 1,
    subrecords numbered per node)."""
    rows = {"clusters": {"node": np.full(res.n_clusters, node),
                         "cluster_id": np.arange(1, res.n_clusters + 1), "size": res.cluster_size}}
    rc = {k: [] for k in ("node", "cluster_id", "chunk_id", "sub", "code")}
    for j in range(res.n_chunks):
        for s in range(res.chunk_subrecords[j], res.chunk_subrecords[j + 1]):
            codes = res.subrecord_codes[res.subrecord_offsets[s]:res.subrecord_offsets[s + 1]]
            for c in (codes.tolist() or [-1]):
                for key, v in zip(rc, (node, res.chunk_cluster[j] + 1, j + 1, s, c)):
                    rc[key].append(v)
    it_cluster = np.repeat(np.arange(res.n_clusters), np.diff(res.item_offsets)) + 1
    rows["items"] = {"node": np.full(it_cluster.size, node), "cluster_id": it_cluster,
                     "code": res.item_codes}
    scl = {k: [] for k in ("node", "shared_id", "cluster_id")}
    sco = {k: [] for k in ("node", "shared_id", "sub", "code")}
    for s in range(res.n_shared):
        for c in res.shared_cluster_ids[res.shared_cluster_offsets[s]:
                                        res.shared_cluster_offsets[s + 1]].tolist():
            for key, v in zip(scl, (node, s + 1, c + 1)):
                scl[key].append(v)
        for r in range(res.shared_subrecords[s], res.shared_subrecords[s + 1]):
            lo, hi = res.shared_subrecord_offsets[r], res.shared_subrecord_offsets[r + 1]
            for c in res.shared_subrecord_codes[lo:hi].tolist():
                for key, v in zip(sco, (node, s + 1, r, c)):
                    sco[key].append(v)
    rows["records"] = {k: np.asarray(v, np.int64) for k, v in rc.items()}
    rows["shared_clusters"] = {k: np.asarray(v, np.int64) for k, v in scl.items()}
    rows["shared_codes"] = {k: np.asarray(v, np.int64) for k, v in sco.items()}
    return rows


def concatenated(a, b):
    """Two nodes' results as one release: b's clusters, chunks, subrecords after a's."""
    def off(x, y):
        return np.r_[x, x[-1] + y[1:]]
    return {
        "cluster_size": np.r_[a.cluster_size, b.cluster_size],
        "chunk_cluster": np.r_[a.chunk_cluster, b.chunk_cluster + a.n_clusters],
        "chunk_subrecords": off(a.chunk_subrecords, b.chunk_subrecords),
        "subrecord_offsets": off(a.subrecord_offsets, b.subrecord_offsets),
        "subrecord_codes": np.r_[a.subrecord_codes, b.subrecord_codes],
        "item_offsets": off(a.item_offsets, b.item_offsets),
        "item_codes": np.r_[a.item_codes, b.item_codes],
        "shared_cluster_offsets": off(a.shared_cluster_offsets, b.shared_cluster_offsets),
        "shared_cluster_ids": np.r_[a.shared_cluster_ids, b.shared_cluster_ids + a.n_clusters],
        "shared_subrecords": off(a.shared_subrecords, b.shared_subrecords),
        "shared_subrecord_offsets": off(a.shared_subrecord_offsets, b.shared_subrecord_offsets),
        "shared_subrecord_codes": np.r_[a.shared_subrecord_codes, b.shared_subrecord_codes]}


def test_disassociated_union_is_the_nodes_releases_side_by_side():
    rng = np.random.default_rng(11)
    n_codes, parts, views = 12, [], []
    for node in (0, 1):
        lengths = rng.integers(1, 4, 120)
        offsets = np.r_[0, np.cumsum(lengths)]
        codes = np.concatenate([np.sort(rng.choice(n_codes, size, replace=False))
                                for size in lengths])
        res = disassociate(offsets, codes, n_codes, 3, 2, seed=node)
        parts.append((offsets, codes, res))
        views.append(as_view_rows(res, node))
    assert parts[0][2].n_shared and parts[1][2].n_shared      # shared chunks on both nodes
    cat = {t: {k: np.concatenate([v[t][k] for v in views]) for k in views[0][t]}
           for t in views[0]}
    union = du.disassociated_union(n_codes, 3, cat["clusters"], cat["records"], cat["items"],
                                   cat["shared_clusters"], cat["shared_codes"])
    for key, want in concatenated(parts[0][2], parts[1][2]).items():
        assert np.array_equal(getattr(union, key), want), key
    rc = reconstruct(union, 0)
    assert rc.offsets.size == 241
    # ARE over the union: the source records of both nodes, a seeded workload
    offsets = np.r_[parts[0][0], parts[0][0][-1] + parts[1][0][1:]]
    codes = np.concatenate([parts[0][1], parts[1][1]])
    are = du.disassociation_are(offsets, codes, n_codes, union, 100, seed=1, reconstructions=2)
    assert are["queries"] == 99 and 0 < are["all"] < 1 and are["sizes"] == [1, 2, 3]
    assert are == du.disassociation_are(offsets, codes, n_codes, union, 100, seed=1,
                                        reconstructions=2)


def test_disassociated_union_without_shared_chunks():
    # two nodes, one cluster each, one record chunk of two subrecords (one empty), item codes
    clusters = {"node": np.array([5, 7]), "cluster_id": np.array([1, 1]), "size": np.array([2, 2])}
    records = {"node": np.array([5, 5, 7, 7, 7]), "cluster_id": np.array([1, 1, 1, 1, 1]),
               "chunk_id": np.array([1, 1, 1, 1, 1]), "sub": np.array([1, 2, 1, 1, 2]),
               "code": np.array([0, -1, 1, 2, 1])}
    items = {"node": np.array([5, 7]), "cluster_id": np.array([1, 1]), "code": np.array([3, 0])}
    union = du.disassociated_union(4, 2, clusters, records, items)
    assert union.n_shared == 0 and union.shared_subrecords.tolist() == [0]
    assert union.chunk_cluster.tolist() == [0, 1]
    assert union.chunk_subrecords.tolist() == [0, 2, 4]
    assert union.subrecord_offsets.tolist() == [0, 1, 1, 3, 4]
    assert union.subrecord_codes.tolist() == [0, 1, 2, 1]
    rc = reconstruct(union, 3)
    assert rc.offsets[-1] == 6 and sorted(rc.codes.tolist()) == [0, 0, 1, 1, 2, 3]


def test_condensation_moments_of_the_union():
    rng = np.random.default_rng(4)
    n = 2000
    src = np.stack([rng.integers(20, 90, n), rng.integers(0, 2, n), rng.integers(0, 4, n),
                    rng.integers(0, 8, n), rng.integers(1, 120, n), rng.integers(0, 2, n)], axis=1)
    same = du.condensation_moments(src, src[rng.permutation(n)])
    assert same["mean_diff_max"] < 1e-9 and same["corr_diff_max"] < 1e-9
    shifted = src.copy()
    shifted[:, 0] += 5                      # every age 5 years older
    assert du.condensation_moments(src, shifted)["mean_diff_max"] == pytest.approx(
        5 / src[:, 0].std())
    # a category the release lacks: compared over the source's levels, same width
    fewer = src.copy()
    fewer[:, 2] = np.minimum(fewer[:, 2], 2)
    assert du.condensation_moments(src, fewer)["corr_diff_max"] > 0
