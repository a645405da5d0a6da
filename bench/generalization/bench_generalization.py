"""Generalization benchmark: method => 'generalization' (paper 002) end to end in SQL.

One command, in the project's client venv (psycopg + numpy):

    .venv/bin/python bench/generalization/bench_generalization.py            # full run, ~15 min on 2 cores
    .venv/bin/python bench/generalization/bench_generalization.py --quick    # smoke run, < 1 min

Data: --rows (1M) generated patients, fixed --seed, 6 hierarchical quasi-identifiers in 2 source
systems (002 sec. 2: k per source):
    registry : age (interval [0,120) by 5/10/20, 5 levels), zip (member, 1000 3-digit prefixes,
               4 levels), ethnicity (member, 12 values, 3 levels)
    pathology: diagnosis (member, 400 ICD-like codes, 4 levels), pt (member, TNM stage as in 002
               Table 6, 4 levels), size_mm (interval [0,200) by 5/25/100, 5 levels)
Member hierarchies go through deid.load_hierarchy (ARX rows), interval ones through
deid.interval_hierarchy; every hierarchy has its own, non-linear info_loss (phi) per level.

Measured for each k (10, 100), all ratios within this run on this table:
  * floors: ONE GROUP BY pass over the 6 QIs, and a CTAS copy of the table;
  * greedy (002 sec. 4.5) and optimal (exact lattice search) requests with a reference priority
    vector: the method's seconds.method from deid.release.metrics and the end-to-end time of the
    SQL call; greedy method / GROUP BY is the target (aim <= 5x). Each repetition measures
    GROUP BY, CTAS and the request back to back, and the ratio is the median of the paired ratios;
  * loss: sum(priority x phi[level]) of greedy vs optimal over --vectors seeded priority vectors
    (half permutations of equally spaced priorities as 002 asks, half uniform in [0.05, 1]).
    A request costs ~15 s at 1M rows (mostly its write phase), so the vectors are solved by deid's
    own solver (python_udfs/deid/methods/generalize.py, with lattice.py) on the class table of the same rows, and
    the reference vector plus the first --sql-vectors vectors also go through anonymize_request:
    both must give the same levels and loss (listed under sql_core_mismatches otherwise);
  * write-phase diagnosis: the release's CTAS shape (label lookups, ORDER BY 7 int keys) on a
    stand-in stage table vs one int8 sort key vs no ORDER BY.
Peer: the PyPI library anjana (k_anonymity, Datafly-like full-domain generalization, no record
suppression) in the benchmark-only venv bench/.venv-anjana, with the same hierarchies as ARX-style
per-value tables, next to deid on the same rows (one source, i.e. k over all 6 QIs as anjana does,
and the 2-source request). Sizes --peer-rows (100k, then 1M if a linear extrapolation x1.5 fits
--peer-timeout and --budget). See bench/generalization/generalization_peer.py.

Writes bench/results/generalization.json and bench/results/generalization.png.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
from common import timed  # noqa: E402
import psycopg

from common import RESULTS, ROOT, save, url

sys.path.insert(0, str(ROOT / "python_udfs"))   # deid's pure-numpy solver, for the loss study

DB = "deid_bench_gen"
VENV = ROOT / "bench" / ".venv-anjana"
VENV_PACKAGES = ["anjana", "pandas", "matplotlib"]
PEER = ROOT / "bench" / "generalization" / "generalization_peer.py"

QIS = ["age", "zip", "ethnicity", "diagnosis", "pt", "size_mm"]
SOURCE = {"age": "registry", "zip": "registry", "ethnicity": "registry",
          "diagnosis": "pathology", "pt": "pathology", "size_mm": "pathology"}
# interval hierarchies: (low, high, widths, phi per level)
INTERVAL = {"age": (0, 120, [5, 10, 20], [0, 0.15, 0.35, 0.6, 1]),
            "size_mm": (0, 200, [5, 25, 100], [0, 0.1, 0.3, 0.6, 1])}
MEMBER_PHI = {"zip": [0, 0.3, 0.7, 1], "ethnicity": [0, 0.5, 1],
              "diagnosis": [0, 0.25, 0.6, 1], "pt": [0, 0.3, 0.5, 1]}
# reference priorities for the timing runs (equally spaced, 002 sec. 4.5 / 5.2 style)
REFERENCE = {"age": 0.8, "zip": 0.4, "ethnicity": 0.2, "diagnosis": 1.0, "pt": 0.6, "size_mm": 0.4}

PT = {"1mic": "1", "1a": "1", "1b": "1", "1c": "1", "2": "2", "3": "3",
      "4a": "4", "4b": "4", "4c": "4", "4d": "4"}
PT_RANGE = {"1": "[1-2]", "2": "[1-2]", "3": "[3-4]", "4": "[3-4]"}
ETHNICITY_GROUPS = 4


# ------------------------------------------------------------------------------------------------
# hierarchies and data


def member_paths():
    """ARX rows (value, level1, ..., '*') of the member hierarchies, leaves in code order."""
    zip_ = [(f"{i:03d}", f"{i // 10:02d}x", f"{i // 100}xx", "*") for i in range(1000)]
    eth = [(f"E{i:02d}", f"G{i % ETHNICITY_GROUPS}", "*") for i in range(12)]
    chapters = "ABCDEFGH"
    diag = [(f"{chapters[i // 50]}{(i // 10) % 5}{i % 10}", f"{chapters[i // 50]}{(i // 10) % 5}x",
             f"{chapters[i // 50]}xx", "*") for i in range(400)]
    pt = [(v, PT[v], PT_RANGE[PT[v]], "*") for v in PT]
    return {"zip": zip_, "ethnicity": eth, "diagnosis": diag, "pt": pt}


def interval_paths(col, values):
    """ARX rows of an interval hierarchy for the values present (labels as deid writes them)."""
    low, high, widths, _ = INTERVAL[col]
    return [(int(v),) + tuple(f"[{low + (v - low) // w * w},{low + (v - low) // w * w + w})"
                              for w in widths) + ("*",) for v in values]


def zipf(rng, n, m, a, shift):
    p = 1.0 / (np.arange(m) + shift) ** a
    p /= p.sum()
    return rng.choice(m, size=n, p=p)


def generate(n, seed):
    """int codes per column (member columns: index into member_paths()[col])."""
    rng = np.random.default_rng(seed)
    zip_p = rng.permutation(1000)          # popular prefixes spread over the hierarchy
    diag_p = rng.permutation(400)
    return {
        "age": np.clip(rng.normal(55, 16, n).round(), 0, 99).astype(np.int64),
        "zip": zip_p[zipf(rng, n, 1000, 1.1, 5.0)],
        "ethnicity": zipf(rng, n, 12, 1.6, 1.0),
        "diagnosis": diag_p[zipf(rng, n, 400, 1.3, 3.0)],
        "pt": rng.choice(10, size=n, p=[.04, .10, .14, .22, .24, .10, .06, .04, .03, .03]),
        "size_mm": np.clip(rng.lognormal(3.0, 0.6, n).round(), 1, 199).astype(np.int64),
    }


def connect(database):
    return psycopg.connect(url(database), autocommit=True)


def fresh_database(n, seed, log, db=DB, generator=None):
    """Drop and recreate the benchmark's own database (`db`), hierarchies, table and roles; the
    rows are `generator(n, seed)` (default generate(): int codes per column)."""
    with connect("postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {db}")
    conn = connect(db)
    conn.execute("SET client_min_messages = warning")
    conn.execute("CREATE EXTENSION deid CASCADE")
    paths = member_paths()
    for col, rows in paths.items():
        conn.execute("SELECT deid.load_hierarchy(%s, %s, %s)",
                     [f"bg_{col}", "\n".join(";".join(r) for r in rows), [float(x) for x in MEMBER_PHI[col]]])
    for col, (low, high, widths, phi) in INTERVAL.items():
        conn.execute("SELECT deid.interval_hierarchy(%s, %s, %s, %s, %s)",
                     [f"bg_{col}", low, high, widths, [float(x) for x in phi]])
    t = time.perf_counter()
    codes = (generator or generate)(n, seed)
    conn.execute("CREATE TABLE bench_gen (id bigint, age int, zip int, ethnicity int, diagnosis int,"
                 " pt int, size_mm int)")
    block = np.column_stack([np.arange(1, n + 1)] + [codes[c] for c in QIS])
    with conn.cursor().copy("COPY bench_gen FROM STDIN") as cp:
        for s in range(0, n, 200_000):
            buf = "\n".join("\t".join(map(str, r)) for r in block[s:s + 200_000].tolist()) + "\n"
            cp.write(buf.encode())
    # member codes -> labels (text columns), in the server
    labels = {c: [r[0] for r in paths[c]] for c in paths}
    sel = ", ".join(f"(%s::text[])[{c} + 1] AS {c}" if c in paths else c for c in QIS)
    conn.execute(f"CREATE TABLE bench_gen_t AS SELECT id, {sel} FROM bench_gen ORDER BY id",
                 [labels[c] for c in QIS if c in paths])
    conn.execute("DROP TABLE bench_gen")
    conn.execute("ALTER TABLE bench_gen_t RENAME TO bench_gen")
    conn.execute("ALTER TABLE bench_gen ADD PRIMARY KEY (id)")
    for c in QIS:
        conn.execute("SELECT deid.set_role('bench_gen', %s, 'quasi_identifier', hierarchy => %s,"
                     " source => %s)", [c, f"bg_{c}", SOURCE[c]])
    conn.execute("VACUUM ANALYZE bench_gen")
    log(f"generated {n} rows (seed {seed}) in {time.perf_counter() - t:.1f} s")
    return conn, codes


# ------------------------------------------------------------------------------------------------
# measurements


GROUP_BY = f"SELECT count(*) FROM (SELECT 1 FROM bench_gen GROUP BY {', '.join(QIS)}) s"


def group_by(conn):
    return timed(conn, GROUP_BY)


def ctas(conn):
    conn.execute("DROP TABLE IF EXISTS bench_gen_copy")
    t, _ = timed(conn, f"CREATE TABLE bench_gen_copy AS SELECT id, {', '.join(QIS)} FROM bench_gen")
    conn.execute("DROP TABLE bench_gen_copy")
    return t


class Requests:
    def __init__(self, conn):
        self.conn, self.n = conn, 0

    def run(self, table, k, search, priorities=None, columns=QIS):
        """One anonymize_request; (end-to-end seconds, release metrics, result row). The release is
        dropped afterwards (not timed) so the disk does not fill up."""
        self.n += 1
        name = f"bg_{self.n}"
        opts = {"search": search, "seed": 7}
        if priorities:
            opts["priorities"] = priorities
        t, rows = timed(self.conn, "SELECT release_id, rows, groups, discernibility, verified FROM"
                        " deid.anonymize_request(%s, 'generalization', k => %s, columns => %s,"
                        " options => %s, release => %s)",
                        [table, k, list(columns), json.dumps(opts), name])
        rid, nrows, groups, disc, verified = rows[0]
        metrics = self.conn.execute("SELECT metrics FROM deid.release WHERE release_id = %s",
                                    [rid]).fetchone()[0]
        self.conn.execute("SELECT deid.drop_release(%s)", [name])
        return t, metrics, {"rows": nrows, "groups": groups, "discernibility": disc,
                            "verified": verified}


def med(xs):
    return statistics.median(xs) if xs else None


def bench_timing(conn, req, ks, repeat, log):
    """Paired measurements: GROUP BY, CTAS, then the request, `repeat` times per (k, search)."""
    out = {}
    for k in ks:
        out[k] = {}
        for search in ("greedy", "optimal"):
            runs = []
            for _ in range(repeat):
                g, (row,) = group_by(conn)
                c = ctas(conn)
                t, m, res = req.run("bench_gen", k, search, REFERENCE)
                runs.append({"group_by_s": g, "ctas_s": c, "end_to_end_s": t,
                             "method_s": m["seconds"]["method"], "read_s": m["seconds"]["read"],
                             "write_s": m["seconds"]["write"], "classes_raw": row[0]})
            last = m
            r = {
                "group_by_s": med([x["group_by_s"] for x in runs]),
                "ctas_s": med([x["ctas_s"] for x in runs]),
                "end_to_end_s": med([x["end_to_end_s"] for x in runs]),
                "method_s": med([x["method_s"] for x in runs]),
                "read_s": med([x["read_s"] for x in runs]),
                "write_s": med([x["write_s"] for x in runs]),
                "method_over_group_by": med([x["method_s"] / x["group_by_s"] for x in runs]),
                "end_to_end_over_group_by": med([x["end_to_end_s"] / x["group_by_s"] for x in runs]),
                "end_to_end_over_ctas": med([x["end_to_end_s"] / x["ctas_s"] for x in runs]),
                "levels": last["levels"], "steps": last["steps"], "loss": last["loss"],
                "groups": res["groups"], "discernibility": res["discernibility"],
                "verified": res["verified"], "runs": runs,
            }
            out[k][search] = r
            log(f"k={k:<3d} {search:7s} method {r['method_s']:6.2f} s = {r['method_over_group_by']:5.2f}"
                f" x GROUP BY ({r['group_by_s']:.2f} s); end-to-end {r['end_to_end_s']:6.2f} s ="
                f" {r['end_to_end_over_group_by']:5.2f} x GROUP BY, {r['end_to_end_over_ctas']:5.2f} x"
                f" CTAS ({r['ctas_s']:.2f} s); read {r['read_s']:.2f} write {r['write_s']:.2f};"
                f" loss {r['loss']:.3f} levels {r['levels']} groups {r['groups']}"
                f" verified {r['verified']}")
    return out


def diagnose_write(conn, log):
    """Why the release write is slow: deid writes the release with
    CREATE TABLE AS SELECT <label lookups ($n::text[])[s.gj + 1]> FROM stage s
    ORDER BY s.g0, ..., s.g5, s.rid (generalization_release.run). The same statement shape on a
    stand-in stage table, against the same lookups sorted by one precomputed int8 key and unsorted.
    """
    conn.execute("DROP TABLE IF EXISTS bg_stage")
    conn.execute("CREATE TABLE bg_stage AS SELECT id AS rid, age / 20 AS g0, zip::int / 10 AS g1,"
                 " 0 AS g2, ascii(diagnosis) - 65 AS g3, 0 AS g4, 4 AS g5 FROM bench_gen")
    conn.execute("ANALYZE bg_stage")
    conn.execute("CREATE OR REPLACE FUNCTION pg_temp.bg_ctas(q text, a text[], b text[]) RETURNS void"
                 " LANGUAGE plpgsql AS $f$ BEGIN EXECUTE q USING a, b; END $f$")
    small = [chr(97 + i) for i in range(10)]
    big = [f"{i:02d}x" for i in range(100)]
    sel = ("($1)[s.g0 + 1] AS age, ($2)[s.g1 + 1] AS zip, ($1)[s.g2 + 1] AS ethnicity,"
           " ($1)[s.g3 + 1] AS diagnosis, ($1)[s.g4 + 1] AS pt, ($1)[s.g5 + 1] AS size_mm")
    variants = {
        "release_shape_order_by_7_keys": "ORDER BY s.g0, s.g1, s.g2, s.g3, s.g4, s.g5, s.rid",
        "one_int8_key": "ORDER BY (s.g0::int8 << 50) | (s.g1::int8 << 40) | (s.g3::int8 << 30) | s.rid",
        "no_order_by": "",
    }
    out = {}
    for name, order in variants.items():
        conn.execute("DROP TABLE IF EXISTS bg_out")
        t, _ = timed(conn, "SELECT pg_temp.bg_ctas(%s, %s, %s)",
                     [f"CREATE TABLE bg_out AS SELECT {sel} FROM bg_stage s {order}", small, big])
        out[name] = t
    conn.execute("DROP TABLE IF EXISTS bg_out")
    conn.execute("DROP TABLE bg_stage")
    log("write-phase diagnosis (release-shaped CTAS of 1 stage table): "
        + ", ".join(f"{k} {v:.2f} s" for k, v in out.items()))
    return out


def priority_vectors(count, seed):
    rng = np.random.default_rng(seed + 1000)
    out = []
    spaced = np.arange(1, len(QIS) + 1) / len(QIS)
    for i in range(count):
        if i % 2 == 0:
            v = rng.permutation(spaced)
            kind = "spaced"
        else:
            v = rng.uniform(0.05, 1.0, len(QIS))
            kind = "uniform"
        out.append((kind, {q: round(float(x), 4) for q, x in zip(QIS, v)}))
    return out


def core_attributes(codes):
    """deid's own solver inputs for the generated rows: AttributeHierarchy per QI (request
    order) built from the same ARX rows / interval bands, and the class table (002 step 1)."""
    from deid.methods.generalization.generalize import AttributeHierarchy
    paths = member_paths()
    attrs, cols = [], []
    for c in QIS:
        if c in paths:
            a = AttributeHierarchy.from_paths(c, paths[c], MEMBER_PHI[c], source=SOURCE[c])
            col = codes[c]
        else:
            vals, col = np.unique(codes[c], return_inverse=True)
            a = AttributeHierarchy.from_paths(c, interval_paths(c, vals.tolist()), INTERVAL[c][3],
                                              source=SOURCE[c])
        attrs.append(a)
        cols.append(np.asarray(col, dtype=np.int64).reshape(-1))
    classes, counts = np.unique(np.stack(cols, axis=1), axis=0, return_counts=True)
    return attrs, classes, counts.astype(np.int64)


def core_solve(attrs, classes, counts, k, search, priorities):
    from deid.methods.generalization import generalize
    for a in attrs:
        a.priority = float(priorities.get(a.name, 1.0))
    t = time.perf_counter()
    r = (generalize.optimal if search == "optimal" else generalize.greedy)(classes, counts, attrs, k)
    return {"loss": r.loss, "levels": dict(zip(QIS, r.levels)), "core_s": time.perf_counter() - t}


def same(sql_metrics, core):
    return (all(int(sql_metrics["levels"][q]) == core["levels"][q] for q in QIS)
            and abs(sql_metrics["loss"] - core["loss"]) < 1e-9)


def bench_loss(conn, req, ks, vectors, core, timing, sql_vectors, log):
    """Loss of greedy vs optimal over the priority vectors. Every vector is solved by deid's own
    solver (python_udfs/deid/methods/generalize.py, the code the extension runs) on the class
    table of the very rows in bench_gen; the reference vector of the timing runs and the first
    `sql_vectors` vectors also go through deid.anonymize_request, and both answers must agree
    (a full request costs ~15 s here, mostly its write phase, so 4 x 20 requests would not fit)."""
    attrs, classes, counts = core
    out, mismatches = {}, []
    for k in ks:
        for search in ("greedy", "optimal"):        # the timing runs' SQL answers
            c = core_solve(attrs, classes, counts, k, search, REFERENCE)
            m = timing[k][search]
            if not same(m, c):
                mismatches.append({"k": k, "search": search, "priorities": REFERENCE,
                                   "sql": {"levels": m["levels"], "loss": m["loss"]}, "core": c})
        cases = []
        for i, (kind, pr) in enumerate(vectors):
            g = core_solve(attrs, classes, counts, k, "greedy", pr)
            o = core_solve(attrs, classes, counts, k, "optimal", pr)
            case = {"kind": kind, "priorities": pr, "greedy": g, "optimal": o}
            if i < sql_vectors:
                for search, c in (("greedy", g), ("optimal", o)):
                    t, m, res = req.run("bench_gen", k, search, pr)
                    c["sql"] = {"levels": m["levels"], "loss": m["loss"], "end_to_end_s": t,
                                "method_s": m["seconds"]["method"], "verified": res["verified"]}
                    if not same(m, c) or not res["verified"]:
                        mismatches.append({"k": k, "search": search, "priorities": pr,
                                           "sql": c["sql"], "core": {"levels": c["levels"],
                                                                     "loss": c["loss"]}})
            excess = g["loss"] - o["loss"]
            if excess < -1e-9:
                log(f"BUG? k={k} greedy loss {g['loss']} below optimal {o['loss']} for {pr}")
            case["excess"] = excess
            case["excess_rel"] = excess / o["loss"] if o["loss"] > 0 else 0.0
            cases.append(case)
        worse = [c for c in cases if c["excess"] > 1e-9]
        summ = {
            "vectors": len(cases),
            "greedy_worse": len(worse),
            "fraction_greedy_worse": len(worse) / len(cases),
            "greedy_better": sum(c["excess"] < -1e-9 for c in cases),
            "mean_excess": statistics.fmean(c["excess"] for c in cases),
            "max_excess": max(c["excess"] for c in cases),
            "mean_excess_rel": statistics.fmean(c["excess_rel"] for c in cases),
            "max_excess_rel": max(c["excess_rel"] for c in cases),
            "mean_excess_when_worse": statistics.fmean(c["excess"] for c in worse) if worse else 0.0,
            "mean_excess_rel_when_worse": statistics.fmean(c["excess_rel"] for c in worse) if worse else 0.0,
            "by_kind": {kind: {"vectors": sum(c["kind"] == kind for c in cases),
                               "greedy_worse": sum(c["kind"] == kind for c in worse)}
                        for kind in ("spaced", "uniform")},
            "median_core_s": {"greedy": med([c["greedy"]["core_s"] for c in cases]),
                              "optimal": med([c["optimal"]["core_s"] for c in cases])},
            "sql_checked_vectors": min(sql_vectors, len(cases)) + 1,
        }
        out[k] = {"summary": summ, "cases": cases}
        log(f"k={k:<3d} loss over {len(cases)} priority vectors: greedy > optimal in {len(worse)}"
            f" ({summ['fraction_greedy_worse']:.0%}); excess mean {summ['mean_excess']:.4f}"
            f" ({summ['mean_excess_rel']:.1%}), max {summ['max_excess']:.4f}"
            f" ({summ['max_excess_rel']:.1%}); core solve median greedy"
            f" {summ['median_core_s']['greedy']:.2f} s, optimal {summ['median_core_s']['optimal']:.2f} s")
    for mm in mismatches:
        log(f"BUG? SQL request and deid's solver disagree: {mm}")
    return out, mismatches


# ------------------------------------------------------------------------------------------------
# the peer (anjana) in its own venv


def ensure_venv(log):
    py = VENV / "bin" / "python"
    check = [str(py), "-c", "import anjana, pandas, matplotlib, pycanon"]
    if py.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return py
    log(f"creating {VENV.relative_to(ROOT)} ({', '.join(VENV_PACKAGES)}) ...")
    subprocess.run(["python3", "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", *VENV_PACKAGES], check=True)
    subprocess.run(check, check=True)
    return py


def make_sample(conn, n_rows):
    """The first n rows (ids are i.i.d. draws) as two tables: 2 sources, and one source."""
    for name, one in (("bench_gen_peer", False), ("bench_gen_peer1", True)):
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(f"CREATE TABLE {name} AS SELECT * FROM bench_gen WHERE id <= %s", [n_rows])
        conn.execute(f"ALTER TABLE {name} ADD PRIMARY KEY (id)")
        for c in QIS:
            conn.execute(f"SELECT deid.set_role('{name}', %s, 'quasi_identifier', hierarchy => %s,"
                         " source => %s)", [c, f"bg_{c}", "all" if one else SOURCE[c]])
        conn.execute(f"VACUUM ANALYZE {name}")


def export_peer_input(conn, n_rows, workdir):
    """data.csv (id + 6 QIs) and one ARX-style hierarchy CSV per QI (one row per leaf)."""
    with open(workdir / "data.csv", "wb") as f, conn.cursor().copy(
            f"COPY (SELECT id, {', '.join(QIS)} FROM bench_gen WHERE id <= {int(n_rows)} ORDER BY id)"
            " TO STDOUT WITH (FORMAT csv, HEADER)") as cp:
        for chunk in cp:
            f.write(chunk)
    paths = member_paths()
    for c in QIS:
        if c in paths:
            rows = paths[c]
        else:
            vals = [r[0] for r in conn.execute(
                f"SELECT DISTINCT {c} FROM bench_gen WHERE id <= %s ORDER BY 1", [n_rows])]
            rows = interval_paths(c, vals)
        (workdir / f"{c}.csv").write_text("\n".join(";".join(map(str, r)) for r in rows) + "\n")


def run_peer(py, conn, req, n_rows, k, timeout, log):
    phi = {c: (INTERVAL[c][3] if c in INTERVAL else MEMBER_PHI[c]) for c in QIS}
    deid = {}
    for table, label in (("bench_gen_peer1", "one_source"), ("bench_gen_peer", "two_sources")):
        for search in ("greedy", "optimal"):
            t, m, res = req.run(table, k, search)          # priorities: all 1 (deid's default)
            deid[f"{search}_{label}"] = {"end_to_end_s": t, "method_s": m["seconds"]["method"],
                                         "levels": m["levels"], "loss": m["loss"],
                                         "groups": res["groups"],
                                         "discernibility": res["discernibility"]}
    with tempfile.TemporaryDirectory(prefix="bench_gen_peer_") as d:
        work = pathlib.Path(d)
        export_peer_input(conn, n_rows, work)
        cmd = [str(py), str(PEER), "anjana", "--dir", str(work), "--k", str(k),
               "--qis", ",".join(QIS), "--numeric", ",".join(INTERVAL)]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            peer = {"status": "timeout", "wall_s": time.perf_counter() - t0,
                    "error": f"anjana did not finish {n_rows} rows within {timeout} s"}
        else:
            if p.returncode != 0:
                peer = {"status": "failed", "wall_s": time.perf_counter() - t0,
                        "error": (p.stderr or p.stdout).strip()[-3000:]}
            else:
                peer = json.loads(p.stdout.strip().splitlines()[-1])
                peer["status"] = "ok"
    if peer.get("status") == "ok" and peer.get("levels") is not None:
        peer["loss"] = float(sum(phi[c][lv] for c, lv in peer["levels"].items()))
    r = {"rows": n_rows, "k": k, "privacy_model": "k over all 6 QIs, no record suppression",
         "deid": deid, "anjana": peer}
    if peer.get("status") == "ok":
        base = deid["greedy_one_source"]
        r["anjana_over_deid_greedy_time"] = peer["seconds"] / base["end_to_end_s"]
        r["anjana_over_deid_optimal_time"] = peer["seconds"] / deid["optimal_one_source"]["end_to_end_s"]
        log(f"peer n={n_rows} k={k}: anjana {peer['seconds']:.1f} s levels {peer['levels']} loss"
            f" {peer.get('loss', float('nan')):.3f} classes {peer.get('classes')} (min"
            f" {peer.get('min_class')}); deid greedy (one source) {base['end_to_end_s']:.2f} s loss"
            f" {base['loss']:.3f} levels {base['levels']}; optimal"
            f" {deid['optimal_one_source']['end_to_end_s']:.2f} s loss"
            f" {deid['optimal_one_source']['loss']:.3f} -> anjana / deid greedy ="
            f" {r['anjana_over_deid_greedy_time']:.0f} x")
    else:
        log(f"peer n={n_rows} k={k}: anjana {peer['status']}: {peer.get('error', '')[-400:]}")
    return r


# ------------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run (< 1 min)")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--k", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--vectors", type=int, default=20)
    ap.add_argument("--sql-vectors", type=int, default=2,
                    help="of the priority vectors, how many also go through anonymize_request")
    ap.add_argument("--budget", type=float, default=1500,
                    help="seconds; a larger peer sample is tried only if it should fit")
    ap.add_argument("--peer-rows", type=int, nargs="*", default=[100_000, 1_000_000],
                    help="sample sizes for anjana, tried in order while the previous one finished"
                         " and a linear extrapolation x1.5 fits --peer-timeout and --budget")
    ap.add_argument("--peer-k", type=int, default=10)
    ap.add_argument("--peer-timeout", type=float, default=600)
    ap.add_argument("--output", default="generalization")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.repeat, args.vectors, args.sql_vectors = 50_000, 1, 4, 1
        args.peer_rows, args.peer_timeout = [3_000, 10_000], 60
        args.output = "generalization_quick"
    t_start = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t_start:6.0f} s] {msg}", flush=True)

    py = ensure_venv(log)
    conn, codes = fresh_database(args.rows, args.seed, log)
    req = Requests(conn)
    _, (row,) = group_by(conn)
    registry = conn.execute("SELECT count(*) FROM (SELECT 1 FROM bench_gen GROUP BY age, zip,"
                            " ethnicity) s").fetchone()[0]
    pathology = conn.execute("SELECT count(*) FROM (SELECT 1 FROM bench_gen GROUP BY diagnosis, pt,"
                             " size_mm) s").fetchone()[0]
    log(f"classes: {row[0]} over 6 QIs, registry {registry}, pathology {pathology}")
    result = {
        "benchmark": "generalization", "rows": args.rows, "seed": args.seed, "ks": args.k, "quick": args.quick,
        "cores": os.cpu_count(), "load_before": os.getloadavg(),
        "data": {"qis": {c: {"source": SOURCE[c],
                             "hierarchy": "interval" if c in INTERVAL else "member",
                             "levels": len(INTERVAL[c][3]) if c in INTERVAL else len(MEMBER_PHI[c]),
                             "info_loss": INTERVAL[c][3] if c in INTERVAL else MEMBER_PHI[c]}
                         for c in QIS},
                 "classes_6_qis": row[0], "classes_registry": registry,
                 "classes_pathology": pathology},
        "reference_priorities": REFERENCE,
        "targets": {"greedy_method_over_group_by": 5.0},
    }
    result["timing"] = bench_timing(conn, req, args.k, args.repeat, log)
    result["write_diagnosis_s"] = diagnose_write(conn, log)
    core = core_attributes(codes)
    del codes
    result["loss"], result["sql_core_mismatches"] = bench_loss(
        conn, req, args.k, priority_vectors(args.vectors, args.seed), core, result["timing"],
        args.sql_vectors, log)
    del core
    peers, last = [], None
    for n in args.peer_rows:
        if n > args.rows:
            continue
        if last is not None:
            a = last["anjana"]
            guess = a.get("seconds", float("inf")) * n / last["rows"] * 1.5
            left = args.budget - (time.perf_counter() - t_start)
            if a.get("status") != "ok" or guess > min(args.peer_timeout, left - 60):
                log(f"peer: not trying {n} rows (anjana {a.get('status')}, expected ~{guess:.0f} s,"
                    f" timeout {args.peer_timeout:.0f} s, budget left {left:.0f} s)")
                peers.append({"rows": n, "skipped": True, "expected_s": guess,
                              "reason": "expected time above the timeout or the remaining budget"})
                break
        make_sample(conn, n)
        last = run_peer(py, conn, req, n, args.peer_k, args.peer_timeout, log)
        peers.append(last)
    result["peer"] = peers
    result["total_s"] = time.perf_counter() - t_start
    result["load_after"] = os.getloadavg()
    path = save(args.output, result)
    log(f"wrote {path.relative_to(ROOT)}")
    png = RESULTS / f"{args.output}.png"
    p = subprocess.run([str(py), str(PEER), "plot", "--json", str(path), "--png", str(png)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        log(f"plot failed: {p.stderr.strip()[-1000:]}")
    else:
        log(f"wrote {png.relative_to(ROOT)}")
    for k in args.k:
        g = result["timing"][k]["greedy"]
        ok = "meets" if g["method_over_group_by"] <= 5.0 else "MISSES"
        log(f"summary k={k}: greedy method {g['method_over_group_by']:.2f} x GROUP BY ({ok} aim <= 5x),"
            f" end-to-end {g['end_to_end_over_ctas']:.2f} x CTAS; optimal method"
            f" {result['timing'][k]['optimal']['method_over_group_by']:.2f} x GROUP BY;"
            f" greedy > optimal loss in {result['loss'][k]['summary']['fraction_greedy_worse']:.0%}"
            f" of vectors")
    conn.close()


if __name__ == "__main__":
    main()
