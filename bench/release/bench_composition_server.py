"""The composition rule's check end to end in the server: a new release of a source of N rows
checked against R earlier releases of it, as the request runs it before commit -- the earlier
releases' row ids read from deid.release_selection, decoded, and crossed with the new one
(log/composition.py check_selections, in PL/Python in the server, under the installed build).

    .venv/bin/python bench/release/bench_composition_server.py --url postgresql://... \
        [--rows 100000,1000000] [--releases 1,10,100]

A scratch database (deid_bench_composition, dropped at the end) holds the source (ids 1..N)
and R synthetic earlier releases (rows of deid.release and deid.release_selection, written
as the request writes them): release i selects all rows but a band of 1,000 ids (bands) or
all but the ids equal to i modulo 1,000 (scattered: 1,000 runs), or a random half of the rows
(random: a predicate on an unordered column, 250,000 runs), distinct selections -- the worst
case, an identical one is skipped. Each earlier selection is stored as the request stores it
(log/rowids.py; `--layouts current,ids` also times int8 ids). Median of 3 calls (the first
warms the cache). Writes bench/results/composition_server.json and composition_server.png
(with composition_server_before.json: the same check at the commit before, int8 ids crossed
row by row, measured on this machine).
"""
import argparse
import json
import pathlib
import statistics
import sys

import numpy as np
import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402
from deid.log import rowids  # noqa: E402

DB = "deid_bench_composition"
RESULTS = bench_paths.RESULTS / "composition_server.json"
PLOT = bench_paths.RESULTS / "composition_server.png"

CHECK = r"""
CREATE FUNCTION pg_temp.composition_check(src oid, n bigint, kind text)
RETURNS float8[] LANGUAGE plpython3u AS $$
import glob, os, sys, time, types
share = plpy.execute("SELECT setting FROM pg_config WHERE name = 'SHAREDIR'")[0]["setting"]
build = sorted(glob.glob(os.path.join(share, "deid", "python-*", "builds", "*")))[-1]
if build not in sys.path:
    sys.path.insert(0, build)
import numpy as np
from deid.pg import Database
from deid.log import composition
from deid.errors import DeidError
ids = np.arange(1, n + 1, dtype=np.int64)
if kind == "random":
    keep = np.random.default_rng(12345).random(n) < 0.5
else:
    keep = (ids % 1000 != 999) if kind == "scattered" else ~((ids > n - 1000))
req = types.SimpleNamespace(rel=types.SimpleNamespace(oid=src), release_id=-1, k=10,
                            grant={"via": "select"}, method="generalization", options={})
db = Database()
t = time.perf_counter()
try:
    composition.check_selections(db, req, "id", ids[keep])
    refused = 0.0
except DeidError:                  # random halves: cells of a row or two, refused
    refused = 1.0
return [time.perf_counter() - t, db.sql_seconds, refused]
$$;
"""


def setup(url, rows):
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
    db = psycopg.connect(_url(url), autocommit=True)
    db.execute("CREATE EXTENSION deid CASCADE")
    db.execute("CREATE TABLE public.src (id bigint PRIMARY KEY)")
    db.execute("INSERT INTO public.src SELECT generate_series(1, %s)", [rows])
    return db


def _url(url):
    return psycopg.conninfo.make_conninfo(url, dbname=DB)


