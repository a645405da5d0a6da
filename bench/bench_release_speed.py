"""Release speed only: anatomy and generalization at 1M rows against CTAS, in one run.

    .venv/bin/python bench/bench_release_speed.py [--rows N] [--repeat R] [--label TEXT]

The speed sections of bench_anatomy.py (c., 1M rows, 4 QIs + 3 sensitive, K=50, L=10) and
bench_generalization.py (1M rows, 6 QIs, 2 sources, k=10, greedy), without the utility
sweeps and the peers, so that a change can be measured before and after in minutes. It reuses
those scripts' generators, loaders and timers. Appends one JSON line per run to
bench/results/release_speed.jsonl (label, git head, ratios, phase seconds).
"""
import argparse
import json
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_anatomy as ba  # noqa: E402
import bench_generalization as bg  # noqa: E402
from common import RESULTS, ROOT  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    t0 = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t0:6.0f} s] {msg}", flush=True)

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    conn = ba.fresh_database()
    one = ba.speed_1m(conn, args.rows, args.repeat)
    conn.close()
    r = one["request"]
    log(f"anatomy {args.rows} rows K=50 L=10: CTAS {one['ctas_s']:.2f} s, deid {r['seconds']:.2f} s"
        f" (runs {', '.join(f'{x:.2f}' for x in r['runs_s'])}) = {one.get('ratio', float('nan')):.2f} x CTAS;"
        f" phases {json.dumps({k: round(v, 2) for k, v in r.get('phase_seconds', {}).items()})}")
    conn, _ = bg.fresh_database(args.rows, 7, log)
    timing = bg.bench_timing(conn, bg.Requests(conn), [10], args.repeat, log)
    conn.close()
    g = timing[10]["greedy"]
    log(f"generalization {args.rows} rows k=10 greedy: CTAS {g['ctas_s']:.2f} s, deid"
        f" {g['end_to_end_s']:.2f} s = {g['end_to_end_over_ctas']:.2f} x CTAS")
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "release_speed.jsonl", "a") as f:
        f.write(json.dumps({"label": args.label, "git": head, "rows": args.rows,
                            "anatomy": {"ctas_s": one["ctas_s"], "seconds": r["seconds"],
                                        "runs_s": r["runs_s"], "ratio": one.get("ratio"),
                                        "phases": r.get("phase_seconds")},
                            "generalization": {"ctas_s": g["ctas_s"], "seconds": g["end_to_end_s"],
                                               "ratio": g["end_to_end_over_ctas"],
                                               "runs": g["runs"]}}, default=float) + "\n")


if __name__ == "__main__":
    main()
