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

The rule measures it on the table itself, with 004's own survival model (sec. 3.5, the Cox
model of the survival time on every other column):

* :func:`cox_fit` -- Cox proportional hazards by Newton-Raphson on the partial likelihood
  (Breslow's ties), in numpy: coefficients and standard errors.
* :func:`ci_misses` -- of the source fit's coefficients, the share whose release estimate lies
  outside the source's 95 % interval, and the largest shift in source standard errors.
* :func:`choose_k` -- from the requested k upwards over ``candidates``: the largest k whose
  release keeps the share of misses <= ``max_miss`` (10 %, the evaluation's target), stopping
  at the first k that does not (attenuation grows with k).  Every trial is recorded.
"""
import numpy as np

from ...errors import DeidError

MAX_MISS = 0.10                  # the evaluation's target: <= 10 % of coefficients outside
Z95 = 1.959963984540054
GROWTH = (1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0)   # candidates: the requested k times these
NEWTON_STEPS = 30


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


def ci_misses(source, released, kinds, time_col, status_col):
    """(share of the source Cox coefficients outside the source's 95 % interval on the release,
    largest |shift| in source standard errors); (1.0, inf) when a fit fails."""
    skip = (time_col, status_col)
    fits = [cox_fit(design(X, kinds, skip), X[:, time_col], X[:, status_col] == 1)
            for X in (source, released)]
    if fits[0] is None or fits[1] is None:
        return 1.0, float("inf")
    (b0, se0), (b1, _) = fits
    shift = np.abs(b1 - b0) / se0
    return float(np.mean(shift > Z95)), float(shift.max())


def choose_k(release, source, kinds, time_col, status_col, k, n_rows, max_miss=MAX_MISS):
    """The largest k (>= the requested ``k``, at most a quarter of the rows) whose release keeps
    <= ``max_miss`` of the Cox coefficients inside the source's 95 % intervals.

    ``release(k)``: a function making the release at k (its rows, same columns as ``source``).
    Returns (chosen k, its release, trials [{k, ci_miss, max_shift_se}]).  The requested k is
    always tried and kept even if it misses (a privacy floor the rule never lowers)."""
    trials, chosen = [], None
    for factor in GROWTH:
        candidate = int(round(k * factor))
        if trials and (candidate <= trials[-1]["k"] or candidate > n_rows // 4):
            continue
        try:
            made = release(candidate)
        except DeidError:                         # e.g. a status subset below this k
            if not trials:
                raise
            break
        miss, shift = ci_misses(source, made.synthetic, kinds, time_col, status_col)
        trials.append({"k": candidate, "ci_miss": round(miss, 4),
                       "max_shift_se": round(shift, 3) if np.isfinite(shift) else None})
        if chosen is not None and miss > max_miss:
            break
        chosen = (candidate, made)
        if miss > max_miss:                           # the requested k already misses
            break
    return chosen[0], chosen[1], trials
