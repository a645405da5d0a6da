"""k-d median partition (001 Fig. 5, row-preserving and tie-safe)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deid.errors import (DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED,
                         PRIVACY_MODEL_UNSATISFIABLE)
from deid.methods.anatomy import mondrian
from deid.methods.anatomy.diversity import greedy_check


def reference_partition(qi, K, accept=None):
    """Literal recursive 001 Fig. 5 Split with the documented deviations (both children must
    pass, try the next widest attribute, cut '<= median' then '< median')."""
    qi = np.asarray(qi, dtype=float)
    n, d = qi.shape
    std = qi.std(axis=0)
    scale = np.where(std > 0, 1.0 / np.where(std > 0, std, 1.0), 0.0)
    groups = []

    def ok(rows):
        return len(rows) >= K and (accept is None or accept(rows))

    def split(rows):
        if len(rows) >= 2 * K:
            width = np.array([(qi[rows, j].max() - qi[rows, j].min()) * scale[j]
                              for j in range(d)])
            for j in np.argsort(-width, kind="stable"):
                if width[j] <= 0:
                    break
                vals = qi[rows, j]
                med = np.sort(vals)[(len(rows) - 1) // 2]
                for left_mask in (vals <= med, vals < med):
                    left, right = rows[left_mask], rows[~left_mask]
                    if ok(left) and ok(right):
                        split(left)
                        split(right)
                        return
        groups.append(rows)

    split(np.arange(n))
    return groups


def canonical(groups_or_ids, n):
    """Partition as a sorted tuple of row tuples."""
    if isinstance(groups_or_ids, np.ndarray):
        ids = groups_or_ids
        groups_or_ids = [np.flatnonzero(ids == g) for g in range(ids.max() + 1)]
    return sorted(tuple(sorted(int(r) for r in g)) for g in groups_or_ids)


def check_partition(ids, n, K):
    assert ids.shape == (n,) and ids.dtype == np.int64
    counts = np.bincount(ids)
    assert counts.min() >= K                         # every group >= K
    assert ids.min() == 0 and counts.size == ids.max() + 1  # ids 0..G-1, none empty
    # numbered by first appearance
    first = [int(np.flatnonzero(ids == g)[0]) for g in range(counts.size)]
    assert first == sorted(first)


def test_simple_median_split():
    qi = np.arange(8, dtype=float).reshape(-1, 1)
    ids = mondrian.partition(qi, 2)
    assert ids.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    ids = mondrian.partition(qi, 3)
    assert ids.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]


def test_widest_normalised_range_is_split_first():
    rng = np.random.default_rng(0)
    a = rng.permutation(40).astype(float)          # (max - min) / std = 3.4
    b = np.arange(40, dtype=float)
    b[39] = 1000.0                                 # one outlier: (max - min) / std = 6.4
    ids = mondrian.partition(np.stack([a, b], axis=1), 20)
    assert canonical(ids, 40) == [tuple(range(20)), tuple(range(20, 40))]


def test_all_ties_single_group():
    qi = np.ones((30, 3))
    assert mondrian.partition(qi, 2).tolist() == [0] * 30


def test_ties_at_median_move_the_cut():
    # 7 rows at the median value: '<= median' leaves 1 row on the right, so the cut moves
    # to '< median'
    qi = np.array([1, 2, 3, 4, 4, 4, 4, 4, 4, 4, 5], dtype=float).reshape(-1, 1)
    ids = mondrian.partition(qi, 3)
    assert canonical(ids, 11) == [(0, 1, 2), tuple(range(3, 11))]


def test_ties_fall_back_to_other_dimension():
    # dim 0 (widest) has one huge tie run: no cut gives K on both sides; dim 1 splits
    x = np.array([0.0] * 18 + [100.0, -100.0])
    y = np.arange(20, dtype=float)
    ids = mondrian.partition(np.stack([x, y], axis=1), 5)
    check_partition(ids, 20, 5)
    assert ids.max() + 1 >= 2


def test_split_needs_both_children_accepted():
    qi = np.arange(16, dtype=float).reshape(-1, 1)
    # reject any child that contains row 0: the root can never split (Fig. 5 would keep
    # splitting the right child and drop the left one)
    ids = mondrian.partition(qi, 2, accept=lambda rows: 0 not in rows)
    assert ids.tolist() == [0] * 16


def test_accept_receives_rows_in_input_order():
    seen = []
    qi = np.array([5, 1, 4, 2, 3, 0, 7, 6], dtype=float).reshape(-1, 1)

    def accept(rows):
        seen.append(rows.tolist())
        return True

    mondrian.partition(qi, 2, accept=accept)
    assert seen and all(r == sorted(r) for r in seen)


def test_accept_groups_matches_accept():
    rng = np.random.default_rng(3)
    qi = rng.integers(0, 6, (300, 3)).astype(float)
    codes = rng.integers(0, 4, (300, 2))

    def one(rows):
        return greedy_check(codes[rows], 3)

    def many(rows, child, n_children):
        return np.array([one(rows[child == c]) for c in range(n_children)])

    a = mondrian.partition(qi, 5, accept=one)
    b = mondrian.partition(qi, 5, accept_groups=many)
    assert a.tolist() == b.tolist()


def test_accept_groups_receives_children_as_runs_in_input_order():
    rng = np.random.default_rng(5)
    qi = rng.integers(0, 9, (400, 3)).astype(float)
    calls = []

    def many(rows, child, n_children):
        calls.append(n_children)
        assert rows.size == child.size and np.all(np.diff(child) >= 0)   # one run per child
        bounds = np.searchsorted(child, np.arange(n_children + 1))
        assert bounds[-1] == rows.size and np.all(np.diff(bounds) > 0)
        for c in range(n_children):
            assert np.all(np.diff(rows[bounds[c]:bounds[c + 1]]) > 0)     # input order
        return np.ones(n_children, dtype=bool)

    ids = mondrian.partition(qi, 5, accept_groups=many)
    assert calls and ids.tolist() == mondrian.partition(qi, 5).tolist()


def test_no_quasi_identifiers_single_group():
    assert mondrian.partition(np.zeros((5, 0)), 2).tolist() == [0] * 5


def test_errors():
    with pytest.raises(DeidError) as e:
        mondrian.partition(np.zeros((3, 1)), 4)
    assert e.value.sqlstate == PRIVACY_MODEL_UNSATISFIABLE
    for bad_k in (0, -1, 2.5, True):
        with pytest.raises(DeidError) as e:
            mondrian.partition(np.zeros((3, 1)), bad_k)
        assert e.value.sqlstate == INVALID_PARAMETER_VALUE
    with pytest.raises(DeidError) as e:
        mondrian.partition(np.array([[1.0], [np.nan]]), 1)
    assert e.value.sqlstate == NULL_VALUE_NOT_ALLOWED


@st.composite
def qi_tables(draw):
    n = draw(st.integers(1, 120))
    d = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["random", "ties", "skewed", "float", "wide"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if kind == "random":
        qi = rng.integers(0, 1000, (n, d)).astype(float)
    elif kind == "ties":
        qi = rng.integers(0, draw(st.integers(1, 3)), (n, d)).astype(float)
    elif kind == "skewed":
        qi = np.minimum(rng.zipf(1.5, (n, d)), 50).astype(float)
    elif kind == "float":
        qi = rng.normal(0, 1, (n, d))
    else:                                          # integers over a range wider than 2^16
        qi = rng.integers(-10**9, 10**9, (n, d)).astype(float)
    K = draw(st.integers(1, max(1, n // 2 + 1)))
    return qi, min(K, n)


@settings(max_examples=150, deadline=None)
@given(qi_tables())
def test_matches_recursive_reference(table):
    qi, K = table
    ids = mondrian.partition(qi, K)
    check_partition(ids, len(qi), K)
    assert canonical(ids, len(qi)) == canonical(reference_partition(qi, K), len(qi))


@settings(max_examples=100, deadline=None)
@given(qi_tables(), st.integers(0, 2**32 - 1))
def test_matches_reference_with_accept(table, seed):
    qi, K = table
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 3, (len(qi), 2))

    def accept(rows):
        return greedy_check(codes[rows], 2)

    ids = mondrian.partition(qi, K, accept=accept)
    check_partition(ids, len(qi), K)
    assert canonical(ids, len(qi)) == canonical(reference_partition(qi, K, accept), len(qi))


def test_segment_ids_match_repeat():
    from deid.segments import segment_ids
    rng = np.random.default_rng(9)
    for _ in range(500):
        k = int(rng.integers(0, 12))
        sizes = rng.integers(0, 5, k) * (rng.random(k) < 0.7)     # some runs empty
        for dtype in (np.intp, np.int32):
            ids = segment_ids(sizes, dtype)
            assert ids.dtype == dtype
            assert np.array_equal(ids, np.repeat(np.arange(k, dtype=dtype), sizes))


@pytest.mark.parametrize("kind", ["random", "ties", "skewed"])
def test_payload_reaches_accept_groups_as_rows(kind):
    # with a payload, accept_groups gets payload[rows] in the same calls and order as it gets
    # the row ids without one (the payload moves with the rows from level to level)
    rng = np.random.default_rng(21)
    n = 3000
    if kind == "random":
        qi = rng.integers(0, 50, (n, 3)).astype(float)
    elif kind == "ties":
        qi = rng.integers(0, 3, (n, 3)).astype(float)
    else:
        qi = np.minimum(rng.zipf(1.4, (n, 3)), 30).astype(float)
    codes = rng.integers(0, 5, (n, 2))
    seen_rows, seen_pay = [], []

    def by_rows(rows, child, n_children):
        seen_rows.append((rows.copy(), child.copy()))
        return np.array([greedy_check(codes[rows[child == c]], 3) for c in range(n_children)])

    def by_payload(pay, child, n_children):
        rows = (pay.astype(np.int64) - 7) // 3
        seen_pay.append((rows, child.copy()))
        return np.array([greedy_check(codes[rows[child == c]], 3) for c in range(n_children)])

    a = mondrian.partition(qi, 10, accept_groups=by_rows)
    b = mondrian.partition(qi, 10, accept_groups=by_payload,
                           payload=(np.arange(n, dtype=np.uint32) * 3 + 7))
    assert np.array_equal(a, b)
    assert len(seen_rows) == len(seen_pay) > 1
    for (r1, c1), (r2, c2) in zip(seen_rows, seen_pay):
        assert np.array_equal(r1, r2) and np.array_equal(c1, c2)
