"""Generalization speed for two data shapes against CTAS, with phase breakdowns.

    .venv/bin/python bench/generalization/bench_generalization_shapes.py [--rows N] [--repeat R] [--label TEXT]
                                                          [--shapes benchmark,twins] [--reuse]
                                                          [--fingerprint] [--quick]

Shapes (1M rows, 6 quasi-identifiers in 2 source systems, k = 10, greedy, the reference
priorities of bench_generalization.py, seed 7):
  * benchmark -- bench_generalization.py's generator and hierarchies (skewed, generalized by the
    method);
  * twins -- the same columns and hierarchies, but every source is k-anonymous on its own
    attributes at level 0 while the joint classes over all 6 are nearly unique: each row takes
    one of PROFILES value triples of the registry (age, zip, ethnicity) and, independently, one
    of PROFILES triples of pathology (diagnosis, pt, size_mm), each triple uniform over the
    attributes' domains. At 1M rows: about 3,000 classes per source (~330 rows each) and ~945k
    joint classes.
Each shape lives in its own database (deid_bench_shape_<shape>). The requests of a shape run on
one connection whose backend first served a request on a 5,000-row copy (bench_warm), so no run
pays PL/Python's imports; its VmHWM is their peak. Per run: a CTAS of the same rows on its own
connection, then the request; printed per shape: CTAS, min and median of the runs, the median ratio of paired runs, the
median phase seconds (deid.release.metrics.seconds) and the peak VmHWM. Appends one JSON line per
invocation to bench/results/generalization_shapes.jsonl. --fingerprint instead prints md5s of the
release relation and the class catalog of one fixed request per shape (release_fingerprint.py),
appended to bench/results/generalization_shapes_fingerprints.jsonl. --reuse keeps the databases
of an earlier run with the same --rows.
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
import bench_generalization as bg  # noqa: E402
import release_fingerprint as rf  # noqa: E402
from common import RESULTS, ROOT, backend_peak_kb, connect, reset_composition, timed  # noqa: E402

PROFILES = 3000
DOMAIN = {"age": 100, "zip": 1000, "ethnicity": 12, "diagnosis": 400, "pt": 10, "size_mm": 199}


def twins(n, seed):
    """int codes per column (as bench_generalization.generate): per source PROFILES value
    triples, each row one registry triple and, independently, one pathology triple."""
    rng = np.random.default_rng(seed)
    out = {}
    for source in ("registry", "pathology"):
        cols = [c for c in bg.QIS if bg.SOURCE[c] == source]
        profile = rng.integers(0, PROFILES, n)
        for c in cols:
            values = rng.integers(0, DOMAIN[c], PROFILES) + (1 if c == "size_mm" else 0)
            out[c] = values[profile].astype(np.int64)
    return out


SHAPES = {"benchmark": None, "twins": twins}


def database(shape):
    return f"deid_bench_shape_{shape}"


def load(shape, rows, seed, reuse, log):
    db = database(shape)
    if reuse:
        try:
            with connect(db) as c:
                if c.execute("SELECT count(*) FROM bench_gen").fetchone()[0] == rows:
                    log(f"{shape}: reusing {db}")
                    return
        except Exception:
            pass
    conn, _ = bg.fresh_database(rows, seed, log, db=db, generator=SHAPES[shape])
    # a small table with the same roles: one request on it warms a connection's backend (imports)
    conn.execute("CREATE TABLE bench_warm AS SELECT * FROM bench_gen ORDER BY id LIMIT 5000")
    conn.execute("ALTER TABLE bench_warm ADD PRIMARY KEY (id)")
    for c in bg.QIS:
        conn.execute("SELECT deid.set_role('bench_warm', %s, 'quasi_identifier', hierarchy => %s,"
                     " source => %s)", [c, f"bg_{c}", bg.SOURCE[c]])
    classes = conn.execute(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM bench_gen GROUP BY age, zip, ethnicity) a),"
        " (SELECT count(*) FROM (SELECT 1 FROM bench_gen GROUP BY diagnosis, pt, size_mm) b),"
        f" (SELECT count(*) FROM (SELECT 1 FROM bench_gen GROUP BY {', '.join(bg.QIS)}) j)").fetchone()
    log(f"{shape}: {rows} rows; raw classes registry {classes[0]}, pathology {classes[1]},"
        f" joint {classes[2]}")
    conn.close()


def request(c, table, k, name):
    """One timed request on connection `c`: (seconds, release_id, groups)."""
    opts = {"search": "greedy", "seed": 7, "priorities": bg.REFERENCE}
    t, rows = timed(c, "SELECT release_id, groups FROM deid.anonymize_request(%s, 'generalization',"
                    " k => %s, columns => %s, options => %s, release => %s)",
                    [table, k, bg.QIS, json.dumps(opts), name])
    return (t,) + tuple(rows[0])


def session(shape, k):
    """A connection to the shape's database whose backend has served one small request (so
    the runs do not pay PL/Python's imports); its VmHWM is the peak of the requests it ran."""
    c = connect(database(shape))
    c.execute("SET client_min_messages = warning")
    request(c, "bench_warm", k, "shape_warm")
    c.execute("SELECT deid.drop_release('shape_warm')")
    return c


