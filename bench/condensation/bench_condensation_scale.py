"""Growth of condensation's pure kernels (paper 004, no server) in seconds and peak memory, on
the rows of bench/distributed/bench_distributed.py's ``bench.survival`` (age, sex, race, pt, surv_months,
vital; k = 100, survival {time surv_months, status vital}, seed 7), built in numpy with the
same marginal shapes (every column drawn independently, as the hashes there make them).

Each size runs in a fresh child process (so its peak RSS -- ru_maxrss, the VmHWM the server
benchmark reports -- is that size's alone), through the plug-in's own path:
``condense`` (its phases: validate_code, partition, cluster, synthesize, decode), the rounding
and ``avoid_rare_copies`` (plugin.avoid_copies), and the in-memory verifier
(verify_condensation + check_rare_records, what verify/condensation.py runs before the stored
checks).

    PYTHONPATH=python_udfs python bench/condensation/bench_condensation_scale.py \
        [--sizes 100000,500000,1000000,5000000] [--out bench/results/condensation_scale.json]

``--server`` times the same request through the private cluster instead (bench/common.py's
URL; bench_distributed.py's rows and request, one node): per size, a CREATE TABLE AS of the
rows, then the request on a fresh session (PL/Python's first import included, as on a node),
its phases from the release log and the backend's VmHWM.  Timed runs hold DEID_BENCH_LOCK.
"""
import argparse
import json
import pathlib
import resource
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
K, SEED = 100, 7
COLUMNS = ("age", "sex", "race", "pt", "surv_months", "vital")
KINDS = ["int", "categorical", "categorical", "categorical", "int", "int"]
AGE, SEX, RACE, PT, MONTHS, VITAL = range(6)


