"""Growth of disassociation's kernel (003 Fig. 6) without a server: seconds per phase and peak
memory at 100k .. 5M records of bench/distributed/bench_distributed.py's shape (bench.diagnoses: 1-3 draws
per patient from 18 ICD-9 codes, skewed as power(u, 1.6), repeats dropped; k = 5, m = 2,
seed 7).

    PYTHONPATH=python_udfs python bench/disassociation/bench_disassociation_scale.py [--sizes 100000,1000000]
    .venv/bin/python bench/disassociation/bench_disassociation_scale.py --server URL [--sizes 500000]

Each size runs in its own process (its peak RSS, VmHWM, is that size's alone).  Phases:
HORPART, VERPART (the record-chunk split of every cluster), refining, chunk assembly (the
shuffled record and shared chunks), the plug-in's plan (methods/disassociation/plugin.run:
everything the method does, less the phases above), and the COPY images of the four tables
(write/copybin, what the writer sends).  Writes bench/results/disassociation_scale.{json,txt}.

With ``--server URL`` (a database with deid installed) the same request runs through the
server instead: bench.dx_<n> is built with bench_distributed.py's SQL on n patients, the
request runs on a fresh session after a tiny warm-up request (PL/Python's first import is
not timed), and its log's phase seconds and the backend's VmHWM are reported beside a
CREATE TABLE AS of the same rows.  Timings are taken under the benchmark lock
(``$DEID_BENCH_LOCK``, as bench_distributed.py).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import bench_paths  # noqa: E402  (every bench folder importable; python_udfs after PYTHONPATH)
RESULTS = str(bench_paths.RESULTS)
CODES = ['401.9', '250.00', '272.4', '427.31', '428.0', '414.01', '496', '599.0', '244.9',
         '530.81', '285.9', '276.1', '403.90', '585.9', '311', '300.00', '493.90', '715.90']


def records(n, seed=0):
    """bench.diagnoses of n patients as a snapshot frame would hold it: CSR offsets, code ids
    into the sorted dictionary (sorted within a record), the dictionary, the record ids."""
    rng = np.random.default_rng(seed)
    draws = 1 + (np.arange(1, n + 1, dtype=np.int64) * 7919) % 3
    rec = np.repeat(np.arange(n, dtype=np.int64), draws)
    label = np.floor(18 * np.power(rng.integers(0, 1000, rec.size) / 1000.0, 1.6)).astype(
        np.int64)
    dictionary = sorted(CODES)
    to_sorted = np.argsort(np.argsort(CODES))
    key = np.unique(rec * 18 + to_sorted[label])
    rec, code = key // 18, key % 18
    offsets = np.r_[0, np.cumsum(np.bincount(rec, minlength=n))].astype(np.int64)
    return offsets, code, dictionary, np.arange(1, n + 1, dtype=np.int64)


def vmhwm_mb(field="VmHWM"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def one(n):
    """Run one size in this process; print a JSON line."""
    from deid.methods.disassociation import disassociate as dmod, plugin
    from deid.write import copybin
    from deid.write.writer import binary_field

    times = {}

    def timed(name, fn):
        def wrapper(*a, **kw):
            t = time.perf_counter()
            out = fn(*a, **kw)
            times[name] = times.get(name, 0.0) + time.perf_counter() - t
            return out
        return wrapper

    dmod.horpart = timed("horpart", dmod.horpart)
    dmod.verpart_groups = timed("verpart", dmod.verpart_groups)
    dmod.refine = timed("refine", dmod.refine)
    dmod._record_chunks = timed("assemble", dmod._record_chunks)
    dmod._shared_chunks = timed("assemble", dmod._shared_chunks)
    offsets, codes, dictionary, rid = records(n)
    base_mb = vmhwm_mb("VmRSS")
    try:                    # the peak from here on: the generator's own temporaries left out
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    frame = SimpleNamespace(offsets=offsets, codes=codes, dictionary=dictionary, rid=rid, n=n)
    req = SimpleNamespace(options={"m": 2, "record": "patient_id", "item": "icd9"}, k=5,
                          seed=7, name="dx")
    t0 = time.perf_counter()
    plan = plugin.run(frame, req)
    t_method = time.perf_counter() - t0
    times["plan"] = t_method - sum(times.values())
    t = time.perf_counter()
    size = 0
    for table in plan.tables:
        fields = [binary_field(c) for c in table.columns]
        if len(fields[0]) == 0:             # the writer copies nothing either
            continue
        order = copybin.field_order(fields)
        for p in copybin.parts([fields[i] for i in order]):
            size += memoryview(p).nbytes
    times["copy_image"] = time.perf_counter() - t
    print(json.dumps({"records": n, "rows": int(codes.size), "clusters": plan.groups,
                      "method_s": t_method, "phases": times, "image_mb": size / 2 ** 20,
                      "input_mb": base_mb, "peak_mb": vmhwm_mb()}))


SOURCE = """
CREATE SCHEMA IF NOT EXISTS bench;
CREATE TABLE IF NOT EXISTS bench.dx_{n} AS
SELECT p.patient_id,
       (ARRAY['401.9','250.00','272.4','427.31','428.0','414.01','496','599.0','244.9','530.81',
              '285.9','276.1','403.90','585.9','311','300.00','493.90','715.90'])
           [1 + floor(18 * power((abs(hashint4((p.patient_id * 37 + j)::int)) % 1000) / 1000.0,
                                 1.6))::int] AS icd9
  FROM generate_series(1::bigint, {n}) p(patient_id), generate_series(1, 1 + (p.patient_id * 7919) % 3) j
 GROUP BY 1, 2;
