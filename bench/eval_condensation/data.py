"""The evaluation's data sets, each as a :class:`Dataset` (a pandas frame plus its schema).

* lifelines ``rossi`` (432 rows), scikit-survival ``gbsg2`` (686), ``whas500`` (500) and
  ``veterans_lung_cancer`` (137): shipped in the packages, no download.
* ``colon`` (N = 9,552) and ``lung`` (N = 17,421): generated registry-like tables shaped like
  004 sec. 3.5's Kentucky Cancer Registry data (:func:`registry`).  Columns: ``vital_status``
  (1 = dead), ``surv_months`` (integer months, 0..71: diagnosed 2004-2009, followed to the end
  of 2009, so censoring is administrative), ``diag_age`` (integer years), ``sex`` (2 levels),
  ``race`` (3), ``stage`` (4: local / regional / distant / unknown), ``appalachia`` (2),
  ``tobacco`` (2), ``payor`` (3: private / federal / uninsured).  Times are Weibull
  proportional hazards in the covariates (effects below), so the Cox, linear and logistic
  models of 004 have significant and non-significant coefficients of both signs.  Colon: shape
  0.9, about 40 % dead; lung: shape 0.8, short survival, about 75 % dead.  Times are dense
  integers (every month held by many rows), the case where the old ``perturbed`` survival-time
  mode moved almost nothing.
"""
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass
class Dataset:
    name: str
    df: pd.DataFrame          # every column numeric: ints, floats, categorical as int codes
    kinds: dict               # column -> "int" | "float" | "categorical"
    time: str
    status: str               # 1 = event (death / arrest)
    k: int                    # the k requested (the plug-in's k rule may raise it: run.chosen_k)

    @property
    def covariates(self):
        return [c for c in self.df.columns if c not in (self.time, self.status)]


def _codes(series):
    return pd.Series(pd.Categorical(series).codes, index=series.index).astype(np.int64)


def rossi():
    from lifelines.datasets import load_rossi
    df = load_rossi().astype(np.int64)
    kinds = {c: "int" for c in df.columns}
    for c in ("fin", "race", "wexp", "mar", "paro"):
        kinds[c] = "categorical"
    return Dataset("rossi", df, kinds, "week", "arrest", 10)


def _sksurv(loader, name, k, time, status):
    X, y = loader()
    df = pd.DataFrame(index=range(len(X)))
    kinds = {}
    for c in X.columns:
        col = X[c].reset_index(drop=True)
        if col.dtype.name in ("category", "object", "bool"):
            df[c], kinds[c] = _codes(col), "categorical"
        elif np.allclose(col, np.round(col)):
            df[c], kinds[c] = col.round().astype(np.int64), "int"
        else:
            df[c], kinds[c] = col.astype(float), "float"
    if name == "whas500":
        for c in ("afb", "av3", "chf", "cvd", "gender", "miord", "mitype", "sho"):
            df[c], kinds[c] = _codes(df[c]), "categorical"
    t = np.asarray(y[time], dtype=float)
    df[time], kinds[time] = (np.round(t).astype(np.int64), "int") if np.allclose(t, np.round(t)) \
        else (t, "float")
    df[status], kinds[status] = np.asarray(y[status]).astype(np.int64), "int"
    return Dataset(name, df, kinds, time, status, k)


def gbsg2():
    from sksurv.datasets import load_gbsg2
    return _sksurv(load_gbsg2, "gbsg2", 10, "time", "cens")


def whas500():
    from sksurv.datasets import load_whas500
    return _sksurv(load_whas500, "whas500", 10, "lenfol", "fstat")


def veterans():
    from sksurv.datasets import load_veterans_lung_cancer
    # 9 censored rows: k = 5 so that the censored subset holds one cluster (Alg. 2 step 1)
    return _sksurv(load_veterans_lung_cancer, "veterans", 5, "Survival_in_days", "Status")


def registry(name="colon", n=None, seed=2004):
    """A registry-like table shaped like 004's colon (N = 9,552) or lung (N = 17,421) data."""
    colon = name == "colon"
    n = n or (9552 if colon else 17421)
    rng = np.random.default_rng(seed + (0 if colon else 1))
    sex = rng.binomial(1, 0.48 if colon else 0.55, n)
    race = rng.choice(3, n, p=[0.88, 0.10, 0.02])
    stage = rng.choice(4, n, p=[0.38, 0.36, 0.19, 0.07] if colon else [0.17, 0.22, 0.50, 0.11])
    appalachia = rng.binomial(1, 0.35, n)
    tobacco = rng.binomial(1, 0.30 + 0.35 * (not colon) + 0.10 * appalachia, n)
    age = np.clip(np.rint(rng.normal(70 if colon else 67, 12, n) - 3 * appalachia), 20, 99)
    payor = np.where(age >= 65, rng.choice(3, n, p=[0.25, 0.72, 0.03]),
                     rng.choice(3, n, p=[0.62, 0.22, 0.16]))
    lin = (0.03 * (age - 68) + 0.08 * sex + np.array([0.0, 0.15, 0.05])[race]
           + np.array([0.0, 0.7, 2.0, 1.2])[stage] + 0.12 * appalachia + 0.2 * tobacco
           + np.array([0.0, 0.25, 0.4])[payor])
    shape, scale = (0.9, 260.0) if colon else (0.8, 45.0)
    t = scale * (-np.log(rng.random(n)) / np.exp(lin)) ** (1 / shape)
    follow = rng.integers(1, 73, n)                       # months from diagnosis to 2009-12
    dead = (t <= follow).astype(np.int64)
    months = np.minimum(np.floor(np.minimum(t, follow)), 71).astype(np.int64)
    df = pd.DataFrame({"diag_age": age.astype(np.int64), "sex": sex, "race": race,
                       "stage": stage, "appalachia": appalachia, "tobacco": tobacco,
                       "payor": payor, "surv_months": months, "vital_status": dead})
    kinds = {c: "categorical" for c in df.columns}
    kinds.update(diag_age="int", surv_months="int", vital_status="int")
    return Dataset(name, df, kinds, "surv_months", "vital_status", 10)


LOADERS = {"rossi": rossi, "gbsg2": gbsg2, "whas500": whas500, "veterans": veterans,
           "colon": lambda: registry("colon"), "lung": lambda: registry("lung")}


def load(name):
    return LOADERS[name]()
