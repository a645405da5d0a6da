"""Tests of deid.verify, the independent release verifier.

The worked examples come from paper 001 (Gal, Chen, Gangopadhyay 2008):
Figs. 1-3 (one group of four patients), the Fig. 6 trace (L = 2 -> yes),
Fig. 4 / Fig. 8 (column-wise constraints: L = 4 with treatment limited to 2
deletions -> yes; L = 4 without the constraint -> no).
"""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid import verify
from deid.errors import DeidError, INVALID_PARAMETER_VALUE, VERIFICATION_FAILED
from deid.verify import (
    check_cluster_sizes,
    check_group_sizes,
    check_k_per_source,
    check_kl,
    check_partition,
)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def rid_set(rows, attrs):
    """Columnar deid.rid_set from rows [(rid, group, (v_attr0, v_attr1, ..))]."""
    sets = {}
    for rid, g, vals in rows:
        for a, v in zip(attrs, vals):
            sets.setdefault((g, a, v), []).append(rid)
    keys = sorted(sets, key=lambda k: (k[0], k[1], str(k[2])))
    return ([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys],
            [np.array(sets[k], dtype=np.int64) for k in keys])


def raises_verification(fn, *args, match=None, **kw):
    with pytest.raises(DeidError) as ei:
        fn(*args, **kw)
    assert ei.value.sqlstate == VERIFICATION_FAILED, ei.value.message
    assert ei.value.hint
    if match is not None:
        assert match in ei.value.message, ei.value.message
    return ei.value


def raises_invalid(fn, *args, **kw):
    with pytest.raises(DeidError) as ei:
        fn(*args, **kw)
    assert ei.value.sqlstate == INVALID_PARAMETER_VALUE, ei.value.message
    return ei.value


ATTRS = ("disease", "treatment")

# 001 Fig. 1 / Fig. 3: patients 1-4, one group.
FIG1 = [
    (1, 1, ("Heart disease", "Medicine")),
    (2, 1, ("Heart disease", "Surgery")),
    (3, 1, ("Flu", "IV")),
    (4, 1, ("Stomach disease", "IV")),
]

# 001 Fig. 4: six rows, disease D1..D6, treatment T1,T1,T2,T2,T3,T3.
FIG4 = [(i, 7, (f"D{i}", f"T{(i + 1) // 2}")) for i in range(1, 7)]


def parsed(rows, attrs=ATTRS):
    return verify._parse_rid_set(*rid_set(rows, attrs))


def caps_for(rs, column_l=None, L=None):
    return verify._column_caps(column_l, rs.anames, L, rs.G)


def greedy(rows, L, column_l=None, attrs=ATTRS, vector_max=verify._VECTOR_MAX_GROUP):
    """The greedy certificate alone (001 Figs. 6-7), per group."""
    rs = parsed(rows, attrs)
    caps = caps_for(rs, column_l, L)
    return verify._greedy(rs, caps, L, np.arange(rs.G), vector_max)


def exact_diversity(rows, attrs, column_l=None, limit=12):
    """Brute force: the least number of values whose deletion deletes every
    row of the (single) group, with at most column_l[a] from attribute a
    (001 Def. 6 / Def. 7).  None if no admissible deletion set does."""
    column_l = column_l or {}
    values = sorted({(a, v[i]) for _, _, v in rows for i, a in enumerate(attrs)},
                    key=str)
    rid_sets = {(a, val): {rid for rid, _, v in rows if v[attrs.index(a)] == val}
                for a, val in values}
    everyone = {rid for rid, _, _ in rows}
    for j in range(1, min(len(values), limit) + 1):
        for combo in itertools.combinations(values, j):
            counts = {}
            for a, _ in combo:
                counts[a] = counts.get(a, 0) + 1
            if any(counts[a] > column_l.get(a, j) for a in counts):
                continue
            if set().union(*(rid_sets[c] for c in combo)) == everyone:
                return j
    return None


# ---------------------------------------------------------------------------
# 001 worked examples
# ---------------------------------------------------------------------------

