"""The composition rule's grouping check end to end in the server: a new anatomy release of a
source of N rows, its groups crossed with those of R earlier anatomy releases (log/composition.py
check_groupings: the groups read from deid.rid_set, crossed by partition.py).

    .venv/bin/python bench/release/bench_composition_groups.py --url postgresql://... \
        [--rows 100000,1000000] [--releases 1,10,100]

A scratch database (deid_bench_composition_groups, dropped at the end) holds R synthetic
earlier anatomy releases of all rows, groups of 10 consecutive ids (release i's shifted by
i modulo 10: distinct groupings, the worst case), one RID-set entry per group as the request
writes it, and the new release's groups likewise. Median of 3 calls after one to warm the
cache. Writes bench/results/composition_groups.json.
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

DB = "deid_bench_composition_groups"
RESULTS = bench_paths.RESULTS / "composition_groups.json"

CHECK = r"""
CREATE FUNCTION pg_temp.groups_check(src oid, new_release bigint, n bigint)
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
req = types.SimpleNamespace(rel=types.SimpleNamespace(oid=src), release_id=new_release, k=10,
                            l=0, grant={"via": "select"}, method="anatomy", options={})
db = Database()
t = time.perf_counter()
earlier = [dict(e, ids=ids) for e in composition._earlier(db, req)]
try:
    composition.check_groupings(db, req, ids, earlier)
    refused = 0.0
except DeidError:
    refused = 1.0
return [time.perf_counter() - t, db.sql_seconds, refused]
$$;
"""


def _release(db, name, rows, shift):
    rid = db.execute(
        "INSERT INTO deid.release (name, method, source, source_name, parameters, requested_by,"
        " started_at, status) VALUES (%s, 'anatomy', 'public.src'::regclass, 'public.src',"
        " '{\"k\": 10, \"l\": 0}', current_user, now(), 'committed') RETURNING release_id",
        [name]).fetchone()[0]
    ids = np.arange(1, rows + 1, dtype=np.int64)
    labels = (ids - 1 + shift) // 10
    groups, counts = np.unique(labels, return_counts=True)
    db.execute("INSERT INTO deid.rid_set (release_id, attribute, chunk, group_ids, value_list,"
               " rid_counts, rids) VALUES (%s, 'dx', 0, %s, %s, %s, %s)",
               [rid, groups.astype(">i4").tobytes(), ["v"] * groups.size,
                counts.astype(">i4").tobytes(), ids.astype(">i8").tobytes()])
    db.execute("INSERT INTO deid.release_selection (release_id, row_id, n, rids)"
               " VALUES (%s, 'id', %s, %s)", [rid, rows, rowids.pack(ids)])
    return rid


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--rows", default="100000,1000000")
    p.add_argument("--releases", default="1,10,100")
    a = p.parse_args(argv)
    results = []
    for rows in map(int, a.rows.split(",")):
        with psycopg.connect(a.url, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {DB}")
        db = psycopg.connect(psycopg.conninfo.make_conninfo(a.url, dbname=DB), autocommit=True)
        db.execute("CREATE EXTENSION deid CASCADE")
        db.execute("CREATE TABLE public.src (id bigint PRIMARY KEY)")
        new = _release(db, "bench_new", rows, 0)
        made = 0
        for releases in map(int, a.releases.split(",")):
            while made < releases:
                _release(db, f"bench_{made}", rows, 1 + made % 9)
                made += 1
            db.execute("VACUUM ANALYZE deid.rid_set")
            db.execute(CHECK)
            oid = db.execute("SELECT 'public.src'::regclass::oid").fetchone()[0]
            out = [db.execute("SELECT pg_temp.groups_check(%s, %s, %s)", [oid, new, rows])
                   .fetchone()[0] for _ in range(4)][1:]
            db.execute("DROP FUNCTION pg_temp.groups_check(oid, bigint, bigint)")
            s, sql_s = statistics.median(x[0] for x in out), statistics.median(x[1] for x in out)
            results.append({"rows": rows, "releases": releases, "kind": "anatomy groups",
                            "seconds": round(s, 4), "sql_seconds": round(sql_s, 4)})
            print(f"anatomy groups rows {rows:>9,} earlier {releases:>4}: {s:.3f} s"
                  f" (reading {sql_s:.3f} s)", flush=True)
            RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        db.close()
        with psycopg.connect(a.url, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")


if __name__ == "__main__":
    main()
