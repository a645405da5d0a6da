"""Disassociation (003) end to end through SQL: a long (patient_id, icd9) table generated like
003's INFORMS data (bench_disassociation_kernel.make_records: 58,302 records, 631 codes, mean
5.11, at most 43 codes), requested with deid.anonymize_request(..., 'disassociation', k => 5,
options => '{"m": 2, "record": ..., "item": ...}') -- read, method, write, verify, log, commit --
and compared with a CREATE TABLE AS copy of the source in the same run; the backend's peak
memory (VmHWM) of the requesting session.

    .venv/bin/python bench/disassociation/bench_disassociation.py [--sizes 58302,1000000] [--k 5] [--m 2]
                                                      [--repeat 3] [--out disassociation]

Every size runs --repeat requests, each after a CTAS of the same table (CTAS interleaved, one
more at the end); it prints the min and median of the requests and their ratios to the min
and median CTAS, the median run's phases, and with two sizes or more the growth exponent of
the minima (slope of log seconds over log records).  Writes bench/results/<--out>.json.
"""
import argparse
import json
import pathlib
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
import numpy as np  # noqa: E402

from bench_disassociation_kernel import make_records  # noqa: E402
from common import RESULTS, backend_peak_kb, connect, reset_composition, save, timed  # noqa: E402


def load(conn, table, n, seed=0):
    offsets, codes, names, _ = make_records(n, seed=seed)
    rid = np.repeat(np.arange(1, n + 1), np.diff(offsets))
    text = np.char.add(np.char.add(rid.astype(str), "\t"), np.asarray(names)[codes])
    conn.execute(f"DROP TABLE IF EXISTS {table}, {table}_copy")
    conn.execute(f"CREATE TABLE {table} (patient_id int NOT NULL, icd9 text NOT NULL)")
    with conn.cursor() as cur:
        with cur.copy(f"COPY {table} FROM STDIN") as cp:
            cp.write("\n".join(text.tolist()) + "\n")
    conn.execute(f"ANALYZE {table}")
    return int(codes.size)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="58302,1000000")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--m", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="disassociation")
    ap.add_argument("--plot-only", action="store_true",
                    help="draw bench/results/<--out>_speed.png from <--out>.json and stop")
    args, _ = ap.parse_known_args()        # make bench passes every script the same flags
    if args.plot_only:
        plot(json.loads((RESULTS / f"{args.out}.json").read_text()), args.out)
        return
    out = []
    admin = connect()
    admin.execute("CREATE SCHEMA IF NOT EXISTS bench")
    for n in [int(x) for x in args.sizes.split(",")]:
        table = f"bench.dx_{n}"
        rows = load(admin, table, n)
        runs, ctas = [], []
        for _ in range(args.repeat):        # CTAS and request interleaved
            ctas.append(timed(admin, f"CREATE TABLE {table}_copy AS SELECT * FROM {table}")[0])
            admin.execute(f"DROP TABLE {table}_copy")
            runs.append(request(admin, table, n, args))
        ctas.append(timed(admin, f"CREATE TABLE {table}_copy AS SELECT * FROM {table}")[0])
        admin.execute(f"DROP TABLE {table}_copy")
        rec = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
        floor, best = float(np.median(ctas)), min(r["seconds"] for r in runs)
        rec.update(records=n, occurrences=rows, k=args.k, m=args.m, ctas_seconds=floor,
                   ctas_min_s=min(ctas), ratio=rec["seconds"] / floor, min_s=best,
                   ratio_min=best / min(ctas), runs_s=[r["seconds"] for r in runs],
                   peak_mb_runs=[r["backend_peak_mb"] for r in runs])
        seconds = rec["phases"]
        print(f"{n:>9,} records ({rows:,} codes): min {best:.2f} s / median {rec['seconds']:.2f} s"
              f" of {len(runs)}; CTAS min {min(ctas):.2f} / median {floor:.2f} s; ratio min/min"
              f" {rec['ratio_min']:.1f} x, median/median {rec['ratio']:.1f} x; median run's phases "
              + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items())
              + f"; backend VmHWM {rec['backend_peak_mb']:.0f} MB (sampled VmRSS peaks after"
              f" {rec['rss_peak_at_s']:.1f} s: {rec['rss_peak_phase']}; by phase"
              f" {rec['rss_mb_by_phase']})", flush=True)
        out.append(rec)
        admin.execute(f"DROP TABLE {table}")
    if len(out) >= 2:
        xs = np.log([r["records"] for r in out])
        exp = float(np.polyfit(xs, np.log([r["min_s"] for r in out]), 1)[0])
        ctas_exp = float(np.polyfit(xs, np.log([r["ctas_min_s"] for r in out]), 1)[0])
        print(f"growth exponent (minima) {out[0]['records']:,} -> {out[-1]['records']:,}:"
              f" {exp:.2f} (CTAS {ctas_exp:.2f})")
        out = {"sizes": out, "growth_exponent": exp, "ctas_growth_exponent": ctas_exp}
        plot(out, args.out)
    save(args.out, out)


