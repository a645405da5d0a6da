"""The worked example of paper 003 (Sec. 5; Figs. 1, 3b, 4, 5, 10, 11) as exact-output tests,
plus input errors.  k = 3, m = 2, maxClusterSize = 6.

Transcription notes:
  * Fig. 1 lists the codes of r_2 out of order (296.00, 296.02, 296.01, ...); records are sets.
  * Fig. 4's item chunk of P_1 is written "834.0, 401.0, 944.01"; as a set it is Sec. 5's
    {401.0, 834.0, 944.01}.
  * Fig. 5 (a reconstruction of Fig. 4) puts 296.02 into r_6, r_7, r_8 and r_10, but P_2 has
    no 296.02: its record chunk is {294.10, 295.04, 296.03}.  The figure should read 296.03;
    we test what the text says (a reconstructed record combines one subrecord per chunk of its
    cluster with item-chunk codes), not the figure's codes.
  * Fig. 9 line 16 ("not all codes of u are added") and the prose of Sec. 4 ("all codes in u
    have also been assigned") disagree; the worked example (692.71 moves back to T_remain
    because 695.10 did not fit) follows line 16, and so does the kernel.
"""

from collections import Counter

import numpy as np
import pytest

from deid.errors import (DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED,
                         PRIVACY_MODEL_UNSATISFIABLE)
from deid.methods.disassociation.disassociate import disassociate, reconstruct
from deid.methods.disassociation.horpart import horpart
from deid.methods.disassociation.verpart import verpart
from deid.verify.shared.km import verify_km
from fixtures.paper003 import FIG1, FIG3B

CODES = ["294.10", "295.04", "296.00", "296.01", "296.02", "296.03", "401.0", "404.00",
         "480.1", "692.71", "695.10", "834.0", "944.01"]
ID = {c: i for i, c in enumerate(CODES)}

K, M, MAX_CLUSTER = 3, 2, 6


def ids(names):
    return [ID[c] for c in names]


def names(code_ids):
    return {CODES[int(c)] for c in code_ids}


def source():
    offsets = np.cumsum([0] + [len(r) for r in FIG1]).astype(np.int64)
    codes = np.array([ID[c] for r in FIG1 for c in r], dtype=np.int64)    # unsorted, as printed
    return offsets, codes


def constraint_ids():
    con = np.full(len(CODES), -1, dtype=np.int64)
    for i, u in enumerate(FIG3B):
        con[ids(u)] = i
    return con


def run(**kwargs):
    offsets, codes = source()
    return disassociate(offsets, codes, len(CODES), K, M, max_cluster_size=MAX_CLUSTER,
                        constraints=[ids(u) for u in FIG3B], seed=kwargs.pop("seed", 3),
                        **kwargs)


def subrecords(offsets, codes):
    return Counter(frozenset(names(codes[offsets[i]:offsets[i + 1]]))
                   for i in range(len(offsets) - 1))


def projections(records, domain):
    return Counter(frozenset(set(r) & set(domain)) for r in records)


P1 = [set(r) for r in FIG1[:5]]
P2 = [set(r) for r in FIG1[5:]]


def test_horpart_fig11():
    # Sec. 5: split on 296.00 (largest support, in u_1): D1 = r_1..r_5, D2 = r_6..r_10, both
    # below maxClusterSize, so they are the clusters of Fig. 11.
    offsets, codes = source()
    order = np.lexsort((codes, np.repeat(np.arange(10), np.diff(offsets))))
    part = horpart(offsets, codes[order], len(CODES), K, MAX_CLUSTER, constraint_ids())
    assert part.cluster_of_record.tolist() == [0] * 5 + [1] * 5
    assert np.diff(part.cluster_start).tolist() == [5, 5]


def test_verpart_fig4_cluster_p1():
    # Sec. 5: 401.0, 834.0, 944.01 (support 2 < k) go to T_T; order 296.00, 296.01, 296.02,
    # 692.71, 695.10; 695.10 fails ({296.01, 695.10} is in r_2 and r_5 only); 692.71 goes back
    # (u_2 only partly added); C_1 = u_1's codes, C_2 = {692.71, 695.10}.
    rec = [sorted(ids(r)) for r in FIG1[:5]]
    offsets = np.cumsum([0] + [len(r) for r in rec])
    domains, item = verpart(offsets, np.concatenate(rec), K, M, constraint_ids())
    assert [names(d) for d in domains] == [{"296.00", "296.01", "296.02"},
                                           {"692.71", "695.10"}]
    assert names(item) == {"401.0", "834.0", "944.01"}


