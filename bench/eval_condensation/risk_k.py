"""Risk and utility of condensation against k (the privacy knob), on the small data sets.

    bench/.venv-eval/bin/python -m bench.eval_condensation.risk_k [--datasets gbsg2 whas500]
        [--ks 10,25,50] [--variant deid-coarsened] [--seeds 5]

For each k: the utility score of run.py (mean of 004's nine percentages over --seeds seeds) and
anonymeter's risks (one seed, 75/25 split, as in run.py), to see at which k the singling-out risk
drops to the Gaussian copula's (taken from bench/results/condensation_eval/<data set>.json).
Writes bench/results/condensation_risk_k.json and .md.
"""
import argparse
import copy
import json
import os

from . import data, risk, synth, utility
from .run import OUT_DIR, RESULTS, utility_score


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=["gbsg2", "whas500"])
    ap.add_argument("--ks", default="10,25,50")
    ap.add_argument("--variant", default="deid-coarsened")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for name in args.datasets:
        ds = data.load(name)
        th = utility.threshold_of(ds)
        orig = {m: utility.fit(ds, ds.df, m, th) for m in utility.MODELS}
        train, control = risk.split(ds, seed=0)
        ds_train = copy.copy(ds)
        ds_train.df = train
        peer = {}
        path = os.path.join(OUT_DIR, f"{name}.json")
        if os.path.exists(path):
            with open(path) as f:
                peer = json.load(f)["risk"].get("copulas", {})
        for k in [int(x) for x in args.ks.split(",")]:
            tallies = {m: utility.Tally() for m in utility.MODELS}
            for seed in range(1, args.seeds + 1):
                rel = synth.deid_release(ds, args.variant, seed, k=k)
                for m in utility.MODELS:
                    tallies[m].add(orig[m], utility.fit(ds, rel, m, th))
            u = {m: tallies[m].row() for m in utility.MODELS}
            r = risk.evaluate(train, control, synth.deid_release(ds_train, args.variant, 1, k=k),
                              ds, seed=0)
            row = {"dataset": name, "k": k, "variant": args.variant, "score": utility_score(u),
                   "changed_significance_pct": sum(u[m]["changed_significance_pct"]
                                                   for m in utility.MODELS) / 3, **r,
                   "copulas_singling_out_multivariate": peer.get("singling_out_multivariate"),
                   "copulas_singling_out_univariate": peer.get("singling_out_univariate")}
            rows.append(row)
            print(json.dumps(row), flush=True)
    lines = ["| data set | k | utility score | changed significance % (mean of 3 models) | "
             "singling out uni / multi | copulas uni / multi | linkability | inference |",
             "|---|---|---|---|---|---|---|---|"]
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"        # noqa: E731
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['k']} | {r['score']:.1f} | "
                     f"{r['changed_significance_pct']:.1f} | "
                     f"{r['singling_out_univariate']:.3f} / {r['singling_out_multivariate']:.3f} | "
                     f"{fmt(r['copulas_singling_out_univariate'])} / "
                     f"{fmt(r['copulas_singling_out_multivariate'])} | "
                     f"{r['linkability']:.3f} | {r['inference']:.3f} |")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(RESULTS, "condensation_risk_k.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(RESULTS, "condensation_risk_k.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
