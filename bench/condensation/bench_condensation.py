"""Condensation (004) end to end through anonymize_request: speed against CTAS, growth, memory.

    .venv/bin/python bench/condensation/bench_condensation.py [--sizes 100000,300000,1000000,3000000]
                                                  [--k 100] [--repeat 3]

A generated registry-like table of 8 attributes (age int, bmi float8, sbp int, dx_date date,
sex text, stage text, surv_months int, vital int 0/1) is condensed with 004 Alg. 2 (survival
split on vital, weight 0.5 on surv_months, the default survival times), k = 100, verified and committed.
Every size is timed against a CTAS of the same rows and columns in the same run (median of
CTAS runs before and after); the growth exponent is the slope of log(seconds) over log(rows);
the backend's peak memory (VmHWM) is read from a fresh connection after its request.  Each
size prints the min and median of --repeat requests, their ratios to CTAS, the phases of the
median run (read, method, write, verify, ... from the release log) and the kernel's own
phases; the growth exponent is fitted on the minima.  Writes bench/results/condensation_speed.json
and bench/results/condensation_speed.png (seconds against rows, log-log).
"""
import argparse
import os
import pathlib
import sys
import time

import numpy as np
import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
from common import backend_cpu_s, backend_peak_kb, save, url  # noqa: E402
import common  # noqa: E402

DB = "deid_bench_cond"
COLUMNS = ["age", "bmi", "sbp", "dx_date", "sex", "stage", "surv_months", "vital"]
OPTIONS = ('{"survival": {"time": "surv_months", "status": "vital"},'
           ' "weights": {"surv_months": 0.5}, "seed": 7, "replace": true}')


def fresh_database():
    return common.fresh_database(DB)


def load(conn, table, n):
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute("SELECT setseed(0.7)")
    conn.execute(f"""CREATE TABLE {table} AS
        SELECT i::bigint AS id, a AS age, round((22 + a * 0.08 + 4 * r1)::numeric, 1)::float8 AS bmi,
               (100 + a / 2 + floor(30 * r2))::int AS sbp,
               DATE '2010-01-01' + floor(r3 * 4000)::int AS dx_date,
               CASE WHEN r4 < 0.52 THEN 'F' ELSE 'M' END AS sex,
               (ARRAY['I','II','III','IV'])[1 + floor(power(r5, 1.3) * 4)::int] AS stage,
               (1 + floor(120 * power(r6, 1 + a / 80.0)))::int AS surv_months,
               (r7 < 0.3 + a / 300.0)::int AS vital
          FROM (SELECT i, 20 + floor(power(random(), 0.8) * 70)::int AS a, random() AS r1,
                       random() AS r2, random() AS r3, random() AS r4, random() AS r5,
                       random() AS r6, random() AS r7
                  FROM generate_series(1, {n}) i) s""")
    conn.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
    conn.execute(f"ANALYZE {table}")
    conn.execute(f"SELECT deid.set_role('{table}', c, 'quasi_identifier')"
                 " FROM unnest('{age,bmi,sbp,dx_date,sex,stage}'::text[]) c")
    conn.execute(f"SELECT deid.set_role('{table}', c, 'sensitive')"
                 " FROM unnest('{surv_months,vital}'::text[]) c")


def ctas(conn, table, runs, cpu=None):
    """Seconds of ``runs`` CTAS of the table's columns; their backend CPU seconds appended to
    ``cpu`` (the leader's only: a parallel plan's workers are not counted)."""
    out = []
    for _ in range(runs):
        conn.execute("DROP TABLE IF EXISTS ctas_copy")
        c, t = backend_cpu_s(conn), time.perf_counter()
        conn.execute(f"CREATE TABLE ctas_copy AS SELECT {', '.join(COLUMNS)} FROM {table}")
        out.append(time.perf_counter() - t)
        if cpu is not None:
            cpu.append(backend_cpu_s(conn) - c)
    conn.execute("DROP TABLE IF EXISTS ctas_copy")
    return out


