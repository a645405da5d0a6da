"""What a decision on condensation's clustering rounds would weigh: the kernel's speed and the
clusters' tightness per option, at the speed benchmark's shape (no server).

    PYTHONPATH=python_udfs .venv/bin/python bench/condensation/bench_kmeans_rounds.py \
        [--rows 1000000] [--repeat 2] [--variants default,iter3,...]

The rows are those of bench_condensation.py (8 attributes: age, bmi, sbp, dx_date, sex,
stage, surv_months, vital; survival split on vital, weight 0.5 on surv_months, k = 100),
drawn with numpy.  Per variant (condense() keywords: ``max_iter`` Lloyd rounds of 004 Alg. 2
step 2a, default 5; ``rebalance_rounds`` rebalanced Lloyd rounds after step 2c, default 3, 0
= 004 as printed; ``workers`` threads for the blocks, the same clusters): the kernel's
seconds and CPU seconds (min of --repeat; its clustering phase apart; BLAS threads
as the environment sets them) and the within-cluster sum of squares
in the weighted feature space the k-means minimises, relative to the default's (1.00 = as
tight).  The utility of the same variants on the condensation evaluation's data sets is
bench/eval_condensation (``--variants deid deid-iter3 ...``).  Writes
bench/results/condensation_kmeans_rounds.json.
"""
import argparse
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (python_udfs importable)
from common import save  # noqa: E402
from deid.methods.condensation import condense as cd  # noqa: E402
from condensation_rows import rows  # noqa: E402

KINDS = ["int", "float", "int", "int", "categorical", "categorical", "int", "int"]
TIME, STATUS = 6, 7
VARIANTS = {
    "default": {},
    "workers2": {"workers": 2},
    "iter3": {"max_iter": 3},
    "iter2": {"max_iter": 2},
    "iter1": {"max_iter": 1},
    "rebal1": {"rebalance_rounds": 1},
    "rebal0": {"rebalance_rounds": 0},
    "iter2-rebal1": {"max_iter": 2, "rebalance_rounds": 1},
    "iter1-rebal0": {"max_iter": 1, "rebalance_rounds": 0},
}


def within_sse(X, res):
    """Within-cluster sum of squares in the weighted feature space of 004 Alg. 2 step 2a."""
    attrs = [j for j in range(X.shape[1]) if j != STATUS]
    features, layout = cd._code_attributes(X, KINDS, attrs)
    features *= cd._feature_scale(features, layout, res.weights)
    sizes = np.bincount(res.cluster_id)
    total = 0.0
    for c in range(features.shape[1]):
        col = features[:, c]
        s1 = np.bincount(res.cluster_id, weights=col)
        total += float((col * col).sum() - (s1 * s1 / sizes).sum())
    return total


def run(X, keywords):
    """(wall seconds, CPU seconds of this process, the result)."""
    c, t = time.process_time(), time.perf_counter()
    res = cd.condense(X, KINDS, 100, status=STATUS, time_col=TIME, weights={TIME: 0.5},
                      survival_times="recode", seed=7, **keywords)
    return time.perf_counter() - t, time.process_time() - c, res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()
    X = rows(args.rows)
    out = {"rows": args.rows, "k": 100, "variants": {}}
    base_sse = None
    for name in args.variants.split(","):
        runs = [run(X, VARIANTS[name]) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r[0])
        sse = within_sse(X, best[2])
        base_sse = sse if base_sse is None else base_sse
        row = {"keywords": VARIANTS[name], "kernel_s": [round(r[0], 3) for r in runs],
               "kernel_cpu_s": [round(r[1], 3) for r in runs],
               "cluster_s": [round(r[2].timings["cluster"], 3) for r in runs],
               "within_sse": sse, "sse_vs_default": sse / base_sse,
               "clusters": int(best[2].n_clusters), "load": os.getloadavg()[0]}
        out["variants"][name] = row
        print(f"{name:>14}: kernel min {min(row['kernel_s']):.2f} s (CPU "
              f"{min(row['kernel_cpu_s']):.2f} s), clustering min "
              f"{min(row['cluster_s']):.2f} s, within-cluster SSE x{row['sse_vs_default']:.3f}"
              f", load {row['load']:.1f}", flush=True)
    print(f"wrote {save('condensation_kmeans_rounds', out)}")


if __name__ == "__main__":
    main()
