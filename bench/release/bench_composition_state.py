"""The composition rule's check with the cells kept per source (deid.composition_state,
log/cellstate.py): a new release of a source of N rows checked against R earlier releases, end
to end in the server as the request runs it before commit -- the stored cells read and
decoded, crossed with the new release's selection (and, for anatomy, its groups read from
deid.rid_set), and the new cells encoded and written (rolled back after each call).

    nice -n 10 .venv/bin/python bench/release/bench_composition_state.py --url postgresql://... \
        [--rows 100000,1000000,3000000] [--releases 1,10,30,100] [--kinds bands,...]

A scratch database (deid_bench_composition_state, dropped at the end) holds the source's
release log: R synthetic earlier releases (rows of deid.release and deid.release_selection as
a request writes them) and the stored cells of exactly those releases, folded here by
log/cellstate.py as each of those requests would have stored them. Kinds: `bands` (release i
selects all rows but a band of 1,000 ids), `scattered` (all but the ids equal to i modulo
1,000: 1,000 runs), `random` (a random half: cells of a row or two, refused) -- the new
release's selection of the same kind, distinct from every earlier one; `anatomy_kept` (every
release groups all rows in groups of 10 consecutive ids, l = 2: the new one keeps the groups)
and `anatomy_regrouped` (release i's groups shifted by 1 + i mod 9, the new one's by 0: a
regrouping, refused). Median of 3 calls after one to warm the cache. Writes
bench/results/composition_state.json and composition_state.png; the machine's load average is
recorded with each figure.
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np
import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402
from deid.log import cellstate, cellstore, cellvalues, rowids  # noqa: E402

DB = "deid_bench_composition_state"
RESULTS = bench_paths.RESULTS / "composition_state.json"
PLOT = bench_paths.RESULTS / "composition_state.png"
K, L, GROUP = 10, 2, 10

CHECK = r"""
CREATE FUNCTION pg_temp.state_check(src oid, new_release bigint, n bigint, kind text)
RETURNS float8[] LANGUAGE plpython3u AS $$
import glob, os, sys, time, types
share = plpy.execute("SELECT setting FROM pg_config WHERE name = 'SHAREDIR'")[0]["setting"]
build = sorted(glob.glob(os.path.join(share, "deid", "python-*", "builds", "*")))[-1]
if build not in sys.path:
    sys.path.insert(0, build)
import numpy as np
from deid.pg import Database
from deid.log import cellstore, composition
from deid.errors import DeidError
ids = np.arange(1, n + 1, dtype=np.int64)
if kind == "random":
    ids = ids[np.random.default_rng(12345).random(n) < 0.5]
elif kind == "scattered":
    ids = ids[ids % 1000 != 999]
elif kind == "bands":
    ids = ids[ids <= n - 1000]
grouped = kind.startswith("anatomy")
req = types.SimpleNamespace(rel=types.SimpleNamespace(oid=src), release_id=new_release,
                            k=10, l=2 if grouped else None, grant={"via": "select"},
                            method="anatomy" if grouped else "generalization", options={},
                            caller=plpy.execute("SELECT current_user AS u")[0]["u"])
db = Database()
t = time.perf_counter()
refused = 0.0
try:
    found = composition.check_selections(db, req, "id", ids)
    if grouped:
        composition.check_groupings(db, req, ids, found)
    try:
        with plpy.subtransaction():
            cellstore.remember(db, found)
            raise RuntimeError("rolled back: the next call reads the same history")
    except RuntimeError:
        pass
except DeidError:
    refused = 1.0
