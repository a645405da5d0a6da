"""anonymeter risk of a release, with a held-out control split (issue 11).

The original rows are split (stratified by status, seeded) into a training part (75 %), from
which the release is made, and a control part (25 %) the release never saw; anonymeter's risk
is the attack's success on the training rows beyond its success on the control rows.
* singling out, univariate and multivariate (3 columns), ``n_attacks`` predicates each;
* linkability: the columns split into two halves (auxiliary data sets), 10 neighbours;
* inference: the status as the secret, every other column known.
"""
import warnings

import numpy as np

N_ATTACKS = 300


def split(ds, seed=0):
    rng = np.random.default_rng(seed)
    control = np.zeros(len(ds.df), bool)
    for s in (0, 1):
        rows = np.flatnonzero(ds.df[ds.status].to_numpy() == s)
        control[rng.choice(rows, int(round(0.25 * rows.size)), replace=False)] = True
    return ds.df[~control].reset_index(drop=True), ds.df[control].reset_index(drop=True)


def evaluate(train, control, release, ds, seed=0):
    from anonymeter.evaluators import (InferenceEvaluator, LinkabilityEvaluator,
                                       SinglingOutEvaluator)
    out = {}
    n_link = min(N_ATTACKS, len(control))
    cols = list(ds.df.columns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in ("univariate", "multivariate"):
            try:
                ev = SinglingOutEvaluator(ori=train, syn=release, control=control,
                                          n_attacks=N_ATTACKS, seed=seed)
                ev.evaluate(mode=mode)
                out[f"singling_out_{mode}"] = float(ev.risk().value)
            except Exception as e:                          # noqa: BLE001
                out[f"singling_out_{mode}"] = float("nan")
                out[f"singling_out_{mode}_error"] = str(e)[:200]
        half = len(cols) // 2
        ev = LinkabilityEvaluator(ori=train, syn=release, control=control, n_attacks=n_link,
                                  aux_cols=(cols[:half], cols[half:]), n_neighbors=10)
        ev.evaluate(n_jobs=1)
        out["linkability"] = float(ev.risk().value)
        ev = InferenceEvaluator(ori=train, syn=release, control=control, n_attacks=n_link,
                                aux_cols=[c for c in cols if c != ds.status], secret=ds.status)
        ev.evaluate(n_jobs=1)
        out["inference"] = float(ev.risk().value)
    return out
