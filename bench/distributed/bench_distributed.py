"""Releases over a sharded warehouse: every method requested on a coordinator and run on 1, 2,
4 (or 8) node clusters of this machine (scripts/shard-cluster.sh, PL/Proxy), in one run.

Per method and number of nodes:
  * seconds, cold and warm. Cold: the request on a fresh coordinator session, so every node
    backend PL/Proxy opens pays PL/Python's first import (numpy, sqlglot, deid) inside the
    timed call. Warm: the same coordinator session first makes one small distributed request
    of the same method (a tiny source of the same shape, WARM_ROWS rows a node), which imports
    everything on the same node backends; then the timed request.
  * ratios: to a CREATE TABLE AS of the same rows on one node (/CTAS1) and to a parallel CTAS
    on the nodes (/CTASn: each node copies its part, all at once).
  * peak memory of the timed request: the largest VmHWM of the node backends that served it
    (and of the coordinator's backend). Warm: every backend's high-water mark is reset to its
    current resident size after the warm-up (/proc/PID/clear_refs, "5"), so the peak is the
    timed request's; if the reset is refused the JSON says so (peak_reset: false) and the
    peak may be the warm-up's. "under 2 GB": every node's peak of both timed requests below
    2048 MB (the target at 10M rows).
  * utility against the release of the same rows on one node, computed on the coordinator's
    views (the union of the parts; a group or cluster is (node, id)), with the definitions of
    the single-node benchmarks (bench/distributed/distributed_utility.py): discernibility (all methods,
    sum |E|^2 / n) and the ARE of 001's random COUNT queries (anatomy; bench_anatomy.py's
    workload shape); loss and levels (generalization, 002); clusters and mean within-cluster
    SD of the numeric columns (condensation, the metrics its parts log); ARE (003 Def. 2) of
    random sets of 1-3 codes grown from one record, on reconstructions (disassociation). The
    workloads are seeded (--seed) and printed with the table.

The rows are a deterministic function of the patient id (hashes, no random()), so every node
generates exactly its own part (hashint4(patient_id) & (nodes - 1): PL/Proxy's partition), and
every configuration releases the same rows.

    DEID_SHARD_PORT=55412 .venv/bin/python bench/distributed/bench_distributed.py [--rows 1000000]
        [--nodes 1,2,4] [--methods anatomy,generalization,condensation,disassociation]
        [--timings cold,warm] [--repeat 1] [--queries N] [--seed 22] [--max-node-mb 6000]
        [--name NAME] [--plan]
    make bench-distributed ROWS=1000000 NODES=1,2,4        (or ROWS=10000000 NODES=2,4)

A configuration whose estimated node peak (KB_PER_ROW x rows / nodes) exceeds --max-node-mb
is skipped and listed as such (at 10M rows: condensation and disassociation on one node).
Before it starts the run prints an estimate of its wall time (the idle 1M-row times scaled
linearly), at the end the real one. Every timed step holds the benchmark lock
(DEID_BENCH_LOCK, default bench/.lock), one step at a time. Writes
bench/results/<name>.{json,txt,png}; the name defaults to distributed, or distributed_10m from
10M rows on.
"""
import argparse
import concurrent.futures as cf
import contextlib
import fcntl
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
import cpu_accounting  # noqa: E402
from common import reset_composition  # noqa: E402
from distributed_report import TARGET_MB, compare, cpu_plot, cpu_table, plot, table  # noqa: E402
from distributed_utility import Workloads  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
SCRIPT = ROOT / "scripts" / "shard-cluster.sh"
LOCK = os.environ.get("DEID_BENCH_LOCK", str(ROOT / "bench" / ".lock"))
DB = "deid_bench_dist"
WARM_ROWS = 2000             # rows a node of the warm-up's tiny sources
# the estimate's model: idle seconds at 1M rows by nodes (docs/sharding.md), a node's peak KB
# per row it holds, data generation seconds per 1M rows
IDLE_1M = {"anatomy": {1: 9.7, 2: 7.2, 4: 6.8}, "generalization": {1: 6.3, 2: 4.8, 4: 5.1},
           "condensation": {1: 53.3, 2: 18.6, 4: 14.5}, "disassociation": {1: 20.1, 2: 13.5, 4: 12.3}}