seconds, sql_seconds = time.perf_counter() - t, db.sql_seconds
found = composition._earlier(db, req)     # were the kept cells read (not folded again)?
covers = [e["release_id"] for e in found]
kinds = ["selections"] + (["groups:anatomy", "values:anatomy"] if grouped else [])
kept = all(cellstore.load_body(db, found.identity, k, covers) is not None for k in kinds)
return [seconds, sql_seconds, refused, float(kept)]
$$;
"""


def selection(kind, rows, i):
    """Release i's selected ids (an earlier release; the new one's is in CHECK)."""
    ids = np.arange(1, rows + 1, dtype=np.int64)
    if kind == "random":
        return ids[np.random.default_rng(i).random(rows) < 0.5]
    if kind == "scattered":
        return ids[ids % 1000 != i % 999]
    if kind == "bands":
        lo = (1000 * i) % rows
        return np.concatenate([ids[:lo], ids[lo + 1000:]])
    return ids


def groups(kind, rows, i):
    """Release i's groups of 10 (None for a selection kind); i = -1: the new release's."""
    if not kind.startswith("anatomy"):
        return None
    shift = 0 if kind == "anatomy_kept" or i < 0 else 1 + i % 9
    return (np.arange(rows, dtype=np.int64) + shift) // GROUP


def setup(url, rows):
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
    db = psycopg.connect(psycopg.conninfo.make_conninfo(url, dbname=DB), autocommit=True)
    db.execute("CREATE EXTENSION deid CASCADE")
    db.execute("CREATE TABLE public.src (id bigint PRIMARY KEY)")
    return db


def _log(db, name, kind, sel):
    method = "anatomy" if kind.startswith("anatomy") else "generalization"
    l = L if kind.startswith("anatomy") else None
    rid = db.execute(
        "INSERT INTO deid.release (name, method, source, source_name, parameters,"
        " requested_by, started_at, status) VALUES (%s, %s, 'public.src'::regclass,"
        " 'public.src', %s, current_user, now(), 'committed') RETURNING release_id",
        [name, method, json.dumps({"k": K, "l": l})]).fetchone()[0]
    db.execute("INSERT INTO deid.release_selection (release_id, row_id, n, rids)"
               " VALUES (%s, 'id', %s, %s)", [rid, int(sel.size), rowids.pack(sel)])
    return rid


def _new_release(db, kind, rows):
    """The new release's log row and, for anatomy, its RID set (two values per group)."""
    ids = np.arange(1, rows + 1, dtype=np.int64)
    rid = _log(db, "bench_new", kind, ids)
    db.execute("DELETE FROM deid.release_selection WHERE release_id = %s", [rid])
    g = groups(kind, rows, -1)
    if g is not None:
        values = ids % 2                         # "v0" for even ids, as the history
        key, counts = np.unique(np.stack([g, values]), axis=1, return_counts=True)
        order = np.lexsort((values, g))
        db.execute("INSERT INTO deid.rid_set (release_id, attribute, chunk, group_ids,"
                   " value_list, rid_counts, rids) VALUES (%s, 'dx', 0, %s, %s, %s, %s)",
                   [rid, key[0].astype(">i4").tobytes(), [f"v{v}" for v in key[1]],
                    counts.astype(">i4").tobytes(), ids[order].astype(">i8").tobytes()])
    return rid


class History:
    """The earlier releases of public.src and the cells their requests would have stored."""
    def __init__(self, db, kind, rows):
        self.db, self.kind, self.rows = db, kind, rows
        self.sel, self.grp, self.made = cellstate.empty(), cellstate.empty(), 0
        self.vals = cellvalues.Values()
        oid = db.execute("SELECT 'public.src'::regclass::oid").fetchone()[0]
        self.identity = cellstore.identity_key([], [oid])

    def grow(self, releases):
        while self.made < releases:
            sel = selection(self.kind, self.rows, self.made)
            rid = _log(self.db, f"bench_{self.made}", self.kind, sel)
            self.sel = cellstate.cross(self.sel, sel, None, K, rid).after
            g = groups(self.kind, self.rows, self.made)
            if g is not None:
                c = cellstate.cross(self.grp, sel, g, K, rid)
                even, odd = sel[sel % 2 == 0], sel[sel % 2 == 1]
                new = {"dx": cellvalues.encode_new(self.vals, "dx", np.concatenate([even, odd]),
                                                   ["v0", "v1"], [even.size, odd.size])}
                self.vals = cellvalues.fold(self.vals, c, self.grp.ids, new, L, None)
                self.grp = c.after
            self.made += 1
        self._store("selections", self.sel.covers, cellstate.encode(self.sel))
        if self.kind.startswith("anatomy"):
            self._store("groups:anatomy", self.grp.covers, cellstate.encode(self.grp))
            self._store("values:anatomy", self.grp.covers, cellvalues.encode(self.vals))
        self.db.execute("VACUUM ANALYZE deid.release_selection")

    def _store(self, kind, covers, body):
        self.db.execute(
            "INSERT INTO deid.composition_state (identity, kind, covers, body)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (identity, kind) DO UPDATE"
            " SET covers = EXCLUDED.covers, body = EXCLUDED.body",
            [self.identity, kind, covers.tolist(), body])

    def stored_bytes(self):
        return int(self.db.execute("SELECT coalesce(sum(length(body)), 0)"
                                   " FROM deid.composition_state").fetchone()[0])