def test_fig3_group_is_4_anonymous_and_2_diverse():
    res = check_kl(*rid_set(FIG1, ATTRS), K=4, L=2, return_groups=True)
    assert res["groups"] == 1 and res["rows"] == 4
    assert res["min_size"] == 4
    assert res["min_certified_l"] == 2
    assert res["attributes"] == ["disease", "treatment"]
    assert list(res["group_ids"]) == [1] and list(res["sizes"]) == [4]


def test_fig6_trace_l2_yes():
    # Theorem 3 RID sets of the group; every row has total frequency 3, so
    # the rid order decides: row 1 in, row 2 shares "Heart disease", row 3 in.
    rows = [[0, 3], [0, 4], [1, 5], [2, 5]]      # value ids: HD, Flu, SD, Med, Surg, IV
    assert verify.certify_group_scalar(rows, [10 ** 9, 10 ** 9], 2) == 2
    assert list(greedy(FIG1, 2)) == [2]
    assert list(greedy(FIG1, 2, vector_max=0)) == [2]


def test_fig2_group_is_not_3_diverse():
    # Introduction of 001: deleting "Heart disease" and "IV" removes all rows.
    assert exact_diversity(FIG1, ATTRS) == 2
    err = raises_verification(check_kl, *rid_set(FIG1, ATTRS), K=4, L=3,
                              match="group 1")
    assert "3-diverse" in err.message
    assert list(greedy(FIG1, 3)) == [2]


def test_fig4_fig8_column_wise_yes():
    res = check_kl(*rid_set(FIG4, ATTRS), K=6, L=4, column_l={"treatment": 2})
    assert res["min_certified_l"] >= 4
    res = check_kl(*rid_set(FIG4, ATTRS), K=6, L=4,
                   column_l={"treatment": 2, "disease": 4})
    assert res["min_certified_l"] >= 4
    # The Fig. 7 path itself (Fig. 8 trace: C = {D1T1, D3T2, D5T3}, then
    # D2T1, D4T2 keep C 3-diverse, D6T3 makes it 4-diverse).
    assert list(greedy(FIG4, 4, {"treatment": 2})) == [4]
    assert list(greedy(FIG4, 4, {"treatment": 2}, vector_max=0)) == [4]
    assert exact_diversity(FIG4, ATTRS, {"treatment": 2}) == 4


def test_fig8_trace_step_by_step():
    # value ids: D1..D6 = 0..5, T1..T3 = 6..8; rows in rid order.
    rows = [[0, 6], [1, 6], [2, 7], [3, 7], [4, 8], [5, 8]]
    caps = [4, 2]
    # Fig. 6 alone finds C = rows 1, 3, 5
    assert verify.certify_group_scalar(rows[:1] + rows[2:3] + rows[4:5], caps, 4) == 3
    # adding D2T1 and D4T2 keeps 3; D6T3 reaches 4
    assert verify.certify_group_scalar(rows[:5], caps, 4) == 3
    assert verify.certify_group_scalar(rows, caps, 4) == 4


def test_fig4_without_constraint_is_not_4_diverse():
    assert exact_diversity(FIG4, ATTRS) == 3
    err = raises_verification(check_kl, *rid_set(FIG4, ATTRS), K=6, L=4, match="group 7")
    assert "treatment" in err.message          # counterexample: delete T1, T2, T3
    assert list(greedy(FIG4, 4)) == [3]
    assert list(greedy(FIG4, 4, vector_max=0)) == [3]
    # L = 3 without the constraint is fine (Fig. 8 step 1: C has 3 rows)
    assert check_kl(*rid_set(FIG4, ATTRS), K=6, L=3)["min_certified_l"] >= 3


def test_theorem2_constraints_only_relax():
    # 001 Theorem 2: a group L-diverse without constraints is L-diverse with.
    for cl in ({"treatment": 1}, {"treatment": 0}, {"disease": 1, "treatment": 1}):
        assert check_kl(*rid_set(FIG1, ATTRS), K=4, L=2, column_l=cl)["min_certified_l"] >= 2


# ---------------------------------------------------------------------------
# violations
# ---------------------------------------------------------------------------

def two_groups():
    rows = [(r, 10, (f"d{r}", f"t{r}")) for r in range(1, 6)]
    rows += [(r, 20, (f"d{r}", f"t{r % 3}")) for r in range(6, 12)]
    return rows


