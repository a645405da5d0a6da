"""A disassociation re-release keeps the earlier clusters (methods/disassociation/kept.py):
the old segments publish what they published, the new records are clustered and refined
among themselves, and a changed record is refused."""
import numpy as np
import pytest

from deid.errors import DeidError
from deid.methods.disassociation import kept as kc
from deid.methods.disassociation.disassociate import disassociate
from deid.methods.disassociation.itemsets import take_records
from deid.methods.kept_groups import KeptGroups

K, M, N_CODES = 5, 2, 30
LABELS = [f"c{i:02d}" for i in range(N_CODES)]


def records(n, seed=1):
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, 5, n)
    codes = np.concatenate([np.sort(rng.choice(N_CODES, n_, replace=False)) for n_ in lens])
    return np.r_[0, np.cumsum(lens)].astype(np.int64), codes.astype(np.int64)


def chunk_local(r):
    cc = np.asarray(r.chunk_cluster)
    first = np.r_[True, cc[1:] != cc[:-1]]
    return np.arange(cc.size) - np.maximum.accumulate(np.where(first, np.arange(cc.size), 0)) + 1


def released(offsets, codes, n, earlier=None, key=None):
    """(result, digests, logged KeptGroups) of a release of the first n records."""
    key = key or kc.parameters_key(K, M, 2 * K, None)
    rid = np.arange(1, n + 1, dtype=np.int64)
    kept = kc.kept_of(rid, earlier, key) if earlier is not None else None
    if kept is not None:
        kc.check_counts(kept, K)
    o = offsets[:n + 1]
    r = disassociate(o, codes[:o[-1]], N_CODES, K, M, seed=3, record_ids=rid, kept=kept)
    digests = kc.segment_digests(r, r.segment_of_cluster, chunk_local(r), LABELS)
    if kept is not None:
        kc.check_unchanged(kept, digests)
    runs = [[int(a), d] for a, d in zip(np.bincount(r.segment_of_cluster), digests)]
    return r, digests, KeptGroups(1, rid, r.cluster_of_record + 1,
                                  logged={"key": key, "runs": runs})


def old_part(r, n_old):
    """Per old cluster: its size, item chunk and record chunks' subrecord multisets."""
    out = []
    for c in range(n_old):
        d = r.cluster(c)
        subs = sorted(sorted(tuple(ch["codes"][ch["offsets"][i]:ch["offsets"][i + 1]])
                             for i in range(ch["offsets"].size - 1)) for ch in d["record_chunks"])
        out.append((d["size"], tuple(d["item_chunk"]), tuple(map(tuple, subs))))
    shared = sorted((tuple(r.shared_chunk(s)["clusters"]), tuple(sorted(r.shared_chunk(s)["codes"])))
                    for s in range(r.n_shared) if r.shared_chunk(s)["clusters"].max() < n_old)
    return out, shared


def test_a_growing_table_keeps_every_old_segment():
    offsets, codes = records(420)
    r0, d0, logged = released(offsets, codes, 300)
    assert r0.segment_of_cluster.max() == 0
    for step, n in enumerate((340, 380, 420), start=1):
        r, d, logged_next = released(offsets, codes, n, logged)
        n_old = logged.labels.max()
        assert d[:step] == [x for _, x in logged.logged["runs"]]
        assert np.array_equal(r.cluster_of_record[:logged.ids.size] + 1, logged.labels)
        assert old_part(r, n_old) == old_part(r0 if step == 1 else r_prev, n_old)
        owner = np.repeat(np.arange(r.n_shared), np.diff(r.shared_cluster_offsets))
        seg = r.segment_of_cluster[r.shared_cluster_ids]
        assert all(np.unique(seg[owner == s]).size == 1 for s in range(r.n_shared))
        assert r.cluster_size[n_old:].min() >= K
        r_prev, logged = r, logged_next


def test_one_segment_refines_as_before():
    """Without kept clusters the release is the one of 003's refining over every cluster."""
    offsets, codes = records(300)
    r = disassociate(offsets, codes, N_CODES, K, M, seed=3)
    assert not r.segment_of_cluster.any()
    assert r.n_shared > 0


def test_a_changed_record_is_refused_without_a_fresh_clustering():
    offsets, codes = records(340)
    _, _, logged = released(offsets, codes, 300)
    changed = codes.copy()
    lo, hi = offsets[10], offsets[11]
    free = np.setdiff1d(np.arange(N_CODES), changed[lo:hi])
    changed[lo:hi] = np.sort(np.r_[changed[lo:hi - 1], free[0]])
    with pytest.raises(DeidError) as e:
        released(offsets, changed, 340, logged)
    assert e.value.sqlstate == "DE001" and e.value.hint and e.value.data_dependent
    assert e.value.no_fresh_grouping


def test_fewer_than_k_new_records_are_refused():
    offsets, codes = records(310)
    _, _, logged = released(offsets, codes, 300)
    with pytest.raises(DeidError) as e:
        released(offsets, codes, 300 + K - 1, logged)
    assert e.value.sqlstate == "DE001" and e.value.hint
    assert e.value.no_fresh_grouping
    released(offsets, codes, 300, logged)             # nothing new: the same release


def test_other_parameters_keep_nothing():
    offsets, codes = records(340)
    _, _, logged = released(offsets, codes, 300)
    rid = np.arange(1, 341, dtype=np.int64)
    assert kc.kept_of(rid, logged, kc.parameters_key(K, M + 1, 2 * K, None)) is None
    assert kc.kept_of(rid, KeptGroups(1, logged.ids, logged.labels), "x") is None


def test_digests_ignore_the_order_of_subrecords():
    offsets, codes = records(300)
    a = disassociate(offsets, codes, N_CODES, K, M, seed=3)
    b = disassociate(offsets, codes, N_CODES, K, M, seed=4)
    assert kc.segment_digests(a, a.segment_of_cluster, chunk_local(a), LABELS) == \
        kc.segment_digests(b, b.segment_of_cluster, chunk_local(b), LABELS)


def test_refine_is_unchanged_on_one_segment():
    """Every cluster kept, in one segment: the shared chunks of a first release."""
    offsets, codes = records(300)
    r = disassociate(offsets, codes, N_CODES, K, M, seed=3)
    one = kc.Kept(r.cluster_of_record, np.zeros(r.n_clusters, np.int64), ())
    again = disassociate(offsets, codes, N_CODES, K, M, seed=3, kept=one)
    assert np.array_equal(again.shared_cluster_ids, r.shared_cluster_ids)
    assert np.array_equal(again.shared_domain_codes, r.shared_domain_codes)


def test_a_deleted_record_is_refused_as_a_cluster_not_whole():
    offsets, codes = records(340)
    _, _, logged = released(offsets, codes, 300)
    keep = np.r_[0:7, 8:340]                         # record id 8 deleted since
    rid = keep + 1
    o, c = take_records(offsets, codes, keep)
    kept = kc.kept_of(rid, logged, kc.parameters_key(K, M, 2 * K, None))
    assert not kept.whole
    r = disassociate(o, c, N_CODES, K, M, seed=3, record_ids=rid, kept=kept)
    with pytest.raises(DeidError) as e:
        kc.check_unchanged(kept, kc.segment_digests(r, r.segment_of_cluster, chunk_local(r),
                                                    LABELS))
    assert "not released whole" in e.value.message and e.value.no_fresh_grouping
