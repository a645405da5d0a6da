"""Interleaved A/B of the server's Python at two git revisions (the catalog stays the installed
one): anatomy and generalization at 1M rows on the databases bench_release_speed.py leaves, and
the two generalization shapes of bench_generalization_shapes.py (its databases).

    .venv/bin/python bench/release/ab_release_speed.py --a 5c1b808 [--b WORKTREE] [--repeat 3]
                                               [--cases anatomy,generalization,benchmark,twins]

Before each request the installed Python package (the one the functions import:
$(pg_config --sharedir)/deid/python-<default_version>/deid) is replaced by revision A's or B's
(git archive; B defaults to the working tree), so A and B alternate in one run under the same
load; each request runs in a fresh backend. The cases `benchmark` and `twins` first warm that
backend with a request on the shape's 5,000-row table (as bench_generalization_shapes.py) and
time a CTAS of the same rows before each request (ratios to CTAS are then of the same moment).
Prints per side min and median seconds and the median phase breakdown, and the ratios B/A.
Each request's CPU seconds too (phase "cpu"): utime + stime of its backend plus what the
postmaster reaped from its children meanwhile (the request's parallel workers; on a cluster of
one's own with autovacuum off -- its workers are children too -- nothing else) -- on a shared
machine these move far less than wall seconds.
Leaves B installed. For a noisy machine: the CPU, the phases and the ratios are what to compare.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
import bench_anatomy as ba  # noqa: E402
import bench_generalization as bg  # noqa: E402
import bench_generalization_shapes as shapes  # noqa: E402
from common import ROOT, backend_cpu_s, reset_composition, url  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def reaped_cpu_s(conn):
    """cutime + cstime of the postmaster of `conn`'s backend (its parent): the CPU of its
    children that ended (a request's parallel workers), in seconds."""
    rest = _stat(int(_stat(conn.info.backend_pid)[1]))
    return (int(rest[13]) + int(rest[14])) / TICK


class cpu_of:
    """Context manager: .seconds = the CPU of `conn`'s backend and of the children the
    postmaster reaped while the block ran."""

    def __init__(self, conn):
        self.conn = conn

    def __enter__(self):
        self.start = backend_cpu_s(self.conn) + reaped_cpu_s(self.conn)
        return self

    def __exit__(self, *exc):
        self.seconds = backend_cpu_s(self.conn) + reaped_cpu_s(self.conn) - self.start
        return False


def installed_dir():
    """The package directory the installed functions import (#@BOOT: python-<version>)."""
    share = pathlib.Path(subprocess.run([os.environ.get("PG_CONFIG", "pg_config"), "--sharedir"],
                                        capture_output=True, text=True, check=True).stdout.strip())
    control = (share / "extension" / "deid.control").read_text()
    version = re.search(r"default_version\s*=\s*'([^']+)'", control).group(1)
    home = share / "deid" / f"python-{version}"
    # the build the functions import (extension/build_sql.py: builds/<id>, linked as current)
    path = (home / "current" / "deid") if (home / "current").exists() else home / "deid"
    if not (path / "pg.py").is_file():
        raise SystemExit(f"no installed deid package at {path}")
    return path


def package(rev, into):
    """The python_udfs/deid package of `rev` (a git revision, or None: the working tree)."""
    into.mkdir(parents=True)
    if rev is None:
        shutil.copytree(ROOT / "python_udfs" / "deid", into / "deid")
    else:
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "python_udfs/deid"],
                             capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
        (into / "python_udfs" / "deid").rename(into / "deid")
    return into / "deid"


