"""Releases over a sharded warehouse (issue 22): every method requested on a coordinator and
run on 1, 2 and 4 node clusters of this machine (scripts/shard-cluster.sh, PL/Proxy), in one
run. Per method and number of nodes: seconds; the ratio to a CREATE TABLE AS of the same rows
on one node and to a parallel CTAS on the nodes (each node copies its part, all at once); each
node's peak memory (the VmHWM of the node backends that served the request, and of the
coordinator's backend); and the utility against the release of the same rows on one node
(discernibility for anatomy, condensation and disassociation, loss and discernibility for
generalization, condensation's within-cluster spread, disassociation's record chunks and
codes left in item chunks).

The rows are a deterministic function of the patient id (hashes, no random()), so every node
generates exactly its own part (hashint4(patient_id) & (nodes - 1): PL/Proxy's partition), and
every configuration releases the same rows.

    DEID_SHARD_PORT=55412 .venv/bin/python bench/bench_distributed.py [--rows 1000000]
        [--nodes 1,2,4] [--methods anatomy,generalization,condensation,disassociation]
        [--name distributed]

Every timed step holds the benchmark lock (DEID_BENCH_LOCK, default bench/.lock), one step at
a time, so that timed runs on a shared machine do not overlap. Writes bench/results/<name>.{json,txt,png}.
"""
import argparse
import concurrent.futures as cf
import contextlib
import fcntl
import json
import os
import pathlib
import subprocess
import time

import psycopg
from psycopg import sql

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SCRIPT = ROOT / "scripts" / "shard-cluster.sh"
LOCK = os.environ.get("DEID_BENCH_LOCK", str(ROOT / "bench" / ".lock"))
DB = "deid_bench_dist"

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

PT = "\n".join(f"{v};{v[0]};{'[1-2]' if v[0] in '12' else '[3-4]'};*"
               for v in ["1a", "1b", "1c", "1mic", "2a", "2b", "3", "4"])
CATALOG = [
    "SELECT deid.interval_hierarchy('b_age', 0, 120, '{5,10,20}')",
    "SELECT deid.load_hierarchy('b_sex', E'F;*\\nM;*')",
    "SELECT deid.load_hierarchy('b_race', E'white;*\\nblack;*\\nasian;*\\nother;*')",
    ("SELECT deid.load_hierarchy('b_pt', %s, info_loss => '{0,0.3,0.6,1}')", [PT]),
    "SELECT deid.set_role('bench.patients', 'age', 'quasi_identifier', 'b_age')",
    "SELECT deid.set_role('bench.patients', 'sex', 'quasi_identifier', 'b_sex')",
    "SELECT deid.set_role('bench.patients', 'race', 'quasi_identifier', 'b_race')",
    "SELECT deid.set_role('bench.patients', 'pt', 'quasi_identifier', 'b_pt')",
    "SELECT deid.set_role('bench.patients', 'zip', 'quasi_identifier')",
    "SELECT deid.set_role('bench.patients', c, 'sensitive')"
    " FROM unnest('{diagnosis,treatment,vital,surv_months}'::text[]) c",
]
CATALOG += [
    "SELECT deid.set_role('bench.survival', c, 'quasi_identifier')"
    " FROM unnest('{age,sex,race,pt}'::text[]) c",
    "SELECT deid.set_role('bench.survival', c, 'sensitive')"
    " FROM unnest('{surv_months,vital}'::text[]) c",
]
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

        def load(who):
            part = -1 if who == "coord" else int(who[4:])
            with self.connect(who) as c:
                c.execute("SET client_min_messages = warning")
                c.execute("CREATE SCHEMA bench")
                c.execute(GENERATE.replace(":nodes", str(int(self.nodes)))
                          .replace(":part", str(int(part))).replace(":n", str(int(rows))))
                if diagnoses:
                    c.execute(DIAGNOSES)
                for s in CATALOG:
                    c.execute(*(s if isinstance(s, tuple) else (s,)))
        with cf.ThreadPoolExecutor(len(self.members)) as ex:
            list(ex.map(load, self.members))
        with self.connect("coord") as c:
            for t in ("bench.patients", "bench.survival") + (("bench.diagnoses",) if diagnoses else ()):
                c.execute("SELECT deid.register_distributed_source(%s, 'deid_shards', 'patient_id')", [t])

    def stop(self):
        self.sh("stop")


