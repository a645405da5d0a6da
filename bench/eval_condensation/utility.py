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
import pandas as pd

MODELS = ("linear", "logistic", "cox")
ALPHA = 0.05


def design(ds, df):
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


class Tally:
    """Pooled counts of one (data set, method, model) over seeds."""

    def __init__(self):
        self.coefs = self.sig_changed = self.sig_orig = self.dir_changed = self.outside = 0
        self.fits = self.failed = 0

    def add(self, orig, rel):
        coef_o, p_o, lo_o, hi_o = orig
        n = coef_o.size
        sig_o = p_o < ALPHA
        self.fits += 1
        self.coefs += n
        self.sig_orig += int(sig_o.sum())
        if rel is None:
            self.failed += 1
            self.sig_changed += n
            self.dir_changed += int(sig_o.sum())
            self.outside += n
            return
        coef_r, p_r = rel[0], rel[1]
        self.sig_changed += int(((p_r < ALPHA) != sig_o).sum())
        self.dir_changed += int((sig_o & (np.sign(coef_r) != np.sign(coef_o))).sum())
        self.outside += int(((coef_r < lo_o) | (coef_r > hi_o)).sum())

    def row(self):
        pct = lambda a, b: 100.0 * a / b if b else float("nan")      # noqa: E731
        return {"changed_significance_pct": pct(self.sig_changed, self.coefs),
                "changed_direction_pct": pct(self.dir_changed, self.sig_orig),
                "outside_ci_pct": pct(self.outside, self.coefs),
                "coefficients": self.coefs, "significant": self.sig_orig,
                "fits": self.fits, "failed": self.failed}


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
