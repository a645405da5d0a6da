"""anonymeter risk of a release, with a held-out control split
(the attacker's baseline: what a record outside the source reveals).

The original rows are split (stratified by status, seeded) into a training part (75 %), from
which the release is made, and a control part (25 %) the release never saw; anonymeter's risk
is the attack's success on the training rows beyond its success on the control rows, reported
with anonymeter's 95 % confidence interval.
* singling out, univariate and multivariate (3 columns), ``N_ATTACKS`` queries each.  The
  multivariate attack tries up to ``MAX_ATTEMPTS`` random predicates (a bound on the run time:
  a release whose rows share their values has few singling-out predicates, and anonymeter's
  default of 10^7 then runs for hours); univariate queries are a finite set (each column's
  minimum, maximum and the values one release row holds).  The number of queries found is
  reported, and when it is below ``N_ATTACKS`` the success rate is taken over the queries found
  (anonymeter divides by ``N_ATTACKS``, which understates the risk);
* linkability: the columns split into two halves (auxiliary data sets), 10 neighbours;
* inference: the status as the secret, every other column known.
Seeded: the split, the query generator (anonymeter's ``seed``) and the attack targets
(numpy's global generator, which anonymeter's ``DataFrame.sample`` draws from).  Not seeded:
anonymeter's random-guess baseline of linkability (its own unseeded generator; the risk does
not use it).
"""
import logging
import re
import warnings

import numpy as np

N_ATTACKS = 300
MAX_ATTEMPTS = 200_000
KEYS = ("singling_out_univariate", "singling_out_multivariate", "linkability", "inference")


def split(ds, seed=0):
    rng = np.random.default_rng(seed)
    control = np.zeros(len(ds.df), bool)
    for s in (0, 1):
        rows = np.flatnonzero(ds.df[ds.status].to_numpy() == s)
        control[rng.choice(rows, int(round(0.25 * rows.size)), replace=False)] = True
    return ds.df[~control].reset_index(drop=True), ds.df[control].reset_index(drop=True)


class _Found(logging.Handler):
    """Catches anonymeter's "could generate only N singling out queries" warning."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.found = None

    def emit(self, record):
        m = re.search(r"could generate only (\d+)", record.getMessage())
        if m:
            self.found = int(m.group(1))


def _risk(ev):
    r = ev.risk(confidence_level=0.95)
    return {"value": float(r.value), "ci": [float(r.ci[0]), float(r.ci[1])]}


def _singling_out(train, release, control, mode, seed):
    """One singling-out attack; when fewer than N_ATTACKS queries single out a release row
    (anonymeter warns), the success rate is taken over the queries found (anonymeter divides
    by N_ATTACKS, which understates the risk) from the evaluator's own counts."""
    from anonymeter.evaluators import SinglingOutEvaluator
    from anonymeter.stats.confidence import EvaluationResults
    log = logging.getLogger("anonymeter.evaluators.singling_out_evaluator")
    catch = _Found()
    log.addHandler(catch)
    try:
        ev = SinglingOutEvaluator(ori=train, syn=release, control=control, n_attacks=N_ATTACKS,
                                  max_attempts=MAX_ATTEMPTS, seed=seed)
        ev.evaluate(mode=mode)
    finally:
        log.removeHandler(catch)
    found = N_ATTACKS if catch.found is None else catch.found
    if found == 0:
        return {"value": 0.0, "ci": [0.0, 0.0], "queries": 0}
    if found == N_ATTACKS:
        return dict(_risk(ev), queries=found)
    res = EvaluationResults(n_attacks=found, n_success=ev._n_success,        # noqa: SLF001
                            n_baseline=min(ev._n_baseline, found),           # noqa: SLF001
                            n_control=min(ev._n_control, found),             # noqa: SLF001
                            confidence_level=0.95)
    r = res.risk()
    return {"value": float(r.value), "ci": [float(r.ci[0]), float(r.ci[1])], "queries": found}


def evaluate(train, control, release, ds, seed=0):
    """{risk name: {"value", "ci", ...}} of ``release`` (made from ``train``)."""
    from anonymeter.evaluators import InferenceEvaluator, LinkabilityEvaluator
    out = {}
    n_link = min(N_ATTACKS, len(control))
    cols = list(ds.df.columns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in ("univariate", "multivariate"):
            try:
                out[f"singling_out_{mode}"] = _singling_out(train, release, control, mode, seed)
            except Exception as e:                          # noqa: BLE001 -- reported
                out[f"singling_out_{mode}"] = {"value": float("nan"), "ci": [float("nan")] * 2,
                                               "error": str(e)[:200]}
        half = len(cols) // 2
        np.random.seed(seed)
        ev = LinkabilityEvaluator(ori=train, syn=release, control=control, n_attacks=n_link,
                                  aux_cols=(cols[:half], cols[half:]), n_neighbors=10)
        ev.evaluate(n_jobs=1)
        out["linkability"] = dict(_risk(ev), attacks=n_link)
        np.random.seed(seed + 1)
        ev = InferenceEvaluator(ori=train, syn=release, control=control, n_attacks=n_link,
                                aux_cols=[c for c in cols if c != ds.status], secret=ds.status)
        ev.evaluate(n_jobs=1)
        out["inference"] = dict(_risk(ev), attacks=n_link)
    return out
