"""Which k a condensation release can afford: the k rule (beyond 004: a
release whose Cox model misses the source's intervals is no use to the analyst who asked).

Condensation keeps every cluster's mean vector and covariance matrix, but not what lies beyond
them inside a cluster (the categories' joint counts, the shape of the hazard), so a model fitted
on the release is pulled towards none of the cluster's within-cluster structure: its
coefficients shrink, more as the clusters grow.  What an analyst can tolerate is set by the
model's precision: a coefficient that moves by more than 1.96 of its source standard errors
leaves the source's 95 % confidence interval.  A fixed k smooths about as much whatever the
table's size while the interval narrows as 1 / sqrt(n), so a large registry tolerates a smaller
k than a small study (lung, 17,421 rows: k = 10; rossi, 432 rows: k = 50).

The rule measures it on the table itself, with 004's own models (sec. 3.5: linear and
logistic models of the survival time and the Cox model, on every other column); one seed
picked k = 100 on whas500 where five seeds miss, so every candidate is judged on five:

* :func:`cox_fit` -- Cox proportional hazards by Newton-Raphson on the partial likelihood
  (Breslow's ties), in numpy: coefficients and standard errors.
* :func:`ci_misses` -- of the source fit's coefficients, the share whose release estimate lies
  outside the source's 95 % interval, and the largest shift in source standard errors.
* :func:`ols_fit`, :func:`logistic_fit` -- 004's linear model of the time and logistic model of
  time > the source's median event time (event rows), in numpy.
* :class:`Judge` -- per model, the share of the source fit's coefficients whose release
  estimate lies outside the source's 95 % interval, and the largest shift in source SEs.
* :func:`choose_k` -- from the requested k upwards over ``candidates``, each judged on
  ``SEEDS`` (5) releases and all three models: the largest k whose releases keep every model's
  share of misses (pooled over the seeds) <= ``max_miss`` (10 %, the evaluation's target)
  and every coefficient's mean shift <= ``max_shift`` (1 SE),
  stopping at the first k that does not (attenuation grows with k), and never above the k that
  leaves every vital-status stratum ``MIN_CLUSTERS`` (20) clusters.  Every trial is recorded.
"""
import numpy as np

from ...errors import DeidError

MAX_MISS = 0.10                  # the evaluation's target: <= 10 % of coefficients outside
MAX_SHIFT = 1.0                  # ... and no coefficient's mean shift over the seeds > 1 SE
Z95 = 1.959963984540054
GROWTH = (1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0)   # candidates: the requested k times these
NEWTON_STEPS = 30
SEEDS = 5                        # releases judged per candidate k (one seed's luck is not a rule)
MIN_CLUSTERS = 20                # every vital-status stratum keeps at least this many clusters


def design(X, kinds, skip):
    """Covariates of 004 sec. 3.5's models: numeric columns as they are, categorical ones as
    indicators of every level but the first; ``skip``: the time and status columns."""
    parts = []
    for j, kind in enumerate(kinds):
        if j in skip:
            continue
        col = X[:, j]
        if kind == "categorical":
            levels = np.unique(col)
            parts.extend((col == v).astype(np.float64) for v in levels[1:])
        else:
            parts.append(col.astype(np.float64))
    return np.stack(parts, axis=1) if parts else np.zeros((X.shape[0], 0))