ANALYZE bench.dx_{n};
"""


def server(url, n):
    """One request of n patients through the server: seconds, phases, the backend's peak."""
    import psycopg
    from bench_distributed import bench_lock as locked     # DEID_BENCH_LOCK
    from common import reset_composition

    request = ("SELECT * FROM deid.anonymize_request(%s, 'disassociation', k => 5, options => %s,"
               " release => %s)")
    opts = json.dumps({"m": 2, "record": "patient_id", "item": "icd9", "seed": 7,
                       "replace": True})
    from psycopg import sql

    source = sql.Identifier("bench", f"dx_{int(n)}")
    ctas_table = sql.Identifier("bench", f"ctas_{os.getpid()}")
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(SOURCE.format(n=int(n)))
        c.execute(SOURCE.format(n=1000))
        rows = c.execute(sql.SQL("SELECT count(*) FROM {}").format(source)).fetchone()[0]
        c.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ctas_table))
        with locked():
            t = time.perf_counter()
            c.execute(sql.SQL("CREATE TABLE {} AS SELECT * FROM {}").format(ctas_table, source))
            ctas = time.perf_counter() - t
        c.execute(sql.SQL("DROP TABLE {}").format(ctas_table))
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SET client_min_messages = warning")
        # each request a first release of its source: the database is kept between runs, and a
        # repeated request would be a re-release that keeps the earlier run's clusters
        reset_composition(c)
        c.execute(request, ["bench.dx_1000", opts, "dx_warm"])
        pid = c.info.backend_pid
        reset_composition(c)
        with locked():
            cpu0, t = cpu_seconds(pid), time.perf_counter()
            c.execute(request, [f"bench.dx_{n}", opts, f"dx_{n}"])
            seconds, cpu = time.perf_counter() - t, cpu_seconds(pid) - cpu0
        with open(f"/proc/{pid}/status") as f:
            peak = next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
        phases = c.execute("SELECT metrics->'seconds' FROM deid.release WHERE name = %s"
                           " AND status = 'committed'", [f"dx_{n}"]).fetchone()[0]
    return {"records": n, "rows": rows, "seconds": seconds, "cpu_s": cpu, "ctas_s": ctas,
            "phases": phases, "peak_mb": peak}


def cpu_seconds(pid):
    """User + system CPU seconds of a process (less sensitive to a loaded machine)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_table(results):
    lines = ["records     rows  request s  CPU s  x CTAS   CTAS s  phases (s)  peak MB"]
    for r in results:
        p = " ".join(f"{k} {v:.2f}" for k, v in r["phases"].items())
        lines.append(f"{r['records']:>9,} {r['rows']:>9,} {r['seconds']:9.2f} {r['cpu_s']:6.2f} "
                     f"{r['seconds'] / r['ctas_s']:7.1f} {r['ctas_s']:7.2f}  {p}  "
                     f"{r['peak_mb']:.0f}")
    return "\n".join(lines)


def table(results):
    lines = ["records     rows   method s  horpart  verpart  refine  assemble  plan  "
             "copy_image  peak MB  (resident before: the records)"]
    for r in results:
        p = r["phases"]
        lines.append(f"{r['records']:>9,} {r['rows']:>9,} {r['method_s']:8.2f} "
                     f"{p.get('horpart', 0):8.2f} {p.get('verpart', 0):8.2f} "
                     f"{p.get('refine', 0):7.2f} {p.get('assemble', 0):9.2f} "
                     f"{p.get('plan', 0):5.2f} {p['copy_image']:11.2f} {r['peak_mb']:8.0f}"
                     f"  ({r['input_mb']:.0f})")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,500000,1000000,5000000")
    ap.add_argument("--one", type=int)
    ap.add_argument("--tag", default="")
    ap.add_argument("--server", help="a database URL: the request through the server")
    ap.add_argument("--udfs", default=str(bench_paths.ROOT / "python_udfs"),
                    help="the python_udfs tree to time (e.g. an older commit's, exported)")
    a = ap.parse_args()
    if a.one:
        return one(a.one)
    if a.server:
        results = [server(a.server, int(s)) for s in a.sizes.split(",")]
        return save("disassociation_server", a.tag, results, server_table(results))
    results = []
    for n in (int(s) for s in a.sizes.split(",")):
        out = subprocess.run([sys.executable, __file__, "--one", str(n)], check=True,
                             capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=a.udfs))
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(table(results[-1:]).splitlines()[-1], flush=True)
    save("disassociation_scale", a.tag, results, table(results))


def save(name, tag, results, text):
    print(text)
    os.makedirs(RESULTS, exist_ok=True)
    name += f"_{tag}" if tag else ""
    with open(os.path.join(RESULTS, name + ".json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(RESULTS, name + ".txt"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
