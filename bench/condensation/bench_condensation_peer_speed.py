"""Condensation kernel vs the copulas peer (fit + sample) on the same registry-like rows.

    bench/.venv-eval/bin/python bench/condensation/bench_condensation_peer_speed.py [--sizes 10000,30000,100000]

Runs in the benchmark-only venv (copulas is not in the server).  Rows: the 8-attribute
registry-like table of bench_condensation_kernel.make_registry, k = 100, Alg. 2 with survival
columns (the default survival_times).  Peer: copulas GaussianMultivariate with Beta marginals
(SDV's default); ``--default-marginals N`` also times copulas' own default (each marginal chosen
among candidates, KDE included) at the sizes <= N -- slow, roughly quadratic.  BLAS threads are
pinned to 1 (OPENBLAS_NUM_THREADS etc.), like the server's reference BLAS: on a busy 2-core
machine the wheels' OpenBLAS threads otherwise spin and inflate CPU time.  For each size: wall and CPU seconds (min of --repeat), the ratio peer / deid,
and a power-law fit of the peer's seconds over rows used to extrapolate to 1M rows (said so
in the output: copulas at 1M was not run when 1M is not among --sizes).
Writes bench/results/condensation_peer_speed.json.
"""
import argparse
import json
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
import sys
import time
import warnings

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
from bench_condensation_kernel import KINDS, MONTHS, STATUS, make_registry  # noqa: E402
from deid.methods.condensation.condense import condense  # noqa: E402


def timed(fn, repeat):
    best = None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        run = (time.perf_counter() - w, time.process_time() - c)
        best = run if best is None or run[0] < best[0] else best
    return best


def copulas_fit_sample(df, distribution):
    from copulas.multivariate import GaussianMultivariate
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GaussianMultivariate(distribution=distribution, random_state=1) \
            if distribution else GaussianMultivariate(random_state=1)
        model.fit(df)
        model.sample(len(df))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,30000,100000")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--default-marginals", type=int, default=0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    out = {"sizes": {}, "load": os.getloadavg()}
    for i, n in enumerate(sizes):
        X = make_registry(n, 0)
        df = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])])
        deid = timed(lambda: condense(X, KINDS, 100, status=STATUS, time_col=MONTHS, seed=1),
                     args.repeat)
        beta = timed(lambda: copulas_fit_sample(df, "copulas.univariate.BetaUnivariate"),
                     args.repeat)
        row = {"deid_wall": deid[0], "deid_cpu": deid[1], "copulas_beta_wall": beta[0],
               "copulas_beta_cpu": beta[1], "ratio_wall": beta[0] / deid[0],
               "ratio_cpu": beta[1] / deid[1]}
        if n <= args.default_marginals:
            auto = timed(lambda: copulas_fit_sample(df, None), 1)
            row.update(copulas_default_wall=auto[0], copulas_default_cpu=auto[1])
        out["sizes"][n] = row
        print(f"{n:>8} rows: deid kernel {deid[0]:.2f} s wall / {deid[1]:.2f} s CPU; copulas "
              f"(beta) fit+sample {beta[0]:.2f} s / {beta[1]:.2f} s CPU = {row['ratio_wall']:.1f} x"
              f" wall, {row['ratio_cpu']:.1f} x CPU"
              + (f"; copulas default marginals {row['copulas_default_wall']:.1f} s wall / {row['copulas_default_cpu']:.1f} s CPU"
                 if "copulas_default_wall" in row else ""), flush=True)
    small = [n for n in sizes if "copulas_default_cpu" in out["sizes"][n]]
    if len(small) >= 2:
        slope, icept = np.polyfit(np.log(small), np.log(
            [out["sizes"][n]["copulas_default_cpu"] for n in small]), 1)
        out["copulas_default_cpu_exponent"] = float(slope)
        out["copulas_default_cpu_at_1M_extrapolated"] = float(np.exp(icept + slope * np.log(1e6)))
        print(f"copulas default marginals: CPU exponent {slope:.2f} over {small}; extrapolated "
              f"to 1M rows (not run): {out['copulas_default_cpu_at_1M_extrapolated']:.0f} s")
    if len(sizes) >= 2:
        xs = np.log(sizes)
        for key in ("deid_cpu", "copulas_beta_cpu"):
            slope, icept = np.polyfit(xs, np.log([out["sizes"][n][key] for n in sizes]), 1)
            out[key + "_exponent"] = float(slope)
            out[key + "_at_1M_extrapolated"] = float(np.exp(icept + slope * np.log(1e6)))
        print(f"growth exponents (CPU): deid {out['deid_cpu_exponent']:.2f}, copulas "
              f"{out['copulas_beta_cpu_exponent']:.2f}; extrapolated to 1M rows"
              f"{' (not run at 1M)' if 1_000_000 not in sizes else ''}: deid "
              f"{out['deid_cpu_at_1M_extrapolated']:.1f} s, copulas "
              f"{out['copulas_beta_cpu_at_1M_extrapolated']:.1f} s CPU = "
              f"{out['copulas_beta_cpu_at_1M_extrapolated'] / out['deid_cpu_at_1M_extrapolated']:.1f} x")
    path = os.path.join(bench_paths.RESULTS, "condensation_peer_speed.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
