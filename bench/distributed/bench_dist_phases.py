"""Where a distributed request's time goes (docs/sharding.md, "Cost model"): per phase on the
coordinator (begin, ping, cleanup, classes, store, check, views: the coordinator's log row,
metrics.seconds) and inside each node's store (read, method, write, verify: the node's part's
log row; "log+hold" is the rest of the store call), for anatomy and generalization at 1M rows
over 1 and 2 nodes, with COLD node backends (a fresh coordinator session: PL/Proxy opens new
node connections, which import PL/Python, numpy and deid inside the timed call) and WARM ones
(the same coordinator session made one request before: the same request, under another
release name), and the single-node request (deid.anonymize_request on a non-distributed
source holding the same rows: the 1-node warehouse's node) for comparison.

    DEID_SHARD_PORT=55531 .venv/bin/python bench/distributed/bench_dist_phases.py [--rows 1000000]
        [--nodes 1,2] [--methods anatomy,generalization] [--name dist_phases]

The rows, the requests and the warehouses are bench/distributed/bench_distributed.py's. Every timed call
holds the benchmark lock (DEID_BENCH_LOCK). Writes bench/results/<name>.{json,txt}.
"""
import argparse
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
import bench_distributed as bd  # noqa: E402

NODE_PHASES = ("read", "method", "write", "verify")
COORD_PHASES = ("begin", "ping", "cleanup", "classes", "store", "check", "views")


def _request(conn, method, name):
    source, meth, k, l, columns, options = bd.REQUESTS[method]
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, %s, k => %s, l => %s, columns => %s,"
        " options => %s, release => %s)",
        [source, meth, k, l, columns, json.dumps(options), name]).fetchone()


def _timed(conn, method, name):
    """The request, timed (its callers first forget the earlier releases: a first release)."""
    with bd.bench_lock():
        t = time.perf_counter()
        row = _request(conn, method, name)
        return time.perf_counter() - t, row


def _node_seconds(w, coord_release):
    """{node: its part's phase seconds} of the distributed release."""
    out = {}
    for m in w.members[1:]:
        with w.connect(m) as c:
            for (s,) in c.execute(
                    "SELECT r.metrics->'seconds' FROM deid.release r JOIN deid.distributed_part p"
                    " USING (release_id) WHERE p.coordinator_release = %s", [coord_release]):
                out[m] = s
    return out


def distributed(w, method, tag, warm):
    """One timed request; `warm`: the same session made the same request once before."""
    with w.connect("coord") as coord:
        coord.execute("SET client_min_messages = warning")
        if warm:
            bd.forget_releases(w)
            _request(coord, method, f"w_{tag}")            # the warm-up (untimed)
        bd.forget_releases(w)
        seconds, row = _timed(coord, method, f"t_{tag}")
        coord_s = coord.execute("SELECT metrics->'seconds' FROM deid.distributed_release"
                                " WHERE release_id = %s", [row[0]]).fetchone()[0]
    return {"seconds": seconds, "coordinator": coord_s, "nodes": _node_seconds(w, row[0])}


def single(w, method, tag):
    """The single-node request on the 1-node warehouse's node (its source is not distributed
    there), on a fresh session after one request of the same method (warm)."""
    with w.connect("node0") as c:
        c.execute("SET client_min_messages = warning")
        bd.reset_composition(c)
        _request(c, method, f"sw_{tag}")
        bd.reset_composition(c)
        seconds, row = _timed(c, method, f"s_{tag}")
        node_s = c.execute("SELECT metrics->'seconds' FROM deid.release WHERE release_id = %s",
                           [row[0]]).fetchone()[0]
    return {"seconds": seconds, "node": node_s}


def table(res):
    head = (f"{'method':15} {'nodes':>5} {'mode':5} {'total':>6} |"
            + "".join(f" {p[:7]:>7}" for p in COORD_PHASES)
            + " |" + "".join(f" {p[:6]:>6}" for p in NODE_PHASES) + f" {'log+hd':>6}")
    out = [head, "-" * len(head)]
    for r in res:
        if r["mode"] == "single":
            n = r["node"]
            out.append(f"{r['method']:15} {'-':>5} {'1-srv':5} {r['seconds']:6.2f} |"
                       + " " * (8 * len(COORD_PHASES)) + " |"
                       + "".join(f" {n.get(p, 0):6.2f}" for p in NODE_PHASES))
            continue
        c = r["coordinator"]
        nodes = list(r["nodes"].values())
        slow = max(nodes, key=lambda s: sum(s.get(p, 0) for p in NODE_PHASES))
        rest = c.get("store", 0) - sum(slow.get(p, 0) for p in NODE_PHASES)
        out.append(f"{r['method']:15} {r['n']:>5} {r['mode']:5} {r['seconds']:6.2f} |"
                   + "".join(f" {c.get(p, 0):7.3f}" for p in COORD_PHASES)
                   + " |" + "".join(f" {slow.get(p, 0):6.2f}" for p in NODE_PHASES)
                   + f" {rest:6.2f}")
    return "\n".join(out)


def _loaded(w, rows):
    """The warehouse runs (started now if it was stopped) and holds `rows` rows already."""
    w.sh("start")
    with w.connect("coord") as c:
        if c.execute("SELECT to_regclass('bench.loaded')").fetchone()[0] is None:
            return False
        return c.execute("SELECT rows FROM bench.loaded").fetchone()[0] == rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--nodes", default="1,2")
    ap.add_argument("--methods", default="anatomy,generalization")
    ap.add_argument("--name", default="dist_phases")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", action="store_true",
                    help="leave the warehouses running, and reuse their rows on the next run")
    a = ap.parse_args()
    res, ctas = [], None
    stamp = int(time.time()) % 100000       # release names unique over --keep runs
    for n in [int(x) for x in a.nodes.split(",")]:
        os.environ["DEID_SHARD_DIR"] = str(bd.ROOT / f".bench_shard_{n}")
        w = bd.Warehouse(n)
        if not (a.keep and _loaded(w, a.rows)):
            w.start(a.rows, diagnoses=False)
            with w.connect("coord") as c:
                c.execute("CREATE TABLE bench.loaded AS SELECT %s::bigint AS rows", [a.rows])
        try:
            if n == 1:
                ctas = bd.ctas_one(w)          # CREATE TABLE AS of all the rows, one node
            for m in a.methods.split(","):
                for i in range(a.repeat):
                    if n == 1:
                        res.append(dict(single(w, m, f"{m[:3]}{i}_{stamp}"), method=m, n=1,
                                        mode="single"))
                    for mode in ("cold", "warm"):
                        r = distributed(w, m, f"{m[:3]}{n}{mode}{i}_{stamp}", mode == "warm")
                        res.append(dict(r, method=m, n=n, mode=mode))
                        print(table(res[-1:]), flush=True)
        finally:
            if not a.keep:
                w.stop()
    bd.RESULTS.mkdir(parents=True, exist_ok=True)
    (bd.RESULTS / f"{a.name}.json").write_text(json.dumps(
        {"ctas_one": ctas, "runs": res}, indent=2) + "\n")
    text = (f"Phases of a distributed request, {a.rows:,} rows (seconds; coordinator phases,"
            " then the slowest node's store phases)\n\n" + table(res)
            + (f"\n\nCTAS of the {a.rows:,} rows on one node: {ctas:.2f} s; totals / CTAS: "
               + ", ".join(f"{r['method'][:3]} {r['n'] if r['mode'] != 'single' else '1-srv'}"
                           f" {r['mode']} {r['seconds'] / ctas:.1f}x" for r in res)
               if ctas else ""))
    (bd.RESULTS / f"{a.name}.txt").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
