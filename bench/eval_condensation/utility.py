"""004 sec. 3.5's utility metrics: the same linear, logistic and Cox models fitted on the
original and on a release, compared coefficient by coefficient.

Models (as in 004, per data set): covariates = every column but time and status, categorical
ones as dummies (first level dropped; levels fixed by the original).
* linear: OLS of the time on the covariates, event rows only (004: deceased patients);
* logistic: time > the original event rows' median time, event rows only;
* Cox: lifelines ``CoxPHFitter`` on all rows (coefficients compared as log hazard ratios, which
  is the same test as 004's exp(coef) since exp is monotone).
Metrics, pooled over coefficients and seeds: % of coefficients that change significance
(p < 0.05), % of the originally significant ones that change sign, % outside the original 95 %
CI.  A fit that fails on a release (singular design, separation, no convergence) counts every
coefficient as changed (significance, direction if significant, outside the CI) and is counted
in ``failed``.  Means: mean over columns of |mean_rel - mean_orig| / sd_orig; correlations: mean
absolute difference of the Pearson correlations of all column pairs (dummies for categories).
"""
import warnings

import numpy as np

MODELS = ("linear", "logistic", "cox")
ALPHA = 0.05


def design(ds, df):
    import pandas as pd
    parts = []
    for c in ds.covariates:
        if ds.kinds[c] == "categorical":
            for level in np.unique(ds.df[c])[1:]:
                parts.append(((df[c] == level).astype(float)).rename(f"{c}={level}"))
        else:
            parts.append(df[c].astype(float))
    X = pd.concat(parts, axis=1)
    return X