KB_PER_ROW = {"anatomy": 0.31, "generalization": 0.28, "condensation": 0.9, "disassociation": 0.85}
LOAD_PER_1M = 40.0

# the rows: every column a hash of the patient id i (skewed where the sample is)
GENERATE = """
CREATE TABLE bench.patients AS
SELECT i::bigint AS patient_id,
       (abs(hashint4(i * 3 + 1)) % 90 + abs(hashint4(i * 5 + 2)) % 10)::int AS age,
       CASE WHEN abs(hashint4(i * 7 + 3)) % 100 < 55 THEN 'F' ELSE 'M' END AS sex,
       (ARRAY['white','white','white','white','black','black','asian','other'])
           [1 + abs(hashint4(i * 11 + 4)) % 8] AS race,
       (10000 + (abs(hashint4(i * 13 + 5)) % 60) * 7)::text AS zip,
       (ARRAY['C50','C50','C50','C34','C34','C18','C61','C61','C43','C64','C67','C25','C71','C91','C56'])
           [1 + abs(hashint4(i * 17 + 6)) % 15] AS diagnosis,
       (ARRAY['surgery','surgery','chemo','chemo','radio','hormone','immuno','palliative','watch'])
           [1 + abs(hashint4(i * 19 + 7)) % 9] AS treatment,
       (ARRAY['1a','1b','1c','1mic','2a','2b','3','4'])[1 + abs(hashint4(i * 23 + 8)) % 8] AS pt,
       (abs(hashint4(i * 29 + 9)) % 100 < 30)::int AS vital,
       (1 + abs(hashint4(i * 31 + 10)) % 120)::int AS surv_months
  FROM generate_series(1, :n) i
 WHERE :part >= 0 AND (hashint4(i) & (:nodes - 1)) = :part;
ALTER TABLE bench.patients ADD PRIMARY KEY (patient_id);
ANALYZE bench.patients;
-- condensation's source: the same rows without the quasi-identifier roles, so that age stays a
-- number (a column whose role names a hierarchy is a category for condensation, 004 sec. 3.1)
CREATE TABLE bench.survival AS
SELECT patient_id, age, sex, race, pt, surv_months, vital FROM bench.patients;
ALTER TABLE bench.survival ADD PRIMARY KEY (patient_id);
ANALYZE bench.survival;
"""
DIAGNOSES = """
CREATE TABLE bench.diagnoses AS
SELECT p.patient_id,
       (ARRAY['401.9','250.00','272.4','427.31','428.0','414.01','496','599.0','244.9','530.81',
              '285.9','276.1','403.90','585.9','311','300.00','493.90','715.90'])
           [1 + floor(18 * power((abs(hashint4((p.patient_id * 37 + j)::int)) % 1000) / 1000.0, 1.6))::int] AS icd9
  FROM bench.patients p, generate_series(1, 1 + (p.patient_id * 7919) % 3) j;
DELETE FROM bench.diagnoses d USING (SELECT ctid, row_number() OVER (PARTITION BY patient_id, icd9) AS r
                                       FROM bench.diagnoses) x WHERE d.ctid = x.ctid AND x.r > 1;
ANALYZE bench.diagnoses;
"""
# the warm-up's tiny sources: the first rows of each, same shape and roles
WARM = """
CREATE TABLE bench.w_patients AS SELECT * FROM bench.patients WHERE patient_id <= :w;
CREATE TABLE bench.w_survival AS SELECT * FROM bench.survival WHERE patient_id <= :w;
ALTER TABLE bench.w_patients ADD PRIMARY KEY (patient_id);
ALTER TABLE bench.w_survival ADD PRIMARY KEY (patient_id);
"""
WARM_DIAGNOSES = "CREATE TABLE bench.w_diagnoses AS SELECT * FROM bench.diagnoses WHERE patient_id <= :w"

