"""Utility (004 sec. 3.5) and anonymeter risk of condensation beside a bootstrap of the original
and the peers, per data set x model.

    make eval-condensation                 # everything, resumable (under nice -n 19)
    bench/.venv-eval/bin/python -m bench.eval_condensation.run --datasets rossi --seeds 5
    bench/.venv-eval/bin/python -m bench.eval_condensation.run --report-only

Per data set, each over ``--seeds`` seeds, every release read by the same model code
(utility.py) against the original's fit:
* ``bootstrap``: a resample of the original (same n, with replacement) -- the sampling-noise
  floor an analyst would see from another sample of the same population;
* ``deid`` (the plug-in's defaults) at every k of ``--ks`` the data set allows (the plug-in
  refuses the others), plus any ``--variants`` (e.g. deid-original-times);
* ``copulas`` (Gaussian copula, Beta marginals) and ``datasynthesizer`` (correlated attribute
  mode, degree 2, epsilon 0), fitted once, sampled per seed.
Risk (risk.py): per method and k, ``--risk-seeds`` releases made from the 75 % training split,
anonymeter against the 25 % control split; ``--risk-max-k`` skips deid's risk above that k.
Every (data set, method, k, seed) is cached (cache.py): a re-run computes only what is
missing or stale (e.g. deid's rows after its code changed).  Tables: stdout and
bench/results/condensation_eval.md (report.py); frontier plots:
bench/results/condensation_frontier_<data set>.png (plots.py).
"""
import argparse
import copy
import os
import time

import numpy as np

from . import cache, data, risk, synth, utility

RESULTS = os.path.join(synth.ROOT, "bench", "results")
OUT_DIR = os.path.join(RESULTS, "condensation_eval")
CACHE = os.path.join(OUT_DIR, "cache")
K_GRID = (5, 10, 25, 50, 100, 200)
PEERS = list(synth.PEERS)
PEER_VERSION = "peers-1"                # bump when synth.py's peers change
STOP_AT = [None]                        # --until: epoch seconds after which nothing new starts


def out_of_time():
    return STOP_AT[0] is not None and time.time() >= STOP_AT[0]


def chosen_k(ds, compute=True):
    """(k, rule) deid uses on ``ds``: the plug-in's k rule (options.auto_k) from the data set's
    requested k, on the seed-1 release, if the plug-in has one; else (ds.k, None).  Cached."""
    from deid.methods.condensation import plugin
    if not any(o.name == "auto_k" for o in plugin.OPTIONS):
        return ds.k, None
    store = cache.Store(CACHE, ds.name, "deid", ds.k, fingerprint(ds, "deid"), kind="k_rule")
    if store.get(1) is None and not compute:
        return ds.k, {"used": ds.k, "why": f"the k rule has not run yet: the requested k = {ds.k}"}
    if store.get(1) is None:
        rel = synth.deid_release(ds, "deid", 1, k=ds.k, extra={"auto_k": True})
        rule = rel.attrs["metrics"].get("k_rule") or {"used": ds.k, "why": "no k rule ran"}
        store.put(1, {"rule": {key: rule.get(key) for key in ("requested", "used", "why",
                                                              "trials")}})
    rule = store.get(1)["rule"]
    return int(rule["used"]), rule


def fingerprint(ds, method):
    base = cache.frame_digest(ds.df)
    if method == "bootstrap":
        return cache.digest(base, "bootstrap-1")
    if method in synth.PEERS:
        return cache.digest(base, PEER_VERSION)
    return cache.digest(base, synth.deid_fingerprint(method))


def risk_fingerprint(ds, method):
    return cache.digest(fingerprint(ds, method), risk.N_ATTACKS, risk.MAX_ATTEMPTS, "risk-1")


class Maker:
    """Releases of one method on one data set (a peer is fitted on first use)."""

    def __init__(self, ds, method, k):
        self.ds, self.method, self.k, self.peer = ds, method, k, None

    def __call__(self, seed):
        if self.method == "bootstrap":
            return synth.bootstrap(self.ds, seed)
        if self.method in synth.PEERS:
            if self.peer is None:
                self.peer = synth.PEERS[self.method](self.ds)
            return self.peer.sample(seed)
        return synth.deid_release(self.ds, self.method, seed, k=self.k)


