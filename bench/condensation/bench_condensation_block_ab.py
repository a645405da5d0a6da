"""CPU of condensation's per-block step (004 Alg. 2 steps 2a-2c: weighted k-means, rebalancing,
rebalanced rounds), compared block by block so that a busy machine's drift cancels.

    .venv/bin/python bench/condensation/bench_condensation_block_ab.py [--rows 1000000] \
        [--against <commit>] [--rounds]

The rows are bench_kmeans_rounds.py's (the speed benchmark's shape, k = 100), cut into the
kernel's k-d blocks once.  ``--against``: the commit's tree (git archive into a temporary
folder, its package imported as a second copy) clusters every block beside this tree's, the
order flipped block by block; CPU seconds (process time) per side and whether every block's
labels are equal.  ``--rounds``: every block under each (max_iter, rebalance_rounds) option,
the order rotated block by block.  Writes bench/results/condensation_block_ab.json.  Runs under the server's Python (its numpy and
BLAS: ``/usr/bin/python3``) as well as the venv's.
"""
import argparse
import importlib
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (python_udfs importable)
from deid.methods.condensation import condense as cd  # noqa: E402
from condensation_rows import rows  # noqa: E402

K = 100
KINDS = ["int", "float", "int", "int", "categorical", "categorical", "int", "int"]
ROUNDS = [(5, 3), (3, 3), (2, 3), (1, 3), (2, 1), (1, 0)]


def blocks(n):
    X = rows(n)
    s = cd._settings(cd.CondenseOptions(status=7, time_col=6, weights={6: 0.5}, seed=7),
                     *cd._check_table(X, KINDS, K))
    f, layout = cd._code_attributes(X, KINDS, s.attrs)
    f *= cd._feature_scale(f, layout, s.weights)
    return [(f[job.rows], cd._rng(s.base_seed, cd._STREAM_CLUSTER, *job.path).bit_generator.state)
            for job in cd.partition_blocks(f, s.subsets, K, s.block_rows)]


def other_tree(commit):
    """condense module of ``commit``'s tree, imported as the package ``deid_ab``."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="deid_ab_"))
    archive = subprocess.run(["git", "archive", commit, "python_udfs/deid"], check=True,
                             capture_output=True, cwd=bench_paths.ROOT).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    (folder / "python_udfs" / "deid").rename(folder / "deid_ab")
    sys.path.insert(0, str(folder))
    return importlib.import_module("deid_ab.methods.condensation.condense")


def timed(fn, features, state, *args):
    rng = np.random.default_rng()
    rng.bit_generator.state = state
    t = time.process_time()
    labels = fn(features, K, rng, "improved", *args)
    return time.process_time() - t, labels


def against(work, commit):
    theirs = other_tree(commit).cluster_block
    cpu, same = {"this tree": 0.0, commit: 0.0}, True
    for i, (features, state) in enumerate(work):
        sides = [("this tree", cd.cluster_block), (commit, theirs)]
        out = {}
        for name, fn in (sides if i % 2 == 0 else sides[::-1]):
            dt, out[name] = timed(fn, features, state)
            cpu[name] += dt
        same &= np.array_equal(out["this tree"], out[commit])
    return {"cpu_s": cpu, "ratio": cpu["this tree"] / cpu[commit], "labels_equal": bool(same)}


def rounds(work):
    cpu = {o: 0.0 for o in ROUNDS}
    for i, (features, state) in enumerate(work):
        for o in ROUNDS[i % len(ROUNDS):] + ROUNDS[:i % len(ROUNDS)]:
            cpu[o] += timed(cd.cluster_block, features, state, *o)[0]
    return {f"max_iter {a}, rebalance_rounds {b}": v for (a, b), v in cpu.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--against")
    ap.add_argument("--rounds", action="store_true")
    a = ap.parse_args()
    work = blocks(a.rows)
    out = {"rows": a.rows, "blocks": len(work), "load": open("/proc/loadavg").read().split()[:3]}
    if a.against:
        out["against"] = against(work, a.against)
        print(out["against"])
    if a.rounds:
        out["rounds_cpu_s"] = rounds(work)
        print(out["rounds_cpu_s"])
    path = bench_paths.RESULTS / "condensation_block_ab.json"   # bench/common needs psycopg
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
