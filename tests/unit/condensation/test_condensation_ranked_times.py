"""survival_times 'ranked': every time moved strictly inside its cell below it, the order of
all times across the table kept (the Cox risk sets), no source time released as such -- and
what it does not protect against: ceil() of a whole-number time gives the time back."""

import dataclasses

import numpy as np
import pytest

from deid.errors import DeidError, VERIFICATION_FAILED
from deid.methods.condensation import plugin
from deid.methods.condensation.condense import condense
from deid.methods.condensation.release_values import ranked_times
from deid.plan import Synthetic
from deid.verify.shared.cluster_moments import verify_condensation

from test_condensation_plugin import SURV, frame, req


def monthly(n, seed):
    """Dense integer months (every month held by many rows), status by hazard: lung-like."""
    rng = np.random.default_rng(seed)
    age = rng.integers(40, 90, n).astype(float)
    stage = rng.integers(0, 4, n).astype(float)
    t = np.minimum(np.floor(rng.exponential(12.0 / np.exp(0.03 * (age - 65) + 0.5 * stage))), 71)
    dead = (rng.random(n) < 0.75).astype(float)
    return np.stack([age, stage, t, dead], axis=1), ["int", "categorical", "int", "categorical"]


def verify(X, kinds, res, k):
    return verify_condensation(
        X, res.cluster_id, res.synthetic, res.synthetic_cluster_id, k, status_col=3, time_col=2,
        survival_times=res.survival_times, moment_columns=[0, 2],
        moment_values=res.synthetic_unrounded, check_ranges=True, integer_columns=[0])


def test_ranked_keeps_the_order_of_all_times():
    X, kinds = monthly(4000, 1)
    res = condense(X, kinds, 10, status=3, time_col=2, seed=4, survival_times="ranked")
    assert condense(X, kinds, 10, status=3, time_col=2, seed=4).survival_times == "recode"
    t, released = X[:, 2], res.synthetic[:, 2]
    assert not np.isin(released, t).any()                     # no source time, dense months
    assert released.min() >= t.min() and released.max() <= t.max()
    # every released time lies in the half gap below its source time: across the whole
    # table, the r-th smallest released time belongs to the r-th smallest source time
    src, rel = np.sort(t), np.sort(released)
    v = np.unique(t)
    j = np.searchsorted(v, src)
    lo = np.r_[v[0], (v[1:] + v[:-1]) / 2][j]
    hi = np.r_[v[0] + (v[1] - v[0]) / 4, v[1:]][j]
    assert np.all((rel > lo) & (rel < hi))
    # the risk sets: by released time, the statuses come in the source's order (ties: events
    # first), so a Cox model sees the same risk sets as on the source times
    by_release = res.synthetic[np.argsort(released, kind="stable"), 3]
    by_source = X[np.lexsort((-X[:, 3], t)), 3]
    assert np.array_equal(by_release, by_source)
    # a threshold at a source time splits the release as it splits the source
    for c in v[1:]:
        assert (released > c).sum() == (t > c).sum()
    # within every cluster, the rank order of the synthetic times is kept
    unr = res.synthetic_unrounded[:, 2]
    for c in range(0, res.n_clusters, 17):
        mine = res.synthetic_cluster_id == c
        u, r = unr[mine], released[mine]
        assert np.all(r[:, None] <= r[None, :] + (u[:, None] >= u[None, :]) * 1e9)
    report = verify(X, kinds, res, 10)
    assert report["times_checked"] == "ranked"
    again = condense(X, kinds, 10, status=3, time_col=2, seed=4, survival_times="ranked")
    assert np.array_equal(again.synthetic, res.synthetic)


def test_ranked_float_times_and_one_distinct_time():
    rng = np.random.default_rng(3)
    t = rng.exponential(300.0, 500)
    moved = ranked_times(t, np.random.default_rng(0))
    assert not np.isin(moved, t).any()
    assert np.array_equal(np.argsort(moved), np.argsort(t))
    same = np.full(50, 7.0)
    assert np.array_equal(ranked_times(same, np.random.default_rng(0)), same)