def test_verpart_fig4_cluster_p2():
    rec = [sorted(ids(r)) for r in FIG1[5:]]
    offsets = np.cumsum([0] + [len(r) for r in rec])
    domains, item = verpart(offsets, np.concatenate(rec), K, M, constraint_ids())
    assert [names(d) for d in domains] == [{"294.10", "295.04", "296.03"}]
    assert names(item) == {"404.00", "480.1", "834.0", "944.01"}


def test_fig4_release_without_refining():
    res = run(max_joint_clusters=1)
    assert res.cluster_of_record.tolist() == [0] * 5 + [1] * 5
    c1, c2 = res.cluster(0), res.cluster(1)
    assert [names(ch["domain"]) for ch in c1["record_chunks"]] == [
        {"296.00", "296.01", "296.02"}, {"692.71", "695.10"}]
    assert [names(ch["domain"]) for ch in c2["record_chunks"]] == [
        {"294.10", "295.04", "296.03"}]
    assert names(c1["item_chunk"]) == {"834.0", "401.0", "944.01"}
    assert names(c2["item_chunk"]) == {"404.00", "480.1", "834.0", "944.01"}
    assert res.n_shared == 0
    # the subrecords of Fig. 4, as multisets (their order is random), empty ones included
    for cluster, records in ((c1, P1), (c2, P2)):
        for ch in cluster["record_chunks"]:
            assert subrecords(ch["offsets"], ch["codes"]) == projections(
                records, names(ch["domain"]))
    assert subrecords(c1["record_chunks"][1]["offsets"], c1["record_chunks"][1]["codes"]) \
        == Counter({frozenset({"692.71", "695.10"}): 3, frozenset({"692.71"}): 1,
                    frozenset(): 1})
    verify_km(res, *source(), K, M)


def test_fig10_shared_chunk():
    # Sec. 5, refining: 834.0 and 944.01 are in the item chunks of P_1 and P_2 with total
    # support 2 + 2 = 4 >= k; VERPART on the projection of r_1..r_10 makes one shared chunk.
    res = run()
    assert res.n_shared == 1
    sh = res.shared_chunk(0)
    assert sh["clusters"].tolist() == [0, 1]
    assert names(sh["domain"]) == {"834.0", "944.01"}
    assert subrecords(sh["offsets"], sh["codes"]) == Counter({
        frozenset({"834.0", "944.01"}): 3, frozenset({"944.01"}): 1,
        frozenset({"834.0"}): 1})                 # r_1, r_7, r_10; r_2; r_3 (5 empty implied)
    assert names(res.cluster(0)["item_chunk"]) == {"401.0"}
    assert names(res.cluster(1)["item_chunk"]) == {"404.00", "480.1"}
    assert res.cluster(0)["shared_chunks"] == [0] and res.cluster(1)["shared_chunks"] == [0]
    # record chunks are those of Fig. 4
    assert [names(ch["domain"]) for ch in res.cluster(0)["record_chunks"]] == [
        {"296.00", "296.01", "296.02"}, {"692.71", "695.10"}]
    report = verify_km(res, *source(), K, M)
    assert report["n_clusters"] == 2 and report["n_shared_chunks"] == 1
    assert report["min_itemset_support"] == 3


def test_fig5_reconstruction():
    res = run()
    rec = reconstruct(res, 11)
    assert rec.offsets.size == 11 and rec.cluster_of_record.tolist() == [0] * 5 + [1] * 5
    recs = [names(rec.codes[rec.offsets[i]:rec.offsets[i + 1]]) for i in range(10)]
    for cluster, mine, original in ((0, recs[:5], P1), (1, recs[5:], P2)):
        view = res.cluster(cluster)
        for ch in view["record_chunks"]:          # one subrecord of each chunk per record
            dom = names(ch["domain"])
            assert projections(mine, dom) == projections(original, dom)
        for code in names(view["item_chunk"]):    # item codes on one record each (default)
            assert sum(code in r for r in mine) == 1
    shared = {"834.0", "944.01"}                   # shared subrecords over all ten records
    assert projections(recs, shared) == projections(P1 + P2, shared)
    again = reconstruct(res, 11)
    assert np.array_equal(again.codes, rec.codes) and np.array_equal(again.offsets,
                                                                      rec.offsets)
    # Fig. 5's first record {296.00, 296.01, 834.0, 944.01} is one of the possible records
    # of P_1: {296.00, 296.01} from C_1, {} from C_2, {834.0, 944.01} from the shared chunk
    c1 = res.cluster(0)["record_chunks"]
    assert frozenset({"296.00", "296.01"}) in subrecords(c1[0]["offsets"], c1[0]["codes"])
    assert frozenset() in subrecords(c1[1]["offsets"], c1[1]["codes"])