def todo(store, seeds):
    """The seeds ``store`` does not hold yet, one by one while there is time."""
    for seed in seeds:
        if out_of_time():
            return
        if store.get(seed) is None:
            yield seed


def refusal(e):
    """The plug-in's refusal (a DeidError: the data set does not allow that k) or re-raise."""
    if getattr(e, "sqlstate", None) is None:
        raise e
    return str(e)


def utility_cell(ds, method, k, seeds, orig, th, refused):
    """Fits of ``seeds`` releases of (method, k), cached; None when the plug-in refuses k."""
    store = cache.Store(CACHE, ds.name, method, k, fingerprint(ds, method))
    make = Maker(ds, method, k)
    done = 0
    for seed in todo(store, seeds):
        t0 = time.perf_counter()
        try:
            rel = make(seed)
        except Exception as e:                       # noqa: BLE001 -- the plug-in's refusal
            refused[(method, k)] = refusal(e)
            return None
        fits = {m: utility.to_json(utility.fit(ds, rel, m, th)) for m in utility.MODELS}
        md, cd = utility.moments(ds, rel)
        store.put(seed, {"fits": fits, "mean_diff": md, "corr_diff": cd,
                         "seconds": time.perf_counter() - t0})
        done += 1
    store.compact()
    if done:
        print(f"  {ds.name} {method} k={k}: {done} new seed(s)", flush=True)
    return [x for x in (store.get(s) for s in seeds) if x is not None]


