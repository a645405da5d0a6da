"""Tests of deid.metrics on small hand-made examples and the papers'
worked examples (001 Fig. 3, 002 Tables 8-9)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid.methods import metrics as M
from deid.errors import DeidError, INVALID_PARAMETER_VALUE


def invalid(fn, *args, **kw):
    with pytest.raises(DeidError) as ei:
        fn(*args, **kw)
    assert ei.value.sqlstate == INVALID_PARAMETER_VALUE
    return ei.value


# ---------------------------------------------------------------------------
# class sizes
# ---------------------------------------------------------------------------

def test_discernibility_exact_values():
    sizes = [2, 3, 5]
    assert M.discernibility_raw(sizes) == 38.0             # 4 + 9 + 25
    assert M.discernibility(sizes) == pytest.approx(3.8)   # 38 / 10
    assert M.average_class_size(sizes) == pytest.approx(10 / 3)
    assert M.normalized_average_class_size(sizes, 2) == pytest.approx(5 / 3)


def test_discernibility_best_case_is_k():
    # 001: "the best possible value of discernability is K"
    assert M.discernibility([50] * 7) == 50.0
    assert M.discernibility_raw([50] * 7) == 7 * 2500.0
    # one group holding everything (Exponential-L's usual result)
    assert M.discernibility([1000]) == 1000.0


def test_discernibility_is_average_over_records():
    gid = np.array([0, 0, 1, 1, 1, 2])
    sizes = M.group_sizes(gid)
    assert list(sizes) == [2, 3, 1]
    per_record = sizes[np.searchsorted(np.unique(gid), gid)]
    assert M.discernibility(sizes) == pytest.approx(per_record.mean())


def test_discernibility_suppressed_records():
    # ARX: each suppressed record costs |D|
    assert M.discernibility_raw([2, 3], suppressed=1) == 4 + 9 + 6
    assert M.discernibility_raw([2, 3], suppressed=2, n_total=100) == 13 + 200


def test_empty_and_bad_sizes():
    assert M.discernibility_raw([]) == 0.0
    assert math.isnan(M.discernibility([]))
    assert math.isnan(M.average_class_size([]))
    assert M.discernibility([0, 3]) == 3.0            # empty groups are no classes
    assert M.average_class_size([0, 3]) == 3.0
    invalid(M.discernibility, [-1, 3])
    invalid(M.discernibility, [1.5])
    invalid(M.discernibility, [[1, 2]])
    invalid(M.discernibility_raw, [1], suppressed=-1)
    invalid(M.normalized_average_class_size, [2], 0)


# ---------------------------------------------------------------------------
# relative error
# ---------------------------------------------------------------------------

def test_relative_error():
    re = M.relative_error([10, 5, 0, 4], [12, 5, 3, 2])
    assert re[0] == pytest.approx(0.2) and re[1] == 0 and math.isnan(re[2])
    assert re[3] == pytest.approx(0.5)
    invalid(M.relative_error, [1, 2], [1])
    invalid(M.relative_error, [-1], [1])


def test_are_split_at_one_percent():
    actual = [5, 20, 0, 100, 9]
    est = [6, 20, 1, 90, 9]
    res = M.are(actual, est, n=1000)
    # relative errors 0.2, 0, (none), 0.1, 0
    assert res["all"] == pytest.approx(0.3 / 4)
    assert res["queries"] == 4 and res["excluded"] == 1
    assert res["threshold"] == 10.0
    assert res["small"] == pytest.approx(0.1) and res["small_queries"] == 2   # 5, 9
    assert res["large"] == pytest.approx(0.05) and res["large_queries"] == 2  # 20, 100
    # exactly 1% counts as ">= 1%"
    assert M.are([10], [11], n=1000)["large_queries"] == 1


def test_are_without_split_and_edge_cases():
    res = M.are([4, 8], [5, 8])
    assert res == {"all": 0.125, "queries": 2, "excluded": 0}
    res = M.are([4], [5], threshold_fraction=0.5, n=4)
    assert res["small"] is None and res["large"] == 0.25
    assert M.are([], [])["all"] is None
    invalid(M.are, [1], [1], threshold_fraction=0.01)
    invalid(M.are, [1], [1], n=0)
    invalid(M.are, [1], [1], threshold_fraction=2, n=10)


# ---------------------------------------------------------------------------
# 002 information loss
# ---------------------------------------------------------------------------

LOSS = {"PT": [0.0, 0.3, 1.0], "PN": [0.0, 0.5, 1.0], "PM": [0.0, 1.0], "R": [0.0, 1.0]}


def test_generalization_loss_002_settings():
    # Table 8 (setting A): R suppressed, PT 0 -> 1
    a = M.generalization_loss({"PT": 1, "PN": 0, "PM": 0, "R": 1}, LOSS,
                              {"PT": 0.8, "PN": 0.6, "PM": 0.4, "R": 0.2})
    assert a == pytest.approx(0.2 * 1.0 + 0.8 * 0.3)
    # Table 9 (setting B): PN 0 -> 1, PT 0 -> 1
    b = M.generalization_loss({"PN": 1, "PT": 1}, LOSS,
                              {"PN": 0.8, "R": 0.6, "PM": 0.4, "PT": 0.2})
    assert b == pytest.approx(0.8 * 0.5 + 0.2 * 0.3)
    # the first step of sec. 5.2: candidate costs 0.20 (R), 0.24 (PT), 0.30 (PN), 0.40 (PM)
    pri = {"PT": 0.8, "PN": 0.6, "PM": 0.4, "R": 0.2}
    costs = {x: M.generalization_loss({x: 1}, LOSS, pri) for x in pri}
    assert costs == pytest.approx({"R": 0.2, "PT": 0.24, "PN": 0.3, "PM": 0.4})


def test_generalization_loss_sequences_and_errors():
    assert M.generalization_loss([2, 0], [[0, 0.5, 1], [0, 1]], [0.5, 1.0]) == 0.5
    assert M.generalization_loss({}, LOSS, {}) == 0.0
    invalid(M.generalization_loss, {"PT": 3}, LOSS, {"PT": 1})
    invalid(M.generalization_loss, {"PT": -1}, LOSS, {"PT": 1})
    invalid(M.generalization_loss, {"XX": 1}, LOSS, {"XX": 1})
    invalid(M.generalization_loss, {"PT": 1}, LOSS, {})
    invalid(M.generalization_loss, {"PT": 1}, LOSS, {"PT": 1.5})
    invalid(M.generalization_loss, {"PT": 1}, {"PT": [0.2, 0.3]}, {"PT": 1})
    invalid(M.generalization_loss, {"PT": 1}, {"PT": [0, 0.6, 0.3]}, {"PT": 1})


# ---------------------------------------------------------------------------
# anatomy estimates (001 Fig. 3)
# ---------------------------------------------------------------------------

# 001 Fig. 1 coded: age; disease 0 heart, 1 flu, 2 stomach; treatment 0 medicine,
# 1 surgery, 2 IV.  One group (code 0).
AGE = np.array([42, 41, 49, 43])
DIS = np.array([0, 0, 1, 2])
TRT = np.array([0, 1, 2, 2])
GRP = np.zeros(4, dtype=np.int64)
RAW = {"age": AGE, "disease": DIS, "treatment": TRT}
ST = {"disease": M.sensitive_table(GRP, DIS), "treatment": M.sensitive_table(GRP, TRT)}


def q(*conds):
    return M.CountQuery(tuple(M.Condition(*c) for c in conds))


def test_sensitive_table_is_fig3():
    g, v, c = ST["disease"]
    assert list(g) == [0, 0, 0] and list(v) == [0, 1, 2] and list(c) == [2, 1, 1]
    g, v, c = ST["treatment"]
    assert list(v) == [0, 1, 2] and list(c) == [1, 1, 2]


def test_fig3_estimates():
    est = lambda query: M.anatomy_estimate(query, {"age": AGE}, GRP, ST)  # noqa: E731
    # sensitive condition on a single whole group: exact
    for query in (q(("disease", True, 1, 1)), q(("disease", True, 0, 0)),
                  q(("treatment", True, 1, 2))):
        assert est(query) == M.exact_count(query, RAW)
    # QI condition covering the whole group + sensitive condition: exact
    query = q(("age", False, 41, 50), ("disease", True, 0, 0))
    assert est(query) == M.exact_count(query, RAW) == 2
    # QI condition on part of the group: the attacker's 25% guess (001 sec. 3)
    query = q(("age", False, 49, 49), ("disease", True, 1, 1))
    assert est(query) == pytest.approx(0.25) and M.exact_count(query, RAW) == 1
    # two sensitive attributes: independence within the group
    query = q(("disease", True, 0, 0), ("treatment", True, 2, 2))
    assert est(query) == pytest.approx(4 * 0.5 * 0.5) and M.exact_count(query, RAW) == 0
    # QI-only: exact
    query = q(("age", False, 42, 49))
    assert est(query) == M.exact_count(query, RAW) == 3


def test_anatomy_count_estimate_low_level():
    gid = np.array([0, 0, 0, 1, 1, 2])
    assert M.anatomy_count_estimate(gid) == 6.0
    assert M.anatomy_count_estimate(gid, gid != 1) == 4.0
    f = np.array([0.5, 1.0, 0.0])
    assert M.anatomy_count_estimate(gid, None, [f]) == pytest.approx(3 * 0.5 + 2)
    assert M.anatomy_count_estimate(gid, gid == 0, [f, f]) == pytest.approx(3 * 0.25)
    invalid(M.anatomy_count_estimate, gid, None, [np.ones(2)])
    invalid(M.anatomy_count_estimate, gid, None, [np.full(3, 1.5)])
    invalid(M.anatomy_count_estimate, gid, [True])
    invalid(M.anatomy_count_estimate, np.array([-1, 0]))


def test_sensitive_fraction():
    fr = M.sensitive_fraction([0, 0, 1, 1], [2, 1, 3, 1], [True, False, False, True], 3)
    assert list(fr) == pytest.approx([2 / 3, 1 / 4, 0.0])
    invalid(M.sensitive_fraction, [0, 5], [1, 1], [True, True], 3)


@st.composite
def release(draw):
    n = draw(st.integers(1, 60))
    G = draw(st.integers(1, 6))
    gid = np.array(draw(st.lists(st.integers(0, G - 1), min_size=n, max_size=n)))
    qi = np.array(draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)))
    s1 = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)))
    s2 = np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    lo = draw(st.integers(0, 4))
    hi = draw(st.integers(lo, 4))
    return gid, qi, s1, s2, lo, hi


@settings(max_examples=200, deadline=None, database=None)
@given(release())
def test_estimate_exact_in_the_aligned_cases(case):
    gid, qi, s1, s2, lo, hi = case
    raw = {"qi": qi, "s1": s1, "s2": s2, "g": gid}
    st_tables = {"s1": M.sensitive_table(gid, s1), "s2": M.sensitive_table(gid, s2)}
    G = int(gid.max()) + 1

    def est(query):
        return M.anatomy_estimate(query, {"qi": qi, "g": gid}, gid, st_tables, n_groups=G)

    # QI conditions only (the QIT is exact)
    query = q(("qi", False, lo, hi))
    assert est(query) == pytest.approx(M.exact_count(query, raw))
    # QI condition selecting whole groups + one sensitive condition
    query = q(("g", False, lo, hi), ("s1", True, lo, hi))
    assert est(query) == pytest.approx(M.exact_count(query, raw))
    # one sensitive condition on a single group (every group in turn)
    for g in np.unique(gid):
        query = q(("g", False, g, g), ("s2", True, lo, hi))
        assert est(query) == pytest.approx(M.exact_count(query, raw))
    # two conditions on the same sensitive attribute are intersected on its ST
    query = q(("g", False, lo, hi), ("s1", True, lo, 4), ("s1", True, 0, hi))
    assert est(query) == pytest.approx(M.exact_count(query, raw))


def test_singleton_groups_answer_every_query_exactly():
    rng = np.random.default_rng(1)
    n = 300
    raw = {"a": rng.integers(0, 20, n), "b": rng.integers(0, 3, n),
           "s": rng.integers(0, 7, n), "t": rng.integers(0, 4, n)}
    gid = np.arange(n)
    st_tables = {x: M.sensitive_table(gid, raw[x]) for x in ("s", "t")}
    queries = M.random_count_queries(rng, raw, ["a", "b"], ["s", "t"], 200, max_sensitive=2)
    act = [M.exact_count(x, raw) for x in queries]
    est = [M.anatomy_estimate(x, raw, gid, st_tables) for x in queries]
    assert np.allclose(act, est)
    assert M.are(act, est, n=n)["all"] == 0.0


# ---------------------------------------------------------------------------
# random queries
# ---------------------------------------------------------------------------

def data(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return {"age": rng.integers(18, 90, n), "zip": rng.integers(0, 50, n),
            "sex": rng.integers(0, 2, n), "race": rng.integers(0, 5, n),
            "topo": rng.integers(0, 40, n), "hist": rng.integers(0, 30, n),
            "size": rng.integers(0, 100, n)}


QI = ["age", "zip", "sex", "race"]
SA = ["topo", "hist", "size"]


def test_random_queries_shape_of_001():
    cols = data()
    qs = M.random_count_queries(np.random.default_rng(7), cols, QI, SA, 2000,
                                categorical=["sex", "race"])
    ncond = np.array([len(x.conditions) for x in qs])
    assert set(ncond) == {1, 2, 3, 4}
    assert abs(np.mean(ncond) - 2.5) < 0.15
    for x in qs:
        attrs = [c.attribute for c in x.conditions]
        assert len(set(attrs)) == len(attrs)
        sens = [c for c in x.conditions if c.sensitive]
        assert len(sens) == 1 and sens[0].attribute in SA     # exactly one (001)
        for c in x.conditions:
            assert c.sensitive == (c.attribute in SA)
            assert c.lo <= c.hi
            assert cols[c.attribute].min() <= c.lo and c.hi <= cols[c.attribute].max()
            if c.attribute in ("sex", "race"):
                assert c.lo == c.hi
        if len(x.conditions) == 1:
            assert M.exact_count(x, cols) > 0
    kinds = [c.lo == c.hi for x in qs for c in x.conditions if c.attribute not in ("sex", "race")]
    assert 0.4 < np.mean(kinds) < 0.6
    assert "BETWEEN" in " ".join(x.sql() for x in qs[:50])


def test_random_queries_seeded_and_max_sensitive():
    cols = data()
    a = M.random_count_queries(np.random.default_rng(3), cols, QI, SA, 50)
    b = M.random_count_queries(3, cols, QI, SA, 50)
    assert a == b
    c = M.random_count_queries(np.random.default_rng(4), cols, QI, SA, 50)
    assert a != c
    qs = M.random_count_queries(np.random.default_rng(5), cols, QI, SA, 500, max_sensitive=3)
    ns = [sum(c.sensitive for c in x.conditions) for x in qs]
    assert min(ns) == 1 and max(ns) == 3
    # without quasi-identifiers every condition is sensitive
    qs = M.random_count_queries(np.random.default_rng(5), cols, [], SA, 100, max_sensitive=3)
    assert all(c.sensitive for x in qs for c in x.conditions)


def test_random_queries_bad_input():
    cols = data()
    invalid(M.random_count_queries, "seed", cols, QI, SA, 5)
    invalid(M.random_count_queries, 1, cols, QI, [], 5)
    invalid(M.random_count_queries, 1, cols, QI + ["topo"], SA, 5)
    invalid(M.random_count_queries, 1, cols, QI + ["nosuch"], SA, 5)
    invalid(M.random_count_queries, 1, dict(cols, zip=np.zeros(3, int)), QI, SA, 5)
    invalid(M.random_count_queries, 1, dict(cols, zip=np.zeros(500)), QI, SA, 5)
    invalid(M.random_count_queries, 1, cols, QI, SA, 5, max_conditions=0)
    assert M.random_count_queries(1, cols, QI, SA, 0) == []


def test_experiment_end_to_end():
    # 001-style run: groups of 25 consecutive ages, queries, ARE split at 1%.
    cols = data(5000, seed=2)
    order = np.argsort(cols["age"], kind="stable")
    gid = np.empty(5000, dtype=np.int64)
    gid[order] = np.arange(5000) // 25
    st_tables = {a: M.sensitive_table(gid, cols[a]) for a in SA}
    qs = M.random_count_queries(np.random.default_rng(9), cols, QI, SA, 400)
    act = np.array([M.exact_count(x, cols) for x in qs])
    est = np.array([M.anatomy_estimate(x, cols, gid, st_tables) for x in qs])
    res = M.are(act, est, n=5000)
    assert res["queries"] + res["excluded"] == 400
    assert res["small_queries"] + res["large_queries"] == res["queries"]
    assert 0 <= res["large"] < res["small"]
    assert M.discernibility(M.group_sizes(gid)) == 25.0
