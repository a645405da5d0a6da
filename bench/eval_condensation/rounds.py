"""The table a decision on condensation's clustering rounds needs: per kernel variant
(synth.KERNEL_VARIANTS; 004 Alg. 2 step 2a's Lloyd rounds and the rebalanced rounds after step
2c), its speed at 1M rows (bench/condensation/bench_kmeans_rounds.py's JSON) beside its
utility on the evaluation's data sets (the cached releases of run.py at the k deid uses).

    bench/.venv-eval/bin/python -m bench.eval_condensation.run --datasets colon lung rossi \
        gbsg2 whas500 --variants deid deid-iter3 ... --risk-seeds 0 --seeds 10 --ks 10
    bench/.venv-eval/bin/python -m bench.eval_condensation.rounds --datasets colon lung ...

Utility per data set and variant, pooled over the seeds: the significance changes and the
95 % CI misses (%, mean of the linear, logistic and Cox models), the largest mean shift (SE)
over the models, and the mean absolute difference of the correlations.  Writes
bench/results/condensation_kmeans_rounds.md.
"""
import argparse
import json
import os

import numpy as np

from . import run, synth

SPEED_NAMES = {"deid": "default", "deid-iter3": "iter3", "deid-iter2": "iter2",
               "deid-iter1": "iter1", "deid-rebal1": "rebal1", "deid-rebal0": "rebal0",
               "deid-iter2-rebal1": "iter2-rebal1"}
MODELS = ("linear", "logistic", "cox")


def utility_row(cell):
    """(significance changes %, CI misses %, max mean shift SE, correlation difference)."""
    return (float(np.mean([cell[m]["changed_significance_pct"] for m in MODELS])),
            float(np.mean([cell[m]["outside_ci_pct"] for m in MODELS])),
            float(max(cell[m]["max_abs_shift_se"] for m in MODELS)),
            float(cell["corr_diff"]))


def speed_cells(speed, name):
    row = speed["variants"].get(SPEED_NAMES.get(name, ""), {})
    base = speed["variants"]["default"]
    if not row:
        return "not run", "", ""
    cpu, base_cpu = min(row["kernel_cpu_s"]), min(base["kernel_cpu_s"])
    return f"{cpu:.2f} ({cpu / base_cpu:.2f} ×)", f"{row['sse_vs_default']:.3f}", \
        ", ".join(f"{k} {v}" for k, v in row["keywords"].items()) or "max_iter 5, rebalance_rounds 3"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=["colon", "lung", "rossi", "gbsg2",
                                                     "whas500"])
    ap.add_argument("--variants", nargs="*", default=list(SPEED_NAMES))
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()
    with open(os.path.join(run.RESULTS, "condensation_kmeans_rounds.json")) as f:
        speed = json.load(f)
    ns = argparse.Namespace(ks=[], variants=args.variants, methods=None, seeds=args.seeds,
                            peer_seeds=None, grid_seeds=None, risk_seeds=0, risk_max_k=0)
    results = [run.evaluate_dataset(name, ns, compute=False) for name in args.datasets]
    lines = [f"Kernel at {speed['rows']:,} rows (k = {speed['k']}, the speed benchmark's "
             "shape; CPU seconds of the whole kernel, min of the runs; load "
             f"{speed['variants']['default']['load']:.0f} on 2 cores) and utility on the "
             "evaluation's data sets at the k deid uses (seeds pooled; sig. = significance "
             "changes %, CI = 95 % CI misses %, both the mean of the linear, logistic and Cox "
             "models; shift = largest mean shift in SE; corr = mean |correlation difference|).",
             "",
             "| variant | keywords | kernel CPU s at 1M | within-cluster SSE vs default | "
             + " | ".join(f"{r['dataset']} (n {r['rows']}, k {r['chosen_k']}): sig. / CI / "
                          "shift / corr" for r in results) + " |",
             "|---|---|---|---|" + "---|" * len(results)]
    for name in args.variants:
        cpu, sse, keywords = speed_cells(speed, name)
        cells = []
        for r in results:
            cell = r["cells"].get((name, r["chosen_k"]))
            cells.append("not run" if cell is None else
                         "{:.1f} / {:.1f} / {:.2f} / {:.4f}".format(*utility_row(cell))
                         + ("" if cell["seeds"] == args.seeds else f" ({cell['seeds']} seeds)"))
        lines.append(f"| {name} | {keywords} | {cpu} | {sse} | " + " | ".join(cells) + " |")
    for name, row in speed["variants"].items():
        if name not in SPEED_NAMES.values():
            lines.append(f"| {name} (speed only) | "
                         + ", ".join(f"{k} {v}" for k, v in row["keywords"].items())
                         + f" | {min(row['kernel_cpu_s']):.2f} (wall {min(row['kernel_s']):.1f}"
                         f" s vs default {min(speed['variants']['default']['kernel_s']):.1f} s)"
                         f" | {row['sse_vs_default']:.3f} | " + " | ".join(
                             ["not run"] * len(results)) + " |")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(run.RESULTS, "condensation_kmeans_rounds.md"), "w") as f:
        f.write("# Condensation's clustering rounds: speed and utility per option\n\n"
                + text + "\n")
    return synth


if __name__ == "__main__":
    main()
