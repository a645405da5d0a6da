"""k per source is not k: a generalization release that is k-anonymous in every source
system separately (002 sec. 2) can be unique over all its quasi-identifiers together. A policy
requester's release must hold the policy minimum over all quasi-identifiers JOINTLY (unless the
policy allows per-source k); a SELECT holder keeps 002's per-source k.

Here without a server: the searches with the joint constraint (greedy and the exact lattice,
against brute force), the plug-in's choice of the constraint from the grant, and the verifier's
own reading of the requirement and its check of the stored classes over all quasi-identifiers."""
import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deid.catalog.relations import Column, Relation
from deid.errors import DeidError, PRIVACY_MODEL_UNSATISFIABLE, VERIFICATION_FAILED
from deid.read.frame import EncodedColumn, Frame
from deid.catalog.hierarchies import Hierarchy
from deid.methods.generalization.generalize import (AttributeHierarchy, apply_levels, greedy,
                                                    optimal)
from deid.methods.generalization import plugin
from deid.request.release import Request
from deid.verify import generalization as vg
from deid.verify.shared.k_per_source import check_joint_k

from test_generalize import k_anonymous, loss_of, min_class, random_hierarchy


# ----------------------------------------------------------------------------------------------
# a table that is k per source but unique jointly: a 4 x 4 grid, every (a, b) once

def pair(name, source, priority=1.0, limit=None):
    return AttributeHierarchy(name, [[0, 0, 1, 1], [0, 0]],
                              [[f"{name}{i}" for i in range(4)], [f"{name}01", f"{name}23"], ["*"]],
                              [0, 0.5, 1], priority=priority, limit=limit, source=source)


def grid(reps=1):
    rows = np.array([(a, b) for a in range(4) for b in range(4)] * reps, np.int64)
    codes, counts = np.unique(rows, axis=0, return_counts=True)
    return codes, counts.astype(np.int64)


def joint_min(codes, counts, attrs, levels):
    return min_class(codes, counts, attrs, levels, list(range(len(attrs))))


def test_grid_is_k_per_source_but_unique_jointly():
    codes, counts = grid()
    attrs = [pair("a", "A"), pair("b", "B")]
    for solve in (greedy, optimal):
        res = solve(codes, counts, attrs, 4)
        assert res.levels == [0, 0]                       # 4 rows per a, 4 per b: nothing to do
        assert k_anonymous(codes, counts, attrs, res.levels, 4)
        assert int(res.class_counts.min()) == 1 and len(res.class_counts) == 16


@pytest.mark.parametrize("solve", [greedy, optimal])
def test_joint_k_generalizes_until_every_joint_class_holds_k(solve):
    codes, counts = grid()
    attrs = [pair("a", "A"), pair("b", "B")]
    res = solve(codes, counts, attrs, 4, joint_k=4)
    assert k_anonymous(codes, counts, attrs, res.levels, 4)
    assert joint_min(codes, counts, attrs, res.levels) >= 4
    assert int(res.class_counts.min()) >= 4 and int(res.class_counts.sum()) == 16
    assert res.loss == pytest.approx(1.0)                 # a and b at level 1, or one of them at '*'


def test_greedy_joint_phase_moves_the_cheapest_attribute_of_all():
    """After 002's per-source steps, each further step moves, one level, the cheapest movable
    attribute of any source (phi of the next level x priority, ties: first listed)."""
    codes, counts = grid()
    attrs = [pair("a", "A", priority=0.8), pair("b", "B", priority=0.4)]
    res = greedy(codes, counts, attrs, 4, joint_k=4)
    assert [(s["attribute"], s["to"]) for s in res.steps] == [("b", 1), ("a", 1)]
    assert res.levels == [1, 1]


def test_joint_k_unreachable_within_the_limits_is_refused():
    codes, counts = grid()
    attrs = [pair("a", "A", limit=0), pair("b", "B", limit=1)]
    for solve in (greedy, optimal):
        solve(codes, counts, attrs, 4)                    # per source: fine as it is
        with pytest.raises(DeidError) as e:
            solve(codes, counts, attrs, 4, joint_k=4)
        assert e.value.sqlstate == PRIVACY_MODEL_UNSATISFIABLE
        assert "jointly" in e.value.message and e.value.hint
        assert "row" not in e.value.message and "smallest" in e.value.detail      # counts: detail only


def test_joint_k_already_met_changes_nothing():
    codes, counts = grid(reps=4)                          # every joint class holds 4 rows
    attrs = [pair("a", "A"), pair("b", "B")]
    for solve in (greedy, optimal):
        plain, joint = solve(codes, counts, attrs, 4), solve(codes, counts, attrs, 4, joint_k=4)
        assert plain.levels == joint.levels == [0, 0] and plain.steps == joint.steps


def brute_force(codes, counts, attrs, k, joint_k):
    best = None
    for v in itertools.product(*[range(h.cap + 1) for h in attrs]):
        if not k_anonymous(codes, counts, attrs, v, k):
            continue
        if len(codes) and joint_min(codes, counts, attrs, v) < joint_k:
            continue
        loss = loss_of(attrs, v)
        if best is None or loss < best - 1e-12:
            best = loss
    return best