def one_run(shape, c, k, n):
    with connect(database(shape)) as cc:
        cc.execute("SET client_min_messages = warning")
        ctas = bg.ctas(cc)
    name = f"shape_{n}"
    reset_composition(c)
    t, rid, groups = request(c, "bench_gen", k, name)
    peak = backend_peak_kb(c)
    metrics = c.execute("SELECT metrics FROM deid.release WHERE release_id = %s", [rid]).fetchone()[0]
    classes = c.execute("SELECT count(*) FROM deid.equivalence_class WHERE release_id = %s",
                        [rid]).fetchone()[0]
    c.execute("SELECT deid.drop_release(%s)", [name])
    return {"ctas_s": ctas, "seconds": t, "ratio": t / ctas, "vmhwm_kb": peak,
            "phases": metrics["seconds"], "groups": groups, "catalog_classes": classes,
            "levels": metrics.get("levels")}


def summary(runs):
    secs = [r["seconds"] for r in runs]
    phases = {p: statistics.median(r["phases"][p] for r in runs) for p in runs[0]["phases"]}
    return {"ctas_s": statistics.median(r["ctas_s"] for r in runs), "min_s": min(secs),
            "median_s": statistics.median(secs),
            "ratio_median": statistics.median(r["ratio"] for r in runs),
            "ratio_min": min(r["ratio"] for r in runs), "phases": phases,
            "vmhwm_kb": max(r["vmhwm_kb"] or 0 for r in runs), "groups": runs[-1]["groups"],
            "catalog_classes": runs[-1]["catalog_classes"], "levels": runs[-1]["levels"],
            "runs": runs}


def fingerprints(shapes, label, head):
    out = {}
    for shape in shapes:
        with connect(database(shape)) as c:
            c.execute("SET client_min_messages = warning")
            out.update(rf.fingerprint(c, "generalization", "bench_gen", 10, None, rf.GEN_QIS,
                                      {"seed": 7, "priorities": rf.GEN_PRIORITIES}, f"fp_{shape}"))
    print(json.dumps(out, indent=1))
    with open(RESULTS / "generalization_shapes_fingerprints.jsonl", "a") as f:
        f.write(json.dumps({"label": label, "git": head, "fingerprints": out}) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--label", default="")
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--fingerprint", action="store_true")
    ap.add_argument("--quick", action="store_true", help="smoke run: 100k rows, one run")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.repeat = 100_000, 1
    shapes = [s for s in args.shapes.split(",") if s]
    t0 = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t0:6.0f} s] {msg}", flush=True)

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    RESULTS.mkdir(parents=True, exist_ok=True)
    for shape in shapes:
        load(shape, args.rows, args.seed, args.reuse, log)
    if args.fingerprint:
        fingerprints(shapes, args.label, head)
        return
    result, n = {}, 0
    runs = {s: [] for s in shapes}
    sessions = {s: session(s, args.k) for s in shapes}
    for _ in range(args.repeat):          # interleaved: shape after shape, run after run
        for shape in shapes:
            n += 1
            runs[shape].append(one_run(shape, sessions[shape], args.k, n))
    for c in sessions.values():
        c.close()
    for shape in shapes:
        s = result[shape] = summary(runs[shape])
        log(f"{shape} {args.rows} rows k={args.k}: CTAS {s['ctas_s']:.2f} s; deid min {s['min_s']:.2f}"
            f" median {s['median_s']:.2f} s = {s['ratio_median']:.2f} x CTAS (min {s['ratio_min']:.2f});"
            f" phases {json.dumps({p: round(v, 2) for p, v in s['phases'].items()})};"
            f" VmHWM {s['vmhwm_kb'] / 1024:.0f} MB; groups {s['groups']},"
            f" catalog classes {s['catalog_classes']}, levels {s['levels']}")
    load_avg = open("/proc/loadavg").read().split()[:3]
    with open(RESULTS / "generalization_shapes.jsonl", "a") as f:
        f.write(json.dumps({"label": args.label, "git": head, "rows": args.rows, "k": args.k,
                            "loadavg": load_avg, "shapes": result}, default=float) + "\n")


if __name__ == "__main__":
    main()
