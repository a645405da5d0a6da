"""Data-path benchmark (the floor under every method): 1M rows x 5 integer columns.

Measures, in the same run and on the same table:
  floor  : CREATE TABLE AS SELECT id, c1..c5 (one read + one write)
  deid   : read the 5 columns + row id into numpy, write (row id, group id) back
Prints the ratio deid / floor (the target: <= 1.5).
"""
import argparse
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
from common import backend_peak_kb, connect, save, timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    conn = connect()
    conn.execute("CREATE EXTENSION IF NOT EXISTS deid CASCADE")
    conn.execute("DROP TABLE IF EXISTS bench_dp")
    conn.execute("SELECT setseed(0.5)")
    conn.execute(f"""CREATE TABLE bench_dp AS SELECT i::bigint AS id,
        (random()*100)::int AS c1, (random()*1000)::int AS c2, (random()*50)::int AS c3,
        (random()*100000)::int AS c4, (random()*7)::int AS c5
        FROM generate_series(1, {args.rows}) i""")
    conn.execute("ALTER TABLE bench_dp ADD PRIMARY KEY (id)")
    conn.execute("VACUUM ANALYZE bench_dp")
    floors, deids, reads, writes = [], [], [], []
    for _ in range(args.repeat):
        conn.execute("DROP TABLE IF EXISTS bench_dp_copy")
        t, _ = timed(conn, "CREATE TABLE bench_dp_copy AS SELECT id, c1, c2, c3, c4, c5 FROM bench_dp")
        floors.append(t)
        t, rows = timed(conn, "SELECT deid._datapath_probe('bench_dp'::regclass, '{c1,c2,c3,c4,c5}')")
        deids.append(t)
        reads.append(rows[0][0]["read_s"])
        writes.append(rows[0][0]["write_s"])
    floor, deid = statistics.median(floors), statistics.median(deids)
    result = {"rows": args.rows, "ctas_s": floor, "deid_s": deid, "read_s": statistics.median(reads),
              "write_s": statistics.median(writes), "ratio": deid / floor,
              "backend_vmhwm_kb": backend_peak_kb(conn), "runs": {"ctas": floors, "deid": deids}}
    conn.execute("DROP TABLE IF EXISTS bench_dp_copy")
    save("datapath", result)
    print(f"datapath: {args.rows} rows x 5 int columns: CTAS {floor:.3f} s, deid read+write "
          f"{deid:.3f} s (read {result['read_s']:.3f} s, write {result['write_s']:.3f} s) "
          f"-> ratio {result['ratio']:.2f} x CTAS (target <= 1.5); "
          f"backend VmHWM {result['backend_vmhwm_kb'] / 1024:.0f} MB")


if __name__ == "__main__":
    main()