def fit(ds, df, model, threshold):
    """(coef, p, ci_lo, ci_hi) as arrays over the design's columns, or None if the fit fails."""
    import statsmodels.api as sm
    from lifelines import CoxPHFitter
    X = design(ds, df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if model == "cox":
                data = X.copy()
                data["_t"] = df[ds.time].astype(float).clip(lower=1e-3)
                data["_e"] = df[ds.status].astype(int)
                cph = CoxPHFitter().fit(data, "_t", "_e")
                s = cph.summary.loc[X.columns]
                out = (s["coef"].to_numpy(), s["p"].to_numpy(),
                       s["coef lower 95%"].to_numpy(), s["coef upper 95%"].to_numpy())
            else:
                ev = df[ds.status].to_numpy() == 1
                Xe = sm.add_constant(X[ev], has_constant="add")
                y = df[ds.time].to_numpy()[ev].astype(float)
                if model == "logistic":
                    r = sm.Logit((y > threshold).astype(float), Xe).fit(disp=0, maxiter=100)
                else:
                    r = sm.OLS(y, Xe).fit()
                ci = np.asarray(r.conf_int())[1:]
                out = (np.asarray(r.params)[1:], np.asarray(r.pvalues)[1:], ci[:, 0], ci[:, 1])
        except Exception:                                   # noqa: BLE001 -- counted as failed
            return None
    if not all(np.all(np.isfinite(a)) for a in out):
        return None
    return out


def to_json(fit_result):
    """A fit as lists (None stays None) for the cache."""
    return None if fit_result is None else [np.asarray(a, float).tolist() for a in fit_result]


def from_json(x):
    return None if x is None else tuple(np.asarray(a, float) for a in x)


EXTREME_P = (0.001, 0.5)       # "clear" coefficients: original p < 0.001 or p > 0.5


class Tally:
    """Pooled counts of one (data set, method, k, model) over seeds.  Significance changes are
    counted overall and apart for the coefficients whose original p is clear (< 0.001 or
    > 0.5) and near the threshold (the rest); ``shift`` sums each coefficient's difference to
    the original in original standard errors (the mean over seeds shows a bias)."""

    def __init__(self, orig):
        self.orig = orig
        coef_o, p_o, lo_o, hi_o = orig
        self.sig_o = p_o < ALPHA
        self.extreme = (p_o < EXTREME_P[0]) | (p_o > EXTREME_P[1])
        self.se_o = (hi_o - lo_o) / (2 * 1.959963984540054)
        self.coefs = self.sig_changed = self.sig_orig = self.dir_changed = self.outside = 0
        self.ext_n = self.ext_changed = self.near_n = self.near_changed = 0
        self.fits = self.failed = 0
        self.shift = np.zeros(coef_o.size)
        self.shift_fits = 0

    def add(self, rel):
        coef_o, _, lo_o, hi_o = self.orig
        n, sig_o = coef_o.size, self.sig_o
        self.fits += 1
        self.coefs += n
        self.sig_orig += int(sig_o.sum())
        self.ext_n += int(self.extreme.sum())
        self.near_n += int((~self.extreme).sum())
        if rel is None:
            self.failed += 1
            self.sig_changed += n
            self.ext_changed += int(self.extreme.sum())
            self.near_changed += int((~self.extreme).sum())
            self.dir_changed += int(sig_o.sum())
            self.outside += n
            return
        coef_r, p_r = rel[0], rel[1]
        changed = (p_r < ALPHA) != sig_o
        self.sig_changed += int(changed.sum())
        self.ext_changed += int((changed & self.extreme).sum())
        self.near_changed += int((changed & ~self.extreme).sum())
        self.dir_changed += int((sig_o & (np.sign(coef_r) != np.sign(coef_o))).sum())
        self.outside += int(((coef_r < lo_o) | (coef_r > hi_o)).sum())
        self.shift += (coef_r - coef_o) / np.where(self.se_o > 0, self.se_o, np.inf)
        self.shift_fits += 1

    def row(self):
        pct = lambda a, b: 100.0 * a / b if b else float("nan")      # noqa: E731
        shift = self.shift / self.shift_fits if self.shift_fits else np.full_like(self.shift,
                                                                                   np.nan)
        return {"changed_significance_pct": pct(self.sig_changed, self.coefs),
                "changed_significance_clear_pct": pct(self.ext_changed, self.ext_n),
                "changed_significance_near_pct": pct(self.near_changed, self.near_n),
                "clear_coefficients": self.ext_n // max(self.fits, 1),
                "changed_direction": self.dir_changed,
                "changed_direction_pct": pct(self.dir_changed, self.sig_orig),
                "outside_ci_pct": pct(self.outside, self.coefs),
                "max_abs_shift_se": (float(np.max(np.abs(shift))) if self.shift_fits and
                                     shift.size else float("nan")),
                "shift_se": [round(float(x), 2) for x in shift],
                "coefficients": self.coefs, "significant": self.sig_orig,
                "fits": self.fits, "failed": self.failed}


def score(row):
    """One model's utility loss: the mean of its three percentages (lower is better)."""
    vals = [row[k] for k in ("changed_significance_pct", "changed_direction_pct",
                             "outside_ci_pct")]
    return float(np.nanmean(vals))


def _numeric(ds, df):
    X = design(ds, df)
    X[ds.time] = df[ds.time].astype(float)
    X[ds.status] = df[ds.status].astype(float)
    return X


def moments(ds, df):
    """(mean difference in original SDs, mean |correlation difference|) against ds.df."""
    A, B = _numeric(ds, ds.df), _numeric(ds, df)
    sd = A.std().replace(0, 1.0)
    mean_diff = float((np.abs(B.mean() - A.mean()) / sd).mean())
    ca, cb = A.corr().to_numpy(), B.corr().to_numpy()
    iu = np.triu_indices_from(ca, 1)
    d = np.abs(np.nan_to_num(cb[iu]) - np.nan_to_num(ca[iu]))
    return mean_diff, float(d.mean())


def threshold_of(ds):
    ev = ds.df[ds.status] == 1
    return float(np.median(ds.df.loc[ev, ds.time]))
