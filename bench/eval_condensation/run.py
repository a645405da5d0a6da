"""Utility (004 sec. 3.5) and anonymeter risk of condensation and its peers, one table each.

    make eval-condensation                      # everything (about 30-60 min on 2 busy cores)
    bench/.venv-eval/bin/python -m bench.eval_condensation.run --datasets rossi gbsg2 --seeds 5

Per data set, in one run: deid through its plug-in -- Alg. 2 with survival_times 'original'
(004 as printed), 'perturbed', 'coarsened', and Alg. 1 ('algorithm': 'original') -- and the
peers copulas (GaussianMultivariate) and DataSynthesizer (correlated attribute mode, degree 2,
epsilon 0), each over ``--seeds`` seeds (peers fitted once, sampled per seed).  Risk: one seed,
release made from a 75 % training split, anonymeter against the 25 % control split.
Results: bench/results/condensation_eval/<data set>.json (a data set already there is reused
unless --force), the tables on stdout and in bench/results/condensation_eval.md, and PNGs
bench/results/condensation_utility.png, condensation_risk_utility.png and (from
bench_condensation.py's JSON) condensation_speed.png.  --plots-only redraws from the JSON.
"""
import argparse
import copy
import json
import os
import time

import numpy as np

from . import data, risk, synth, utility

RESULTS = os.path.join(synth.ROOT, "bench", "results")
OUT_DIR = os.path.join(RESULTS, "condensation_eval")
DEID = list(synth.DEID_VARIANTS)
PEERS = list(synth.PEERS)
METHODS = DEID + PEERS


def evaluate_dataset(name, seeds, with_risk=True, methods=None, result=None):
    """Utility (and risk) of ``methods`` (default all) on data set ``name``; with ``result``
    (a previous run's JSON) only those methods' entries are replaced."""
    ds = data.load(name)
    th = utility.threshold_of(ds)
    orig = {m: utility.fit(ds, ds.df, m, th) for m in utility.MODELS}
    methods = methods or METHODS
    result = result or {"dataset": name, "rows": len(ds.df), "k": ds.k, "seeds": seeds,
                        "columns": list(ds.df.columns), "time": ds.time, "status": ds.status,
                        "event_rate": float(ds.df[ds.status].mean()),
                        "original_significant": {m: int((orig[m][1] < utility.ALPHA).sum())
                                                 for m in utility.MODELS},
                        "utility": {}, "risk": {}, "seconds": {}}
    for method in methods:
        t0 = time.perf_counter()
        if method in synth.PEERS:
            peer = synth.PEERS[method](ds)
            result["seconds"][method + "_fit"] = time.perf_counter() - t0
            make = peer.sample
        else:
            make = lambda seed, method=method: synth.deid_release(ds, method, seed)  # noqa: E731
        tallies = {m: utility.Tally() for m in utility.MODELS}
        means, corrs, gen = [], [], 0.0
        for seed in range(1, seeds + 1):
            g0 = time.perf_counter()
            rel = make(seed)
            gen += time.perf_counter() - g0
            for m in utility.MODELS:
                tallies[m].add(orig[m], utility.fit(ds, rel, m, th))
            md, cd = utility.moments(ds, rel)
            means.append(md)
            corrs.append(cd)
        result["seconds"][method + "_generate"] = gen
        result["utility"][method] = {m: tallies[m].row() for m in utility.MODELS}
        result["utility"][method]["mean_diff_sd"] = float(np.mean(means))
        result["utility"][method]["corr_diff"] = float(np.mean(corrs))
        result["seconds"][method] = time.perf_counter() - t0
        print(f"  {name} {method}: {time.perf_counter() - t0:.1f} s", flush=True)
    if with_risk:
        train, control = risk.split(ds, seed=0)
        ds_train = copy.copy(ds)
        ds_train.df = train
        for method in methods:
            t0 = time.perf_counter()
            if method in synth.PEERS:
                rel = synth.PEERS[method](ds_train).sample(1)
            else:
                rel = synth.deid_release(ds_train, method, 1)
            result["risk"][method] = risk.evaluate(train, control, rel, ds, seed=0)
            print(f"  {name} risk {method}: {time.perf_counter() - t0:.1f} s", flush=True)
    return result


def utility_score(u):
    """One number per (data set, method): the mean of 004's three percentages over the three
    models (lower is better)."""
    vals = [u[m][key] for m in utility.MODELS
            for key in ("changed_significance_pct", "changed_direction_pct", "outside_ci_pct")]
    return float(np.nanmean(vals))