def test_passes_two_groups():
    res = check_kl(*rid_set(two_groups(), ATTRS), K=5, L=3)
    assert res["groups"] == 2 and res["min_size"] == 5 and res["min_certified_l"] >= 3


def test_group_below_k():
    err = raises_verification(check_kl, *rid_set(two_groups(), ATTRS), K=6, L=2,
                              match="group 10 has 5 rows, fewer than K = 6")
    assert "1 of 2 groups" in err.detail


def test_k_none_and_l_none_skip():
    res = check_kl(*rid_set(two_groups(), ATTRS), K=None, L=None)
    assert res["min_certified_l"] is None and res["min_size"] == 5


def test_duplicated_rid_in_two_values():
    g, a, v, r = rid_set(two_groups(), ATTRS)
    i = v.index("d2")
    r[i] = np.array([2, 3])            # rid 3 now has two diseases
    raises_verification(check_kl, g, a, v, r, K=1, L=1, match="row id 3")


def test_duplicated_rid_in_two_groups():
    rows = two_groups() + [(3, 20, ("dx", "tx"))]
    raises_verification(check_kl, *rid_set(rows, ATTRS), K=1, L=1, match="row id 3")


def test_rid_in_other_group_for_other_attribute():
    g, a, v, r = rid_set(two_groups(), ATTRS)
    i = v.index("t1")                  # group 20 has a treatment t1 (rids 7, 10)
    j = [k for k in range(len(v)) if v[k] == "t1" and g[k] == 10][0]
    r[j] = np.array([], dtype=np.int64)
    r[i] = np.append(r[i], 1)          # rid 1: disease in group 10, treatment in 20
    del g[j], a[j], v[j], r[j]
    err = raises_verification(check_kl, g, a, v, r, K=1, L=1, match="group 10")
    assert "row id 1" in err.message


def test_incomplete_group_missing_from_one_attribute():
    g, a, v, r = rid_set(two_groups(), ATTRS)
    i = v.index("t4")
    del g[i], a[i], v[i], r[i]         # rid 4 has a disease but no treatment
    err = raises_verification(check_kl, g, a, v, r, K=1, L=1, match="group 10 is incomplete")
    assert "row id 4" in err.message and "'treatment'" in err.message


def test_group_missing_a_whole_attribute():
    g, a, v, r = rid_set(two_groups(), ATTRS)
    keep = [i for i in range(len(g)) if not (g[i] == 20 and a[i] == "disease")]
    sub = [[x[i] for i in keep] for x in (g, a, v, r)]
    raises_verification(check_kl, *sub, K=1, L=1, match="group 20 is incomplete")


def test_split_value_entry_is_rejected():
    # one value in two entries would let the greedy count it twice
    g, a, v, r = rid_set(FIG1, ATTRS)
    i = v.index("Heart disease")
    g.append(g[i]), a.append(a[i]), v.append(v[i]), r.append(r[i][1:])
    r[i] = r[i][:1]
    raises_verification(check_kl, g, a, v, r, K=1, L=1, match="more than one rid_set entry")


def test_empty_rid_set_is_rejected():
    g, a, v, r = rid_set(FIG1, ATTRS)
    g.append(1), a.append("disease"), v.append("Cold"), r.append(np.array([], np.int64))
    raises_verification(check_kl, g, a, v, r, K=1, L=1, match="empty RID set")


def test_not_l_diverse_by_hand_greedy_path():
    # One group where no single attribute gives a small cover (so the
    # counterexample shortcut does not apply) but two values cover it:
    # "a" covers rids 1-3, "y" covers rids 4-6.
    rows = [(1, 5, ("a", "x1")), (2, 5, ("a", "x2")), (3, 5, ("a", "x3")),
            (4, 5, ("b", "y")), (5, 5, ("c", "y")), (6, 5, ("d", "y"))]
    assert exact_diversity(rows, ATTRS) == 2
    err = raises_verification(check_kl, *rid_set(rows, ATTRS), K=6, L=3, match="group 5")
    assert "greedy certificate" in err.message
    assert check_kl(*rid_set(rows, ATTRS), K=6, L=2)["min_certified_l"] >= 2