PT = "\n".join(f"{v};{v[0]};{'[1-2]' if v[0] in '12' else '[3-4]'};*"
               for v in ["1a", "1b", "1c", "1mic", "2a", "2b", "3", "4"])
HIERARCHIES = [
    "SELECT deid.interval_hierarchy('b_age', 0, 120, '{5,10,20}')",
    "SELECT deid.load_hierarchy('b_sex', E'F;*\\nM;*')",
    "SELECT deid.load_hierarchy('b_race', E'white;*\\nblack;*\\nasian;*\\nother;*')",
    ("SELECT deid.load_hierarchy('b_pt', %s, info_loss => '{0,0.3,0.6,1}')", [PT]),
]


def roles(patients, survival):
    """The column roles of a patients table and of condensation's survival table (without
    the hierarchies, so that age stays a number: 004 sec. 3.1)."""
    return [
        (f"SELECT deid.set_role('{patients}', c, 'quasi_identifier', 'b_' || c)"
         " FROM unnest('{age,sex,race,pt}'::text[]) c", None),
        (f"SELECT deid.set_role('{patients}', 'zip', 'quasi_identifier')", None),
        (f"SELECT deid.set_role('{patients}', c, 'sensitive')"
         " FROM unnest('{diagnosis,treatment,vital,surv_months}'::text[]) c", None),
        (f"SELECT deid.set_role('{survival}', c, 'quasi_identifier')"
         " FROM unnest('{age,sex,race,pt}'::text[]) c", None),
        (f"SELECT deid.set_role('{survival}', c, 'sensitive')"
         " FROM unnest('{surv_months,vital}'::text[]) c", None)]


REQUESTS = {
    "anatomy": ("bench.patients", "anatomy", 10, 3, "{age,sex,race,zip,diagnosis}", {"seed": 7}),
    "generalization": ("bench.patients", "generalization", 10, None, "{age,sex,race,pt,diagnosis}",
                       {"seed": 7}),
    "condensation": ("bench.survival", "condensation", 100, None,
                     "{age,sex,race,pt,surv_months,vital}",
                     {"survival": {"time": "surv_months", "status": "vital"},
                      "row_id": "patient_id", "seed": 7}),
    "disassociation": ("bench.diagnoses", "disassociation", 5, None, None,
                       {"m": 2, "record": "patient_id", "item": "icd9", "seed": 7}),
}
SOURCES = ("bench.patients", "bench.survival", "bench.diagnoses")


@contextlib.contextmanager
def bench_lock():
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class Warehouse:
    def __init__(self, nodes):
        self.nodes = nodes
        self.env = dict(os.environ, DEID_SHARD_NODES=str(nodes),
                        DEID_SHARD_DIR=os.environ.get("DEID_SHARD_DIR", str(ROOT / ".bench_shard")))
        self.members = ["coord"] + [f"node{i}" for i in range(nodes)]

    def sh(self, *args):
        return subprocess.run(["sh", str(SCRIPT), *args], env=self.env, check=True, text=True,
                              capture_output=True).stdout.strip()

    def url(self, who, db=DB):
        return self.sh("url", who, db)

    def connect(self, who):
        return psycopg.connect(self.url(who), autocommit=True)

    def start(self, rows, diagnoses=True):
        self.sh("start")
        self.sh("setup", DB)
        warm = str(min(rows, WARM_ROWS * self.nodes))

        def load(who):
            part = -1 if who == "coord" else int(who[4:])
            with self.connect(who) as c:
                c.execute("SET client_min_messages = warning")
                c.execute("CREATE SCHEMA bench")
                c.execute(GENERATE.replace(":nodes", str(int(self.nodes)))
                          .replace(":part", str(int(part))).replace(":n", str(int(rows))))
                c.execute(WARM.replace(":w", warm))
                if diagnoses:
                    c.execute(DIAGNOSES)
                    c.execute(WARM_DIAGNOSES.replace(":w", warm))
                for s in HIERARCHIES + roles("bench.patients", "bench.survival") \
                        + roles("bench.w_patients", "bench.w_survival"):
                    c.execute(*(s if isinstance(s, tuple) else (s,)))
        with cf.ThreadPoolExecutor(len(self.members)) as ex:
            list(ex.map(load, self.members))
        with self.connect("coord") as c:
            for t in SOURCES[:3 if diagnoses else 2]:
                for name in (t, t.replace("bench.", "bench.w_")):
                    c.execute("SELECT deid.register_distributed_source(%s, 'deid_shards',"
                              " 'patient_id')", [name])

    def stop(self):
        self.sh("stop")


