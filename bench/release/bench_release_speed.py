"""Release speed: anatomy and generalization against CTAS, the data path, the growth
from 100k to 3M rows, backend peak memory, the RID-set case with ids in QI order.

    .venv/bin/python bench/release/bench_release_speed.py [--rows N] [--repeat R] [--sizes N,N,...]
        [--skip-generalization] [--skip-anatomy] [--skip-sorted] [--skip-datapath] [--label TEXT]

For every size (and --rows, 1M by default, which also gets the extra cases):
  * anatomy (bench_anatomy's data: 4 QIs + 3 sensitive, K=50, L=10, model kl) and
    generalization (bench_generalization's: 6 QIs, 2 sources, k=10, greedy, the reference
    priorities), each request in a fresh backend, INTERLEAVED with a CTAS of the same rows
    (CTAS, request, CTAS, request, ...), `repeat` times: min and median of both, the ratios
    median/median and min/min, the phase breakdown of the median run (deid.release.metrics
    seconds: read, method, write, verify, in_sql) and the backend's VmHWM (KB per row);
  * at --rows only: the data path (1M x 5 int read + write back, deid._datapath_probe) against
    its CTAS (3 x repeat interleaved pairs), and anatomy on the same rows with ids renumbered in QI order (sequential RIDs in
    the RID sets: the case pglz compresses best), with the time of writing and of digesting the
    RID-set catalog;
  * the growth exponent b of time ~ rows^b (least squares on log-log, median times) for each
    method and for CTAS.
Writes bench/results/release_speed.json, appends one line to bench/results/release_speed.jsonl,
and plots time against rows (both methods, CTAS beside them) to bench/results/release_speed.png
(matplotlib in bench/.venv-peers, the benchmarks' own virtualenv). Quote `uptime` with it: the
numbers are only meaningful on a quiet machine.
"""
import argparse
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
import time

import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
import bench_anatomy as ba  # noqa: E402
import bench_generalization as bg  # noqa: E402
from common import (RESULTS, ROOT, backend_peak_kb, connect, reset_composition, save,  # noqa: E402
                    timed, url)

T0 = time.perf_counter()
ANATOMY_COLUMNS = ba.QIS + ba.SAS[:3]


def log(msg):
    print(f"[{time.perf_counter() - T0:6.0f} s] {msg}", flush=True)


def stats(xs):
    return {"min": min(xs), "median": statistics.median(xs), "runs": xs}


def table_name(n):
    return "patients_1m" if n == 1_000_000 else f"patients_{n}"    # release_fingerprint.py's


def anatomy_request(table, release):
    """One anatomy request in a fresh backend: seconds, phases, VmHWM."""
    conn = psycopg.connect(url(ba.DB), autocommit=True)
    try:
        reset_composition(conn)
        r = ba.request(conn, table, 50, 10, ANATOMY_COLUMNS, release)
        r["vmhwm_kb"] = backend_peak_kb(conn)
    finally:
        conn.close()
    if not r["ok"]:
        raise RuntimeError(f"anatomy request failed: {r}")
    return r


def summarize(name, n, ctas_runs, runs, log_line=True):
    """min/median, ratios, the median run's phases and VmHWM."""
    secs = [r["seconds"] for r in runs]
    mid = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
    out = {"rows": n, "ctas_s": stats(ctas_runs), "seconds": stats(secs),
           "ratio_median": statistics.median(secs) / statistics.median(ctas_runs),
           "ratio_min": min(secs) / min(ctas_runs),
           "phases": {k: round(v, 3) for k, v in (mid.get("phases") or {}).items()},
           "vmhwm_kb": [r.get("vmhwm_kb") for r in runs]}
    hwm = [x for x in out["vmhwm_kb"] if x]
    out["vmhwm_kb_per_row"] = max(hwm) * 1024 / n / 1024 if hwm else None   # KB per row
    if log_line:
        log(f"{name:14s} {n:>9,} rows: CTAS min {min(ctas_runs):.2f} med "
            f"{statistics.median(ctas_runs):.2f} s; deid min {min(secs):.2f} med "
            f"{statistics.median(secs):.2f} s = {out['ratio_median']:.2f} x CTAS (min/min "
            f"{out['ratio_min']:.2f}); VmHWM {max(hwm) / 1024 if hwm else 0:.0f} MB = "
            f"{out['vmhwm_kb_per_row'] or 0:.2f} KB/row; phases {json.dumps(out['phases'])}")
    return out