def test_column_wise_violation():
    # Fig. 4 with treatment allowed 3 deletions: T1, T2, T3 delete all rows.
    raises_verification(check_kl, *rid_set(FIG4, ATTRS), K=6, L=4,
                        column_l={"treatment": 3}, match="column-wise")
    # A constrained group where the greedy must refuse: disease capped at 1,
    # "a" (3 rows) + "y" (3 rows) still delete everything with 2 deletions.
    rows = [(1, 5, ("a", "x1")), (2, 5, ("a", "x2")), (3, 5, ("a", "x3")),
            (4, 5, ("b", "y")), (5, 5, ("c", "y")), (6, 5, ("d", "y"))]
    assert exact_diversity(rows, ATTRS, {"disease": 1}) == 2
    raises_verification(check_kl, *rid_set(rows, ATTRS), K=1, L=3,
                        column_l={"disease": 1}, match="group 5")


def test_column_wise_zero_cap_exempts_attribute():
    # 001 sec. 5: L_i = 0 means values of attribute i are never deleted;
    # a treatment-only cover no longer counts.
    rows = [(r, 1, ("flu", f"t{r}")) for r in range(1, 5)]
    raises_verification(check_kl, *rid_set(rows, ATTRS), K=4, L=2)
    res = check_kl(*rid_set(rows, ATTRS), K=4, L=2, column_l={"disease": 0})
    assert res["min_certified_l"] >= 2
    # nothing admissible at all: every L holds, reported as >= L
    res = check_kl(*rid_set(rows, ATTRS), K=4, L=7, column_l={"disease": 0, "treatment": 0})
    assert res["min_certified_l"] >= 7


def test_theorem6_as_printed_would_be_unsound():
    # One attribute, values A, A, B.  Deleting A and B removes everything, so
    # the group is 2-diverse, not 3-diverse.  001 Theorem 6 as printed
    # (SumF of the 3 largest = 3 <= |C| = 3) would say yes.
    rows = [(1, 1, ("A",)), (2, 1, ("A",)), (3, 1, ("B",))]
    assert exact_diversity(rows, ("d",)) == 2
    assert list(greedy(rows, 3, attrs=("d",))) == [2]
    assert verify.certify_group_scalar([[0], [0], [1]], [10 ** 9], 3) == 2
    raises_verification(check_kl, *rid_set(rows, ("d",)), K=1, L=3)
    # and a single-valued group is not even 2-diverse
    rows = [(r, 1, ("A",)) for r in range(5)]
    raises_verification(check_kl, *rid_set(rows, ("d",)), K=5, L=2, match="at most 1-diverse")


def test_null_values_are_values():
    rows = [(1, 1, (None, "x")), (2, 1, ("a", None)), (3, 1, ("b", "y"))]
    res = check_kl(*rid_set(rows, ATTRS), K=3, L=3)
    assert res["min_certified_l"] == 3


def test_first_failing_group_is_named():
    rows = [(r, 30, ("a", "b")) for r in range(3)]               # fails L=2
    rows += [(r, 40, (f"a{r}", f"b{r}")) for r in range(3, 6)]
    rows += [(r, 35, ("a", "b")) for r in range(6, 9)]           # fails too
    err = raises_verification(check_kl, *rid_set(rows, ATTRS), K=3, L=2, match="group 30")
    assert "2 of 3 groups fail" in err.detail


def test_flat_form_matches_list_form():
    g, a, v, r = rid_set(two_groups(), ATTRS)
    res1 = check_kl(g, a, v, r, K=5, L=3, return_groups=True)
    res2 = check_kl(np.array(g), np.array(a), np.array(v), np.concatenate(r), K=5, L=3,
                    rid_counts=[len(x) for x in r], return_groups=True)
    assert np.array_equal(res1["certified_l"], res2["certified_l"])
    # attribute names as an object array, values as codes (the catalog reader's form)
    codes = {x: i for i, x in enumerate(sorted(set(v)))}
    res4 = check_kl(np.array(g), np.array(a, dtype=object), np.array([codes[x] for x in v]),
                    np.concatenate(r), K=5, L=3, rid_counts=np.array([len(x) for x in r]),
                    return_groups=True)
    assert np.array_equal(res1["certified_l"], res4["certified_l"])
    # python lists of rids work too
    res3 = check_kl(g, a, v, [x.tolist() for x in r], K=5, L=3)
    assert res3["min_certified_l"] == res1["min_certified_l"]