def compact(results):
    """One row per (data set, method): the three metrics as linear / logistic / Cox."""
    lines = ["| data set (rows, k) | method | changed significance % | significant, changed "
             "direction % | outside original 95 % CI % | mean diff (SD) | corr diff | score | "
             "beats both peers |", "|---|---|---|---|---|---|---|---|---|"]
    trio = lambda u, key: " / ".join(f"{u[m][key]:.0f}" if u[m][key] == u[m][key] else "-"  # noqa: E731
                                     for m in utility.MODELS)
    for r in results:
        best_peer = min(utility_score(r["utility"][p]) for p in PEERS)
        for method in METHODS:
            u = r["utility"][method]
            score = utility_score(u)
            beats = ("yes" if score < best_peer else "**no**") if method in DEID else ""
            failed = sum(u[m]["failed"] for m in utility.MODELS)
            note = f" ({failed} failed fits)" if failed else ""
            lines.append(f"| {r['dataset']} ({r['rows']}, {r['k']}) | {method}{note} | "
                         f"{trio(u, 'changed_significance_pct')} | "
                         f"{trio(u, 'changed_direction_pct')} | {trio(u, 'outside_ci_pct')} | "
                         f"{u['mean_diff_sd']:.3f} | {u['corr_diff']:.3f} | {score:.1f} | "
                         f"{beats} |")
    return "\n".join(lines)