def bench_anatomy(conn, n, repeat, sorted_ids=False):
    table = table_name(n) + ("_sorted" if sorted_ids else "")
    t = time.perf_counter()
    if not conn.execute("SELECT to_regclass(%s)", [table_name(n)]).fetchone()[0]:
        data = ba.make_patients(n, seed=1_000_000)
        ba.load_table(conn, table_name(n), data, ANATOMY_COLUMNS)
        del data
        log(f"  loaded {table_name(n)} ({n:,} rows) in {time.perf_counter() - t:.1f} s")
    if not conn.execute("SELECT to_regclass(%s)", [table]).fetchone()[0]:
        if sorted_ids:      # the same rows, ids in the order of the quasi-identifiers
            conn.execute(f"CREATE TABLE {table} AS SELECT row_number() OVER (ORDER BY"
                         f" {', '.join(ba.QIS)}, id)::bigint AS id,"
                         f" {', '.join(ANATOMY_COLUMNS)} FROM {table_name(n)}")
            conn.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
            conn.execute(f"VACUUM ANALYZE {table}")
            for c in ANATOMY_COLUMNS:
                conn.execute("SELECT deid.set_role(%s::regclass, %s, %s)",
                             (table, c, "quasi_identifier" if c in ba.QIS else "sensitive"))
    ctas_runs, runs = [], []
    for i in range(repeat):
        ctas_runs += ba.ctas(conn, table, 1)
        r = anatomy_request(table, f"speed_{table}")
        runs.append({"seconds": r["seconds"], "phases": r["phase_seconds"], "vmhwm_kb": r["vmhwm_kb"],
                     "release_id": r["release_id"]})
    out = summarize("anatomy" + (" sorted" if sorted_ids else ""), n, ctas_runs, runs)
    if sorted_ids:
        out["rid_set"] = rid_set_costs(conn, runs[-1]["release_id"])
        log(f"  RID sets of the sorted-id release: {json.dumps(out['rid_set'])}")
    return out


def rid_set_costs(conn, release_id):
    """How the stored RID sets of a release cost: their size on disk, a rewrite of them (as
    the writer's COPY stores them) and the server's digest pass of the verifier."""
    out = {"storage": conn.execute(
        "SELECT string_agg(DISTINCT coalesce(pg_column_compression(rids), 'none'), ',') FROM"
        " deid.rid_set WHERE release_id = %s", [release_id]).fetchone()[0]}
    out["bytes"] = conn.execute("SELECT sum(pg_column_size(rids)) FROM deid.rid_set WHERE"
                                " release_id = %s", [release_id]).fetchone()[0]
    conn.execute("CREATE TEMP TABLE rs (LIKE deid.rid_set INCLUDING ALL)")   # storage too
    out["write_s"], _ = timed(conn, "INSERT INTO rs SELECT * FROM deid.rid_set WHERE release_id = %s",
                              [release_id])
    sys.path.insert(0, str(ROOT / "python_udfs"))
    from deid.verify.shared.rid_set_digest import _STORED_SQL
    out["digest_s"], _ = timed(conn, _STORED_SQL.replace("deid.rid_set", "pg_temp.rs")
                               .replace("$1", "%s"), [release_id])
    conn.execute("DROP TABLE rs")
    return out