def multi_source_case(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 5))
    attrs = [random_hierarchy(rng, f"a{j}", source=("A", "B", "C")[j % 3 if j > 1 else j],
                              max_leaves=6) for j in range(d)]
    n = int(rng.integers(1, 200))
    rows = np.stack([rng.integers(0, h.size(0), n) for h in attrs], axis=1)
    codes, counts = np.unique(rows, axis=0, return_counts=True)
    k = int(rng.integers(1, 12))
    return codes, counts.astype(np.int64), attrs, k, int(rng.integers(1, k + 1))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_joint_k_properties(seed):
    codes, counts, attrs, k, joint_k = multi_source_case(seed)
    best = brute_force(codes, counts, attrs, k, joint_k)
    if best is None:
        for solve in (greedy, optimal):
            with pytest.raises(DeidError) as e:
                solve(codes, counts, attrs, k, joint_k=joint_k)
            assert e.value.sqlstate == PRIVACY_MODEL_UNSATISFIABLE and e.value.hint
        return
    g, o = greedy(codes, counts, attrs, k, joint_k=joint_k), optimal(codes, counts, attrs, k, joint_k=joint_k)
    for res in (g, o):
        assert k_anonymous(codes, counts, attrs, res.levels, k)
        assert joint_min(codes, counts, attrs, res.levels) >= joint_k
        assert all(0 <= lv <= h.cap for h, lv in zip(attrs, res.levels))
        assert res.loss == pytest.approx(loss_of(attrs, res.levels))
        exp_codes, inv = np.unique(apply_levels(codes, attrs, res.levels), axis=0, return_inverse=True)
        exp_counts = np.bincount(inv.reshape(-1), weights=counts).astype(np.int64)
        order = np.lexsort(res.class_codes.T[::-1])
        assert np.array_equal(res.class_codes[order], exp_codes)
        assert np.array_equal(res.class_counts[order], exp_counts)
    assert o.loss == pytest.approx(best, abs=1e-9)
    assert g.loss >= o.loss - 1e-9
    # the greedy path starts with 002's per-source path; the joint steps only add to it
    plain = greedy(codes, counts, attrs, k)
    assert g.steps[:len(plain.steps)] == plain.steps
    if joint_min(codes, counts, attrs, plain.levels) >= joint_k:
        assert g.levels == plain.levels
    plain = optimal(codes, counts, attrs, k)
    if joint_min(codes, counts, attrs, plain.levels) >= joint_k:
        assert o.levels == plain.levels


# ----------------------------------------------------------------------------------------------
# the plug-in: which releases must hold k jointly

def member(name):
    return Hierarchy(name, "member", 3, [0.0, 0.5, 1.0],
                     members=[{f"{name}{i}": f"{name}{'01' if i < 2 else '23'}" for i in range(4)},
                              {f"{name}01": "*", f"{name}23": "*"}])


def grid_request(grant, k=4):
    cols = {"a": Column("a", "text", "text", False, role="quasi_identifier", hierarchy="ha", source="A"),
            "b": Column("b", "text", "text", False, role="quasi_identifier", hierarchy="hb", source="B")}
    req = Request(Relation(1, "public", "t", "r", False, cols), "generalization", k, None, ["a", "b"],
                  None, None, {}, "rel", 1, 3, "me", grant,
                  hierarchies={"a": member("a"), "b": member("b")})
    n = 16
    frame = Frame(n, np.arange(n, dtype=np.int64), {
        "a": EncodedColumn("a", "category", np.arange(n) // 4, np.zeros(n, bool), [f"a{i}" for i in range(4)]),
        "b": EncodedColumn("b", "category", np.arange(n) % 4, np.zeros(n, bool), [f"b{i}" for i in range(4)])})
    return req, frame


POLICY = {"via": "policy", "grantee": "r", "min_k": 4, "min_l": None, "reader": "owner"}


@pytest.mark.parametrize("search", ["greedy", "optimal"])
@pytest.mark.parametrize("grant, joint", [
    (POLICY, 4),
    (dict(POLICY, min_k=2), 2),
    (dict(POLICY, per_source_k=True), None),
    ({"via": "select", "reader": "me"}, None),
])
def test_plugin_requires_the_policy_minimum_jointly(grant, joint, search):
    req, frame = grid_request(grant)
    req = dataclasses.replace(req, options={"search": search})
    plan = plugin.run(frame, req)
    m = plan.metrics
    assert m["joint_k_required"] == joint
    assert m["joint_classes"] == plan.groups
    if joint is None:
        assert m["levels"] == {"a": 0, "b": 0} and m["joint_k"] == 1 and plan.groups == 16
    else:
        assert m["joint_k"] >= joint and plan.groups <= 16 // joint


# ----------------------------------------------------------------------------------------------
# the verifier: its own reading of the requirement, and the check over all quasi-identifiers

class _Req:
    def __init__(self, grant=None):
        if grant is not None:
            self.grant = grant


@pytest.mark.parametrize("req, want", [
    (_Req(POLICY), 4),
    (_Req(dict(POLICY, min_k=7)), 7),
    (_Req(dict(POLICY, per_source_k=True)), None),
    (_Req(dict(POLICY, per_source_k=False)), 4),
    (_Req({"via": "select", "reader": "me"}), None),
    (_Req({}), None),            # a release logged before its grant was: nothing to require
    (_Req(), None),
])
def test_verifier_reads_the_requirement_from_the_request(req, want):
    assert vg.joint_requirement(req) == want


def test_check_joint_k():
    assert check_joint_k(np.array([4, 5, 7]), 4, n_rows=16) == {"classes": 3, "min_size": 4, "required": 4}
    with pytest.raises(DeidError) as e:
        check_joint_k(np.array([4, 1, 11]), 4)
    assert e.value.sqlstate == VERIFICATION_FAILED and "jointly" in e.value.message
    assert "1" not in e.value.message.replace("k = 4", "") and e.value.hint
    with pytest.raises(DeidError) as e:
        check_joint_k(np.array([4, 4]), 4, n_rows=9)      # the GROUP BY missed rows
    assert e.value.sqlstate == VERIFICATION_FAILED