def install(src, dst, compile=True):
    """As `make install`: the package, its bytecode (checked-hash) unless compile is False
    (an install as before 2ad54b1, which shipped none: every fresh backend compiled)."""
    shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    if compile:
        subprocess.run([os.environ.get("SERVER_PYTHON", "/usr/bin/python3"), "-m", "compileall", "-q",
                        "--invalidation-mode", "checked-hash", str(dst)], check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run(["chmod", "-R", "a+rX", str(dst)], check=True)


def anatomy():
    conn = psycopg.connect(url(ba.DB), autocommit=True)
    try:
        reset_composition(conn)
        with cpu_of(conn) as cpu:
            r = ba.request(conn, "patients_1m", 50, 10, ba.QIS + ba.SAS[:3], "ab_anatomy")
    finally:
        conn.close()
    return r["seconds"], dict(r["phase_seconds"], cpu=cpu.seconds)


def generalization():
    conn = psycopg.connect(url(bg.DB), autocommit=True)
    try:
        reset_composition(conn)
        with cpu_of(conn) as cpu:
            t, m, _ = bg.Requests(conn).run("bench_gen", 10, "greedy", bg.REFERENCE)
    finally:
        conn.close()
    return t, dict(m["seconds"], cpu=cpu.seconds)


def shape(name):
    def run():
        c = shapes.session(name, 10)           # a fresh backend, warmed by a small request
        try:
            reset_composition(c)
            with cpu_of(c) as cpu:             # the request alone (the CTAS's backend, once
                t, rid, _ = shapes.request(c, "bench_gen", 10, "shape_ab")  # reaped, is not)
            phases = c.execute("SELECT metrics->'seconds' FROM deid.release WHERE release_id = %s",
                               [rid]).fetchone()[0]
            c.execute("SELECT deid.drop_release('shape_ab')")
            with shapes.connect(shapes.database(name)) as cc:   # after it: same moment, not counted
                cc.execute("SET client_min_messages = warning")
                ctas = bg.ctas(cc)
        finally:
            c.close()
        return t, dict(phases, ctas=ctas, cpu=cpu.seconds)
    return run


CASES = {"anatomy": anatomy, "generalization": generalization,
         "benchmark": shape("benchmark"), "twins": shape("twins")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="git revision A (e.g. 5c1b808)")
    ap.add_argument("--b", default=None, help="git revision B (default: the working tree)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="anatomy,generalization",
                    help="of " + ",".join(CASES) + " (benchmark, twins: bench_generalization_shapes.py's"
                         " databases, warmed backend, with a CTAS per request)")
    ap.add_argument("--compile", default="AB",
                    help="the sides installed with bytecode as `make install` does (default AB;"
                         " e.g. B: A installed as before 2ad54b1, without bytecode)")
    args = ap.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    dst = installed_dir()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="deid_ab_"))
    sides = {"A": package(args.a, tmp / "a"), "B": package(args.b, tmp / "b")}
    runs = {(m, s): [] for m in cases for s in sides}
    try:
        for i in range(args.repeat):
            for method, run in ((c, CASES[c]) for c in cases):
                for side in (("A", "B") if i % 2 == 0 else ("B", "A")):
                    install(sides[side], dst, side in args.compile.upper())
                    t, phases = run()
                    runs[(method, side)].append((t, phases))
                    print(f"{method:14s} {side} run {i + 1}: {t:6.2f} s "
                          f"{json.dumps({k: round(v, 2) for k, v in phases.items()})}", flush=True)
    finally:
        install(sides["B"], dst)
        shutil.rmtree(tmp)
    print(f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    for method in cases:
        med = {}
        for side in sides:
            ts = [t for t, _ in runs[(method, side)]]
            phases = {k: statistics.median(p[k] for _, p in runs[(method, side)])
                      for k in runs[(method, side)][0][1]}
            med[side] = statistics.median(ts)
            print(f"{method:14s} {side} ({args.a if side == 'A' else args.b or 'worktree'}): min "
                  f"{min(ts):.2f} median {med[side]:.2f} s; median phases "
                  f"{json.dumps({k: round(v, 2) for k, v in phases.items()})}")
        print(f"{method:14s} B/A median {med['B'] / med['A']:.2f}")
        for side in sides:
            ratios = [t / p["ctas"] for t, p in runs[(method, side)] if p.get("ctas")]
            if ratios:
                print(f"{method:14s} {side} x CTAS (same-moment pairs): min {min(ratios):.2f}"
                      f" median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