def test_sparse_rids_and_value_codes():
    rng = np.random.default_rng(3)
    rows = [(int(x), int(x) % 3, (int(x) % 7, int(x) % 5))
            for x in rng.choice(10 ** 15, 60, replace=False)]
    res = check_kl(*rid_set(rows, ATTRS), K=10, L=2)
    assert res["rows"] == 60 and res["groups"] == 3


def test_empty_catalog():
    res = check_kl([], [], [], [], K=5, L=3)
    assert res["groups"] == 0 and res["min_size"] is None


def test_invalid_parameters():
    g, a, v, r = rid_set(FIG1, ATTRS)
    raises_invalid(check_kl, g, a, v, r, K=-1, L=2)
    raises_invalid(check_kl, g, a, v, r, K=2.5, L=2)
    raises_invalid(check_kl, g, a, v, r, K=True, L=2)
    raises_invalid(check_kl, g[:-1], a, v, r, K=2, L=2)
    raises_invalid(check_kl, g, a, v[:-1], r, K=2, L=2)
    raises_invalid(check_kl, g, a, v, r[:-1], K=2, L=2)
    raises_invalid(check_kl, g, a, v, r, K=2, L=2, column_l={"nosuch": 1})
    raises_invalid(check_kl, g, a, v, r, K=2, L=2, column_l={"treatment": -1})
    raises_invalid(check_kl, g, a, v, r, K=2, L=2, column_l=[("treatment", 1)])
    raises_invalid(check_kl, g, a, v, r, K=2, L=None, column_l={"treatment": 1})
    raises_invalid(check_kl, g, a, v, r[:-1] + [[1, None]], K=2, L=2)
    raises_invalid(check_kl, g, a[:-1] + [None], v, r, K=2, L=2)
    raises_invalid(check_kl, g, a, v, np.concatenate(r), K=2, L=2, rid_counts=[1] * len(g))


# ---------------------------------------------------------------------------
# the certificate against brute force and itself
# ---------------------------------------------------------------------------

@st.composite
def small_release(draw):
    m = draw(st.integers(1, 3))
    G = draw(st.integers(1, 4))
    rows, rid = [], 0
    for g in range(G):
        n = draw(st.integers(1, 9))
        domains = [draw(st.integers(1, 6)) for _ in range(m)]
        for _ in range(n):
            rid += draw(st.integers(1, 3))
            rows.append((rid, g * 11, tuple(draw(st.integers(0, d - 1)) for d in domains)))
    attrs = tuple(f"s{i}" for i in range(m))
    cl = draw(st.one_of(st.none(), st.dictionaries(st.sampled_from(attrs),
                                                   st.integers(0, 4), max_size=m)))
    L = draw(st.integers(1, 6))
    return rows, attrs, cl, L


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(small_release())
def test_certificate_is_sound_and_paths_agree(case):
    rows, attrs, cl, L = case
    rs = verify._parse_rid_set(*rid_set(rows, attrs))
    caps = verify._column_caps(cl, rs.anames, L, rs.G)
    groups = np.arange(rs.G)
    vec = verify._greedy(rs, caps, L, groups, vector_max=10 ** 9)
    sca = verify._greedy(rs, caps, L, groups, vector_max=0)
    assert np.array_equal(vec, sca)
    cert, ub, _, _ = verify._certify(rs, caps, L)
    by_group = {}
    for r in rows:
        by_group.setdefault(r[1], []).append(r)
    passes = True
    for i, gid in enumerate(rs.gvals):
        truth = exact_diversity(by_group[gid], attrs, {str(k): v for k, v in (cl or {}).items()})
        proven = min(int(cert[i]), L)
        if truth is not None:
            assert proven <= truth, (gid, proven, truth)      # sound
            assert truth <= ub[i]                               # ub is a real cover
        assert min(int(vec[i]), L) <= (truth if truth is not None else L)
        passes &= cert[i] >= L
    if passes:
        check_kl(*rid_set(rows, attrs), K=1, L=L, column_l=cl)
    else:
        raises_verification(check_kl, *rid_set(rows, attrs), K=1, L=L, column_l=cl)