def tables(results):
    lines = ["### Summary (percentages as linear / logistic / Cox; score = mean of the nine)", "",
             compact(results), ""]
    head = ("| data set | method | model | changed significance % | significant changed "
            "direction % | outside original 95 % CI % | failed fits |")
    lines += ["### Utility (004 sec. 3.5; pooled over seeds; targets: direction 0, significance "
              "<= 5, CI <= 10)", "", head, "|---|---|---|---|---|---|---|"]
    for r in results:
        for method in METHODS:
            u = r["utility"][method]
            for m in utility.MODELS:
                x = u[m]
                lines.append(f"| {r['dataset']} | {method} | {m} | "
                             f"{x['changed_significance_pct']:.1f} | "
                             f"{x['changed_direction_pct']:.1f} | {x['outside_ci_pct']:.1f} | "
                             f"{x['failed']}/{x['fits']} |")
    lines += ["", "### Means, correlations and the summary score (mean of the nine "
              "percentages; lower is better)", "",
              "| data set | rows | k | method | mean diff (SDs) | corr diff | score | beats both "
              "peers |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        best_peer = min(utility_score(r["utility"][p]) for p in PEERS)
        for method in METHODS:
            u = r["utility"][method]
            s = utility_score(u)
            beats = ("yes" if s < best_peer else "no") if method in DEID else ""
            lines.append(f"| {r['dataset']} | {r['rows']} | {r['k']} | {method} | "
                         f"{u['mean_diff_sd']:.4f} | {u['corr_diff']:.4f} | {s:.1f} | {beats} |")
    if any(r["risk"] for r in results):
        lines += ["", "### Risk (anonymeter, 75/25 train/control split, one seed; risk = "
                  "attack success beyond the control's)", "",
                  "| data set | method | singling out univariate | singling out multivariate | "
                  "linkability | inference (status) |", "|---|---|---|---|---|---|"]
        for r in results:
            for method in METHODS:
                x = r["risk"].get(method)
                if x:
                    lines.append(f"| {r['dataset']} | {method} | "
                                 f"{x['singling_out_univariate']:.3f} | "
                                 f"{x['singling_out_multivariate']:.3f} | "
                                 f"{x['linkability']:.3f} | {x['inference']:.3f} |")
    lines += ["", "### Seconds (generation over all seeds; peers: one fit)", "",
              "| data set | " + " | ".join(METHODS) + " | copulas fit | DataSynthesizer fit |",
              "|---|" + "---|" * (len(METHODS) + 2)]
    for r in results:
        s = r["seconds"]
        lines.append(f"| {r['dataset']} | " + " | ".join(f"{s[m + '_generate']:.1f}"
                                                          for m in METHODS)
                     + f" | {s['copulas_fit']:.1f} | {s['datasynthesizer_fit']:.1f} |")
    return "\n".join(lines)


def plots(results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["dataset"] for r in results]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    width = 0.8 / len(METHODS)
    keys = [("changed_significance_pct", "changed significance %"),
            ("changed_direction_pct", "significant, changed direction %"),
            ("outside_ci_pct", "outside original 95 % CI %")]
    for ax, (key, label) in zip(axes, keys):
        for i, method in enumerate(METHODS):
            vals = [np.nanmean([r["utility"][method][m][key] for m in utility.MODELS])
                    for r in results]
            ax.bar(np.arange(len(names)) + i * width, vals, width, label=method)
        ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names)
        ax.set_title(label + " (mean of linear, logistic, Cox)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "condensation_utility.png"), dpi=90)
    plt.close(fig)
    if not any(r["risk"] for r in results):
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    markers = dict(zip(names, "osD^vP"))
    colors = dict(zip(METHODS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, mode in zip(axes, ("univariate", "multivariate")):
        for r in results:
            for method in METHODS:
                x = r["risk"].get(method)
                if x:
                    ax.scatter(x[f"singling_out_{mode}"], utility_score(r["utility"][method]),
                               marker=markers[r["dataset"]], color=colors[method],
                               label=f"{method}" if r is results[0] else None)
        ax.set_xlabel(f"anonymeter singling-out risk ({mode})")
        ax.set_ylabel("utility score (mean %, lower is better)")
    axes[0].legend(fontsize=7)
    axes[1].set_title("markers: " + ", ".join(f"{n} {markers[n]}" for n in names), fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "condensation_risk_utility.png"), dpi=90)
    plt.close(fig)


def speed_plot():
    """bench/results/condensation_speed.png from bench_condensation.py's JSON (the server venv
    has no matplotlib), with bench_condensation_peer_speed.py's copulas CPU times if present."""
    path = os.path.join(RESULTS, "condensation_speed.json")
    if not os.path.exists(path):
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(path) as f:
        out = json.load(f)
    sizes = sorted(int(n) for n in out["sizes"])
    get = lambda key: [out["sizes"][str(n)][key] for n in sizes]        # noqa: E731
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.loglog(sizes, get("min_s"), "o-", label="condensation, end to end (min of 3)")
    ax.loglog(sizes, get("seconds"), "o:", label="condensation (median)")
    ax.loglog(sizes, get("ctas_min_s"), "s-", label="CTAS (min)")
    ax.loglog(sizes, [20 * c for c in get("ctas_min_s")], "--", color="grey", label="20 x CTAS")
    peer_path = os.path.join(RESULTS, "condensation_peer_speed.json")
    if os.path.exists(peer_path):
        with open(peer_path) as f:
            peer = json.load(f)
        ps = sorted(int(n) for n in peer["sizes"])
        ax.loglog(ps, [peer["sizes"][str(n)]["copulas_beta_cpu"] for n in ps], "^-",
                  label="copulas fit+sample (CPU s)")
        ax.loglog(ps, [peer["sizes"][str(n)]["deid_cpu"] for n in ps], "v-",
                  label="condensation kernel (CPU s)")
    ax.set_xlabel("rows (8 attributes, k = 100)")
    ax.set_ylabel("seconds")
    ax.set_title(f"growth exponent {out.get('growth_exponent', float('nan')):.2f}; "
                 f"load {out['sizes'][str(sizes[-1])]['load'][0]:.0f} on 2 cores", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "condensation_speed.png"), dpi=90)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=list(data.LOADERS))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--no-risk", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--plots-only", action="store_true", help="tables and plots from the JSON")
    ap.add_argument("--methods", nargs="*", help="re-run only these methods of the data sets "
                    "already in the JSON (the others are kept)")
    args = ap.parse_args()
    os.makedirs(OUT_DIR, exist_ok=True)
    results = []
    for name in args.datasets:
        path = os.path.join(OUT_DIR, f"{name}.json")
        if args.plots_only and not os.path.exists(path):
            continue
        previous = None
        if os.path.exists(path):
            with open(path) as f:
                previous = json.load(f)
        if previous and (args.plots_only or not (args.force or args.methods)):
            results.append(previous)
            continue
        print(f"{name}:", flush=True)
        r = evaluate_dataset(name, args.seeds, not args.no_risk, args.methods,
                             previous if args.methods else None)
        with open(path, "w") as f:
            json.dump(r, f, indent=1)
        results.append(r)
    text = tables(results)
    print(text)
    with open(os.path.join(RESULTS, "condensation_eval.md"), "w") as f:
        f.write(text + "\n")
    plots(results)
    speed_plot()


if __name__ == "__main__":
    main()