def vmhwm_kb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None


def reset_peak(pid):
    """Reset a process's VmHWM to its current resident size (Linux >= 4.0; the caller needs
    the right to write /proc/PID/clear_refs: the same user or root)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def ctas_one(w):
    """CREATE TABLE AS of all the rows on one node (the 1-node warehouse's node)."""
    with w.connect("node0") as c:
        c.execute("DROP TABLE IF EXISTS bench.ctas")
        with bench_lock():
            t = time.perf_counter()
            c.execute("CREATE TABLE bench.ctas AS SELECT * FROM bench.patients")
            s = time.perf_counter() - t
        c.execute("DROP TABLE bench.ctas")
    return s


def ctas_parallel(w):
    """Every node copies its part at once: the wall time."""
    conns = [w.connect(m) for m in w.members[1:]]
    try:
        for c in conns:
            c.execute("DROP TABLE IF EXISTS bench.ctas")
        with bench_lock(), cf.ThreadPoolExecutor(len(conns)) as ex:
            t = time.perf_counter()
            list(ex.map(lambda c: c.execute("CREATE TABLE bench.ctas AS SELECT * FROM bench.patients"),
                        conns))
            s = time.perf_counter() - t
        for c in conns:
            c.execute("DROP TABLE bench.ctas")
    finally:
        for c in conns:
            c.close()
    return s


def request(coord, source, method, name):
    _, meth, k, l, columns, options = REQUESTS[method]
    return coord.execute(
        "SELECT * FROM deid.anonymize_request(%s, %s, k => %s, l => %s, columns => %s,"
        " options => %s, release => %s)",
        [source, meth, k, l, columns, json.dumps(options), name]).fetchone()


def node_backends(watchers):
    """{member: [pids]}: the client backends of each node but the watcher's own (those
    PL/Proxy opened for the coordinator's session)."""
    return {m: [p for (p,) in c.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND backend_type = 'client backend' AND pid <> pg_backend_pid()").fetchall()]
        for m, c in watchers.items()}


def first_release(coord, watchers):
    """Forget every earlier release on the coordinator and every node (the composition rule
    runs on each node, against that node's history of the source): each request of the run
    -- the cold one, the warm-up, the warm one, another method's on the same source -- is then
    timed as the first release of its source, not as a re-release that keeps earlier groups."""
    for c in [coord, *watchers.values()]:
        reset_composition(c)


def forget_releases(w):
    """first_release on connections of its own (the benchmarks that hold none to the nodes)."""
    conns = {m: w.connect(m) for m in w.members}
    try:
        first_release(conns["coord"], {m: c for m, c in conns.items() if m != "coord"})
    finally:
        for c in conns.values():
            c.close()


def release(w, method, name, warm):
    """One timed distributed request, a first release of its source. Cold: on a fresh
    coordinator session. Warm: after a small request of the same method on the same session,
    every backend's peak reset."""
    watchers = {m: w.connect(m) for m in w.members[1:]}
    out = {}
    try:
        with w.connect("coord") as coord:
            coord.execute("SET client_min_messages = warning")
            coord.execute("SELECT deid._dist_node_ping()")
            if warm:
                source = REQUESTS[method][0].replace("bench.", "bench.w_")
                first_release(coord, watchers)
                request(coord, source, method, name + "_warmup")
                before = node_backends(watchers)
                out["warmup_peak_kb"] = {m: max([vmhwm_kb(p) or 0 for p in ps] or [0])
                                         for m, ps in before.items()}
                pids = [coord.info.backend_pid] + [p for ps in before.values() for p in ps]
                out["peak_reset"] = all([reset_peak(p) for p in pids])
            members = {"coord": cpu_accounting.postmaster_of(coord)}
            members.update({m: cpu_accounting.postmaster_of(c) for m, c in watchers.items()})
            sampler = cpu_accounting.Sampler(
                members, DB, exclude=[c.info.backend_pid for c in watchers.values()])
            first_release(coord, watchers)
            with bench_lock():
                sampler.start()
                t, client = time.perf_counter(), time.thread_time()
                row = request(coord, REQUESTS[method][0], method, name)
                out["seconds"] = time.perf_counter() - t
                client = time.thread_time() - client
                sampler.stop()
            out["accounting"] = cpu_accounting.summary(sampler.cpu_by_member(), client,
                                                       sampler.waits, out["seconds"])
            out["accounting"]["unseen"] = {m: round(v, 3)
                                           for m, v in sampler.unseen_by_member().items()}
            memory = {"coord": vmhwm_kb(coord.info.backend_pid)}
            after = node_backends(watchers)
            for m, ps in after.items():
                memory[m] = max([vmhwm_kb(p) or 0 for p in ps] or [0])
            if warm:
                out["same_backends"] = after == before
            metrics = coord.execute("SELECT metrics FROM deid.distributed_release WHERE name = %s",
                                    [name]).fetchone()[0]
        parts = []
        for m, c in watchers.items():
            parts += [r for (r,) in c.execute(
                "SELECT metrics FROM deid.release r JOIN deid.distributed_part p USING (release_id)"
                " WHERE p.coordinator_release = %s", [row[0]]).fetchall()]
    finally:
        for c in watchers.values():
            c.close()
    out.update(rows=row[2], groups=row[3], discernibility=row[4], relations=list(row[1]),
               node_phase_seconds=[p.get("seconds") for p in parts],
               peak_kb=memory, utility=logged_utility(method, metrics, parts))
    return out


def logged_utility(method, metrics, parts):
    """What the coordinator's and the parts' logs say (loss, clusters, spread)."""
    if method == "generalization":
        g = metrics.get("generalization", {})
        return {"loss": g.get("loss"), "levels": g.get("levels"), "joint_classes": g.get("joint_classes")}
    if method == "condensation":     # the mean within-cluster SD over every node's clusters
        n = sum(p.get("clusters", 0) for p in parts) or 1
        spread = {}
        for p in parts:
            sd = p.get("cluster_sd_mean") or {
                c: float(np.nanmean(np.asarray(v, float))) for c, v in
                (p.get("per_cluster") or {}).get("sd", {}).items() if len(v)}
            for c, v in sd.items():
                spread[c] = spread.get(c, 0.0) + v * p.get("clusters", 0) / n
        return {"clusters": sum(p.get("clusters", 0) for p in parts),
                "cluster_sd_mean": {c: round(v, 4) for c, v in spread.items()}}
    if method == "disassociation":
        return {"clusters": sum(p.get("clusters", 0) for p in parts),
                "record_chunks": sum(p.get("record_chunks", 0) for p in parts),
                "shared_chunks": sum(p.get("shared_chunks", 0) for p in parts),
                "item_chunk_codes": sum(p.get("item_chunk_codes", 0) for p in parts)}
    return {"min_group": min((p.get("min_group") for p in parts if p.get("min_group")), default=None)}




def plan(methods, nodes, rows, timings, max_node_mb, queries, reconstructions, repeat=1):
    """{(method, nodes): None or the reason it is skipped} and the estimated seconds of each
    step ((method, nodes), and ("setup", nodes): starting and loading a warehouse): the
    idle 1M-row times scaled linearly, data generation, and the utility work (measured at
    100k rows: anatomy 5 ms a query per 1M rows, disassociation 1.6 ms a query and
    reconstruction or the source)."""
    skip, model = {}, {}
    scale = rows / 1e6
    for n in nodes:
        model[("setup", n)] = LOAD_PER_1M * scale + 5 + 4 * (n + 1)   # initdb/start per member
        for m in methods:
            est_mb = KB_PER_ROW[m] * rows / n / 1024
            if est_mb > max_node_mb:
                skip[(m, n)] = (f"estimated node peak {est_mb:,.0f} MB > --max-node-mb"
                                f" {max_node_mb:,} ({KB_PER_ROW[m]} KB a row)")
                continue
            skip[(m, n)] = None
            model[(m, n)] = IDLE_1M[m][min(n, 4)] * scale * (len(timings) + repeat - 1) + scale * {
                "anatomy": 0.05 * queries, "generalization": 0.5, "condensation": 20,
                "disassociation": 0.016 * queries * (reconstructions + 1)}[m]
    return skip, model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--nodes", default="1,2,4")
    ap.add_argument("--methods", default=",".join(REQUESTS))
    ap.add_argument("--timings", default=None,
                    help="cold,warm (default; warm alone above 2M rows, where the imports'"
                         " 1-2 s are noise and cold would add a third to the run)")
    ap.add_argument("--queries", type=int, default=None,
                    help="ARE workload size (default 1000, 300 above 2M rows)")
    ap.add_argument("--reconstructions", type=int, default=None,
                    help="disassociation's reconstructions (default 3, 1 above 2M rows)")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--repeat", type=int, default=1,
                    help="timed warm requests per method and node count for the CPU accounting"
                         " (each after its own warm-up; the least total CPU is reported: a loaded"
                         " machine only adds CPU, by contention); the utility is measured once")
    ap.add_argument("--max-node-mb", type=int, default=6000)
    ap.add_argument("--name", default=None)
    ap.add_argument("--render", action="store_true",
                    help="rewrite bench/results/<name>.{txt,png} and the CPU plot from its JSON;"
                         " run nothing")
    ap.add_argument("--floor", default=None,
                    help="with --render: the name of a run on a source of next to no rows whose"
                         " nodes' CPU is the floor of the model's fixed share of a node (b)")
    ap.add_argument("--plan", action="store_true",
                    help="print the configurations, the skipped ones and the estimate; run nothing")
    a = ap.parse_args()
    big = a.rows > 2_000_000
    name = a.name or ("distributed_10m" if a.rows >= 10_000_000 else "distributed")
    if a.render:
        return render(name, a.floor)
    methods = a.methods.split(",")
    timings = (a.timings or ("warm" if big else "cold,warm")).split(",")
    nodes = [int(x) for x in a.nodes.split(",")]
    work = Workloads(a.queries or (300 if big else 1000), a.seed,
                     a.reconstructions or (1 if big else 3))
    skip, model = plan(methods, nodes, a.rows, timings, a.max_node_mb, work.n_queries,
                       work.reconstructions, a.repeat)
    estimate = sum(model.values()) / 60
    results = {"rows": a.rows, "cores": os.cpu_count(), "nodes": nodes, "timings": timings,
               "repeat": a.repeat,
               "load_before": [round(x, 2) for x in os.getloadavg()],
               "shared_buffers": os.environ.get("DEID_SHARD_SHARED_BUFFERS", "128MB"),
               "workloads": work.describe(), "estimate_min": estimate,
               "methods": {m: {} for m in methods}, "ctas_nodes": {}, "ctas_one": None}
    print(f"{name}: {a.rows:,} rows, nodes {nodes}, {methods}, {timings};"
          f" estimated wall time {estimate:.0f} min on an idle machine", flush=True)
    for (m, n), why in skip.items():
        if why:
            print(f"  skipped: {m} on {n} node(s): {why}", flush=True)
    if a.plan:
        for step, seconds in model.items():
            print(f"  {step[0]:15} {step[1]} node(s): about {seconds / 60:.1f} min", flush=True)
        return
    started = time.perf_counter()
    raw, done = {}, [0.0]

    def progress(step):
        """After each step: the elapsed time, and the rest of the model scaled by how this
        machine has kept to the model so far."""
        done[0] += model[step]
        elapsed = time.perf_counter() - started
        rest = (sum(model.values()) - done[0]) * elapsed / done[0]
        print(f"  [{elapsed / 60:.1f} min elapsed, about {rest / 60:.0f} min to go]", flush=True)
    for n in nodes:
        w = Warehouse(n)
        w.start(a.rows, diagnoses="disassociation" in methods)
        progress(("setup", n))
        try:
            if n == 1:
                results["ctas_one"] = ctas_one(w)
            results["ctas_nodes"][n] = ctas_parallel(w)
            for m in methods:
                if skip[(m, n)]:
                    raw[(m, n)] = {"skipped": skip[(m, n)]}
                    continue
                r = raw[(m, n)] = {}
                try:
                    for timing in timings:
                        r[timing] = release(w, m, f"b_{m[:3]}_{n}_{timing}", timing == "warm")
                        print(m, n, timing, round(r[timing]["seconds"], 2), flush=True)
                    for i in range(1, a.repeat):
                        again = release(w, m, f"b_{m[:3]}_{n}_r{i}", True)["accounting"]
                        r.setdefault("repeats", []).append(again)
                        print(m, n, f"repeat {i}", again["cpu_total"], "CPU s", flush=True)
                except psycopg.Error as e:      # a refusal is a result: listed, the run goes on
                    raw[(m, n)] = {"skipped": f"refused by the server: {e.sqlstate}"
                                              f" {e.diag.message_primary}"}
                    print(m, n, raw[(m, n)]["skipped"], flush=True)
                    write(name, results, raw)
                    progress((m, n))
                    continue
                t = time.perf_counter()
                r["utility"] = dict(r[timings[-1]]["utility"], **work.measure(
                    w.connect, w.members[1:], m, r[timings[-1]]["relations"], REQUESTS[m][2]))
                r["utility_seconds"] = round(time.perf_counter() - t, 1)
                results["wall_min"] = (time.perf_counter() - started) / 60
                write(name, results, raw)       # what is measured so far, after every step
                progress((m, n))
        finally:
            w.stop()


def least(runs):
    """Of a configuration's runs: the total CPU of the run of least total CPU, and the slowest
    node, coordinator, waits and projection of the run of least projected wall time (each its
    own run's: contention on a shared machine only ever adds CPU, and other jobs' disk traffic
    only adds waits)."""
    cpu = min(runs, key=lambda x: x["cpu_total"])
    out = dict(min(runs, key=lambda x: x["projected_wall"]), runs=len(runs),
               cpu_total_runs=[x["cpu_total"] for x in runs],
               projected_runs=[x["projected_wall"] for x in runs])
    out.update(cpu=cpu["cpu"], client_cpu=cpu["client_cpu"], cpu_total=cpu["cpu_total"])
    return out


def cpu_model(results, floor=None):
    """Per method: the CPU accounting of each node count's last timing (of its --repeat runs,
    the least: least()), its ratios to the
    1-node release (total CPU; projected wall time over the 1-node release's projected wall
    time -- on an idle machine the 1-node wall time, which a loaded machine inflates -- and over
    its measured wall time), and the cost
    model fitted to them with its projections at 16 and 64 nodes."""
    out = {}
    for m, by_nodes in results["methods"].items():
        runs = {int(n): [a for a in [(r.get("warm") or r.get("cold") or {}).get("accounting"),
                                     *r.get("repeats", [])] if a]
                for n, r in by_nodes.items() if not r.get("skipped")}
        acc = {n: least(a) for n, a in runs.items() if a}
        if not acc:
            continue
        one = acc.get(1)
        rows = {n: dict(a, cpu_ratio=round(a["cpu_total"] / one["cpu_total"], 3) if one else None,
                        projected_ratio=round(a["projected_wall"] / one["projected_wall"], 3)
                        if one else None,
                        projected_over_wall=round(a["projected_wall"] / one["wall"], 3) if one else None)
                for n, a in sorted(acc.items())}
        out[m] = {"nodes": rows}
        fixed = node_fixed(floor, m)
        if len(acc) >= 2:
            coef, project = cpu_accounting.fit(sorted(acc.items()), fixed)
            out[m]["node_fixed_from"] = (floor["name"] if fixed is not None
                                         and coef["node_fixed"] == fixed else "fit")
            out[m]["model"] = {k: round(v, 4) for k, v in coef.items()}
            out[m]["projected"] = {n: round(project(n), 2) for n in (1, 2, 4, 16, 64)}
    return out


def node_fixed(floor, method):
    """The floor of a node's fixed CPU share b in the cost model: the median over the node
    counts of the slowest node's CPU in a run on a source of next to no rows (--floor), or
    None."""
    if not floor or method not in floor.get("cpu_model", {}):
        return None
    return float(np.median([a["cpu_slowest_node"]
                            for a in floor["cpu_model"][method]["nodes"].values()]))


def render(name, floor_name=None):
    """The table, the plots and the cost model again from a run's JSON (a change of the
    report or of the model's form needs no new run)."""
    results = json.loads((RESULTS / f"{name}.json").read_text())
    floor = None
    if floor_name:
        floor = dict(json.loads((RESULTS / f"{floor_name}.json").read_text()), name=floor_name)
        results["floor"] = floor_name
    elif results.get("floor"):
        floor = dict(json.loads((RESULTS / f"{results['floor']}.json").read_text()),
                     name=results["floor"])
    results["cpu_model"] = cpu_model(results, floor)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (RESULTS / f"{name}.txt").write_text(table(results) + "\n\n" + cpu_table(results) + "\n")
    plot(results, RESULTS / f"{name}.png")
    cpu_plot(results, RESULTS / f"{name}_cpu.png")
    print(cpu_table(results))


def write(name, results, raw):
    one, mb = results["ctas_one"], lambda kb: kb / 1024
    for (m, n), r in raw.items():
        if r.get("skipped"):
            results["methods"][m][n] = r
            continue
        last = r.get("warm") or r["cold"]
        base = raw.get((m, 1), {}).get("utility")
        peaks = {t: max(v for k, v in r[t]["peak_kb"].items() if k != "coord")
                 for t in ("cold", "warm") if t in r}
        results["methods"][m][n] = dict(
            {t: r[t] for t in ("cold", "warm") if t in r},
            rows=last["rows"], groups=last["groups"], discernibility=last["discernibility"],
            ratio_ctas_one=last["seconds"] / one if one else float("nan"),
            ratio_ctas_one_cold=r["cold"]["seconds"] / one if one and "cold" in r else float("nan"),
            ratio_ctas_nodes=last["seconds"] / results["ctas_nodes"][n],
            peak_cold_mb=mb(peaks["cold"]) if "cold" in peaks else None,
            peak_warm_mb=mb(peaks["warm"]) if "warm" in peaks else None,
            under_2gb=all(mb(p) < TARGET_MB for p in peaks.values()),
            repeats=r.get("repeats", []),
            utility=r["utility"], utility_seconds=r["utility_seconds"],
            utility_vs_one=compare(dict(r["utility"], discernibility=last["discernibility"]),
                                   dict(base, discernibility=raw[(m, 1)][
                                       "warm" if "warm" in raw[(m, 1)] else "cold"]["discernibility"]))
            if base else {})
    results["cpu_model"] = cpu_model(results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    text = table(results) + "\n\n" + cpu_table(results)
    (RESULTS / f"{name}.txt").write_text(text + "\n")
    plot(results, RESULTS / f"{name}.png")
    cpu_plot(results, RESULTS / f"{name}_cpu.png")
    print(text, flush=True)


if __name__ == "__main__":
    main()