def test_reconstruction_uniform_item_support():
    res = run(max_joint_clusters=1)
    for seed in range(20):
        rec = reconstruct(res, seed, item_support="uniform")
        recs = [names(rec.codes[rec.offsets[i]:rec.offsets[i + 1]]) for i in range(10)]
        for cluster, mine in ((0, recs[:5]), (1, recs[5:])):
            for code in names(res.cluster(cluster)["item_chunk"]):
                assert 1 <= sum(code in r for r in mine) <= K - 1


def test_attacker_example_sec32():
    # Sec. 3.2: an attacker knowing {296.01, 834.0} must consider >= 3 candidate records in
    # some reconstruction (Guarantee 1); found by enumerating reconstructions.
    from test_disassociation_fuzz import guarantee_holds, release_view
    res = run()
    view = release_view(res)
    assert guarantee_holds(view, 0, {ID["296.01"], ID["834.0"]}, K)
    assert guarantee_holds(view, 1, {ID["294.10"], ID["296.03"]}, K)


def test_same_seed_same_release_and_other_seed_same_content():
    a, b, c = run(seed=5), run(seed=5), run(seed=6)
    for f in ("subrecord_offsets", "subrecord_codes", "shared_subrecord_codes",
              "chunk_domain_codes", "item_codes", "cluster_of_record"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
        if f in ("chunk_domain_codes", "item_codes", "cluster_of_record"):
            assert np.array_equal(getattr(a, f), getattr(c, f))
    for cl in range(2):
        for x, y in zip(a.cluster(cl)["record_chunks"], c.cluster(cl)["record_chunks"]):
            assert subrecords(x["offsets"], x["codes"]) == subrecords(y["offsets"], y["codes"])


def test_record_ids_are_kept():
    offsets, codes = source()
    rid = np.arange(100, 110)
    res = disassociate(offsets, codes, len(CODES), K, M, record_ids=rid)
    assert res.record_ids.tolist() == rid.tolist()


FIG5 = [  # Fig. 5 as printed (a reconstruction of Fig. 4; see the note on 296.02 above)
    ["296.00", "296.01", "834.0", "944.01"],
    ["296.02", "296.01", "692.71", "834.0"],
    ["296.00", "296.01", "296.02", "692.71", "695.10", "834.0"],
    ["296.00", "296.02", "692.71", "695.10"],
    ["296.00", "296.01", "296.02", "692.71", "695.10", "401.0"],
    ["296.02", "295.04", "480.1"],
    ["294.10", "296.02", "404.00", "834.0", "944.01"],
    ["294.10", "295.04", "296.02", "480.1", "834.0"],
    ["294.10", "295.04", "404.00", "834.0"],
    ["294.10", "295.04", "296.02", "834.0", "944.01"],
]


def test_are_and_mre_on_figs_1_and_5():
    from deid.methods.disassociation.metrics_sets import (are, average_relative_error,
                                                          itemset_counts, matching_relative_error)
    original = source()
    fig5 = (np.cumsum([0] + [len(r) for r in FIG5]), np.array([ID[c] for r in FIG5 for c in r]))
    workload = [ids(["296.00"]), ids(["296.01", "834.0"])]
    # Sec. 3.2: {296.01, 834.0} is in r_1 only in Fig. 1 and in r_1, r_2, r_3 in Fig. 5
    assert itemset_counts(*original, workload).tolist() == [5, 1]
    assert itemset_counts(*fig5, workload).tolist() == [4, 3]
    assert are(original, fig5, workload) == pytest.approx((1 / 5 + 2 / 1) / 2)   # Def. 2
    # Def. 3 on u_2, u_3, u_5: records holding any of the codes, 4 -> 4, 4 -> 3, 5 -> 7
    mre = matching_relative_error(original, fig5, [ids(FIG3B[1]), ids(FIG3B[2]),
                                                   ids(FIG3B[4])])
    assert mre.tolist() == pytest.approx([0.0, 0.25, -0.4])
    with pytest.raises(DeidError) as info:
        average_relative_error([0, 3], [1, 3])
    assert info.value.sqlstate == INVALID_PARAMETER_VALUE and info.value.hint


# -- input errors: SQLSTATE, hint, and no raw code value or count below k in the message --

def expect_error(sqlstate, call, *forbidden):
    with pytest.raises(DeidError) as info:
        call()
    err = info.value
    assert err.sqlstate == sqlstate and err.hint
    for text in forbidden:
        assert text not in err.message
    return err


def test_bad_k_m_and_max_cluster_size():
    offsets, codes = source()
    for k in (1, 0, -3, True, 2.5, "3", None):
        expect_error(INVALID_PARAMETER_VALUE,
                     lambda: disassociate(offsets, codes, len(CODES), k, 2))
    for m in (0, -1, False, 1.0):
        expect_error(INVALID_PARAMETER_VALUE,
                     lambda: disassociate(offsets, codes, len(CODES), 3, m))
    expect_error(INVALID_PARAMETER_VALUE,
                 lambda: disassociate(offsets, codes, len(CODES), 3, 2, max_cluster_size=2))
    expect_error(INVALID_PARAMETER_VALUE,
                 lambda: disassociate(offsets, codes, len(CODES), 3, 2, seed=-1))
    expect_error(INVALID_PARAMETER_VALUE,
                 lambda: disassociate(offsets, codes, len(CODES), 3, 2, max_joint_clusters=0))


def test_fewer_than_k_records():
    offsets = np.array([0, 2, 3, 5])              # 3 records
    codes = np.array([0, 1, 1, 0, 2])
    err = expect_error(PRIVACY_MODEL_UNSATISFIABLE,
                       lambda: disassociate(offsets, codes, 3, 4, 2), "3")
    assert "k" in err.message
    expect_error(PRIVACY_MODEL_UNSATISFIABLE,
                 lambda: disassociate(np.array([0]), np.array([], dtype=np.int64), 3, 2, 1))


def test_overlapping_constraints():
    offsets, codes = source()
    err = expect_error(INVALID_PARAMETER_VALUE,
                       lambda: disassociate(offsets, codes, len(CODES), 3, 2,
                                            constraints=[[7, 1], [2, 7]]), "7")
    assert "overlap" in err.message and "disjoint" in err.hint
    for bad, value in (("ab", None), ([[1, None]], None), ([[1], [-4]], "4"), ([[99]], "99"),
                       ([3, 4], None)):
        with pytest.raises(DeidError) as info:
            disassociate(offsets, codes, len(CODES), 3, 2, constraints=bad)
        assert info.value.hint and (value is None or value not in info.value.message)


def test_null_codes():
    offsets = np.array([0, 2, 4, 6])
    for codes in ([0, None, 1, 2, 0, 1], np.array([0.0, np.nan, 1, 2, 0, 1])):
        expect_error(NULL_VALUE_NOT_ALLOWED, lambda: disassociate(offsets, codes, 3, 2, 1))


def test_negative_and_out_of_range_codes():
    offsets = np.array([0, 2, 4, 6])
    expect_error(INVALID_PARAMETER_VALUE,
                 lambda: disassociate(offsets, np.array([0, -5, 1, 2, 0, 1]), 3, 2, 1), "5")
    expect_error(INVALID_PARAMETER_VALUE,
                 lambda: disassociate(offsets, np.array([0, 17, 1, 2, 0, 1]), 3, 2, 1), "17")
    expect_error(INVALID_PARAMETER_VALUE,
                 lambda: disassociate(offsets, np.array([0, 1.5, 1, 2, 0, 1]), 3, 2, 1))
    expect_error(INVALID_PARAMETER_VALUE,
                 lambda: disassociate(offsets, np.array(["a"] * 6), 3, 2, 1))


def test_repeated_code_and_bad_offsets():
    err = expect_error(INVALID_PARAMETER_VALUE,
                       lambda: disassociate(np.array([0, 2, 4]), np.array([1, 1, 0, 2]), 3, 2, 1))
    assert "7.1" in err.hint
    for offsets in (np.array([1, 2, 4]), np.array([0, 3, 2, 4]), np.array([0, 2, 5]),
                    np.array([[0, 2, 4]]), np.array([0.0, 2, 4])):
        expect_error(INVALID_PARAMETER_VALUE,
                     lambda: disassociate(offsets, np.array([1, 0, 0, 2]), 3, 2, 1))


def test_unsorted_records_are_accepted():
    offsets, codes = source()
    shuffled = codes.copy()
    rng = np.random.default_rng(0)
    for i in range(10):
        lo, hi = offsets[i], offsets[i + 1]
        shuffled[lo:hi] = rng.permutation(shuffled[lo:hi])
    a = disassociate(offsets, codes, len(CODES), K, M, seed=1)
    b = disassociate(offsets, shuffled, len(CODES), K, M, seed=1)
    assert np.array_equal(a.subrecord_codes, b.subrecord_codes)
    verify_km(b, offsets, shuffled, K, M)