def request(table, k):
    fresh = psycopg.connect(url(DB), autocommit=True)
    try:
        fresh.execute("SET client_min_messages = warning")
        common.reset_composition(fresh)      # a first release: no kept clusters, no history
        cpu, t = backend_cpu_s(fresh), time.perf_counter()
        row = fresh.execute(
            "SELECT release_id, rows, groups, verified FROM deid.anonymize_request(%s::regclass,"
            " 'condensation', k => %s, columns => %s, options => %s::jsonb, release => %s)",
            (table, k, "{" + ",".join(COLUMNS) + "}", OPTIONS, f"{table}_synth")).fetchone()
        seconds = time.perf_counter() - t
        cpu = backend_cpu_s(fresh) - cpu
        peak = backend_peak_kb(fresh)
        metrics = fresh.execute("SELECT metrics FROM deid.release WHERE release_id = %s",
                                (row[0],)).fetchone()[0]
    finally:
        fresh.close()
    return {"seconds": seconds, "cpu_s": cpu, "rows": row[1], "clusters": row[2], "verified": row[3],
            "backend_vmhwm_kb": peak, "phases": metrics.get("seconds"),
            "kernel": metrics.get("kernel_seconds"), "blocks": metrics.get("blocks")}


def plot(out, sizes):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib here: make eval-condensation draws condensation_speed.png")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(sizes, [out["sizes"][n]["min_s"] for n in sizes], "o-", label="condensation (min)")
    ax.loglog(sizes, [out["sizes"][n]["seconds"] for n in sizes], "o:", label="condensation (median)")
    ax.loglog(sizes, [out["sizes"][n]["ctas_min_s"] for n in sizes], "s-", label="CTAS (min)")
    ax.loglog(sizes, [20 * out["sizes"][n]["ctas_min_s"] for n in sizes], "--", color="grey",
              label="20 x CTAS")
    ax.set_xlabel("rows (8 attributes, k = 100)")
    ax.set_ylabel("seconds (verified, committed)")
    ax.set_title(f"growth exponent {out['growth_exponent']:.2f}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(common.RESULTS / "condensation_speed.png",
                dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,300000,1000000,3000000")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    conn = fresh_database()
    out = {"k": args.k, "columns": COLUMNS, "sizes": {}}
    for n in sizes:
        table = f"cond_{n}"
        t = time.perf_counter()
        load(conn, table, n)
        print(f"[{n:>8} rows] loaded in {time.perf_counter() - t:.1f} s", flush=True)
        ctas_cpu = []
        before = ctas(conn, table, 3, ctas_cpu)
        runs = [request(table, args.k) for _ in range(args.repeat)]
        after = ctas(conn, table, 3, ctas_cpu)
        floor = float(np.median(before + after))
        r = sorted(runs, key=lambda x: x["seconds"])[len(runs) // 2]
        best = min(x["seconds"] for x in runs)
        r.update(ctas_s=floor, ctas_min_s=min(before + after), ratio=r["seconds"] / floor,
                 min_s=best, ratio_min=best / min(before + after),
                 runs_s=[x["seconds"] for x in runs], cpu_runs_s=[x["cpu_s"] for x in runs],
                 ctas_cpu_s=float(np.median(ctas_cpu)),
                 vmhwm_kb_runs=[x["backend_vmhwm_kb"] for x in runs], load=os.getloadavg())
        out["sizes"][n] = r
        print(f"[{n:>8} rows] deid min {best:.2f} s / median {r['seconds']:.2f} s of "
              f"{len(runs)}; CTAS min {r['ctas_min_s']:.3f} s / median {floor:.3f} s; ratio "
              f"min/min {r['ratio_min']:.1f} x, median/median {r['ratio']:.1f} x; "
              f"load {r['load'][0]:.1f}; backend CPU min {min(r['cpu_runs_s']):.2f} s"
              f" (CTAS {r['ctas_cpu_s']:.2f} s)", flush=True)
        print(f"[{n:>8} rows] median run: {r['seconds']:.2f} s;"
              f" {r['clusters']} clusters in {r['blocks']} blocks; backend VmHWM"
              f" {r['backend_vmhwm_kb'] / 1024:.0f} MB; phases"
              f" {({k: round(v, 2) for k, v in (r['phases'] or {}).items()})};"
              f" kernel {r['kernel']}", flush=True)
        conn.execute(f"SELECT deid.drop_release('{table}_synth')")
    if len(sizes) >= 2:
        xs = np.log(sizes)
        ys = np.log([out["sizes"][n]["min_s"] for n in sizes])
        out["growth_exponent"] = float(np.polyfit(xs, ys, 1)[0])
        print(f"growth exponent (minima) over {sizes}: {out['growth_exponent']:.2f}")
        for a, b in zip(sizes, sizes[1:]):
            e = np.log(out["sizes"][b]["min_s"] / out["sizes"][a]["min_s"]) / np.log(b / a)
            print(f"  {a} -> {b}: {e:.2f}")
        plot(out, sizes)
    print(f"wrote {save('condensation_speed', out)}")
    conn.close()


if __name__ == "__main__":
    main()
