"""Shared helpers of the benchmarks: connect to the private cluster, time
things, read the backend's peak memory, and write results under bench/results."""
import json
import os
import subprocess
import time

import psycopg

from bench_paths import RESULTS, ROOT  # noqa: F401  (and every bench folder on sys.path)


def url(database=None):
    u = os.environ.get("DEID_BENCH_URL") or subprocess.check_output(
        ["sh", str(ROOT / "scripts" / "cluster.sh"), "url"], text=True).strip()
    if database:
        u = u.rsplit("/", 1)[0] + "/" + database
    return u


def connect(database=None):
    return psycopg.connect(url(database), autocommit=True)


def timed(conn, sql, params=None):
    t = time.perf_counter()
    cur = conn.execute(sql, params)
    rows = cur.fetchall() if cur.description else None
    return time.perf_counter() - t, rows


def backend_cpu_s(conn):
    """utime + stime of the backend serving `conn`, in seconds (Linux /proc): what a request
    cost in CPU, whatever else the machine runs."""
    with open(f"/proc/{conn.info.backend_pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def backend_peak_kb(conn):
    """VmHWM of the backend serving `conn` (Linux /proc)."""
    pid = conn.info.backend_pid
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None


def save(name, payload):
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=float) + "\n")
    return path


def fresh_database(name):
    """Drop and re-create a benchmark's own database with deid installed (releases and RID sets
    of earlier runs would otherwise pile up: deid.release is append-only)."""
    with connect("postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {name}")
    conn = connect(name)
    conn.execute("SET client_min_messages = warning")
    conn.execute("CREATE EXTENSION deid CASCADE")
    return conn


def reset_composition(conn):
    """Forget the earlier releases for the composition rule (a superuser's row in
    deid.composition_reset): a speed benchmark releases the same rows again and again, and
    each request should be timed as the first release of its source, not checked against
    every earlier run of the benchmark."""
    conn.execute("INSERT INTO deid.composition_reset (source, after_release)"
                 " SELECT NULL, coalesce(max(release_id), 0) FROM deid.release")