def risk_cell(ds, method, k, seeds, train, control, by_rule=False):
    """anonymeter runs of (method, k), cached.  A k the plug-in refuses on the training split
    (a smaller table) is recorded as refused, except for the k deid uses (``by_rule``): its
    release of the split then takes the k rule from the requested ``ds.k`` (``k_used``)."""
    store = cache.Store(CACHE, ds.name, method, k, risk_fingerprint(ds, method),
                        kind="risk-rule" if by_rule else "risk")
    ds_train = copy.copy(ds)
    ds_train.df = train
    make = Maker(ds_train, method, k)
    for seed in todo(store, seeds):
        t0 = time.perf_counter()
        k_used = k
        try:
            rel = make(seed)
        except Exception as e:                       # noqa: BLE001 -- the plug-in's refusal
            if not by_rule:
                store.put(seed, {"refused": refusal(e)})
                continue
            rel = synth.deid_release(ds_train, method, seed, k=ds.k, extra={"auto_k": True})
            k_used = rel.attrs["metrics"].get("k_rule", {}).get("used", ds.k)
        r = risk.evaluate(train, control, rel, ds, seed=seed)
        store.put(seed, {"risk": r, "k_used": k_used, "seconds": time.perf_counter() - t0})
        print(f"  {ds.name} risk {method} k={k_used} seed {seed}: "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    store.compact()
    return [x for x in (store.get(s) for s in seeds) if x is not None and "risk" in x]


def evaluate_dataset(name, args, compute=True):
    """{"dataset", "rows", "chosen_k", "cells": {(method, k): {...}}} for the report; with
    ``compute`` False only what the cache holds."""
    ds = data.load(name)
    th = utility.threshold_of(ds)
    orig = {m: utility.fit(ds, ds.df, m, th) for m in utility.MODELS}
    k_pick, rule = chosen_k(ds, compute)
    ks = sorted(set(args.ks) | {k_pick})
    main = args.variants[0]                 # at every k; the other variants at the chosen k
    cells = [("bootstrap", 0), (main, k_pick), ("copulas", 0)] + \
        [(v, k_pick) for v in args.variants[1:]] + \
        [(main, k) for k in ks if k != k_pick] + \
        [("datasynthesizer", 0)]            # what the targets and dominance need first
    if args.methods:
        cells = [(m, k) for m, k in cells if m in args.methods]
    rseeds = list(range(1, args.risk_seeds + 1))
    train, control = risk.split(ds, seed=0)
    refused, out = {}, {}
    for method, k in cells:
        n = args.peer_seeds if method in synth.PEERS and args.peer_seeds else \
            args.grid_seeds if method in synth.DEID_VARIANTS and k != k_pick and \
            args.grid_seeds else args.seeds
        seeds = list(range(1, n + 1))
        skip_risk = (method == "bootstrap" or not args.risk_seeds
                     or (method in synth.DEID_VARIANTS and k > args.risk_max_k and k != k_pick))
        by_rule = rule is not None and method in args.variants and k == k_pick
        runs = []
        if not skip_risk:                   # risk first: the dominance needs one run of each
            if compute:
                runs = risk_cell(ds, method, k, rseeds, train, control, by_rule)
            else:
                store = cache.Store(CACHE, ds.name, method, k, risk_fingerprint(ds, method),
                                    "risk-rule" if by_rule else "risk")
                runs = [x for x in (store.get(s) for s in rseeds) if x and "risk" in x]
        if not compute:
            store = cache.Store(CACHE, ds.name, method, k, fingerprint(ds, method))
            lines = [store.get(s) for s in seeds]
            lines = [x for x in lines if x is not None]
        else:
            lines = utility_cell(ds, method, k, seeds, orig, th, refused)
        if not lines:
            continue
        tallies = {m: utility.Tally(orig[m]) for m in utility.MODELS}
        for x in lines:
            for m in utility.MODELS:
                tallies[m].add(utility.from_json(x["fits"][m]))
        cell = {m: tallies[m].row() for m in utility.MODELS}
        cell["seeds"] = len(lines)
        cell["mean_diff"] = float(np.mean([x["mean_diff"] for x in lines]))
        cell["corr_diff"] = float(np.mean([x["corr_diff"] for x in lines]))
        cell["seconds"] = float(np.mean([x["seconds"] for x in lines]))
        if not skip_risk:
            cell["risk"] = [x["risk"] for x in runs]
            cell["risk_k"] = sorted({int(x.get("k_used", k)) for x in runs})
        out[(method, k)] = cell
    return {"dataset": name, "rows": len(ds.df), "chosen_k": k_pick, "k_rule": rule,
            "event_rate": float(ds.df[ds.status].mean()), "cells": out,
            "refused": {f"{m} k={k}": msg for (m, k), msg in refused.items()},
            "risk_max_k": args.risk_max_k}


def main():
    from . import plots, report
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=list(data.LOADERS))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--ks", type=lambda s: [int(x) for x in s.split(",")], default=list(K_GRID))
    ap.add_argument("--variants", nargs="*", default=["deid", "deid-guard"],
                    help="deid variants (synth.DEID_VARIANTS): the first at every k, the others "
                    "at the k deid uses")
    ap.add_argument("--methods", nargs="*", help="compute only these (bootstrap, deid variants, "
                    "copulas, datasynthesizer); the report shows every cached one")
    ap.add_argument("--peer-seeds", type=int, help="seeds of the peers (default --seeds)")
    ap.add_argument("--grid-seeds", type=int, help="seeds of deid at the k other than the "
                    "chosen one (default --seeds)")
    ap.add_argument("--risk-seeds", type=int, default=1)
    ap.add_argument("--risk-max-k", type=int, default=max(K_GRID),
                    help="no risk runs for deid above this k (besides the chosen k)")
    ap.add_argument("--report-only", action="store_true", help="tables and plots from the cache")
    ap.add_argument("--out", default="condensation_eval.md", help="the report's file name "
                    "under bench/results")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--until", help="UTC time HH:MM after which nothing new starts (the report "
                    "shows what was done: seeds per cell)")
    args = ap.parse_args()
    if args.until:
        import datetime as dt
        now = dt.datetime.now(dt.timezone.utc)
        h, m = (int(x) for x in args.until.split(":"))
        STOP_AT[0] = now.replace(hour=h, minute=m, second=0, microsecond=0).timestamp()
    results = []
    for name in args.datasets:
        print(f"{name}:", flush=True)
        results.append(evaluate_dataset(name, args, compute=not args.report_only))
    if args.methods and not args.report_only:        # the report shows every cached cell
        args.methods = None
        results = [evaluate_dataset(name, args, compute=False) for name in args.datasets]
    text = report.tables(results, args)
    print(text)
    with open(os.path.join(RESULTS, args.out), "w") as f:
        f.write(text + "\n")
    if not args.no_plots:
        plots.frontier(results, RESULTS)
        plots.speed_plot(RESULTS)


if __name__ == "__main__":
    main()