def cox_fit(Z, time, event):
    """(coefficients, standard errors) of the Cox model, or None if the fit fails (a
    constant column, separation, no events).  Efron's ties (as lifelines and R's coxph): the
    d events tied at t see the risk set {time >= t} minus l/d of their own weight, l = 0..d-1."""
    n, p = Z.shape
    if p == 0 or not event.any():
        return None
    mu, sd = Z.mean(axis=0), Z.std(axis=0)
    if np.any(sd == 0):
        return None
    order = np.argsort(-time, kind="stable")          # descending: risk sets are prefixes
    Z, t, e = (Z[order] - mu) / sd, time[order], event[order].astype(bool)
    last = np.r_[t[1:] != t[:-1], True]                # end of each group of tied times
    group_end = np.flatnonzero(last)[np.cumsum(np.r_[0, last[:-1]])]
    ends = group_end[e]                                # per event: its risk set's end
    _, first, group, tied = np.unique(ends, return_index=True, return_inverse=True,
                                      return_counts=True)
    frac = (np.arange(ends.size) - first[group]) / tied[group]     # l / d per event
    Ze = Z[e]

    def parts(b):
        eta = Z @ b
        top = eta.max()
        w = np.exp(eta - top)                          # every weight scaled by exp(-top)
        s0 = np.cumsum(w)[ends] - frac * np.bincount(group, w[e])[group]
        return eta, w, s0, top

    def loglik(b):
        eta, _, s0, top = parts(b)
        return float(eta[e].sum() - (np.log(s0) + top).sum()) if np.all(s0 > 0) else -np.inf

    beta, current, info = np.zeros(p), loglik(np.zeros(p)), None
    for _ in range(NEWTON_STEPS):
        eta, w, s0, _ = parts(beta)
        own = w[e][:, None] * Ze
        e1 = np.stack([np.bincount(group, own[:, i]) for i in range(p)], axis=1)
        s1 = np.cumsum(w[:, None] * Z, axis=0)[ends] - frac[:, None] * e1[group]
        m = s1 / s0[:, None]                           # the risk sets' weighted means
        grad = Ze.sum(axis=0) - m.sum(axis=0)
        a = np.zeros(n)
        np.add.at(a, ends, 1.0 / s0)
        weight = w * np.cumsum(a[::-1])[::-1]          # sum of 1/s0 over risk sets holding j
        weight[np.flatnonzero(e)] -= w[e] * np.bincount(group, frac / s0)[group]
        info = (Z * weight[:, None]).T @ Z - m.T @ m
        try:
            step = np.linalg.solve(info, grad)
        except np.linalg.LinAlgError:
            return None
        scale = 1.0
        while scale > 1e-4:
            trial = beta + scale * step
            value = loglik(trial)
            if np.isfinite(value) and value >= current - 1e-12:
                break
            scale /= 2
        beta, previous, current = trial, current, value
        if abs(current - previous) < 1e-10 * max(1.0, abs(current)):
            break
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return None
    se = np.sqrt(np.diag(cov))
    if not (np.all(np.isfinite(beta)) and np.all(np.isfinite(se))):
        return None
    return beta / sd, se / sd


def ols_fit(Z, y):
    """(coefficients, standard errors) of least squares with an intercept (the intercept
    dropped from what is returned), or None when the design is singular."""
    A = np.c_[np.ones(Z.shape[0]), Z]
    if A.shape[0] <= A.shape[1]:
        return None
    try:
        gram_inv = np.linalg.inv(A.T @ A)
    except np.linalg.LinAlgError:
        return None
    beta = gram_inv @ (A.T @ y)
    resid = y - A @ beta
    sigma2 = float(resid @ resid) / (A.shape[0] - A.shape[1])
    se = np.sqrt(np.clip(np.diag(gram_inv) * sigma2, 0, None))
    if not (np.all(np.isfinite(beta)) and np.all(se > 0)):
        return None
    return beta[1:], se[1:]


def logistic_fit(Z, y):
    """(coefficients, standard errors) of logistic regression with an intercept, by
    Newton-Raphson (IRLS), or None on separation or a singular design."""
    A = np.c_[np.ones(Z.shape[0]), Z]
    if y.min() == y.max():
        return None
    beta = np.zeros(A.shape[1])
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-np.clip(A @ beta, -30, 30)))
        info = (A * (p * (1 - p))[:, None]).T @ A
        try:
            step = np.linalg.solve(info, A.T @ (y - p))
        except np.linalg.LinAlgError:
            return None
        beta += step
        if np.abs(step).max() < 1e-8:
            break
    try:
        se = np.sqrt(np.diag(np.linalg.inv(info)))
    except np.linalg.LinAlgError:
        return None
    if not (np.all(np.isfinite(beta)) and np.all(np.isfinite(se))) or np.abs(beta).max() > 25:
        return None
    return beta[1:], se[1:]


def model_fits(X, design_of, time_col, status_col, threshold):
    """004 sec. 3.5's three models on the rows X: {"linear": OLS of the time on the covariates
    (event rows), "logistic": time > ``threshold`` (event rows), "cox": all rows}."""
    Z = design_of(X)
    event = X[:, status_col] == 1
    t = X[:, time_col].astype(np.float64)
    return {"linear": ols_fit(Z[event], t[event]),
            "logistic": logistic_fit(Z[event], (t[event] > threshold).astype(np.float64)),
            "cox": cox_fit(Z, t, event)}


def fixed_design(source, kinds, skip):
    """A design function whose category levels are the source's (a release missing a level
    keeps the same columns)."""
    levels = {j: np.unique(source[:, j])[1:] for j, kind in enumerate(kinds)
              if kind == "categorical" and j not in skip}

    def design_of(X):
        parts = []
        for j, kind in enumerate(kinds):
            if j in skip:
                continue
            if j in levels:
                parts.extend((X[:, j] == v).astype(np.float64) for v in levels[j])
            else:
                parts.append(X[:, j].astype(np.float64))
        return np.stack(parts, axis=1) if parts else np.zeros((X.shape[0], 0))
    return design_of


def ci_misses(source, released, kinds, time_col, status_col):
    """(share of the source Cox coefficients outside the source's 95 % interval on the release,
    largest |shift| in source standard errors); (1.0, inf) when a fit fails."""
    judge = Judge(source, kinds, time_col, status_col)
    miss, shift, _ = judge.misses(released)["cox"]
    return miss, shift


