"""survival_times 'recode' (the default): every released (time, status) pair shared by >= k
source rows, whole units where k rows already share a time, sparse stretches (tails
included) merged into bins, every row of a bin released as the bin's value; and the
independent verifier's check of it (verify/shared/survival_pairs.py)."""

import numpy as np
import pytest

from deid.errors import DeidError, VERIFICATION_FAILED
from deid.methods.condensation.condense import condense
from deid.methods.condensation.survival_recode import bin_values, recoded_times
from deid.verify.shared.survival_pairs import check_pairs


def pairs_ok(t, s, out, k):
    """Every (value, status) pair of ``out`` is held by >= k rows; values monotone per status."""
    for v in np.unique(s):
        rel = out[s == v]
        _, counts = np.unique(rel, return_counts=True)
        assert counts.min() >= k
        order = np.argsort(t[s == v], kind="stable")
        assert np.all(np.diff(rel[order]) >= 0)          # the order kept up to the bins


def test_dense_values_stay_whole_units():
    t = np.repeat(np.arange(1, 13, dtype=float), 30)       # every month held by 30 rows
    s = np.tile([0, 1], t.size // 2)
    out = recoded_times(t, s, 10, integer=True)
    assert np.array_equal(out, t)                          # 15 rows per (month, status)
    pairs_ok(t, s, out, 10)


def test_sparse_stretch_is_merged_and_every_row_gets_the_bin_value():
    # 20 rows at 1, then one row each at 2..31 (a sparse tail), k = 5
    t = np.r_[np.ones(20), np.arange(2, 32)].astype(float)
    s = np.ones(t.size, dtype=int)
    out = recoded_times(t, s, 5, integer=True)
    assert np.all(out[:20] == 1)                            # dense: its own grain
    tail = out[20:]
    values, counts = np.unique(tail, return_counts=True)
    assert counts.min() >= 5 and values.size == 6           # 30 rows in bins of 5
    assert np.array_equal(values, [4, 9, 14, 19, 24, 29])   # each bin's mean, in whole units
    pairs_ok(t, s, out, 5)


def test_tie_heavy_times_with_a_short_stretch_between_dense_values():
    # dense 10 (12 rows), sparse 11 and 12 (1 row each), dense 30 (12 rows); k = 5: the short
    # stretch joins the nearer dense value (10), never both dense values together
    t = np.r_[np.full(12, 10.0), [11.0, 12.0], np.full(12, 30.0)]
    s = np.zeros(t.size, dtype=int)
    out = recoded_times(t, s, 5, integer=True)
    assert set(out[:14]) == {10.0} and set(out[14:]) == {30.0}
    pairs_ok(t, s, out, 5)


def test_short_stretch_joins_the_next_dense_value_when_nearer():
    t = np.r_[np.full(12, 1.0), [28.0, 29.0], np.full(12, 30.0)]
    s = np.zeros(t.size, dtype=int)
    out = recoded_times(t, s, 5, integer=True)
    assert set(out[:12]) == {1.0} and set(out[12:]) == {30.0}


def test_skewed_float_times_with_a_huge_tail():
    rng = np.random.default_rng(3)
    t = np.round(rng.lognormal(2.0, 1.5, 3000), 3)          # heavy right tail, few ties
    t[:5] = [1e6, 2e6, 3e6, 4e6, 5e6]
    s = (rng.random(t.size) < 0.6).astype(int)
    out = recoded_times(t, s, 10, integer=False)
    pairs_ok(t, s, out, 10)
    # the outliers share bins with other rows: none is released as itself
    assert not np.isin(out[:5], t[:5]).any() and out.max() < 5e6
    # the released value lies within the times of its bin
    for v in np.unique(s):
        for value in np.unique(out[s == v]):
            members = t[(s == v) & (out == value)]
            assert members.min() <= value <= members.max()


def test_all_equal_times():
    t = np.full(50, 7.0)
    s = np.r_[np.zeros(20, int), np.ones(30, int)]
    assert np.array_equal(recoded_times(t, s, 10, integer=True), t)


def test_one_status_only():
    t = np.arange(40, dtype=float)
    out = recoded_times(t, np.ones(40, int), 10, integer=True)
    assert np.unique(out).size == 4
    pairs_ok(t, np.ones(40, int), out, 10)


def test_fewer_rows_than_k_is_refused_without_a_count():
    with pytest.raises(DeidError) as e:
        recoded_times(np.arange(12, dtype=float), np.r_[np.zeros(3, int), np.ones(9, int)], 5,
                      integer=True)
    assert e.value.sqlstate == "DE001" and "3" not in e.value.message


def test_whole_subset_sparse_but_at_least_k_rows_is_one_bin_at_a_time():
    t = np.arange(9, dtype=float)                           # 9 distinct times, k = 5
    out = recoded_times(t, np.zeros(9, int), 5, integer=True)
    assert np.unique(out).size == 1                          # 9 rows cannot make 2 bins of 5


def test_bins_never_hold_two_dense_values():
    rng = np.random.default_rng(5)
    counts = rng.integers(1, 25, 400)
    values = np.cumsum(rng.integers(1, 4, 400)).astype(float)
    b = bin_values(counts, values, 10)
    rows = np.bincount(b, weights=counts)
    assert rows.min() >= 10
    dense_per_bin = np.bincount(b, weights=(counts >= 10))
    assert dense_per_bin.max() <= 1
    assert np.all(np.diff(b) >= 0) and b[0] == 0


def test_condense_defaults_to_recode_and_its_verifier_accepts_it():
    rng = np.random.default_rng(1)
    n = 3000
    age = rng.integers(40, 90, n).astype(float)
    t = np.minimum(np.floor(rng.exponential(12.0, n)), 71)
    dead = (rng.random(n) < 0.7).astype(float)
    X = np.stack([age, t, dead], axis=1)
    res = condense(X, ["int", "int", "categorical"], 10, status=2, time_col=1, seed=4)
    assert res.survival_times == "recode"
    rel = res.synthetic
    report = check_pairs(X[:, 1], X[:, 2], rel[:, 1], rel[:, 2], 10)
    assert report["smallest_pair_rows"] >= 10
    # rounding a released time gives back the bin's value: never a sparse row's own time
    sparse = [v for v in np.unique(t) if ((t == v) & (dead == 1)).sum() < 10]
    released_dead = rel[rel[:, 2] == 1, 1]
    for v in sparse:
        rows = ((X[:, 1] == v) & (X[:, 2] == 1)).sum()
        assert (released_dead == v).sum() != rows or rows == 0 or (released_dead == v).sum() >= 10


def test_verifier_rejects_a_pair_of_fewer_than_k_rows():
    t = np.repeat(np.arange(1, 6, dtype=float), 10)
    s = np.zeros(t.size, int)
    rel = t.copy()
    assert check_pairs(t, s, rel, s, 10)["smallest_pair_rows"] == 10
    rel[0] = 1.5                                             # one row alone at its own time
    with pytest.raises(DeidError) as e:
        check_pairs(t, s, rel, s, 10)
    assert e.value.sqlstate == VERIFICATION_FAILED and "fewer than k" in e.value.message


def test_verifier_rejects_a_value_outside_its_rows_and_a_needless_merge():
    t = np.repeat(np.arange(1, 6, dtype=float), 10)
    s = np.zeros(t.size, int)
    with pytest.raises(DeidError, match="outside"):
        check_pairs(t, s, t + 0.5, s, 10)
    merged = np.where(t <= 2, 1.0, t)                        # two dense months released as one
    with pytest.raises(DeidError, match="already share"):
        check_pairs(t, s, merged, s, 10)
    with pytest.raises(DeidError, match="vital status"):
        check_pairs(t, s, t, 1 - s, 10)


def test_whole_unit_values_keep_the_total_of_the_times():
    rng = np.random.default_rng(8)
    t = np.minimum(np.floor(rng.exponential(30.0, 3000)), 200)    # a long sparse tail
    s = (rng.random(t.size) < 0.4).astype(int)
    out = recoded_times(t, s, 10, integer=True)
    assert np.array_equal(out, np.rint(out))
    pairs_ok(t, s, out, 10)
    for v in (0, 1):                 # per status within half its largest bin of the source's
        _, counts = np.unique(out[s == v], return_counts=True)
        assert abs(out[s == v].sum() - t[s == v].sum()) <= counts.max() / 2
