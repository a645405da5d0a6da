"""Property / fuzz tests of anatomize: random, tie-heavy and skewed tables."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deid.errors import DeidError, INVALID_PARAMETER_VALUE, PRIVACY_MODEL_UNSATISFIABLE
from deid.methods.anatomy import diversity as dv
from deid.methods.anatomy.partition import anatomize, sensitive_counts
from test_mondrian import canonical, reference_partition


def make_table(rng, n, d, s, kind):
    if kind == "random":
        qi = rng.integers(0, 500, (n, d)).astype(float)
    elif kind == "ties":                         # few distinct values, long runs at medians
        qi = rng.integers(0, rng.integers(1, 4), (n, d)).astype(float)
        qi[: n // 2, 0] = 1.0
    else:                                        # skewed
        qi = np.minimum(rng.zipf(1.3, (n, d)), 40).astype(float)
    cols = []
    for _ in range(s):
        v = int(rng.integers(2, 30))
        if kind == "random":
            cols.append(rng.integers(0, v, n))
        else:
            p = 1.0 / np.arange(1, v + 1) ** 1.1
            cols.append(rng.choice(v, n, p=p / p.sum()))
    return qi, np.stack(cols, axis=1)


@st.composite
def problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(1, 400))
    d = draw(st.integers(2, 6))
    s = draw(st.integers(1, 5))
    kind = draw(st.sampled_from(["random", "ties", "skewed"]))
    qi, codes = make_table(rng, n, d, s, kind)
    K = draw(st.integers(2, 25))
    L = draw(st.one_of(st.none(), st.integers(1, 6), st.integers(2, 4)))
    column_l = None
    if L is not None and draw(st.integers(0, 3)) == 0:
        column_l = {a: draw(st.integers(0, L)) for a in range(s) if draw(st.booleans())}
    return qi, codes, K, L, column_l


def check_result(res, qi, codes, K, L, column_l):
    n = len(qi)
    gid = res.group_id
    assert gid.shape == (n,) and gid.dtype == np.int64
    sizes = np.bincount(gid)
    assert sizes.size == res.n_groups and sizes.min() >= K       # every group >= K
    assert res.certified_l.shape == (res.n_groups,)
    if L is not None:
        assert res.certified_l.min() >= L
    assert res.certified_l.tolist() == dv.certified_l_per_group(
        gid, codes, column_l, n_groups=res.n_groups, max_l=L).tolist()
    if not column_l:
        full = anatomize(qi, codes, K, L, full_certificate=True)
        assert full.group_id.tolist() == gid.tolist()
        assert full.certified_l.tolist() == dv.certified_l_per_group(
            gid, codes, n_groups=res.n_groups).tolist()
    # per-attribute count tables add up to the group sizes (Fig. 3)
    for a in range(codes.shape[1]):
        g, _, c = sensitive_counts(gid, codes[:, a])
        assert np.bincount(g, weights=c, minlength=res.n_groups).tolist() == sizes.tolist()
    # the greedy certificate is sound: check it exactly where the search is small
    for g in range(res.n_groups):
        rows = codes[gid == g]
        if len(np.unique(rows, axis=0)) <= 14:
            assert dv.exact_min_deletions(rows, column_l) >= min(res.certified_l[g],
                                                                  dv.UNBOUNDED_L)


@settings(max_examples=400, deadline=None)
@given(problems())
def test_anatomize_properties(problem):
    qi, codes, K, L, column_l = problem
    try:
        res = anatomize(qi, codes, K, L, column_l)
    except DeidError as e:
        assert e.hint
        if e.sqlstate == PRIVACY_MODEL_UNSATISFIABLE:
            assert len(qi) < K or dv.certified_l(codes, column_l) < L
        else:
            assert e.sqlstate == INVALID_PARAMETER_VALUE
            distinct = [len(np.unique(codes[:, a])) for a in range(codes.shape[1])
                        if not column_l or column_l.get(a, L) >= len(np.unique(codes[:, a]))]
            assert L > min(distinct)
        return
    check_result(res, qi, codes, K, L, column_l)
    # same groups as the literal recursive Fig. 5 with the greedy check as acceptor
    accept = None
    if L is not None and L > 1:
        def accept(rows):
            return dv.greedy_check(codes[rows], L, column_l)
    ref = reference_partition(qi, K, accept)
    assert canonical(res.group_id, len(qi)) == canonical(ref, len(qi))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(30, 300), st.integers(1, 3), st.integers(2, 3))
def test_exponential_l_properties(seed, n, s, L):
    rng = np.random.default_rng(seed)
    qi = rng.integers(0, 50, (n, 2)).astype(float)
    codes = rng.integers(0, 4, (n, s))
    try:
        res = anatomize(qi, codes, K=2, L=L, model="exponential_l")
    except DeidError as e:
        assert e.sqlstate in (PRIVACY_MODEL_UNSATISFIABLE, INVALID_PARAMETER_VALUE)
        return
    assert np.bincount(res.group_id).min() >= 2
    level = dv.exponential_l_per_group(res.group_id, codes)
    assert level.min() >= L and res.certified_l.tolist() == level.tolist()
    assert np.bincount(res.group_id).min() >= L ** s           # needs L^s rows


def test_tie_heavy_large_table():
    rng = np.random.default_rng(7)
    n = 20_000
    qi = rng.integers(0, 3, (n, 4)).astype(float)            # 81 distinct QI tuples
    codes = rng.integers(0, 12, (n, 3))
    res = anatomize(qi, codes, K=50, L=5)
    check_result(res, qi, codes, 50, 5, None)


def test_skewed_medium_table_with_column_limits():
    rng = np.random.default_rng(8)
    n = 30_000
    qi = np.stack([rng.integers(1920, 2010, n), rng.integers(0, 2, n),
                   rng.integers(0, 6, n), rng.integers(0, 900, n)], axis=1).astype(float)
    p = 1.0 / np.arange(1, 31)
    codes = np.stack([rng.choice(30, n, p=p / p.sum()), rng.integers(0, 3, n),
                      rng.choice(30, n, p=p / p.sum())], axis=1)
    res = anatomize(qi, codes, K=20, L=6, column_l={1: 2})
    check_result(res, qi, codes, 20, 6, {1: 2})
    assert res.n_groups > 100


def test_blocked_checks_match_one_check(monkeypatch):
    # accept_groups checks runs of whole children separately; tiny runs must give the same
    # partition and certificates as one check over all children
    from deid.methods.anatomy import partition as anatomy
    rng = np.random.default_rng(11)
    for kind, column_l in (("random", None), ("skewed", {0: 2}), ("ties", None)):
        qi, codes = make_table(rng, 3000, 3, 3, kind)
        ref = anatomize(qi, codes, 8, 3, column_l=column_l)
        monkeypatch.setattr(anatomy, "BLOCK_ROWS", 40)
        res = anatomize(qi, codes, 8, 3, column_l=column_l)
        monkeypatch.setattr(anatomy, "BLOCK_ROWS", 1 << 17)
        assert np.array_equal(res.group_id, ref.group_id)
        assert np.array_equal(res.certified_l, ref.certified_l)


def test_blocks_cover_whole_children(monkeypatch):
    from deid.methods.anatomy import partition as anatomy
    child = np.repeat(np.arange(6, dtype=np.int32), [5, 1, 9, 2, 2, 7])
    monkeypatch.setattr(anatomy, "BLOCK_ROWS", 4)
    cuts = anatomy._blocks(child, 6)
    assert cuts[0] == 0 and cuts[-1] == child.size and np.all(np.diff(cuts) > 0)
    starts = np.searchsorted(child, np.arange(7))
    assert set(cuts.tolist()) <= set(starts.tolist())   # never inside a child


def test_pack_round_trip():
    # codes packed into one uint32 / uint64 (attribute 0 lowest) come back unchanged, fields
    # of 0 bits (one value) and fields up to 64 bits in all included
    from deid.methods.anatomy import partition as anatomy
    rng = np.random.default_rng(12)
    for sizes in ([1], [2], [1, 1, 3], [256, 2, 1], [1 << 16, 1 << 16], [1 << 20, 1 << 11, 2],
                  [1 << 21, 1 << 21, 1 << 21, 2], [3, 1 << 30, 1 << 31], [5, 7, 1 << 19, 300]):
        sizes = np.array(sizes, dtype=np.int64)
        assert sum(anatomy._field_bits(sizes)) <= 64
        codes = np.stack([rng.integers(0, v, 500) for v in sizes], axis=1)
        codes[0] = sizes - 1                                   # every field's largest code
        dense, dsizes = dv.dense_columns(codes)
        dsizes = np.maximum(dsizes, sizes)                     # fields as wide as the sizes
        packed = anatomy._pack(dense, dsizes)
        assert packed.dtype == (np.uint32 if sum(anatomy._field_bits(dsizes)) <= 32
                                else np.uint64)
        back = anatomy._unpack(packed, [c.dtype for c in dense], dsizes)
        for c, b in zip(dense, back):
            assert b.dtype == c.dtype and np.array_equal(b, c)


@settings(max_examples=60, deadline=None)
@given(problems())
def test_packed_and_gathered_codes_agree(problem):
    # the partition carries the packed codes with its rows; gathering them by row id instead
    # (codes wider than 64 bits) gives the same groups and certificates
    from deid.methods.anatomy import partition as anatomy
    qi, codes, K, L, column_l = problem
    if L is None or L < 2:
        L = 2
    saved = anatomy.PACK_MAX_BITS
    out = []
    for bits in (saved, -1):
        anatomy.PACK_MAX_BITS = bits
        try:
            res = anatomize(qi, codes, K, L, column_l)
            out.append((res.group_id.tolist(), res.certified_l.tolist()))
        except DeidError as e:
            out.append(e.sqlstate)
        finally:
            anatomy.PACK_MAX_BITS = saved
    assert out[0] == out[1]


@pytest.mark.parametrize("model", ["kl", "exponential_l"])
def test_packed_and_gathered_codes_agree_on_larger_tables(model, monkeypatch):
    from deid.methods.anatomy import partition as anatomy
    rng = np.random.default_rng(13)
    n = 20_000
    p = 1.0 / np.arange(1, 41) ** 1.2
    for kind in ("random", "skewed", "ties"):
        qi, _ = make_table(rng, n, 4, 1, kind)
        codes = np.stack([rng.choice(40, n, p=p / p.sum()), rng.integers(0, 300, n),
                          rng.integers(0, 6, n)], axis=1)
        if model == "exponential_l":                   # every value combination present
            codes = rng.integers(0, 3, (n, 3))
        L = 2 if model == "exponential_l" else 4
        ref = anatomize(qi, codes, 30, L, model=model)
        monkeypatch.setattr(anatomy, "PACK_MAX_BITS", -1)
        res = anatomize(qi, codes, 30, L, model=model)
        monkeypatch.setattr(anatomy, "PACK_MAX_BITS", 64)
        assert np.array_equal(res.group_id, ref.group_id)
        assert np.array_equal(res.certified_l, ref.certified_l)
