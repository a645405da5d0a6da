"""Worked examples of paper 001 (Figs. 1-4, 6, 8) through the anatomy entry point."""

import numpy as np
import pytest

from deid.errors import DeidError, INVALID_PARAMETER_VALUE, PRIVACY_MODEL_UNSATISFIABLE
from deid.methods.anatomy.partition import AnatomyResult, anatomize, sensitive_counts

# 001 Fig. 1, literally
FIG1 = [
    # Patient ID, Age, Disease Type, Treatment
    (1, 42, "Heart disease", "Medicine"),
    (2, 41, "Heart disease", "Surgery"),
    (3, 49, "Flu", "Intravenous therapy"),
    (4, 43, "Stomach disease", "Intravenous therapy"),
]
# value dictionaries in the order Fig. 3 lists them
DISEASES = ["Heart disease", "Flu", "Stomach disease"]
TREATMENTS = ["Medicine", "Surgery", "Intravenous therapy"]

# 001 Fig. 3, literally (the paper abbreviates intravenous therapy as "IV")
FIG3_QIT = [(1, 42, 1), (2, 41, 1), (3, 49, 1), (4, 43, 1)]
FIG3_DISEASE = [(1, "Heart disease", 2), (1, "Flu", 1), (1, "Stomach disease", 1)]
FIG3_TREATMENT = [(1, "Medicine", 1), (1, "Surgery", 1), (1, "IV", 2)]

# 001 Fig. 4 (no quasi-identifiers shown)
FIG4 = [("D1", "T1"), ("D2", "T1"), ("D3", "T2"), ("D4", "T2"), ("D5", "T3"), ("D6", "T3")]


def fig1_arrays():
    qi = np.array([[age] for _, age, _, _ in FIG1], dtype=float)
    sensitive = np.array([[DISEASES.index(d), TREATMENTS.index(t)] for _, _, d, t in FIG1])
    return qi, sensitive


def fig4_arrays():
    codes = np.array([[int(d[1:]), int(t[1:])] for d, t in FIG4])
    return np.zeros((len(FIG4), 1)), codes


def test_figs_1_to_3_anatomy_tables():
    qi, sensitive = fig1_arrays()
    res = anatomize(qi, sensitive, K=4, L=2)
    assert isinstance(res, AnatomyResult)
    assert res.model == "kl" and res.n_groups == 1
    assert res.certified_l.tolist() == [2]           # "They also satisfy 2-diversity"
    qit = [(pid, age, int(g) + 1) for (pid, age, _, _), g in zip(FIG1, res.group_id)]
    assert qit == FIG3_QIT

    g, v, c = sensitive_counts(res.group_id, sensitive[:, 0])
    assert [(int(a) + 1, DISEASES[b], int(n)) for a, b, n in zip(g, v, c)] == FIG3_DISEASE
    g, v, c = sensitive_counts(res.group_id, sensitive[:, 1])
    short = {"Intravenous therapy": "IV"}
    got = [(int(a) + 1, short.get(TREATMENTS[b], TREATMENTS[b]), int(n))
           for a, b, n in zip(g, v, c)]
    assert got == FIG3_TREATMENT


def test_fig2_group_is_4_anonymous_but_not_3_diverse():
    qi, sensitive = fig1_arrays()
    with pytest.raises(DeidError) as e:            # each attribute has 3 values, yet only 2
        anatomize(qi, sensitive, K=4, L=3)        # deletions ("heart", "IV") delete the group
    assert e.value.sqlstate == PRIVACY_MODEL_UNSATISFIABLE and e.value.hint


def test_fig1_split_blocked_by_diversity():
    qi, sensitive = fig1_arrays()
    # K=2 alone splits the ages at the median 42: {41, 42} | {43, 49}
    k_only = anatomize(qi, sensitive, K=2)
    assert k_only.group_id.tolist() == [0, 0, 1, 1]
    # {41, 42} are both heart disease, {43, 49} both intravenous therapy
    assert k_only.certified_l.tolist() == [1, 1]
    # with L=2 the left child {patients 1, 2} fails (deleting "heart disease" deletes it),
    # so the split is not taken and no row is dropped (deviation from Fig. 5 lines 5-8)
    kl = anatomize(qi, sensitive, K=2, L=2)
    assert kl.group_id.tolist() == [0, 0, 0, 0]
    assert kl.certified_l.tolist() == [2]