def random_release(rng, n, G, cards):
    gid = np.sort(rng.integers(0, G, n))
    rids = rng.permutation(n).astype(np.int64) + 1
    g_, a_, v_, r_ = [], [], [], []
    for a, card in enumerate(cards):
        col = rng.integers(0, card, n)
        key = gid * 100000 + col
        o = np.argsort(key, kind="stable")
        k = key[o]
        b = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        g_.append(k[b] // 100000)
        v_.append(k[b] % 100000)
        a_ += [f"a{a}"] * b.size
        r_ += np.split(rids[o], b[1:])
    return np.concatenate(g_), a_, np.concatenate(v_), r_


def test_vectorised_matches_scalar_on_random_groups():
    rng = np.random.default_rng(11)
    g, a, v, r = random_release(rng, 3000, 60, [40, 8, 4])
    rs = verify._parse_rid_set(g, a, v, r)
    for cl, L in [(None, 4), (None, 7), ({"a2": 2}, 6), ({"a1": 3, "a2": 1}, 5)]:
        caps = verify._column_caps(cl, rs.anames, L, rs.G)
        groups = np.arange(rs.G)
        assert np.array_equal(verify._greedy(rs, caps, L, groups, 10 ** 9),
                              verify._greedy(rs, caps, L, groups, 0))


def test_stable_argsort_by_is_the_stable_argsort_of_the_combined_key():
    """arrays._stable_argsort_by: by major, then minor, then position -- by two 16-bit radix
    passes when both fit, else by the combined key -- the permutation np.argsort gives."""
    from deid.verify.shared.arrays import _stable_argsort_by
    rng = np.random.default_rng(4)
    for n, n_major, n_minor in [(10, 3, 4), (50_000, 14_000, 320), (50_000, 70_000, 9),
                                (50_000, 5, 1 << 17), (50_000, 1 << 16, 1 << 16)]:
        major = rng.integers(0, n_major, n)
        minor = rng.integers(0, n_minor, n)
        expected = np.argsort(major * n_minor + minor, kind="stable")
        assert np.array_equal(_stable_argsort_by(major, minor, n_major, n_minor), expected)
        assert np.array_equal(_stable_argsort_by(major.astype(np.int32), minor, n_major, n_minor),
                              expected)


def test_greedy_on_some_groups_matches_all_groups():
    """_greedy on a subset of the groups (few: their rows are selected first; most: every row
    is sorted) gives each group the certificate it gets among all groups."""
    rng = np.random.default_rng(12)
    g, a, v, r = random_release(rng, 20_000, 300, [40, 8, 4])
    rs = verify._parse_rid_set(g, a, v, r)
    for cl, L in [(None, 5), ({"a2": 2}, 6)]:
        caps = verify._column_caps(cl, rs.anames, L, rs.G)
        every = verify._greedy(rs, caps, L, np.arange(rs.G))
        for groups in (np.arange(0, rs.G, 7), np.arange(rs.G)[np.arange(rs.G) % 7 != 3]):
            assert np.array_equal(verify._greedy(rs, caps, L, groups), every[groups])


def test_rows_of_sparse_and_dense_rids_agree():
    """_parse_rid_set's rows: rids spanning a compact range fill every slot or leave gaps;
    either way each row holds its group and its entry per attribute."""
    rng = np.random.default_rng(13)
    g, a, v, r = random_release(rng, 5_000, 40, [30, 6])
    dense = verify._parse_rid_set(g, a, v, r)
    gappy = verify._parse_rid_set(g, a, v, [x * 2 for x in r])       # every other slot empty
    sparse = verify._parse_rid_set(g, a, v, [x * 10 ** 9 for x in r])  # ranked rids
    for rs in (gappy, sparse):
        assert np.array_equal(rs.row_g, dense.row_g)
        assert np.array_equal(rs.row_ent, dense.row_ent)
        assert np.array_equal(rs.sizes, dense.sizes)
    rows = {}
    for e, rids in enumerate(r):
        for x in rids.tolist():
            rows.setdefault(x, []).append(e)
    order = sorted(rows)
    assert np.array_equal(dense.row_ent, np.array([rows[x] for x in order]))
    assert np.array_equal(dense.row_g, dense.gcode[dense.row_ent[:, 0]])


def test_large_group_uses_scalar_path():
    rng = np.random.default_rng(5)
    n = verify._VECTOR_MAX_GROUP + 200
    rows = [(i, 1, (int(x), int(y))) for i, (x, y) in
            enumerate(zip(rng.integers(0, 3, n), rng.integers(0, 2000, n)))]
    res = check_kl(*rid_set(rows, ATTRS), K=n, L=3)
    assert res["min_certified_l"] >= 3
    raises_verification(check_kl, *rid_set(rows, ATTRS), K=n, L=4, match="at most 3-diverse")


def test_200k_rows():
    """A large release checked whole (its speed is measured in bench/, not here)."""
    rng = np.random.default_rng(0)
    g, a, v, r = random_release(rng, 200_000, 4000, [500, 60, 31])
    res = check_kl(g, a, v, r, K=20, L=5, column_l={"a2": 2})
    assert res["groups"] == 4000 and res["min_certified_l"] >= 5


# ---------------------------------------------------------------------------
# partition and sizes
# ---------------------------------------------------------------------------

def test_partition_ok():
    all_rids = np.arange(100, 200)
    res = check_partition(all_rids[::-1].copy(), all_rids)
    assert res == {"rows": 100, "memberships": 100}


def test_partition_missing_rid():
    all_rids = np.arange(10)
    err = raises_verification(check_partition, all_rids[all_rids != 7], all_rids,
                              match="row id 7")
    assert "in no group" in err.message


def test_partition_duplicated_rid():
    all_rids = np.arange(10)
    member = np.r_[all_rids, 4]
    gid = np.r_[np.zeros(10, np.int64), 3]
    err = raises_verification(check_partition, member, all_rids, group_id=gid,
                              match="row id 4")
    assert "groups 0, 3" in err.message


def test_partition_unknown_rid():
    all_rids = np.arange(10)
    raises_verification(check_partition, np.r_[all_rids, 99], all_rids, match="row id 99")


def test_partition_bad_input():
    raises_invalid(check_partition, [1, 2], [1, 1, 2])
    raises_invalid(check_partition, [1, 2], [1, 2], group_id=[1])
    raises_invalid(check_partition, [[1, 2]], [1, 2])
    raises_invalid(check_partition, [1.5], [1])
    assert check_partition([], []) == {"rows": 0, "memberships": 0}


def test_group_sizes():
    gid = np.array([5, 5, 5, 9, 9, 9, 9])
    assert check_group_sizes(gid, 3) == {"groups": 2, "rows": 7, "min_size": 3}
    err = raises_verification(check_group_sizes, gid, 4, match="group 5 has 3 rows")
    assert "1 of 2 groups" in err.detail
    assert check_group_sizes([], 4)["min_size"] is None
    raises_invalid(check_group_sizes, gid, -2)


def test_group_counts_are_group_sizes_of_the_repeated_ids():
    """check_group_counts(counts) == check_group_sizes(np.repeat(arange, counts)): same summary,
    same failure (the first group below k, by position)."""
    from deid.verify import check_group_counts
    for counts in ([3, 4], [4, 0, 4, 7], [], [0, 0], [5, 2, 9, 1]):
        gid = np.repeat(np.arange(len(counts)), counts)
        for k in (1, 3, 4):
            try:
                want = check_group_sizes(gid, k)
            except DeidError as e:
                got = raises_verification(check_group_counts, np.array(counts, np.int64), k)
                assert (got.message, got.detail) == (e.message, e.detail)
            else:
                assert check_group_counts(np.array(counts, np.int64), k) == want
    raises_invalid(check_group_counts, [3], -2)


def test_cluster_sizes():
    cid = np.repeat(np.arange(4), [10, 12, 10, 11])
    res = check_cluster_sizes(cid, 10)
    assert res["clusters"] == res["groups"] == 4 and res["min_size"] == 10
    raises_verification(check_cluster_sizes, cid, 11, match="cluster 0 has 10 rows")


def test_k_per_source():
    counts = {"findings": np.array([2, 3, 4]), "survival": np.array([9]),
              "genes": np.array([], dtype=np.int64)}
    res = check_k_per_source(counts, 2, n_rows=9)
    assert res["min_size"] == 2
    assert res["sources"]["findings"] == {"classes": 3, "min_size": 2}
    assert res["sources"]["genes"] == {"classes": 0, "min_size": None}
    err = raises_verification(check_k_per_source, counts, 3, match="'findings'")
    assert "1 of 3 classes" in err.detail
    # k per source
    check_k_per_source(counts, {"findings": 2, "survival": 9, "genes": 50})
    raises_verification(check_k_per_source, counts, {"findings": 2, "survival": 10,
                                                     "genes": 1}, match="'survival'")
    raises_invalid(check_k_per_source, counts, {"findings": 2})
    raises_verification(check_k_per_source, counts, 2, n_rows=10, match="add up to 9")
    raises_invalid(check_k_per_source, {"a": [0, 3]}, 1)
    raises_invalid(check_k_per_source, [1, 2], 1)


def test_002_table2_use_case():
    # 002 Table 2: the anonymised table has k = 2 for findings (PT, PN, PM),
    # survival (cause of death) and BMI.
    findings = [("3", "0", "1"), ("3", "0", "X"), ("3", "0", "X"), ("3", "0", "X"),
                ("3", "0", "1"), ("3", "0", "X")]
    survival = ["I25", "C18", "C18", "C18", "I25", "C18"]
    bmi = ["Over", "Over", "Normal", "Normal", "Normal", "Normal"]

    def classes(col):
        _, c = np.unique(np.array([str(x) for x in col]), return_counts=True)
        return c
    counts = {"findings": classes(findings), "survival": classes(survival),
              "bmi": classes(bmi)}
    assert check_k_per_source(counts, 2, n_rows=6)["min_size"] == 2
    raises_verification(check_k_per_source, counts, 3)


def test_never_imports_methods():
    import ast
    import inspect
    tree = ast.parse(inspect.getsource(verify))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert "methods" not in (node.module or "")
        if isinstance(node, ast.Import):
            assert all("methods" not in n.name for n in node.names)


def test_coded_attributes_are_the_attribute_names():
    """check_kl takes the attributes as readers.Coded (codes into names; an unused or repeated
    name is as in the names' own column): the same result, the same failures."""
    from deid.verify.shared.readers import Coded
    rng = np.random.default_rng(21)
    g, a, v, r = random_release(rng, 3000, 40, [30, 6, 5])
    names = ["zz", "a1", "a0", "a2"]                      # "zz" unused; codes into this list
    codes = np.array([names.index(x) for x in a])
    assert check_kl(g, Coded(codes, names), v, r, K=5, L=3) == check_kl(g, a, v, r, K=5, L=3)
    twice = ["a0", "a1", "a2", "a0"]                      # one name twice: one attribute
    codes2 = np.array([twice.index(x) for x in a])
    codes2[(codes2 == 0) & (np.arange(len(a)) % 2 == 1)] = 3
    assert check_kl(g, Coded(codes2, twice), v, r, K=5, L=3) == check_kl(g, a, v, r, K=5, L=3)
    with pytest.raises(DeidError) as e:
        check_kl(g, Coded(codes, names[:2]), v, r, K=5, L=3)
    assert e.value.sqlstate == INVALID_PARAMETER_VALUE
    raises_invalid(check_kl, g, Coded(codes[:-1], names), v, r, K=5, L=3)


def test_runs_and_repeat_are_np_repeat():
    from deid.verify.shared.arrays import _repeat, _runs
    rng = np.random.default_rng(2)
    for lengths in ([], [3], [1, 1, 1], [2, 0, 3], [0, 0], [4, 2, 0], rng.integers(1, 9, 1000),
                    rng.integers(0, 3, 1000)):
        lengths = np.asarray(lengths, np.int64)
        for first, dtype in ((0, np.int64), (17, np.int32)):
            got = _runs(lengths, first, dtype)
            assert got.dtype == dtype
            assert np.array_equal(got, np.repeat(np.arange(first, first + len(lengths)), lengths))
        values = rng.integers(-2 ** 62, 2 ** 62, len(lengths))        # steps that wrap int64
        assert np.array_equal(_repeat(values, lengths), np.repeat(values, lengths))
        assert _repeat(values.astype(np.int32), lengths).dtype == np.int32