@pytest.mark.parametrize("tamper", ["source_time", "order"])
def test_verifier_refuses_a_ranked_release_that_breaks_its_promise(tamper):
    X, kinds = monthly(1200, 2)
    res = condense(X, kinds, 10, status=3, time_col=2, seed=1, survival_times="ranked")
    released = res.synthetic.copy()
    if tamper == "source_time":
        released[0, 2] = np.ceil(released[0, 2])              # a source month
    else:                                                     # two clusters swap one time each
        a = np.flatnonzero(res.synthetic_cluster_id == 0)[0]
        far = np.abs(released[:, 2] - released[a, 2]) > 5
        b = np.flatnonzero(far & (res.synthetic_cluster_id != 0))[0]
        released[[a, b], 2] = released[[b, a], 2]
    moved = dataclasses.replace(res, synthetic=released)
    with pytest.raises(DeidError) as e:
        verify(X, kinds, moved, 10)
    assert e.value.sqlstate == VERIFICATION_FAILED and "rank" in str(e.value)


def test_plugin_releases_a_ranked_integer_time_as_float8():
    f, r = frame(), req(**SURV, seed=11, survival_times="ranked")
    plan = plugin.run(f, r)
    time_column = plan.tables[0].columns[r.columns.index("t")]
    assert isinstance(time_column, Synthetic)
    assert time_column.column.base_type == "float8"
    assert not np.isin(time_column.values, f.columns["t"].values).any()
    assert plan.metrics["survival_times"] == "ranked"
    assert plan.evidence.kinds[r.columns.index("t")] == "float"


def test_plugin_keeps_a_date_time_a_date():
    f = frame()
    r = req(**{"survival": {"time": "dx", "status": "dead"}}, seed=2)
    plan = plugin.run(f, r)
    assert plan.metrics["survival_times"] == "recode"
    with pytest.raises(DeidError) as e:
        plugin.plan_read(req(**{"survival": {"time": "dx", "status": "dead"}},
                             survival_times="ranked"), "rid")
    assert e.value.sqlstate == "22023" and e.value.hint


def recovered(source_times, res, attack):
    """Share of the source times an attacker gets back by ``attack`` of the released times,
    matched by rank within each cluster (the best pairing the attacker could hope for)."""
    hits = total = 0
    for c in range(res.n_clusters):
        src = np.sort(source_times[res.cluster_id == c])
        rel = np.sort(attack(res.synthetic[res.synthetic_cluster_id == c, 2]))
        hits += int((src == rel).sum())
        total += src.size
    return hits / total


@pytest.mark.parametrize("attack", [np.ceil, np.rint, np.floor])
def test_rounding_attack_on_whole_number_times(attack):
    """The attack deid defends against by default: rounding a released whole-month time.
    'ranked' keeps the order of all times, so ceil() returns every source month (it protects
    only against exact-value matches: documented, not the default; the smallest month's cell
    lies above it); 'coarsened' gives back no more months than its bins allow by chance (a
    bin spans >= 3 months); the default 'recode' gives back the grain and nothing finer: a
    month held by >= k rows of a status is released as itself (k rows share it), a rarer
    month only as its bin's value."""
    X, kinds = monthly(4000, 7)
    ranked = condense(X, kinds, 10, status=3, time_col=2, seed=2, survival_times="ranked")
    coarse = condense(X, kinds, 10, status=3, time_col=2, seed=2, survival_times="coarsened")
    recode = condense(X, kinds, 10, status=3, time_col=2, seed=2)
    assert recode.survival_times == "recode"
    if attack is np.ceil:
        # every month but the smallest (its cell lies above it), in disguise
        smallest = np.mean(X[:, 2] == X[:, 2].min())
        assert recovered(X[:, 2], ranked, attack) >= 1 - smallest - 0.01
    assert recovered(X[:, 2], coarse, attack) < 0.5                # not the times
    # recode: rows of a rare (month, status) come back only where their month is the bin's
    # value, which every row of the bin gets: the attacker learns the bin of >= k rows
    t, s = X[:, 2], X[:, 3]
    released = np.sort(attack(recode.synthetic[:, 2]))
    for v in (0.0, 1.0):
        mine = attack(recode.synthetic[recode.synthetic[:, 3] == v, 2])
        _, counts = np.unique(mine, return_counts=True)
        assert counts.min() >= 10
    assert released.size == t.size