def test_fig4_fig8_column_wise():
    qi, codes = fig4_arrays()
    res = anatomize(qi, codes, K=2, L=4, column_l={1: 2})
    assert res.group_id.tolist() == [0] * 6 and res.certified_l.tolist() == [4]
    # without column-wise limits L can be 3 at most (three treatments)
    assert anatomize(qi, codes, K=2, L=3).certified_l.tolist() == [3]
    with pytest.raises(DeidError) as e:
        anatomize(qi, codes, K=2, L=4)
    assert e.value.sqlstate == INVALID_PARAMETER_VALUE and "3" in e.value.detail   # a count of the data: in the detail only


def test_exponential_l_on_fig1():
    qi, sensitive = fig1_arrays()
    res = anatomize(qi, sensitive, K=2, L=1, model="exponential_l")
    assert res.model == "exponential_l"
    with pytest.raises(DeidError) as e:            # flu has a single treatment
        anatomize(qi, sensitive, K=2, L=2, model="exponential_l")
    assert e.value.sqlstate == PRIVACY_MODEL_UNSATISFIABLE


def test_exponential_l_needs_l_to_the_s_rows():
    # all 9 (disease, treatment) pairs, twice, along one QI in a Latin-square order: every
    # 3 consecutive rows share no value.  Exponential-L with L=3 needs all 9 combinations in a
    # group (L^s rows); the (K,L) model of Def. 6 gets smaller groups.
    latin = [(0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (2, 0), (0, 2), (1, 0), (2, 1)]
    codes = np.array(latin * 2)
    qi = np.arange(18, dtype=float).reshape(-1, 1)
    exp = anatomize(qi, codes, K=3, L=3, model="exponential_l")
    kl = anatomize(qi, codes, K=3, L=3)
    assert exp.group_id.tolist() == [0] * 9 + [1] * 9
    assert exp.certified_l.tolist() == [3, 3]
    assert kl.group_id.tolist() == [0] * 5 + [1] * 4 + [2] * 5 + [3] * 4
    assert kl.certified_l.tolist() == [3, 3, 3, 3]


@pytest.mark.parametrize("kwargs, state", [
    ({"K": 1}, INVALID_PARAMETER_VALUE),
    ({"K": 0}, INVALID_PARAMETER_VALUE),
    ({"K": 2.0}, INVALID_PARAMETER_VALUE),
    ({"K": 2, "L": 0}, INVALID_PARAMETER_VALUE),
    ({"K": 2, "L": -1}, INVALID_PARAMETER_VALUE),
    ({"K": 2, "L": 4}, INVALID_PARAMETER_VALUE),        # only 3 distinct diseases / treatments
    ({"K": 5}, PRIVACY_MODEL_UNSATISFIABLE),            # n < K
    ({"K": 2, "L": 3}, PRIVACY_MODEL_UNSATISFIABLE),    # whole table needs only 2 deletions
    ({"K": 2, "L": 2, "model": "nope"}, INVALID_PARAMETER_VALUE),
    ({"K": 2, "column_l": {0: 1}}, INVALID_PARAMETER_VALUE),           # limits need L
    ({"K": 2, "L": 2, "column_l": {0: 3}}, INVALID_PARAMETER_VALUE),   # L_i > L
    ({"K": 2, "L": 2, "column_l": {5: 1}}, INVALID_PARAMETER_VALUE),   # no such attribute
])
def test_errors(kwargs, state):
    qi, sensitive = fig1_arrays()
    with pytest.raises(DeidError) as e:
        anatomize(qi, sensitive, **kwargs)
    assert e.value.sqlstate == state and e.value.hint


def test_mismatched_lengths():
    qi, sensitive = fig1_arrays()
    with pytest.raises(DeidError) as e:
        anatomize(qi[:3], sensitive, K=2)
    assert e.value.sqlstate == INVALID_PARAMETER_VALUE


def test_sensitive_counts_sorted_and_generic():
    gid = np.array([2, 0, 2, 1, 0, 2])
    vals = np.array(["b", "a", "a", "c", "a", "b"])
    g, v, c = sensitive_counts(gid, vals)
    assert list(zip(g.tolist(), v.tolist(), c.tolist())) == [
        (0, "a", 2), (1, "c", 1), (2, "a", 1), (2, "b", 2)]
    g, v, c = sensitive_counts(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert g.size == v.size == c.size == 0
