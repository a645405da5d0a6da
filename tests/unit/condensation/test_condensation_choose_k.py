"""The k rule of condensation (methods.condensation.choose_k): the Cox fit and the choice."""

import numpy as np
import pytest

from deid.errors import DeidError
from deid.methods.condensation import choose_k as ck, plugin
from deid.methods.condensation.condense import condense

from test_condensation_plugin import SURV, frame, req


def efron_loglik(Z, t, e, b):
    """Efron's partial log-likelihood, written out event time by event time."""
    eta, ll = Z @ b, 0.0
    for tt in np.unique(t[e]):
        tied, risk = (t == tt) & e, t >= tt
        d, s0, e0 = tied.sum(), np.exp(eta[risk]).sum(), np.exp(eta[tied]).sum()
        ll += eta[tied].sum() - sum(np.log(s0 - j / d * e0) for j in range(d))
    return ll


def test_cox_fit_maximizes_efrons_partial_likelihood():
    rng = np.random.default_rng(0)
    n = 300
    Z = np.stack([rng.normal(size=n), rng.integers(0, 2, n), rng.normal(5, 2, n)], axis=1)
    t = np.ceil(rng.exponential(10 / np.exp(0.5 * Z[:, 0] - 0.7 * Z[:, 1])))  # heavy ties
    e = rng.random(n) < 0.7
    b, se = ck.cox_fit(Z, t, e)
    h = 1e-5
    grad = [(efron_loglik(Z, t, e, b + h * u) - efron_loglik(Z, t, e, b - h * u)) / (2 * h)
            for u in np.eye(3)]
    assert np.abs(grad).max() < 1e-4                       # the maximum
    hess = np.array([[(efron_loglik(Z, t, e, b + h * (u + v)) - efron_loglik(Z, t, e, b + h * u)
                       - efron_loglik(Z, t, e, b + h * v) + efron_loglik(Z, t, e, b)) / h ** 2
                      for v in np.eye(3)] for u in np.eye(3)])
    assert np.allclose(se, np.sqrt(np.diag(np.linalg.inv(-hess))), rtol=1e-3)
    assert b[0] > 0.3 and b[1] < -0.4                      # the simulated effects
    assert ck.cox_fit(np.ones((n, 1)), t, e) is None       # a constant column


def table(n, seed):
    rng = np.random.default_rng(seed)
    age = rng.integers(30, 90, n).astype(float)
    stage = rng.integers(0, 4, n).astype(float)
    risk = np.exp(0.04 * (age - 60) + 0.6 * stage)
    t = np.minimum(np.ceil(rng.exponential(30 / risk)), 60)
    dead = (t < 60).astype(float)
    X = np.stack([age, stage, t, dead], axis=1)
    return X, ["int", "categorical", "int", "categorical"]


def test_choose_k_takes_the_largest_k_within_the_target_and_never_lowers_k():
    X, kinds = table(3000, 1)
    made = []

    def release(k, i=0):
        made.append(k)
        return condense(X, kinds, k, status=3, time_col=2, seed=2 + i)

    k, res, trials = ck.choose_k(release, X, kinds, 2, 3, 5, X.shape[0])
    assert made == [t["k"] for t in trials for _ in range(ck.SEEDS)] and made[0] == 5
    assert all(t["seeds"] == ck.SEEDS and set(t["by_model"]) == {"linear", "logistic", "cox"}
               for t in trials)
    def passes(t):
        return t["ci_miss"] <= ck.MAX_MISS and t["mean_shift_se"] <= ck.MAX_SHIFT
    assert all(passes(t) for t in trials if t["k"] <= k) or (k == 5 and len(trials) == 1)
    assert k == 5 or k == max(t["k"] for t in trials if passes(t))
    assert trials[-1]["k"] == k or not passes(trials[-1])              # stopped at a miss
    assert res.cluster_size.min() >= k
    # a requested k that already misses is kept: the rule never lowers k
    k2, _, trials2 = ck.choose_k(release, X, kinds, 2, 3, 5, X.shape[0], max_miss=-1.0)
    k3, _, _ = ck.choose_k(release, X, kinds, 2, 3, 5, X.shape[0], max_shift=-1.0)
    assert k3 == 5
    assert k2 == 5 and len(trials2) == 1


def test_ols_and_logistic_fits_match_their_definitions():
    rng = np.random.default_rng(4)
    n = 2000
    Z = np.stack([rng.normal(size=n), rng.integers(0, 2, n).astype(float)], axis=1)
    y = 1.0 + 2.0 * Z[:, 0] - 0.5 * Z[:, 1] + rng.normal(size=n)
    b, se = ck.ols_fit(Z, y)
    want = np.linalg.lstsq(np.c_[np.ones(n), Z], y, rcond=None)[0][1:]
    assert np.allclose(b, want) and np.all(se > 0) and np.all(se < 0.1)
    p = 1 / (1 + np.exp(-(0.3 + 1.2 * Z[:, 0] - 0.8 * Z[:, 1])))
    b, se = ck.logistic_fit(Z, (rng.random(n) < p).astype(float))
    assert abs(b[0] - 1.2) < 4 * se[0] and abs(b[1] + 0.8) < 4 * se[1]
    assert ck.logistic_fit(Z, np.ones(n)) is None                 # one class only
    assert ck.ols_fit(np.ones((n, 1)), y) is None or True          # singular: no crash


def test_the_k_rule_keeps_twenty_clusters_per_status():
    X, kinds = table(3000, 2)
    dead = int((X[:, 3] == 1).sum())
    alive = X.shape[0] - dead
    cap = min(dead, alive) // ck.MIN_CLUSTERS
    assert ck.cluster_cap(X, 3) == cap

    def release(k, i=0):
        return condense(X, kinds, k, status=3, time_col=2, seed=2 + i)

    k, res, trials = ck.choose_k(release, X, kinds, 2, 3, 5, X.shape[0], max_miss=1.0,
                                 max_shift=np.inf)
    assert all(t["k"] <= max(cap, 5) for t in trials) and k <= max(cap, 5)
    assert np.bincount(res.cluster_status).min() >= min(ck.MIN_CLUSTERS, min(dead, alive) // 5)


def test_auto_k_is_logged_and_needs_survival():
    f = frame(n=600, seed=3)
    plan = plugin.run(f, req(**SURV, seed=4, auto_k=True))
    rule = plan.metrics["k_rule"]
    assert rule["requested"] == 5 and rule["used"] >= 5 and rule["trials"][0]["k"] == 5
    assert plan.clusters.sizes.min() >= rule["used"] and "Cox" in rule["why"]
    assert "k_rule" not in plugin.run(f, req(**SURV, seed=4)).metrics
    why = plugin.k_rule_metrics(5, 5, [{"k": 5, "ci_miss": 0.2, "max_shift_se": 3.0, "mean_shift_se": 2.0}],
                                "coarsened")["why"]
    assert "as requested" in why and "coarsened" in why
    with pytest.raises(DeidError) as e:
        plugin.validate(5, None, {"auto_k": True})
    assert e.value.sqlstate == "22023" and e.value.hint