def bench_generalization(n, repeat):
    conn, _ = bg.fresh_database(n, 7, log)
    ctas_runs, runs = [], []
    try:
        for _ in range(repeat):
            ctas_runs.append(bg.ctas(conn))
            fresh = psycopg.connect(url(bg.DB), autocommit=True)
            try:
                reset_composition(fresh)
                t, m, res = bg.Requests(fresh).run("bench_gen", 10, "greedy", bg.REFERENCE)
                runs.append({"seconds": t, "phases": m["seconds"], "vmhwm_kb": backend_peak_kb(fresh)})
            finally:
                fresh.close()
    finally:
        conn.close()
    return summarize("generalization", n, ctas_runs, runs)


def bench_datapath(n, repeat):
    """bench_datapath.py's measurement (1M x 5 int: read into numpy, write (rid, group) back),
    interleaved with its CTAS."""
    conn = connect()
    conn.execute("CREATE EXTENSION IF NOT EXISTS deid CASCADE")
    conn.execute("DROP TABLE IF EXISTS bench_dp")
    conn.execute("SELECT setseed(0.5)")
    conn.execute(f"""CREATE TABLE bench_dp AS SELECT i::bigint AS id,
        (random()*100)::int AS c1, (random()*1000)::int AS c2, (random()*50)::int AS c3,
        (random()*100000)::int AS c4, (random()*7)::int AS c5
        FROM generate_series(1, {n}) i""")
    conn.execute("ALTER TABLE bench_dp ADD PRIMARY KEY (id)")
    conn.execute("VACUUM ANALYZE bench_dp")
    ctas_runs, runs = [], []
    for _ in range(repeat):
        conn.execute("DROP TABLE IF EXISTS bench_dp_copy")
        ctas_runs.append(timed(conn, "CREATE TABLE bench_dp_copy AS SELECT id, c1, c2, c3, c4, c5"
                                     " FROM bench_dp")[0])
        t, rows = timed(conn, "SELECT deid._datapath_probe('bench_dp'::regclass, '{c1,c2,c3,c4,c5}')")
        p = json.loads(rows[0][0]) if isinstance(rows[0][0], str) else rows[0][0]
        runs.append({"seconds": t, "phases": {"read": p["read_s"], "write": p["write_s"]},
                     "vmhwm_kb": backend_peak_kb(conn)})
    conn.execute("DROP TABLE IF EXISTS bench_dp_copy")
    conn.execute("DROP TABLE IF EXISTS bench_dp")
    conn.close()
    return summarize("data path", n, ctas_runs, runs)


def growth(points):
    """b of time ~ rows^b (least squares on log-log) over the sizes measured."""
    xs = [math.log(p["rows"]) for p in points]
    if len(xs) < 2:
        return {}
    out = {}
    for key, pick in (("deid", lambda p: p["seconds"]["median"]),
                      ("ctas", lambda p: p["ctas_s"]["median"])):
        ys = [math.log(pick(p)) for p in points]
        mx, my = statistics.mean(xs), statistics.mean(ys)
        out[key] = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return out


PLOT = r'''
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
res = json.load(open(sys.argv[1])); out = sys.argv[2]
fig, ax = plt.subplots(figsize=(7, 4.6))
for method, color in (("anatomy", "C0"), ("generalization", "C1")):
    pts = res["sizes"].get(method) or []
    if not pts: continue
    xs = [p["rows"] for p in pts]
    b = res["growth"].get(method, {})
    ax.plot(xs, [p["seconds"]["median"] for p in pts], marker="o", color=color,
            label=f"deid {method} (median of {len(pts[0]['seconds']['runs'])}; b = {b.get('deid', float('nan')):.2f})")
    ax.plot(xs, [p["ctas_s"]["median"] for p in pts], marker="s", ls="--", color=color, alpha=.6,
            label=f"CTAS of the same rows (b = {b.get('ctas', float('nan')):.2f})")
    for p in pts:
        ax.annotate(f"{p['ratio_median']:.1f}x", (p["rows"], p["seconds"]["median"]),
                    textcoords="offset points", xytext=(4, 4), fontsize=7, color=color)
ax.set_xscale("log"); ax.set_yscale("log"); ax.grid(alpha=.3, which="both")
ax.set_xlabel("rows"); ax.set_ylabel("seconds")
ax.set_title(f"Release time against rows (git {res['git']}, load {res['load']})", fontsize=9)
ax.legend(fontsize=7); fig.tight_layout(); fig.savefig(out, dpi=120)
print(out)
'''