def make_survival(n, seed=0):
    """bench.survival's shape: age = U{0..89} + U{0..9}; sex 55 % F; race white/black/asian/
    other 4:2:1:1; pt 8 stages uniform; vital 30 % ones; surv_months U{1..120}.  Categories as
    the frame codes them (sorted labels' index)."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, 6))
    X[:, AGE] = rng.integers(0, 90, n) + rng.integers(0, 10, n)
    X[:, SEX] = rng.random(n) >= 0.55
    X[:, RACE] = np.array([3, 3, 3, 3, 1, 1, 0, 2])[rng.integers(0, 8, n)]
    X[:, PT] = rng.integers(0, 8, n)
    X[:, MONTHS] = 1 + rng.integers(0, 120, n)
    X[:, VITAL] = rng.random(n) < 0.30
    return X


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def one(n):
    """One size in this process: phase seconds and the peak RSS after each phase."""
    from deid.methods.condensation.condense import condense
    from deid.methods.condensation.rare_values import ColumnRules, Release, avoid_rare_copies
    from deid.verify.shared.cluster_moments import verify_condensation
    from deid.verify.shared.rare_records import check_rare_records
    X = make_survival(n)
    out = {"rows": n, "peak_mb": {"data": peak_mb()}, "seconds": {}}
    t = time.perf_counter()
    res = condense(X, KINDS, K, status=VITAL, time_col=MONTHS, survival_times="coarsened",
                   seed=SEED)
    out["seconds"]["condense"] = time.perf_counter() - t
    out["kernel_seconds"] = {k: round(v, 3) for k, v in res.timings.items()}
    out["peak_mb"]["condense"] = peak_mb()
    t = time.perf_counter()
    for j in (AGE, MONTHS):                                 # plugin.avoid_copies: int grain
        res.synthetic[:, j] = np.round(res.synthetic[:, j], 0)
    moved = avoid_rare_copies(
        X, res.cluster_id, Release(res.synthetic, res.synthetic_cluster_id, res.synthetic_unrounded),
        K, ColumnRules(decimals=[0, -1, -1, -1, 0, 0], relative=[0.0] * 6, float32=[False] * 6,
                       categorical=[kd == "categorical" for kd in KINDS],
                       fixed=[j == VITAL for j in range(6)],
                       reluctant=[j == MONTHS for j in range(6)]),
        np.random.default_rng(np.random.SeedSequence(SEED, spawn_key=(9,))))
    out["seconds"]["avoid_rare_copies"] = time.perf_counter() - t
    out["moved"] = int(moved)
    out["peak_mb"]["avoid_rare_copies"] = peak_mb()
    t = time.perf_counter()
    order = np.argsort(res.cluster_id, kind="stable")
    verify_condensation(X, (order, res.cluster_id[order]), res.synthetic,
                        res.synthetic_cluster_id, K, status_col=VITAL, time_col=MONTHS,
                        survival_times=res.survival_times, moment_columns=[AGE, MONTHS],
                        moment_values=res.synthetic_unrounded, count_columns=[SEX, RACE, PT],
                        check_ranges=True, integer_columns=[AGE, MONTHS])
    check_rare_records(X, res.synthetic, K, [SEX, RACE, PT], list(COLUMNS))
    out["seconds"]["verify"] = time.perf_counter() - t
    out["peak_mb"]["verify"] = peak_mb()
    out["seconds"]["total"] = sum(v for k, v in out["seconds"].items())
    out["clusters"] = int(res.n_clusters)
    return out


def server(sizes, label, out):
    import contextlib
    import fcntl
    import os
    sys.path.insert(0, str(ROOT / "bench"))
    import common
    import bench_distributed as bd

    @contextlib.contextmanager
    def lock():
        with open(os.environ.get("DEID_BENCH_LOCK", str(ROOT / "bench" / ".lock")), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    source, method, k, _, columns, options = bd.REQUESTS["condensation"]
    print(f"condensation through the server, one node, {source}, k={k} {label}")
    print(f"{'rows':>9} {'CTAS':>6} {'request':>8} {'/CTAS':>6} {'peak MB':>8}  phases (s)")
    rows = []
    for n in sizes:
        c = common.fresh_database("deid_bench_cnd")
        c.execute("CREATE SCHEMA bench")
        c.execute(bd.GENERATE.replace(":nodes", "1").replace(":part", "0")
                  .replace(":n", str(int(n))))
        for q in bd.HIERARCHIES + bd.roles("bench.patients", "bench.survival"):
            c.execute(*(q if isinstance(q, tuple) else (q,)))
        with lock():
            t = time.perf_counter()
            c.execute("CREATE TABLE bench.ctas AS SELECT * FROM bench.survival")
            ctas = time.perf_counter() - t
        c.close()
        with common.connect("deid_bench_cnd") as fresh:
            fresh.execute("SET client_min_messages = warning")
            common.reset_composition(fresh)     # a first release (the database is new, say so)
            with lock():
                t = time.perf_counter()
                fresh.execute("SELECT * FROM deid.anonymize_request(%s, %s, k => %s,"
                              " columns => %s, options => %s, release => 'b')",
                              [source, method, k, columns, json.dumps(options)]).fetchone()
                seconds = time.perf_counter() - t
            peak = common.backend_peak_kb(fresh) / 1024
            metrics = fresh.execute("SELECT metrics FROM deid.release WHERE name = 'b'"
                                    ).fetchone()[0]
        phases = metrics["seconds"]
        rows.append({"rows": n, "ctas": ctas, "seconds": seconds, "peak_mb": peak,
                     "phases": phases, "kernel_seconds": metrics.get("kernel_seconds")})
        print(f"{n:>9} {ctas:6.2f} {seconds:8.2f} {seconds / ctas:6.1f} {peak:8.0f}  "
              + " ".join(f"{p}={v:.2f}" for p, v in phases.items() if isinstance(v, float)),
              flush=True)
    path = pathlib.Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"label": label, "server": rows}, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", action="store_true")
    ap.add_argument("--sizes", default="100000,500000,1000000,5000000")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "condensation_scale.json"))
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    if a.server:
        server([int(s) for s in a.sizes.split(",") if s], a.label, a.out)
        return
    if a.one:
        print(json.dumps(one(a.one)))
        return
    rows = []
    print(f"condensation kernels, bench.survival's shape, k={K}, seed {SEED} {a.label}")
    print(f"{'rows':>9} {'condense':>9} {'avoid':>8} {'verify':>7} {'total':>7} {'peak MB':>8}"
          f" {'MB/1k rows':>10} {'moved':>7}  condense phases (s)")
    for n in (int(s) for s in a.sizes.split(",") if s):
        p = subprocess.run([sys.executable, __file__, "--one", str(n)], check=True,
                           capture_output=True, text=True)
        r = json.loads(p.stdout.strip().splitlines()[-1])
        rows.append(r)
        s, peak = r["seconds"], max(r["peak_mb"].values())
        phases = " ".join(f"{k}={v}" for k, v in r["kernel_seconds"].items() if k != "total")
        print(f"{n:>9} {s['condense']:9.2f} {s['avoid_rare_copies']:8.2f} {s['verify']:7.2f} "
              f"{s['total']:7.2f} {peak:8.0f} {1000 * peak / n:10.2f} {r['moved']:>7}  {phases}",
              flush=True)
    for r0, r1 in zip(rows, rows[1:]):
        g = np.log(r1["seconds"]["total"] / r0["seconds"]["total"]) / np.log(r1["rows"] / r0["rows"])
        print(f"growth exponent {r0['rows']} -> {r1['rows']}: {g:.2f}")
    path = pathlib.Path(a.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"label": a.label, "sizes": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