def history(db, rows, releases, kind, layout):
    """R earlier releases of public.src, as a request logs them."""
    db.execute("ALTER TABLE deid.release DISABLE TRIGGER USER")
    db.execute("DELETE FROM deid.release_selection")
    db.execute("DELETE FROM deid.release")
    db.execute("ALTER TABLE deid.release ENABLE TRIGGER USER")
    ids = np.arange(1, rows + 1, dtype=np.int64)
    for i in range(releases):
        if kind == "random":                       # a predicate on an unordered column
            sel = ids[np.random.default_rng(i).random(rows) < 0.5]
        elif kind == "scattered":
            sel = ids[ids % 1000 != i % 999]
        else:
            lo = (1000 * i) % rows
            sel = np.concatenate([ids[:lo], ids[lo + 1000:]])
        data = rowids.pack(sel) if layout == "current" else b"I" + sel.astype(">i8").tobytes()
        rid = db.execute(
            "INSERT INTO deid.release (name, method, source, source_name, parameters,"
            " requested_by, started_at, status) VALUES (%s, 'generalization',"
            " 'public.src'::regclass, 'public.src', '{\"k\": 10}', current_user, now(),"
            " 'committed') RETURNING release_id", [f"bench_{i}"]).fetchone()[0]
        db.execute("INSERT INTO deid.release_selection (release_id, row_id, n, rids)"
                   " VALUES (%s, 'id', %s, %s)", [rid, int(sel.size), data])
    db.execute("VACUUM ANALYZE deid.release_selection")


def seconds(db, rows, kind, repeat=3):
    db.execute(CHECK)
    oid = db.execute("SELECT 'public.src'::regclass::oid").fetchone()[0]
    out = [db.execute("SELECT pg_temp.composition_check(%s, %s, %s)",
                      [oid, rows, kind]).fetchone()[0] for _ in range(repeat + 1)][1:]
    db.execute("DROP FUNCTION pg_temp.composition_check(oid, bigint, text)")
    return (statistics.median(x[0] for x in out), statistics.median(x[1] for x in out),
            bool(out[0][2]))


def plot(results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9.5, 4.2))
    for (layout, kind, rows), pts in sorted(_series(results).items()):
        xs, ys = zip(*sorted(pts))
        ax.plot(xs, ys, marker="o", linestyle="-" if layout == "current" else ":",
                label=f"{rows:,} rows, {kind}{'' if layout == 'current' else ', before (int8 ids, row by row)'}")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("earlier releases of the source")
    ax.set_ylabel("check before commit, in the server (s)")
    ax.set_title("Composition rule: selections, end to end")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)


def _series(results):
    out = {}
    for r in results:
        out.setdefault((r["layout"], r["kind"], r["rows"]), []).append((r["releases"], r["seconds"]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--rows", default="100000,1000000")
    p.add_argument("--releases", default="1,10,100")
    p.add_argument("--layouts", default="current")
    p.add_argument("--kinds", default="bands,scattered,random")
    p.add_argument("--out", default=str(RESULTS))
    a = p.parse_args(argv)
    results = []
    for rows in map(int, a.rows.split(",")):
        db = setup(a.url, rows)
        for layout in a.layouts.split(","):
            for kind in a.kinds.split(","):
                for releases in map(int, a.releases.split(",")):
                    history(db, rows, releases, kind, layout)
                    size = db.execute("SELECT sum(length(rids)) FROM deid.release_selection").fetchone()[0]
                    s, sql_s, refused = seconds(db, rows, kind)
                    results.append({"rows": rows, "releases": releases, "kind": kind,
                                    "layout": layout, "seconds": round(s, 4),
                                    "sql_seconds": round(sql_s, 4), "stored_bytes": int(size),
                                    "refused": refused})
                    print(f"{layout:>7} {kind:>9} rows {rows:>9,} earlier {releases:>4}: {s:.3f} s"
                          f" (reading {sql_s:.3f} s, {size / 1e6:.1f} MB stored)", flush=True)
                    pathlib.Path(a.out).write_text(json.dumps(results, indent=1) + "\n")
        db.close()
    with psycopg.connect(a.url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    plot(results + _before())


def _before():
    """The same check at f0452c7 (int8 ids, crossed row by row), measured on this machine."""
    path = bench_paths.RESULTS / "composition_server_before.json"
    return [dict(r, layout="before") for r in json.loads(path.read_text())] if path.exists() else []


if __name__ == "__main__":
    main()