def plot(result):
    py = ROOT / "bench" / ".venv-peers" / "bin" / "python"
    if not py.exists():
        py = ba.ensure_peers()
    path = RESULTS / "release_speed.json"
    r = subprocess.run([str(py), "-c", PLOT, str(path), str(RESULTS / "release_speed.png")],
                       capture_output=True, text=True)
    log(("plot: " + r.stdout.strip()) if r.returncode == 0 else "plot failed: " + r.stderr[-800:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="", help="e.g. 100000,300000,1000000,3000000")
    ap.add_argument("--skip-generalization", action="store_true")
    ap.add_argument("--skip-anatomy", action="store_true",
                    help="generalization alone (e.g. its growth over --sizes)")
    ap.add_argument("--skip-sorted", action="store_true")
    ap.add_argument("--skip-datapath", action="store_true")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()
    sizes = sorted({int(x) for x in args.sizes.split(",") if x} | {args.rows})
    log(f"git {head}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, sizes {sizes}")
    result = {"label": args.label, "git": head, "load": f"{load[0]:.1f}", "repeat": args.repeat,
              "sizes": {"anatomy": [], "generalization": []}, "growth": {}}
    if not args.skip_anatomy:
        conn = ba.fresh_database()
        for n in sizes:
            result["sizes"]["anatomy"].append(bench_anatomy(conn, n, args.repeat))
            if n == args.rows and not args.skip_sorted:
                result["anatomy_sorted_ids"] = bench_anatomy(conn, n, args.repeat, sorted_ids=True)
        conn.close()
    if not args.skip_generalization:      # --rows last: release_fingerprint.py reads that table
        for n in [x for x in sizes if x != args.rows] + [args.rows]:
            result["sizes"]["generalization"].append(bench_generalization(n, args.repeat))
        result["sizes"]["generalization"].sort(key=lambda p: p["rows"])
    if not args.skip_datapath:
        # ~1 s a pair, and the noisiest ratio (two statements, two WAL flushes): 3 x repeat pairs
        result["datapath"] = bench_datapath(args.rows, 3 * args.repeat)
    for method, pts in result["sizes"].items():
        result["growth"][method] = growth(pts)
        if len(pts) > 1:
            g = result["growth"][method]
            log(f"growth {method} {pts[0]['rows']:,} -> {pts[-1]['rows']:,}: time ~ rows^"
                f"{g['deid']:.3f} (CTAS ^{g['ctas']:.3f})")
    at = {m: next((p for p in pts if p["rows"] == args.rows), None)
          for m, pts in result["sizes"].items()}
    for m, p in at.items():
        if p:
            log(f"SUMMARY {m} {args.rows:,}: {p['ratio_median']:.2f} x CTAS (median of {args.repeat};"
                f" min/min {p['ratio_min']:.2f}), VmHWM {p['vmhwm_kb_per_row'] or 0:.2f} KB/row")
    if result.get("datapath"):
        log(f"SUMMARY data path {args.rows:,} x 5 int: {result['datapath']['ratio_median']:.2f} x CTAS")
    save("release_speed", result)
    with open(RESULTS / "release_speed.jsonl", "a") as f:
        f.write(json.dumps(result, default=float) + "\n")
    plot(result)


if __name__ == "__main__":
    main()
