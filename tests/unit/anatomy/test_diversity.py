"""L-diversity checks (001 Def. 6-7, Figs. 6-8, Theorems 3-6) and the Exponential-L level."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deid.errors import DeidError, INVALID_PARAMETER_VALUE
from deid.methods.anatomy import diversity as dv

# 001 Fig. 1 (sensitive part): disease type, treatment
HEART, FLU, STOMACH = 0, 1, 2
MEDICINE, SURGERY, IV = 0, 1, 2
FIG1 = np.array([[HEART, MEDICINE], [HEART, SURGERY], [FLU, IV], [STOMACH, IV]])

# 001 Fig. 4: D1..D6 x T1..T3
FIG4 = np.array([[1, 1], [2, 1], [3, 2], [4, 2], [5, 3], [6, 3]])
TREATMENT = 1


def test_fig6_trace():
    # f(heart) = f(IV) = 2, others 1: every row has total frequency 3 (001 Fig. 6 example)
    trace = dv.greedy_trace(FIG1, L=2)
    assert trace["order"] == [0, 1, 2, 3]            # all ties: input order
    assert trace["independent"] == [0, 2]            # row 1 shares "heart disease" with row 0
    assert trace["certified"] == 2
    assert dv.greedy_check(FIG1, 2) is True
    assert dv.greedy_check(FIG1, 3) is False
    assert dv.certified_l(FIG1) == 2
    assert dv.exact_min_deletions(FIG1) == 2        # e.g. delete "heart disease" and "IV"


def test_fig8_column_wise_trace():
    trace = dv.greedy_trace(FIG4, {TREATMENT: 2}, L=4)
    assert trace["independent"] == [0, 2, 4]         # Step 1: (D1,T1) (D3,T2) (D5,T3)
    # Steps 2-4 add (D2,T1), (D4,T2), (D6,T3); C stays 3-diverse, then becomes 4-diverse
    assert trace["history"] == [(1, 3), (3, 3), (5, 4)]
    assert trace["rows"] == [0, 2, 4, 1, 3, 5]
    assert dv.greedy_check(FIG4, 4, {TREATMENT: 2}) is True
    assert dv.certified_l(FIG4, {TREATMENT: 2}) == 4
    assert dv.exact_min_deletions(FIG4, {TREATMENT: 2}) == 4


def test_fig4_without_column_limit_is_not_4_diverse():
    assert dv.greedy_check(FIG4, 4) is False
    assert dv.certified_l(FIG4) == 3                 # three treatments
    assert dv.exact_min_deletions(FIG4) == 3


def test_theorem2_column_model_is_weaker():
    # a group L-diverse without limits is L-diverse with any limits L_i <= L
    rng = np.random.default_rng(5)
    for _ in range(200):
        codes = rng.integers(0, 4, (rng.integers(1, 12), 3))
        exact = dv.exact_min_deletions(codes)
        limits = {int(a): int(rng.integers(0, 4)) for a in range(3)}
        assert dv.exact_min_deletions(codes, limits) >= exact


def test_paper_theorem6_corner_case_is_not_certified():
    # 001 Theorem 6 as printed would call C = {(a1,b1), (a2,b1)} 2-diverse with L_a = 0
    # (frequency of b1 = 2 <= |C|), but deleting b1 alone deletes C.
    codes = np.array([[1, 7], [2, 7]])
    assert dv.exact_min_deletions(codes, {0: 0}) == 1
    assert dv.greedy_check(codes, 2, {0: 0}) is False
    assert dv.certified_l(codes, {0: 0}) == 1


def test_single_attribute_is_distinct_count():
    codes = np.array([3, 3, 1, 9, 9, 9, 4]).reshape(-1, 1)
    assert dv.certified_l(codes) == 4
    assert dv.exact_min_deletions(codes) == 4


def test_unbounded_when_limits_forbid_deleting_the_group():
    codes = np.array([[1, 1], [2, 2], [3, 3]])
    assert dv.exact_min_deletions(codes, {0: 1, 1: 1}) == dv.UNBOUNDED_L
    assert dv.certified_l(codes, {0: 1, 1: 1}) == dv.UNBOUNDED_L
    assert dv.greedy_check(codes, 50, {0: 1, 1: 1}) is True
    assert dv.certified_l(codes, {0: 0, 1: 0}) == dv.UNBOUNDED_L
    assert dv.certified_l_per_group([0, 0, 0], codes, {0: 1, 1: 1}, max_l=5).tolist() == [5]


def test_null_is_just_another_code_and_negative_codes():
    codes = np.array([[-1, 10**12], [-1, 5], [7, -(10**12)]])
    assert dv.certified_l(codes) == 2
    assert dv.exact_min_deletions(codes) == 2


def test_per_group_matches_single_groups_and_caps():
    rng = np.random.default_rng(11)
    gid = rng.integers(0, 30, 2000)
    codes = rng.integers(0, 6, (2000, 3))
    per = dv.certified_l_per_group(gid, codes, n_groups=32)
    assert per.dtype == np.int64 and per.shape == (32,)
    assert per.tolist() == [dv.certified_l(codes[gid == g]) if (gid == g).any() else 0
                            for g in range(32)]
    capped = dv.certified_l_per_group(gid, codes, n_groups=32, max_l=3)
    assert capped.tolist() == np.minimum(per, 3).tolist()
    limits = {1: 1}
    per_c = dv.certified_l_per_group(gid, codes, limits)
    assert per_c.tolist() == [dv.certified_l(codes[gid == g], limits) for g in range(30)]


def test_per_group_large_input():
    """A million rows in 20,000 groups, skewed values: one certified l per group (its speed is
    measured in bench/, not here)."""
    rng = np.random.default_rng(0)
    n, G = 1_000_000, 20_000
    p = 1.0 / np.arange(1, 31)
    codes = rng.choice(30, (n, 3), p=p / p.sum())
    gid = rng.integers(0, G, n)
    cert = dv.certified_l_per_group(gid, codes)
    assert cert.shape == (G,) and cert.min() >= 1


def test_exact_search_limits():
    big = np.arange(2 * (dv.EXACT_MAX_ROWS + 1)).reshape(-1, 2)
    with pytest.raises(DeidError) as e:
        dv.exact_min_deletions(big)
    assert e.value.sqlstate == INVALID_PARAMETER_VALUE and e.value.hint
    # duplicate rows collapse, so a large group of few distinct rows is fine
    assert dv.exact_min_deletions(np.tile(FIG1, (100, 1))) == 2
    assert dv.exact_min_deletions(np.zeros((0, 2), dtype=np.int64)) == 0


def test_invalid_arguments():
    for L in (0, -3, 1.5, True):
        with pytest.raises(DeidError) as e:
            dv.greedy_check(FIG1, L)
        assert e.value.sqlstate == INVALID_PARAMETER_VALUE
    for limits in ({2: 1}, {-1: 1}, {0: -1}, {0: 1.5}, {"0": 1}):
        with pytest.raises(DeidError) as e:
            dv.certified_l(FIG1, limits)
        assert e.value.sqlstate == INVALID_PARAMETER_VALUE
    for codes in (np.zeros((3, 0), dtype=np.int64), np.array([[0.5]]), np.zeros((2, 2, 2))):
        with pytest.raises(DeidError) as e:
            dv.certified_l(codes)
        assert e.value.sqlstate == INVALID_PARAMETER_VALUE
    with pytest.raises(DeidError):
        dv.certified_l_per_group([0, 1], FIG1)
    with pytest.raises(DeidError):
        dv.certified_l_per_group([0, 1, 2, 5], FIG1, n_groups=3)


def test_exponential_l_level():
    # Fig. 1: heart disease has 2 treatments, flu and stomach disease only IV -> level 1
    assert dv.exponential_l_per_group([0] * 4, FIG1).tolist() == [1]
    # a full 3 x 3 grid: every disease has 3 treatments and vice versa
    grid = np.array([[d, t] for d in range(3) for t in range(3)])
    assert dv.exponential_l_per_group([0] * 9, grid).tolist() == [3]
    # one attribute: distinct count; groups are independent
    gid = [0, 0, 0, 1, 1]
    assert dv.exponential_l_per_group(gid, np.array([1, 2, 2, 5, 5])).tolist() == [2, 1]


def test_exponential_l_cube_and_sorted_paths_agree():
    rng = np.random.default_rng(2)
    for _ in range(100):
        n, s, G = int(rng.integers(1, 150)), int(rng.integers(1, 4)), int(rng.integers(1, 6))
        codes = rng.integers(0, rng.integers(1, 6), (n, s))
        gid = rng.integers(0, G, n)
        dense, sizes = dv.dense_columns(codes)
        cube = dv.exponential_l_dense(gid, dense, sizes, G)
        ref = dv._exponential_l_sorted(gid, dense, sizes, G)
        ref[np.bincount(gid, minlength=G) == 0] = 0
        assert cube.tolist() == ref.tolist()


# ------------------------------------------------------------------------- property tests

def random_codes(rng, values, m, zipf=None):
    """m rows, one column per entry of `values` (its number of distinct codes): uniform, or
    Zipf-skewed with exponent `zipf`."""
    cols = []
    for v in values:
        if zipf:
            p = 1.0 / np.arange(1, v + 1) ** zipf
            cols.append(rng.choice(v, m, p=p / p.sum()))
        else:
            cols.append(rng.integers(0, v, m))
    return np.stack(cols, axis=1)


@st.composite
def small_groups(draw, max_rows=14):
    m = draw(st.integers(1, max_rows))
    s = draw(st.integers(1, 5))
    values = draw(st.lists(st.integers(1, 6), min_size=s, max_size=s))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    skew = draw(st.booleans())
    codes = random_codes(rng, values, m, 2.0 if skew else None)
    limits = None
    if draw(st.booleans()):
        limits = {a: draw(st.integers(0, 4)) for a in range(s) if draw(st.booleans())}
    return codes, limits


@settings(max_examples=1500, deadline=None)
@given(small_groups(), st.integers(1, 8))
def test_greedy_is_sound_against_exact(group, L):
    codes, limits = group
    exact = dv.exact_min_deletions(codes, limits)
    cert = dv.certified_l(codes, limits)
    assert cert <= exact
    if dv.greedy_check(codes, L, limits):
        assert exact >= L                           # never says yes wrongly
    assert dv.greedy_check(codes, L, limits) == (cert >= L)


@settings(max_examples=500, deadline=None)
@given(small_groups(max_rows=30))
def test_vectorised_matches_literal_reference(group):
    codes, limits = group
    assert dv.certified_l(codes, limits) == dv.greedy_trace(codes, limits)["certified"]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 400), st.integers(1, 4), st.integers(1, 25), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_per_group_matches_reference(n, s, G, limited, seed):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, rng.integers(1, 12), (n, s))
    gid = rng.integers(0, G, n)
    limits = {0: int(rng.integers(0, 4))} if limited else None
    per = dv.certified_l_per_group(gid, codes, limits, n_groups=G)
    ref = [dv.greedy_trace(codes[gid == g], limits)["certified"] if (gid == g).any() else 0
           for g in range(G)]
    assert per.tolist() == ref


@settings(max_examples=40, deadline=None)
@given(st.integers(20, 250), st.integers(2, 4), st.integers(2, 9), st.integers(0, 2**32 - 1))
def test_column_wise_on_larger_groups_matches_reference(m, s, L, seed):
    # one low-cardinality limited attribute (like "recur status" in 001's Fig. 12) makes Fig. 6
    # stop early, so Fig. 7 runs long, with batches of rejected candidates
    rng = np.random.default_rng(seed)
    cols = [rng.integers(0, 3, m)]
    for _ in range(s - 1):
        v = int(rng.integers(3, 40))
        p = 1.0 / np.arange(1, v + 1)
        cols.append(rng.choice(v, m, p=p / p.sum()))
    codes = np.stack(cols, axis=1)
    limits = {0: int(rng.integers(0, 3))}
    ref = dv.greedy_trace(codes, limits, L=L)["certified"]
    assert min(dv.certified_l(codes, limits), L) == ref
    assert dv.greedy_check(codes, L, limits) == (ref >= L)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 3, 40, 400]), st.integers(1, 12),
       st.booleans())
def test_capped_fast_path_matches_reference(seed, G, L, skewed):
    # large enough for the capped path's sampled thresholds and further rounds, with and
    # without its group-ordered layout; checked against the uncapped vectorised greedy and, on
    # a few groups, the literal row-at-a-time reference
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2_000, 40_000))
    sizes = [int(rng.integers(2, 400)), int(rng.integers(2, 300)), int(rng.integers(2, 16))]
    codes = random_codes(rng, sizes, n, 1.5 if skewed else None)
    gid = rng.integers(0, G, n)
    if G > 1:
        gid[rng.random(n) < 0.5] = 0                   # one large group among small ones
    capped = dv.certified_l_per_group(gid, codes, n_groups=G, max_l=L)
    full = dv.certified_l_per_group(gid, codes, n_groups=G)
    assert capped.tolist() == np.minimum(full, L).tolist()
    saved = dv.CAPPED_LOCAL_PAIRS
    try:
        dv.CAPPED_LOCAL_PAIRS = 0                       # force the group-ordered layout
        assert dv.certified_l_per_group(gid, codes, n_groups=G, max_l=L).tolist() \
            == capped.tolist()
    finally:
        dv.CAPPED_LOCAL_PAIRS = saved
    # rows handed over already in group order (input order within each group), as the
    # partition's acceptor does: the grouping sort is skipped, the answer is the same
    o = np.argsort(gid, kind="stable")
    assert dv.certified_l_per_group(gid[o], codes[o], n_groups=G, max_l=L).tolist() \
        == capped.tolist()
    for g in rng.choice(G, min(G, 3), replace=False):
        rows = codes[gid == g]
        assert capped[g] == dv.greedy_trace(rows, L=L)["certified"]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.booleans())
def test_capped_small_groups_deferred_half_matches_reference(seed, L, skewed):
    # groups of at most 8 x L rows: the capped path scans the first part of each group's
    # Fig. 6 order first and the rest only for groups still short of L
    rng = np.random.default_rng(seed)
    G = int(rng.integers(1, 300))
    gsize = rng.integers(1, 8 * L + 1, G)
    gid = rng.permutation(np.repeat(np.arange(G), gsize))
    sizes = [int(rng.integers(2, 60)), int(rng.integers(2, 30)), int(rng.integers(2, 8))]
    codes = random_codes(rng, sizes, gid.size, 1.5 if skewed else None)
    capped = dv.certified_l_per_group(gid, codes, n_groups=G, max_l=L)
    full = dv.certified_l_per_group(gid, codes, n_groups=G)
    assert capped.tolist() == np.minimum(full, L).tolist()
    o = np.argsort(gid, kind="stable")                 # grouped input: per-run radix sort
    assert dv.certified_l_per_group(gid[o], codes[o], n_groups=G, max_l=L).tolist() \
        == capped.tolist()
    for g in rng.choice(G, min(G, 3), replace=False):
        assert capped[g] == dv.greedy_trace(codes[gid == g], L=L)["certified"]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5000),
       st.one_of(st.integers(1, 300), st.integers(1, 2**15)))
def test_order_grouped_then_matches_two_pass_sort(seed, G, fmax):
    # rows in group order (some groups empty): sorting runs of groups with one 16-bit radix
    # pass each gives the same stable (group, f) order as the general sort
    rng = np.random.default_rng(seed)
    gid = np.sort(rng.integers(0, G, int(rng.integers(0, 20_000)))).astype(np.int32)
    f = rng.integers(0, fmax + 1, gid.size).astype(np.int32)
    assert np.array_equal(dv._order_grouped_then(gid, f, G), dv._order_by_group_then(gid, f, G))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 2, 6, 50]), st.integers(1, 12),
       st.sampled_from(["random", "skewed", "ties", "degenerate"]))
def test_capped_windows_match_literal_reference(seed, G, L, kind):
    # rows in group order, as the partition's acceptor hands them over (grouped=True): the
    # capped scan goes over each round's sorted rows in windows (3 x L rows, then windows
    # twice as long) and must give the literal row-at-a-time greedy's answer for every
    # group -- large groups that need many windows, empty groups and degenerate columns too
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1_000, 25_000))
    gsize = rng.multinomial(n, rng.dirichlet(np.full(G, 0.7)))
    gid = np.repeat(np.arange(G), gsize)
    if kind == "random":
        codes = random_codes(rng, [300, 200, 12], n)
    elif kind == "skewed":
        codes = random_codes(rng, [300, 200, 12], n, 1.5)
    elif kind == "ties":
        codes = random_codes(rng, [3, 3, 2], n)
    else:                                               # one value; all distinct; two values
        codes = np.stack([np.zeros(n, dtype=np.int64), rng.permutation(n),
                          rng.integers(0, 2, n)], axis=1)
    dense, sizes = dv.dense_columns(dv.as_codes(codes))
    capped = dv.certify_dense(gid, dense, sizes, G, max_l=L, grouped=True)
    assert capped.tolist() == dv.certify_dense(gid, dense, sizes, G, max_l=L).tolist()
    assert capped.tolist() == [dv.greedy_trace(codes[gid == g], L=L)["certified"]
                               for g in range(G)]