def vmhwm_kb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None


def ctas_one(w, timeout=None):
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


def release(w, method, name):
    """One distributed request on a fresh coordinator session (fresh node backends: the peak
    memory is this request's). Returns seconds, the result row, memory and metrics."""
    source, meth, k, l, columns, options = REQUESTS[method]
    watchers = {m: w.connect(m) for m in w.members[1:]}
    with w.connect("coord") as coord:
        coord.execute("SET client_min_messages = warning")
        coord.execute("SELECT deid._dist_node_ping()")
        with bench_lock():
            t = time.perf_counter()
            row = coord.execute(
                "SELECT * FROM deid.anonymize_request(%s, %s, k => %s, l => %s, columns => %s,"
                " options => %s, release => %s)",
                [source, meth, k, l, columns, json.dumps(options), name]).fetchone()
            seconds = time.perf_counter() - t
        memory = {"coord": vmhwm_kb(coord.info.backend_pid)}
        for m, c in watchers.items():      # the node backends PL/Proxy opened for this session
            pids = [p for (p,) in c.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND backend_type = 'client backend' AND pid <> pg_backend_pid()").fetchall()]
            memory[m] = max([vmhwm_kb(p) or 0 for p in pids] or [0])
        metrics = coord.execute("SELECT metrics FROM deid.distributed_release WHERE name = %s",
                                [name]).fetchone()[0]
    parts = []
    for m, c in watchers.items():
        parts += [r for (r,) in c.execute(
            "SELECT metrics FROM deid.release r JOIN deid.distributed_part p USING (release_id)"
            " WHERE p.coordinator_release = %s", [row[0]]).fetchall()]
        c.close()
    return {"seconds": seconds, "rows": row[2], "groups": row[3], "discernibility": row[4],
            "peak_kb": memory, "utility": utility(method, metrics, parts)}


def utility(method, metrics, parts):
    if method == "generalization":
        g = metrics.get("generalization", {})
        return {"loss": g.get("loss"), "levels": g.get("levels"), "joint_classes": g.get("joint_classes")}
    if method == "condensation":
        n = sum(p["rows"] for p in parts)
        spread = {}
        for p in parts:
            for c, v in (p.get("cluster_sd_mean") or {}).items():
                spread[c] = spread.get(c, 0.0) + v * p["rows"] / n
        return {"clusters": sum(p.get("clusters", 0) for p in parts),
                "cluster_sd_mean": {c: round(v, 4) for c, v in spread.items()}}
    if method == "disassociation":
        return {"clusters": sum(p.get("clusters", 0) for p in parts),
                "record_chunks": sum(p.get("record_chunks", 0) for p in parts),
                "shared_chunks": sum(p.get("shared_chunks", 0) for p in parts),
                "item_chunk_codes": sum(p.get("item_chunk_codes", 0) for p in parts)}
    return {"min_group": min((p.get("min_group") for p in parts if p.get("min_group")), default=None)}


def table(results, rows):
    out = [f"Distributed releases, {rows:,} rows ({os.cpu_count()} cores; seconds, ratios to a"
           " CTAS of the same rows on one node and to a parallel CTAS on the nodes;",
           "peak = the largest VmHWM of a node's backends (MB); utility vs the 1-node release)", ""]
    head = f"{'method':15} {'nodes':>5} {'seconds':>8} {'/CTAS1':>7} {'/CTASn':>7} {'peak MB':>8}" \
           f" {'groups':>9} {'discern.':>10}  utility"
    out += [head, "-" * len(head)]
    for method, by_nodes in results["methods"].items():
        for n, r in sorted(by_nodes.items()):
            out.append(f"{method:15} {n:>5} {r['seconds']:8.2f} {r['ratio_ctas_one']:7.2f}"
                       f" {r['ratio_ctas_nodes']:7.2f} {r['peak_node_mb']:8.0f} {r['groups']:9d}"
                       f" {r['discernibility']:10.1f}  {json.dumps(r['utility_vs_one'])}")
    out += ["", "CTAS: " + ", ".join(f"{n} node(s) {s:.2f} s" for n, s in results["ctas_nodes"].items())
            + (f"; one node, all rows: {results['ctas_one']:.2f} s" if results["ctas_one"] else "")]
    return "\n".join(out)


def compare(u, base):
    """The utility of an n-node release against the 1-node release's (ratios of the numbers)."""
    out = {}
    for key, v in u.items():
        b = base.get(key)
        if key == "levels":
            out[key] = v
        elif isinstance(v, (int, float)) and isinstance(b, (int, float)) and b:
            out[key] = round(v / b, 3)
        elif isinstance(v, dict) and isinstance(b, dict):
            out[key] = {c: round(x / b[c], 3) for c, x in v.items()
                        if isinstance(x, (int, float)) and b.get(c)}
        else:
            out[key] = v
    return out


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for method, by_nodes in results["methods"].items():
        ns = [int(n) for n in by_nodes]
        ax[0].plot(ns, [by_nodes[n]["ratio_ctas_one"] for n in by_nodes], marker="o", label=method)
        ax[1].plot(ns, [by_nodes[n]["peak_node_mb"] for n in by_nodes], marker="o", label=method)
    ax[0].axhline(5, color="grey", ls="--", lw=0.8)
    ax[0].set(xlabel="nodes", ylabel="seconds / CTAS on one node", xticks=[1, 2, 4],
              title=f"{results['rows']:,} rows")
    ax[1].set(xlabel="nodes", ylabel="peak MB of a node backend", xticks=[1, 2, 4])
    ax[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--nodes", default="1,2,4")
    ap.add_argument("--methods", default=",".join(REQUESTS))
    ap.add_argument("--name", default="distributed")
    a = ap.parse_args()
    methods = a.methods.split(",")
    results = {"rows": a.rows, "cores": os.cpu_count(), "methods": {m: {} for m in methods},
               "ctas_nodes": {}, "ctas_one": None}
    raw = {}
    for n in [int(x) for x in a.nodes.split(",")]:
        w = Warehouse(n)
        w.start(a.rows, diagnoses="disassociation" in methods)
        try:
            if n == 1:
                results["ctas_one"] = ctas_one(w)
            results["ctas_nodes"][n] = ctas_parallel(w)
            for m in methods:
                raw[(m, n)] = release(w, m, f"b_{m[:3]}_{n}")
                print(m, n, round(raw[(m, n)]["seconds"], 2), flush=True)
                write(a, results, raw)       # what is measured so far, after every step
        finally:
            w.stop()


def write(a, results, raw):
    one = results["ctas_one"]
    for (m, n), r in raw.items():
        base = raw.get((m, 1), r)["utility"]
        results["methods"][m][n] = dict(
            r, ratio_ctas_one=r["seconds"] / one if one else float("nan"),
            ratio_ctas_nodes=r["seconds"] / results["ctas_nodes"][n],
            peak_node_mb=max(v for k, v in r["peak_kb"].items() if k != "coord") / 1024,
            utility_vs_one=compare(r["utility"], base))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{a.name}.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    text = table(results, a.rows)
    (RESULTS / f"{a.name}.txt").write_text(text + "\n")
    plot(results, RESULTS / f"{a.name}.png")
    print(text, flush=True)

if __name__ == "__main__":
    main()
