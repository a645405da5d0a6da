"""The cost of anatomy's (K,L) pre-check over shards (distributed/eligibility.py): 2 local
nodes of ROWS / 2 rows each (bench_distributed.py's rows and anatomy request), on one
coordinator session: the pre-check alone (deid._dist_eligible, RUN ON ALL; first and warm),
the whole distributed request (which includes it), and a CTAS of the rows of one node.

    DEID_SHARD_PORT=55412 .venv/bin/python bench/distributed/bench_eligibility.py [--rows 1000000]

Timed steps hold the benchmark lock (DEID_BENCH_LOCK). Writes bench/results/eligibility.txt."""
import argparse
import json
import os
import time

from bench_distributed import REQUESTS, RESULTS, Warehouse, bench_lock, forget_releases


def timed(c, statement, params):
    with bench_lock():
        t = time.perf_counter()
        c.execute(statement, params).fetchall()
        return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    a = ap.parse_args()
    source, method, k, l, columns, options = REQUESTS["anatomy"]
    w = Warehouse(2)
    w.start(a.rows, diagnoses=False)
    try:
        with w.connect("node0") as c:
            per_node = c.execute("SELECT count(*) FROM bench.patients").fetchone()[0]
            with bench_lock():
                t = time.perf_counter()
                c.execute("CREATE TABLE bench.ctas AS SELECT * FROM bench.patients")
                ctas = time.perf_counter() - t
            c.execute("DROP TABLE bench.ctas")
        pre = ("SELECT * FROM deid._dist_eligible('deid_shards', %s, jsonb_build_object("
               "'method', %s::text, 'k', %s::int, 'l', %s::int, 'columns', %s::text[],"
               " 'options', %s::text, 'name', %s::text))")
        args = [source, method, k, l, columns, json.dumps(options)]
        with w.connect("coord") as c:
            c.execute("SET client_min_messages = warning")
            forget_releases(w)       # every step below as on a source without earlier releases
            first = timed(c, pre, args + ["b_pre_1"])
            warm = min(timed(c, pre, args + [f"b_pre_{i}"]) for i in range(2, 5))
            forget_releases(w)
            whole = timed(c, "SELECT * FROM deid.anonymize_request(%s, %s, k => %s, l => %s,"
                             " columns => %s, options => %s, release => 'b_elig_whole')",
                          [source, method, k, l, columns, json.dumps(options)])
    finally:
        w.stop()
    text = "\n".join([
        f"anatomy (K={k}, L={l}), {a.rows} rows over 2 local nodes ({per_node} on node0);"
        " seconds, every step under the benchmark lock; load average at the end"
        f" {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        f"  pre-check, RUN ON ALL, first call of the session   {first:7.2f} s",
        f"  pre-check, RUN ON ALL, warm (best of 3)            {warm:7.2f} s",
        f"  whole distributed request (pre-check included)     {whole:7.2f} s"
        f"   pre-check share {warm / whole:.1%} (warm)",
        f"  CTAS of node0's rows                               {ctas:7.2f} s"
        f"   pre-check / CTAS {warm / ctas:.1f} x"])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "eligibility.txt").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
