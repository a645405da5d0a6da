"""Interleaved A/B of the server's Python at two git revisions (the catalog stays the installed
one): anatomy and generalization at 1M rows on the databases bench_release_speed.py leaves.

    .venv/bin/python bench/ab_release_speed.py --a 5c1b808 [--b WORKTREE] [--repeat 3]

Before each request the installed Python package ($(pg_config --sharedir)/deid/python-<version>/deid)
is replaced by revision A's or B's (git archive; B defaults to the working tree), so A and B
alternate in one run under the same load; each request runs in a fresh backend. Prints per
side min and median seconds and the median phase breakdown, and the ratios B/A. Leaves B
installed. For a noisy machine: the phases and the ratios are what to compare.
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_anatomy as ba  # noqa: E402
import bench_generalization as bg  # noqa: E402
from common import ROOT, url  # noqa: E402


def installed_dir():
    """The package the server loads: $(pg_config --sharedir)/deid/python-<EXTVERSION>/deid (the
    version of extension/Makefile; the SQL of that version puts this directory on sys.path)."""
    share = subprocess.run([os.environ.get("PG_CONFIG", "pg_config"), "--sharedir"],
                           capture_output=True, text=True, check=True).stdout.strip()
    version = re.search(r"^EXTVERSION\s*=\s*(\S+)", (ROOT / "extension" / "Makefile").read_text(),
                        re.M).group(1)
    dst = pathlib.Path(share) / "deid" / f"python-{version}" / "deid"
    if not (dst / "pipeline.py").is_file():
        raise SystemExit(f"{dst}: no installed deid package there (make install first)")
    return dst


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


def install(src, dst):
    shutil.rmtree(dst)
    shutil.copytree(src, dst)
    subprocess.run(["chmod", "-R", "a+rX", str(dst)], check=True)


def anatomy():
    conn = psycopg.connect(url(ba.DB), autocommit=True)
    try:
        r = ba.request(conn, "patients_1m", 50, 10, ba.QIS + ba.SAS[:3], "ab_anatomy")
    finally:
        conn.close()
    return r["seconds"], r["phase_seconds"]


def generalization():
    conn = psycopg.connect(url(bg.DB), autocommit=True)
    try:
        t, m, _ = bg.Requests(conn).run("bench_gen", 10, "greedy", bg.REFERENCE)
    finally:
        conn.close()
    return t, m["seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="git revision A (e.g. 5c1b808)")
    ap.add_argument("--b", default=None, help="git revision B (default: the working tree)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--methods", default="anatomy,generalization",
                    help="comma-separated: anatomy, generalization")
    args = ap.parse_args()
    dst = installed_dir()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="deid_ab_"))
    sides = {"A": package(args.a, tmp / "a"), "B": package(args.b, tmp / "b")}
    methods = [m for m in ("anatomy", "generalization") if m in args.methods.split(",")]
    runs = {(m, s): [] for m in methods for s in sides}
    try:
        for i in range(args.repeat):
            for method, run in [(m, {"anatomy": anatomy, "generalization": generalization}[m])
                                for m in methods]:
                for side in (("A", "B") if i % 2 == 0 else ("B", "A")):
                    install(sides[side], dst)
                    t, phases = run()
                    runs[(method, side)].append((t, phases))
                    print(f"{method:14s} {side} run {i + 1}: {t:6.2f} s "
                          f"{json.dumps({k: round(v, 2) for k, v in phases.items()})}", flush=True)
    finally:
        install(sides["B"], dst)
        shutil.rmtree(tmp)
    for method in methods:
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


if __name__ == "__main__":
    main()