def seconds(db, new, rows, kind, repeat=3):
    db.execute(CHECK)
    oid = db.execute("SELECT 'public.src'::regclass::oid").fetchone()[0]
    out = [db.execute("SELECT pg_temp.state_check(%s, %s, %s, %s)", [oid, new, rows, kind])
           .fetchone()[0] for _ in range(repeat + 1)][1:]
    db.execute("DROP FUNCTION pg_temp.state_check(oid, bigint, bigint, text)")
    return (statistics.median(x[0] for x in out), statistics.median(x[1] for x in out),
            bool(out[0][2]), all(x[3] for x in out))


def run(url, rows, kind, releases, out, results):
    db = setup(url, rows)
    db.execute("INSERT INTO public.src SELECT generate_series(1, %s)", [rows])
    new = _new_release(db, kind, rows)
    history = History(db, kind, rows)
    for r in releases:
        t = time.perf_counter()
        history.grow(r)
        fold = time.perf_counter() - t
        s, sql_s, refused, kept = seconds(db, new, rows, kind)
        load = os.getloadavg()[0]
        results.append({"rows": rows, "releases": r, "kind": kind, "seconds": round(s, 4),
                        "sql_seconds": round(sql_s, 4), "refused": refused, "kept_cells_read": kept,
                        "state_bytes": history.stored_bytes(), "load_average": round(load, 1)})
        print(f"{kind:>17} rows {rows:>9,} earlier {r:>4}: {s:.3f} s (sql {sql_s:.3f} s,"
              f" state {results[-1]['state_bytes'] / 1e6:.2f} MB, refused {refused}, kept {kept},"
              f" load {load:.1f}; history built in {fold:.0f} s)", flush=True)
        pathlib.Path(out).write_text(json.dumps(results, indent=1) + "\n")
    db.close()


def plot(results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9.5, 4.2))
    series = {}
    for r in results:
        series.setdefault((r["kind"], r["rows"]), []).append((r["releases"], r["seconds"]))
    for (kind, rows), pts in sorted(series.items()):
        xs, ys = zip(*sorted(pts))
        ax.plot(xs, ys, marker="o", label=f"{rows:,} rows, {kind}")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("earlier releases of the source")
    ax.set_ylabel("check before commit, in the server (s)")
    ax.set_title("Composition rule with the cells kept per source, end to end")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--rows", default="1000000")
    p.add_argument("--releases", default="1,10,30,100")
    p.add_argument("--kinds", default="bands,scattered,random,anatomy_kept,anatomy_regrouped")
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--append", action="store_true", help="add to the results in --out")
    a = p.parse_args(argv)
    results = json.loads(pathlib.Path(a.out).read_text()) if a.append else []
    for rows in map(int, a.rows.split(",")):
        for kind in a.kinds.split(","):
            run(a.url, rows, kind, [int(r) for r in a.releases.split(",")], a.out, results)
    with psycopg.connect(a.url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    plot(results)


if __name__ == "__main__":
    main()