def plot(out, name):
    """Seconds against records, log-log: the requests (min and median) and CTAS, with the
    fitted growth exponent; bench/results/<name>_speed.png."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib here: no plot")
        return
    sizes = out["sizes"]
    n = [r["records"] for r in sizes]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(n, [r["min_s"] for r in sizes], "o-", label="disassociation (min)")
    ax.loglog(n, [r["seconds"] for r in sizes], "o:", label="disassociation (median)")
    ax.loglog(n, [r["ctas_min_s"] for r in sizes], "s-", label="CTAS (min)")
    ax.loglog(n, [6 * r["ctas_min_s"] for r in sizes], "--", color="grey", label="6 x CTAS")
    ax.set_xlabel(f"records (mean 5.1 codes; k = {sizes[0]['k']}, m = {sizes[0]['m']})")
    ax.set_ylabel("seconds (verified, committed)")
    ax.set_title(f"growth exponent {out['growth_exponent']:.2f}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}_speed.png", dpi=90)


def request(admin, table, n, args):
    """One request from a fresh backend (its peak memory is the request's): seconds, phases,
    peak memory; the release is dropped afterwards."""
    admin.execute(f"SELECT deid.drop_release(name) FROM deid.release WHERE name = 'bench_dx_{n}'"
                  " AND status = 'committed'")
    conn = connect()
    reset_composition(admin)              # a first release: no history to compare with
    conn.execute("SELECT deid.usage()")
    base_kb = backend_peak_kb(conn)
    sampler = RssSampler(conn.info.backend_pid)
    t = time.perf_counter()
    r = conn.execute(
        "SELECT * FROM deid.anonymize_request(%s::regclass, 'disassociation', k => %s,"
        " options => %s, release => %s)",
        [table, args.k, f'{{"m": {args.m}, "record": "patient_id", "item": "icd9", "seed": 1}}',
         f"bench_dx_{n}"]).fetchone()
    total = time.perf_counter() - t
    rss_peak_s, _ = sampler.stop()
    peak = backend_peak_kb(conn)
    seconds = admin.execute("SELECT metrics->'seconds' FROM deid.release WHERE release_id = %s",
                            [r[0]]).fetchone()[0]
    conn.close()
    admin.execute(f"SELECT deid.drop_release('bench_dx_{n}')")
    return {"seconds": total, "clusters": r[3], "phases": seconds, "backend_peak_mb": peak / 1024,
            "backend_base_mb": base_kb / 1024, "rss_peak_at_s": rss_peak_s,
            "rss_peak_phase": phase_at(seconds, rss_peak_s),
            "rss_mb_by_phase": sampler.by_phase(seconds)}


class RssSampler:
    """VmRSS of a backend every 20 ms in a thread: when (seconds after start) it peaked."""

    def __init__(self, pid):
        self.path, self.t0, self.best, self.done = f"/proc/{pid}/status", time.perf_counter(), (0.0, 0), False
        self.samples = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done:
            for line in open(self.path):
                if line.startswith("VmRSS:"):
                    kb = int(line.split()[1])
                    self.samples.append((time.perf_counter() - self.t0, kb))
                    if kb > self.best[1]:
                        self.best = (time.perf_counter() - self.t0, kb)
            time.sleep(0.02)

    def by_phase(self, seconds):
        """Peak VmRSS (MB) while each phase ran (client-side clock, so approximate)."""
        out = {}
        for at, kb in self.samples:
            name = phase_at(seconds, at)
            out[name] = max(out.get(name, 0), round(kb / 1024))
        return out

    def stop(self):
        self.done = True
        self.thread.join()
        return self.best[0], self.best[1] / 1024


def phase_at(seconds, at):
    """The pipeline phase (read, method, write, verify, log, in order) running at `at` s."""
    end = 0.0
    for name in ("read", "method", "write", "verify"):
        end += seconds.get(name, 0.0)
        if at <= end:
            return name
    return "after verify (log/commit)"


if __name__ == "__main__":
    main()