class Judge:
    """The source's fits of the three models, and how far a release's fits fall from them."""

    def __init__(self, source, kinds, time_col, status_col):
        skip = (time_col, status_col)
        self.design_of = fixed_design(source, kinds, skip)
        self.time_col, self.status_col = time_col, status_col
        event = source[:, status_col] == 1
        self.threshold = float(np.median(source[event, time_col])) if event.any() else 0.0
        self.source = model_fits(source, self.design_of, time_col, status_col, self.threshold)

    def misses(self, released):
        """{model: (share of its coefficients outside the source's 95 % intervals, largest
        |shift| in source SEs)}; a model whose source fit fails is not judged, a failed
        release fit counts every coefficient outside."""
        fits = model_fits(released, self.design_of, self.time_col, self.status_col,
                          self.threshold)
        out = {}
        for model, base in self.source.items():
            if base is None:
                continue
            if fits[model] is None:
                out[model] = (1.0, float("inf"), np.full(base[0].size, np.inf))
                continue
            signed = (fits[model][0] - base[0]) / base[1]
            shift = np.abs(signed)
            out[model] = (float(np.mean(shift > Z95)), float(shift.max()), signed)
        return out


def cluster_cap(source, status_col, min_clusters=MIN_CLUSTERS):
    """The largest k that leaves every vital-status stratum >= ``min_clusters`` clusters
    (floor(n_s / k) >= min_clusters): fewer clusters leave too few to carry a stratum's
    covariate structure (whas500 at k = 100: 2-3 clusters per status, 13-16 sign flips)."""
    _, counts = np.unique(source[:, status_col], return_counts=True)
    return int(counts.min()) // min_clusters


def choose_k(release, source, kinds, time_col, status_col, k, n_rows, max_miss=MAX_MISS,
             seeds=SEEDS, max_shift=MAX_SHIFT):
    """The largest k (>= the requested ``k``, at most a quarter of the rows and at most
    :func:`cluster_cap`) whose releases over ``seeds`` seeds keep, for each of the linear,
    logistic and Cox models, <= ``max_miss`` of the coefficients (pooled over the seeds)
    outside the source's 95 % intervals, and no coefficient whose mean shift over the seeds
    exceeds ``max_shift`` source SEs (a bias, which a share of misses pooled over many
    coefficients can hide: lung at k = 20 kept one of ten Cox coefficients 6 SE off).

    ``release(k, i)``: a function making the release at k with the i-th seed (i = 0 is the
    request's own seed; its rows, same columns as ``source``).  Returns (chosen k, its seed-0
    release, trials [{k, ci_miss, max_shift_se, by_model, seeds}]).  The requested k is always
    tried and kept even if it misses (a privacy floor the rule never lowers)."""
    judge = Judge(source, kinds, time_col, status_col)
    cap = max(min(n_rows // 4, cluster_cap(source, status_col)), k)
    trials, chosen = [], None
    for factor in GROWTH:
        candidate = int(round(k * factor))
        if trials and (candidate <= trials[-1]["k"] or candidate > cap):
            continue
        try:
            made = [release(candidate, i) for i in range(seeds)]
        except DeidError:                         # e.g. a status subset below this k
            if not trials:
                raise
            break
        trial = _trial(candidate, [judge.misses(m.synthetic) for m in made])
        trials.append(trial)
        fails = trial["ci_miss"] > max_miss or trial["mean_shift_se"] > max_shift
        if chosen is not None and fails:
            break
        chosen = (candidate, made[0])
        if fails:                                     # the requested k already misses
            break
    return chosen[0], chosen[1], trials


def _trial(k, per_seed):
    """One trial's record: per model the share of misses pooled over seeds and the largest
    mean shift; ``ci_miss`` is the worst model's share (what the rule compares)."""
    by_model = {}
    for model in per_seed[0]:
        shares = [m[model][0] for m in per_seed]
        shifts = [m[model][1] for m in per_seed]
        mean_shift = float(np.abs(np.mean([m[model][2] for m in per_seed], axis=0)).max())
        by_model[model] = {"ci_miss": round(float(np.mean(shares)), 4),
                           "max_shift_se": round(float(np.max(shifts)), 3)
                           if np.all(np.isfinite(shifts)) else None,
                           "mean_shift_se": round(mean_shift, 3)
                           if np.isfinite(mean_shift) else None}
    worst = max(v["ci_miss"] for v in by_model.values()) if by_model else 1.0
    shifts = [v["mean_shift_se"] for v in by_model.values()]
    worst_shift = float("inf") if not shifts or None in shifts else max(shifts)
    cox = by_model.get("cox", {})
    return {"k": k, "ci_miss": worst, "mean_shift_se": worst_shift,
            "max_shift_se": cox.get("max_shift_se"), "by_model": by_model,
            "seeds": len(per_seed)}
