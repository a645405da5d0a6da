"""The reconstruction that follows the utility policy (releases/constrained_assignment.py):
every D' it draws is consistent with the release (tests/reconstruction_check.py, plain
Python) on random, Zipf-skewed, tie-heavy and degenerate releases at colocate 0, 0.5 and 1;
colocate 0 is the random deal of 003 Fig. 5; the same seed draws the same D'; an item-chunk
code of a split constraint joins a record of its constraint."""
import numpy as np
import pytest

from deid.errors import DeidError
from deid.methods.disassociation.disassociate import (constraint_ids, disassociate,
                                                      reconstruct)
from deid.releases.constrained_assignment import constrained_reconstruct
from reconstruction_check import inconsistencies, records_of, release_of
from test_disassociation_fuzz import KINDS, csr, make_case

CASES_PER_KIND = 25


def policy(rng, D, constraints):
    """The case's policy, or a random partition of the codes into groups of 1-4."""
    if constraints:
        return constraints
    perm = rng.permutation(D).tolist()
    cuts = np.cumsum(rng.integers(1, 5, D))
    return [perm[a:b] for a, b in zip(np.r_[0, cuts], cuts) if a < D]


@pytest.mark.parametrize("kind", KINDS)
def test_every_draw_is_consistent_with_the_release(kind):
    rng = np.random.default_rng(sorted(KINDS).index(kind) + 240)
    for _ in range(CASES_PER_KIND):
        recs, D, k, m, constraints, max_cluster, max_joint, seed = make_case(rng, kind)
        offsets, codes = csr(recs)
        pol = policy(rng, D, constraints)
        res = disassociate(offsets, codes, D, k, m, constraints=pol, seed=seed,
                           max_cluster_size=max_cluster, max_joint_clusters=max_joint)
        plain = release_of(res)
        cu = constraint_ids(pol, D)
        for colocate in (0.0, 0.5, 1.0):
            d = constrained_reconstruct(res, seed, cu, colocate)
            assert inconsistencies(plain, records_of(d), k) == [], (kind, colocate)
            again = constrained_reconstruct(res, seed, cu, colocate)
            assert np.array_equal(d.offsets, again.offsets)
            assert np.array_equal(d.codes, again.codes)
        plain_draw = reconstruct(res, seed)
        d0 = constrained_reconstruct(res, seed, cu, 0.0)
        assert np.array_equal(d0.codes, plain_draw.codes)
        assert np.array_equal(d0.offsets, plain_draw.offsets)


def test_the_checker_sees_an_inconsistent_draw():
    rng = np.random.default_rng(5)
    recs, D, k, m, constraints, max_cluster, max_joint, seed = make_case(rng, "zipf")
    offsets, codes = csr(recs)
    res = disassociate(offsets, codes, D, 2, 2, seed=1)
    plain = release_of(res)
    good = records_of(reconstruct(res, 3))
    assert inconsistencies(plain, good, 2) == []
    moved = [set(r) for r in good]
    moved[0], moved[-1] = moved[0] | moved[-1], set()      # two records merged
    assert inconsistencies(plain, moved, 2)
    assert inconsistencies(plain, good[:-1], 2)
    extra = [set(r) for r in good]
    extra[0] |= {D + 5}
    assert inconsistencies(plain, extra, 2)


# one cluster of 6 records (k = 3): A = 0 on three records (record chunk), B = 1 on one of
# them (item chunk); A and B form one utility constraint, C = 2 is on every record
SPLIT = [[0, 1, 2], [0, 2], [0, 2], [2], [2], [2]]


def test_an_item_code_joins_a_record_of_its_constraint():
    offsets, codes = csr(SPLIT)
    res = disassociate(offsets, codes, 3, 3, 2, constraints=[[0, 1]], seed=0)
    assert res.cluster_size.tolist() == [6] and res.item_codes.tolist() == [1]
    cu = constraint_ids([[0, 1]], 3)
    apart = 0
    for seed in range(20):
        d = records_of(constrained_reconstruct(res, seed, cu, 1.0))
        assert all(0 in r for r in d if 1 in r), seed
        apart += any(0 not in r for r in records_of(reconstruct(res, seed)) if 1 in r)
    assert apart > 0             # the random deal splits them for some seed


@pytest.mark.parametrize("colocate", [-0.1, 1.5, float("nan"), None, True, "1"])
def test_colocate_outside_0_1_is_refused(colocate):
    offsets, codes = csr(SPLIT)
    res = disassociate(offsets, codes, 3, 3, 2, constraints=[[0, 1]], seed=0)
    with pytest.raises(DeidError) as e:
        constrained_reconstruct(res, 1, constraint_ids([[0, 1]], 3), colocate)
    assert e.value.sqlstate == "22023" and e.value.hint
