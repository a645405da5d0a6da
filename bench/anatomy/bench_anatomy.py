"""Benchmarks of method => 'anatomy' (paper 001): utility, query error, speed.

    .venv/bin/python bench/anatomy/bench_anatomy.py [--quick]

Runs with the project's client venv (.venv: psycopg + Debian's numpy 1.24). Everything that
needs other packages runs in a subprocess of a separate venv, bench/.venv-peers, which this
script creates idempotently (`/usr/bin/python3 -m venv` + pip install matplotlib pandas
umbra-k anonypy; git-ignored): the PNG plots and the two PyPI peer libraries.

All work happens in the database `deid_bench_anatomy` of the private cluster (dropped and
re-created at the start of every run, so old releases and RID sets never pile up; override
the URI with DEID_BENCH_URL). Data are generated with numpy (fixed seed) and loaded with
binary COPY: a patient table shaped like 001's Kentucky Cancer Registry extract -- 72,194
rows, QIs birth date, sex, race, zip; seven skewed sensitive attributes in 001's order
(tumor topography, histology, survival years, diagnosis date, age at diagnosis, tumor size,
tumor site), with the dependencies real registry data has (histology follows topography,
age at diagnosis = diagnosis date - birth date, breast/prostate follow sex, ...).

  a. utility: discernibility (001 Figs. 9-11) of anonymize_request for varying L (K=50,
     m=3), K (L=10, m=3) and m (K=50, L=10), model 'kl' (001 Anonymize) vs 'exponential_l'
     (001 Exponential-L).  Target: discernibility <= 1.5 K at K=50, L=10, m=3.
  b. query error (001 Table 1): ARE of 8,800 random COUNT queries (1-4 conditions, one on a
     sensitive attribute) estimated from the released QIT + count tables read back from the
     database, split at 1% of the patients.  Targets (001 Table 1, Anonymize): all < 11.3%,
     >= 1% queries < 1.6%.
  c. speed: 1M rows (4 QIs, 3 sensitive), K=50, L=10, the committed anonymize_request vs a
     CREATE TABLE AS copy of the same table in the same run (bar <= 10x, aim <= 5x), backend
     VmHWM of a fresh connection; 100k rows, K=10, k-anonymity only: deid vs umbra-k and
     anonypy (aim: deid >= 20x faster).

Writes bench/results/anatomy.json (anatomy_quick.json with --quick) and PNG plots
bench/results/anatomy_*.png.
"""
import argparse
import io
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
from common import RESULTS, ROOT, backend_peak_kb, save, url  # noqa: E402
import common  # noqa: E402
from deid.methods import metrics  # noqa: E402  (pure numpy: query generation, ARE, cross-checks)

DB = "deid_bench_anatomy"
PEERS = ROOT / "bench" / ".venv-peers"
PEER_PACKAGES = ["matplotlib", "pandas", "umbra-k", "anonypy"]
QIS = ["birth_date", "sex", "race", "zip"]
SAS = ["topography", "histology", "survival_years", "dx_date", "age_at_dx", "tumor_size",
       "tumor_site"]
TEXT = {"sex": 1, "race": 2, "zip": 5}            # fixed-width text codes (NAACCR style)
DATES = {"birth_date", "dx_date"}                  # days since 1970-01-01 client-side
EPOCH_2000 = 10957                                 # PostgreSQL's binary date epoch, in days
PAPER_ROWS = 72_194


# --------------------------------------------------------------------------- data

def make_patients(n, seed=20080101):
    """Generated registry-like patients. Every column is an int64 array client-side: dates
    as days since 1970-01-01, text codes as their integer (zero-padded in the table, so
    text order = integer order)."""
    rng = np.random.default_rng(seed)

    def zipf_choice(values, s, size, perm=True):
        w = 1.0 / np.arange(1, len(values) + 1) ** s
        v = rng.permutation(values) if perm else np.asarray(values)
        return v[rng.choice(len(v), size, p=w / w.sum())]

    day = lambda y, m=1, d=1: int(np.datetime64(f"{y:04d}-{m:02d}-{d:02d}", "D").astype(int))
    dx = rng.integers(day(1995), day(2008), n)                              # diagnosis date
    mix = rng.random(n)
    age = np.where(mix < 0.85, rng.normal(66, 12, n),
                   np.where(mix < 0.95, rng.normal(45, 10, n), rng.uniform(0, 30, n)))
    age = np.clip(np.round(age), 0, 100).astype(np.int64)
    birth = dx - np.round(age * 365.25).astype(np.int64) - rng.integers(0, 365, n)
    age = ((dx - birth) / 365.25).astype(np.int64)                        # exact, derived
    sex = np.where(rng.random(n) < 0.52, 2, 1)                              # 1 male, 2 female
    race = rng.choice([1, 2, 3, 4, 5, 6, 96, 98, 99], n,
                      p=[0.874, 0.081, 0.004, 0.003, 0.003, 0.002, 0.008, 0.010, 0.015])
    zips = np.sort(rng.choice(np.arange(40003, 42789), 760, replace=False))
    zipc = zipf_choice(zips, 0.9, n)
    codes = np.sort(rng.choice(np.arange(0, 810), 320, replace=False))    # C00.0..C80.9
    topo = zipf_choice(codes, 1.1, n)
    r = rng.random(n)
    topo = np.where((sex == 2) & (r < 0.28), 509, topo)                     # breast
    topo = np.where((sex == 1) & (r < 0.26), 619, topo)                     # prostate
    topo = np.where((sex == 1) & (topo == 509) & (r > 0.99), 509,
                    np.where((sex == 1) & (topo == 509), 619, topo))
    hists = np.sort(rng.choice(np.arange(8000, 9990), 260, replace=False))
    pref = hists[rng.integers(0, len(hists), 810)]                          # per topography
    second = hists[rng.integers(0, len(hists), 810)]
    r = rng.random(n)
    hist = np.where(r < 0.62, pref[topo], np.where(r < 0.78, second[topo],
                                                   zipf_choice(hists, 1.2, n)))
    follow = (day(2009) - dx) / 365.25
    mean_surv = np.clip(9 - (age - 50) / 8.0, 1, 15)
    surv = np.minimum(np.floor(rng.exponential(mean_surv)), np.floor(follow)).astype(np.int64)
    size = np.clip(np.round(rng.lognormal(3.0, 0.8, n)), 1, 989).astype(np.int64)
    size = np.where(rng.random(n) < 0.27, 999, size)                        # 999 = unknown
    group_of = rng.integers(0, 31, 810)
    site = np.where(rng.random(n) < 0.9, group_of[topo], zipf_choice(np.arange(31), 1.0, n))
    cols = {"birth_date": birth, "sex": sex, "race": race, "zip": zipc, "topography": topo,
            "histology": hist, "survival_years": surv, "dx_date": dx, "age_at_dx": age,
            "tumor_size": size, "tumor_site": site}
    return {k: np.ascontiguousarray(v, dtype=np.int64) for k, v in cols.items()}


def sql_type(c):
    return "text" if c in TEXT else "date" if c in DATES else "integer"


def copy_binary(columns, n):
    """A PGCOPY binary image of (id bigint, columns...) built with one structured array."""
    fields = [("nf", ">i2"), ("l_id", ">i4"), ("id", ">i8")]
    for c in columns:
        fields += [(f"l_{c}", ">i4"), (c, f"S{TEXT[c]}" if c in TEXT else ">i4")]
    rec = np.empty(n, dtype=np.dtype(fields))
    rec["nf"] = 1 + len(columns)
    rec["l_id"] = 8
    rec["id"] = np.arange(1, n + 1)
    for c, v in columns.items():
        if c in TEXT:
            rec[f"l_{c}"] = TEXT[c]
            rec[c] = np.char.zfill(v.astype(f"U{TEXT[c]}"), TEXT[c]).astype(f"S{TEXT[c]}")
        else:
            rec[f"l_{c}"] = 4
            rec[c] = v - EPOCH_2000 if c in DATES else v
    head = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
    return head + rec.tobytes() + b"\xff\xff"


def load_table(conn, name, data, columns):
    conn.execute(f"DROP TABLE IF EXISTS {name} CASCADE")
    conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, "
                 + ", ".join(f"{c} {sql_type(c)} NOT NULL" for c in columns) + ")")
    n = len(data[columns[0]])
    buf = copy_binary({c: data[c] for c in columns}, n)
    with conn.cursor() as cur:
        with cur.copy(f"COPY {name} (id, {', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as cp:
            for i in range(0, len(buf), 1 << 24):
                cp.write(buf[i:i + (1 << 24)])
    conn.execute(f"VACUUM ANALYZE {name}")
    for c in columns:
        role = "quasi_identifier" if c in QIS else "sensitive"
        conn.execute("SELECT deid.set_role(%s::regclass, %s, %s)", (name, c, role))


# --------------------------------------------------------------------------- plumbing

def log(msg):
    print(msg, flush=True)


def fresh_database():
    return common.fresh_database(DB)


def request(conn, table, k, l, columns, release, options=None):
    """One anonymize_request; returns a dict with its result or its error."""
    opts = dict(options or {}, seed=7, replace=True)
    t = time.perf_counter()
    try:
        row = conn.execute(
            "SELECT release_id, relations, rows, groups, discernibility, verified FROM"
            " deid.anonymize_request(%s::regclass, 'anatomy', k => %s, l => %s, columns => %s,"
            " options => %s::jsonb, release => %s)",
            (table, k, l, columns, json.dumps(opts), release)).fetchone()
    except psycopg.Error as e:
        diag = e.diag
        return {"ok": False, "seconds": time.perf_counter() - t, "sqlstate": diag.sqlstate,
                "error": diag.message_primary, "detail": diag.message_detail}
    out = {"ok": True, "seconds": time.perf_counter() - t, "release_id": row[0],
           "relations": row[1], "rows": row[2], "groups": row[3], "discernibility": row[4],
           "verified": row[5]}
    m = conn.execute("SELECT metrics FROM deid.release WHERE release_id = %s", (row[0],)).fetchone()[0]
    out["phase_seconds"] = m.get("seconds")
    out["min_group"] = m.get("min_group")
    return out


def client_anatomize(data, m, k, l, model):
    """The method alone, client-side (same code as the server), for points whose request
    failed: what the release would have been.  Not a release; labelled as such."""
    from deid.methods.anatomy.partition import anatomize
    qi = np.stack([data[c] for c in QIS], axis=1).astype(np.float64)
    sa = np.stack([np.unique(data[c], return_inverse=True)[1] for c in SAS[:m]], axis=1)
    try:
        r = anatomize(qi, sa.astype(np.int64), k, l, model=model)
    except Exception as e:  # noqa: BLE001 -- reported, not hidden
        return {"ok": False, "error": str(e)}
    return {"ok": True, "discernibility": metrics.discernibility(np.bincount(r.group_id)),
            "groups": int(r.n_groups)}


# --------------------------------------------------------------------------- a. utility

def utility(conn, data, n, quick):
    Ls = [2, 4, 10] if quick else [2, 4, 6, 8, 10, 12]
    Ks = [10, 50, 100] if quick else [10, 25, 50, 100, 200]
    ms = [1, 3, 7] if quick else [1, 2, 3, 4, 5, 6, 7]
    sweeps = {"L": [(50, L, 3) for L in Ls], "K": [(K, 10, 3) for K in Ks],
              "m": [(50, 10, m) for m in ms]}
    out = {"rows": n, "sweeps": {}}
    done = {}
    for axis, points in sweeps.items():
        rows = []
        for k, l, m in points:
            for model in ("kl", "exponential_l"):
                key = (k, l, m, model)
                if key not in done:
                    name = f"u_{'kl' if model == 'kl' else 'exp'}_k{k}_l{l}_m{m}"
                    r = request(conn, "patients", k, l, QIS + SAS[:m], name, {"model": model})
                    r.update(K=k, L=l, m=m, model=model, release=name)
                    if not r["ok"]:
                        r["client_method_only"] = client_anatomize(data, m, k, l, model)
                    done[key] = r
                    d = r.get("discernibility")
                    log(f"  K={k:<3} L={l:<2} m={m} {model:<13} " + (
                        f"discernibility {d:8.1f} ({d / k:.2f} K), {r['groups']} groups, "
                        f"{r['seconds']:.1f} s" if r["ok"] else
                        f"REFUSED {r['sqlstate']}: {r['error'][:110]}"))
                rows.append(done[key])
        out["sweeps"][axis] = rows
    t = done[(50, 10, 3, "kl")]
    out["target"] = {"K": 50, "L": 10, "m": 3, "discernibility": t.get("discernibility"),
                     "bound": 1.5 * 50,
                     "pass": bool(t["ok"] and t["discernibility"] <= 1.5 * 50)}
    return out, done


# --------------------------------------------------------------------------- b. ARE

def read_release(conn, release, m):
    """The released QIT and count tables, as analysts see them (schema release)."""
    def arr(rows, i):
        return np.fromiter((r[i] for r in rows), dtype=np.int64, count=len(rows))
    rows = conn.execute(
        f"SELECT group_id, birth_date - DATE '1970-01-01', sex::int, race::int, zip::int"
        f" FROM release.{release}_qit").fetchall()
    qit = {"group_id": arr(rows, 0)}
    for j, c in enumerate(QIS):
        qit[c] = arr(rows, j + 1)
    sts = {}
    for a in SAS[:m]:
        v = f"{a} - DATE '1970-01-01'" if a in DATES else a
        rows = conn.execute(f"SELECT group_id, {v}, count FROM release.{release}_{a}").fetchall()
        sts[a] = (arr(rows, 0), arr(rows, 1), arr(rows, 2))
    return qit, sts


def rid_groups(conn, release_id, attribute, n):
    """Row -> group from deid.rid_sets (superuser; 001 Theorem 3), for the consistency
    checks of the release (analysts cannot read it)."""
    rows = conn.execute("SELECT r, group_id FROM deid.rid_sets, unnest(rids) r"
                        " WHERE release_id = %s AND attribute = %s",
                        (release_id, attribute)).fetchall()
    rid = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    grp = np.fromiter((r[1] for r in rows), np.int64, len(rows))
    g = np.full(n, -1, dtype=np.int64)
    ok = len(rid) == n and np.array_equal(np.sort(rid), np.arange(1, n + 1))
    if ok:
        g[rid - 1] = grp
    return g if ok else None


def check_release(data, qit, sts, row_group, k, m):
    """The released tables agree with the source and the RID sets: every row in one group,
    QIT = (group, QIs) of the source rows, count tables = the per-group value counts."""
    problems = []
    if row_group is None:
        return ["deid.rid_set is not a partition of the source rows"]
    G = int(row_group.max()) + 1
    sizes = np.bincount(row_group, minlength=G)
    if sizes.min() < k:
        problems.append(f"smallest group {sizes.min()} < K")
    key = lambda g, cols: np.lexsort([cols[c] for c in reversed(QIS)] + [g])
    src = {c: data[c] for c in QIS}
    a, b = key(row_group, src), key(qit["group_id"], qit)
    if not (np.array_equal(row_group[a], qit["group_id"][b]) and
            all(np.array_equal(src[c][a], qit[c][b]) for c in QIS)):
        problems.append("QIT differs from (group, QIs) of the source rows")
    for s in SAS[:m]:
        g, v, c = metrics.sensitive_table(row_group, data[s])
        sg, sv, sc = sts[s]
        o = np.lexsort((sv, sg))
        if not (np.array_equal(g, sg[o]) and np.array_equal(v, sv[o]) and np.array_equal(c, sc[o])):
            problems.append(f"count table of {s} differs from the source")
    return problems


class Estimator:
    """COUNT(*) estimates from an anatomy release (001 Def. 3), vectorised per query:
    QIT rows matching the QI conditions are counted per group with one bincount, each
    sensitive condition becomes a per-group fraction from its count table."""

    def __init__(self, qit, sts):
        self.G = int(qit["group_id"].max()) + 1
        self.g = qit["group_id"]
        self.qit = qit
        self.sizes = np.bincount(self.g, minlength=self.G).astype(np.float64)
        self.st = {}
        for a, (sg, sv, sc) in sts.items():
            tot = np.bincount(sg, weights=sc, minlength=self.G)
            self.st[a] = (sg, sv, sc.astype(np.float64), tot)

    def estimate(self, q):
        mask = None
        frac = None
        for c in q.conditions:
            if c.sensitive:
                sg, sv, sc, tot = self.st[c.attribute]
                hit = np.bincount(sg, weights=sc * ((sv >= c.lo) & (sv <= c.hi)), minlength=self.G)
                f = np.divide(hit, tot, out=np.zeros(self.G), where=tot > 0)
                frac = f if frac is None else frac * f
            else:
                col = self.qit[c.attribute]
                mm = (col == c.lo) if c.lo == c.hi else ((col >= c.lo) & (col <= c.hi))
                mask = mm if mask is None else mask & mm
        cnt = self.sizes if mask is None else np.bincount(self.g[mask], minlength=self.G)
        return float(np.dot(cnt, frac)) if frac is not None else float(cnt.sum())


def exact_counts(queries, data):
    out = np.empty(len(queries), dtype=np.int64)
    for i, q in enumerate(queries):
        mask = None
        for c in q.conditions:
            col = data[c.attribute]
            mm = (col == c.lo) if c.lo == c.hi else ((col >= c.lo) & (col <= c.hi))
            mask = mm if mask is None else mask & mm
        out[i] = np.count_nonzero(mask)
    return out


def query_error(conn, data, n, done, n_queries, quick):
    m, k, l = 3, 50, 10
    rng = np.random.default_rng(2008)
    queries = metrics.random_count_queries(rng, data, QIS, SAS[:m], n_queries, max_conditions=4,
                                           categorical=("sex", "race"))
    t = time.perf_counter()
    actual = exact_counts(queries, data)
    t_exact = time.perf_counter() - t
    nc = np.bincount([len(q.conditions) for q in queries], minlength=5)[1:]
    out = {"K": k, "L": l, "m": m, "queries": n_queries, "conditions_histogram": nc.tolist(),
           "exact_seconds": t_exact, "models": {}}
    sub = queries[:300]
    for model in ("kl", "exponential_l"):
        r = done[(k, l, m, model)]
        res = {"request": {x: r.get(x) for x in ("ok", "release", "groups", "discernibility",
                                                  "sqlstate", "error")}}
        if r["ok"]:
            qit, sts = read_release(conn, r["release"], m)
            row_group = rid_groups(conn, r["release_id"], SAS[0], n)
            problems = check_release(data, qit, sts, row_group, k, m)
            d_qit = metrics.discernibility(np.bincount(qit["group_id"]))
            if abs(d_qit - r["discernibility"]) > 1e-6 * d_qit:
                problems.append(f"returned discernibility {r['discernibility']} != {d_qit} of the QIT")
            res["release_check"] = problems or "ok"
            est = Estimator(qit, sts)
            t = time.perf_counter()
            e = np.array([est.estimate(q) for q in queries])
            res["estimate_seconds"] = time.perf_counter() - t
            # cross-check against the reference implementation in deid.metrics
            ref_e = np.array([metrics.anatomy_estimate(
                q, {c: qit[c] for c in QIS}, qit["group_id"], sts) for q in sub])
            ref_a = np.array([metrics.exact_count(q, data) for q in sub])
            res["crosscheck_max_abs_diff"] = {"estimate": float(np.abs(ref_e - e[:len(sub)]).max()),
                                              "exact": int(np.abs(ref_a - actual[:len(sub)]).max())}
            res["are"] = metrics.are(actual, e, n=n)
        else:
            # 001 reports Exponential-L as one group holding the whole table; deid refuses
            # (that group is not Exponential-L either).  Estimate it that way, labelled.
            qit = {c: data[c] for c in QIS}
            qit["group_id"] = np.zeros(n, dtype=np.int64)
            sts = {a: metrics.sensitive_table(qit["group_id"], data[a]) for a in SAS[:m]}
            e = np.array([Estimator(qit, sts).estimate(q) for q in queries])
            res["are_one_group_as_in_001"] = metrics.are(actual, e, n=n)
        out["models"][model] = res
    kl = out["models"]["kl"].get("are")
    out["target"] = {"all_below": 0.113, "large_below": 0.016,
                     "all": kl and kl["all"], "large": kl and kl["large"],
                     "pass_all": bool(kl and kl["all"] < 0.113),
                     "pass_large": bool(kl and kl["large"] is not None and kl["large"] < 0.016)}
    return out


# --------------------------------------------------------------------------- c. speed

def ctas(conn, table, reps):
    times = []
    for _ in range(reps):
        conn.execute(f"DROP TABLE IF EXISTS {table}_copy")
        t = time.perf_counter()
        conn.execute(f"CREATE TABLE {table}_copy AS SELECT * FROM {table}")
        times.append(time.perf_counter() - t)
    conn.execute(f"DROP TABLE IF EXISTS {table}_copy")
    return times


def speed_1m(conn, n, repeat):
    """CTAS x3, then `repeat` x (fresh connection: anonymize_request), then CTAS x3; the
    ratio is median(request) / median(all CTAS runs), all in this run."""
    cols = QIS + SAS[:3]
    t = time.perf_counter()
    data = make_patients(n, seed=1_000_000)
    load_table(conn, "patients_1m", data, cols)
    log(f"  generated + loaded {n} rows in {time.perf_counter() - t:.1f} s")
    del data
    before = ctas(conn, "patients_1m", 3)
    runs = []
    for _ in range(repeat):
        fresh = psycopg.connect(url(DB), autocommit=True)
        base_kb = backend_peak_kb(fresh)
        r = request(fresh, "patients_1m", 50, 10, cols, "speed_1m")
        r["backend_vmhwm_kb"] = backend_peak_kb(fresh)
        r["backend_vmhwm_fresh_kb"] = base_kb
        fresh.close()
        runs.append(r)
        if not r["ok"]:
            break
    after = ctas(conn, "patients_1m", 3)
    floor = float(np.median(before + after))
    ok = [x for x in runs if x["ok"]]
    r = dict(sorted(ok, key=lambda x: x["seconds"])[len(ok) // 2]) if ok else runs[0]
    r["runs_s"] = [x["seconds"] for x in runs]
    r["backend_vmhwm_kb_runs"] = [x["backend_vmhwm_kb"] for x in runs]
    out = {"rows": n, "K": 50, "L": 10, "columns": cols, "ctas_runs": before + after,
           "ctas_s": floor, "request": r}
    if r["ok"]:
        out["ratio"] = r["seconds"] / floor
        out["pass_bar_10x"] = out["ratio"] <= 10
        out["pass_aim_5x"] = out["ratio"] <= 5
    return out


PEER_SCRIPT = r'''
import json, sys, time
import pandas as pd
lib, path, k, qis, sens = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(","), sys.argv[5]
t0 = time.perf_counter()
df = pd.read_csv(path, dtype={"sex": str, "race": str})
df["birth_date"] = (pd.to_datetime(df["birth_date"]) - pd.Timestamp("1970-01-01")).dt.days
t_load = time.perf_counter() - t0
out = {"lib": lib, "rows": len(df), "load_s": t_load}
if lib == "umbra-k":
    from umbra_k import MondrianAnonymizer
    import importlib.metadata as md
    out["version"] = md.version("umbra-k")
    a = MondrianAnonymizer(k=k, quasi_id=qis)
    t = time.perf_counter()
    res = a.fit_transform(df)
    out["anonymize_s"] = time.perf_counter() - t
    sizes = [len(p) for p in a._partitions]
    out["min_class_in_output"] = int(res.groupby(qis).size().min())
elif lib == "anonypy":
    import anonypy
    import importlib.metadata as md
    out["version"] = md.version("anonypy")
    for c in ("sex", "race"):
        df[c] = df[c].astype("category")
    t = time.perf_counter()
    p = anonypy.Preserver(df, qis, sens)          # = Preserver.anonymize_k_anonymity(k),
    parts = p.modrian.partition(k)                # split in two steps to get the sizes
    rows = anonypy.anonymize(df, parts, qis, sens)
    out["anonymize_s"] = time.perf_counter() - t
    sizes = [len(x) for x in parts]
    flat = pd.DataFrame([{c: (r[c][0] if isinstance(r[c], list) else r[c]) for c in qis + ["count"]}
                         for r in rows])              # anonypy returns QI labels as [label]
    out["min_class_in_output"] = int(flat.groupby(qis)["count"].sum().min())
sizes = [s for s in sizes if s]
out["classes"] = len(sizes)
out["min_class"] = min(sizes)
out["discernibility"] = sum(s * s for s in sizes) / sum(sizes)
print(json.dumps(out))
'''


def ensure_peers():
    """bench/.venv-peers with matplotlib, pandas, umbra-k, anonypy (idempotent)."""
    py = PEERS / "bin" / "python"
    if not py.exists():
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(PEERS)], check=True)
    missing = subprocess.run([str(py), "-c", "import matplotlib, pandas"],
                             capture_output=True).returncode != 0
    for pkg in PEER_PACKAGES:
        if missing or subprocess.run([str(py), "-m", "pip", "show", "-q", pkg],
                                     capture_output=True).returncode != 0:
            r = subprocess.run([str(py), "-m", "pip", "install", "-q", *PEER_PACKAGES],
                               capture_output=True, text=True)
            if r.returncode != 0:
                log("  pip install into bench/.venv-peers failed:\n" + r.stderr[-2000:])
            break
    return py


def run_peer(py, lib, csv, k, timeout):
    try:
        r = subprocess.run([str(py), "-c", PEER_SCRIPT, lib, str(csv), str(k), ",".join(QIS),
                            "topography"], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"lib": lib, "ok": False, "timeout_s": timeout, "error": f"> {timeout} s (timeout)"}
    if r.returncode != 0:
        return {"lib": lib, "ok": False, "error": (r.stderr.strip().splitlines() or ["?"])[-1],
                "stderr_tail": r.stderr[-1500:]}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["ok"] = True
    return out


def speed_peers(conn, n, timeout, py):
    cols = QIS + ["topography"]
    data = make_patients(n, seed=100_000)
    load_table(conn, "patients_peer", data, cols)
    csv = RESULTS / f".peer_{n}.csv"
    with open(csv, "wb") as f, conn.cursor() as cur:
        with cur.copy(f"COPY (SELECT {', '.join(cols)} FROM patients_peer ORDER BY id)"
                      " TO STDOUT (FORMAT CSV, HEADER)") as cp:
            for chunk in cp:
                f.write(chunk)
    runs = [request(conn, "patients_peer", 10, None, cols, f"speed_peer_{i}") for i in range(3)]
    ok = [r for r in runs if r["ok"]]
    deid = {"runs_s": [r["seconds"] for r in runs], "ok": bool(ok)}
    if ok:
        deid.update(seconds=float(np.median([r["seconds"] for r in ok])),
                    discernibility=ok[0]["discernibility"], groups=ok[0]["groups"],
                    min_group=ok[0]["min_group"])
    else:
        deid["error"] = runs[0]["error"]
    log(f"  deid    {n} rows K=10: " + (f"{deid['seconds']:.2f} s (median of 3, committed),"
                                        f" discernibility {deid['discernibility']:.1f}"
                                        if ok else f"FAILED {deid['error']}"))
    peers = {}
    for lib in ("umbra-k", "anonypy"):
        r = run_peer(py, lib, csv, 10, timeout)
        if r["ok"] and deid["ok"]:
            r["ratio_peer_over_deid"] = r["anonymize_s"] / deid["seconds"]
            r["pass_aim_20x"] = r["ratio_peer_over_deid"] >= 20
        elif not r["ok"] and r.get("timeout_s") and deid["ok"]:
            r["ratio_peer_over_deid"] = f"> {r['timeout_s'] / deid['seconds']:.0f}"
            r["pass_aim_20x"] = r["timeout_s"] / deid["seconds"] >= 20
        peers[lib] = r
        log(f"  {lib:<7} {n} rows K=10: " + (
            f"{r['anonymize_s']:.2f} s anonymize (+{r['load_s']:.2f} s CSV load), "
            f"discernibility {r['discernibility']:.1f}, min class {r['min_class_in_output']}"
            f" -> deid is {r.get('ratio_peer_over_deid', float('nan')):.1f}x faster"
            if r["ok"] else f"FAILED: {r['error']}"))
    csv.unlink()
    return {"rows": n, "K": 10, "columns": cols, "deid": deid, "peers": peers}


# --------------------------------------------------------------------------- plots

PLOT_SCRIPT = r'''
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
res = json.load(open(sys.argv[1])); prefix = sys.argv[2]
written = []
u = res["utility"]; n = u["rows"]
titles = {"L": "Varying L (K=50, m=3)", "K": "Varying K (L=10, m=3)", "m": "Varying m (K=50, L=10)"}
for axis in ("L", "K", "m"):
    pts = u["sweeps"][axis]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for model, label, color, mk in (("kl", "Anonymize (model kl)", "C0", "o"),
                                    ("exponential_l", "Exponential-L", "C3", "s")):
        p = [x for x in pts if x["model"] == model]
        ok = [x for x in p if x["ok"]]
        if ok:
            ax.plot([x[axis] for x in ok], [x["discernibility"] for x in ok], marker=mk,
                    color=color, label=label)
        bad = [x for x in p if not x["ok"]]
        if bad and model == "exponential_l":
            ax.scatter([x[axis] for x in bad], [n] * len(bad), facecolors="none", edgecolors=color,
                       marker=mk, s=60, label="Exponential-L refused: whole table fails "
                       "(001 plots one group = |T|)")
        elif bad:
            cm = [x for x in bad if x.get("client_method_only", {}).get("ok")]
            ax.scatter([x[axis] for x in bad], [x.get("client_method_only", {}).get("discernibility", n)
                       if x.get("client_method_only", {}).get("ok") else n for x in bad],
                       marker="x", color="k", s=60, zorder=5,
                       label="kl request failed (%s); x = method alone, not released"
                       % ",".join(sorted({x["sqlstate"] for x in bad})))
    ks = [x["K"] for x in pts if x["model"] == "kl"]
    xs = [x[axis] for x in pts if x["model"] == "kl"]
    ax.plot(xs, ks, ls=":", color="grey", label="best possible (K)")
    ax.plot(xs, [1.5 * k for k in ks], ls="--", color="grey", lw=0.8, label="1.5 K")
    ax.set_yscale("log"); ax.set_xlabel(axis if axis != "m" else "m (sensitive attributes)")
    ax.set_ylabel("discernibility (avg group size per record)")
    ax.set_title(f"{titles[axis]}, {n:,} patients"); ax.legend(fontsize=7); ax.grid(alpha=.3)
    fig.tight_layout(); f = f"{prefix}_discernibility_{axis}.png"; fig.savefig(f, dpi=120)
    written.append(f); plt.close(fig)
q = res.get("query_error")
if q:
    cats = ["all", "small", "large"]; labels = ["all queries", "< 1% of patients", ">= 1% of patients"]
    series = []
    kl = q["models"]["kl"].get("are")
    if kl: series.append(("deid Anonymize (kl)", kl, "C0"))
    e = q["models"]["exponential_l"]
    if e.get("are"): series.append(("deid Exponential-L", e["are"], "C3"))
    elif e.get("are_one_group_as_in_001"):
        series.append(("Exponential-L as one group (deid refuses)", e["are_one_group_as_in_001"], "C3"))
    series.append(("001 Table 1 Anonymize", {"all": .113, "small": .146, "large": .016}, "grey"))
    series.append(("001 Table 1 Exponential-L", {"all": .232, "small": .286, "large": .085}, "silver"))
    fig, ax = plt.subplots(figsize=(7, 4.2)); w = 0.8 / len(series)
    for i, (lab, a, c) in enumerate(series):
        xs = [j + i * w for j in range(3)]; ys = [100 * (a[c2] or 0) for c2 in cats]
        ax.bar(xs, ys, w, label=lab, color=c)
        for x, y in zip(xs, ys): ax.text(x, y, f"{y:.1f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks([j + 0.4 - w / 2 for j in range(3)]); ax.set_xticklabels(labels)
    ax.set_ylabel("average relative error (%)")
    ax.set_title(f"{q['queries']:,} random COUNT queries, K=50, L=10, m=3"); ax.legend(fontsize=7)
    fig.tight_layout(); f = f"{prefix}_are.png"; fig.savefig(f, dpi=120); written.append(f); plt.close(fig)
s = res.get("speed")
if s:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.2))
    one = s["one_million"]; r = one["request"]
    a1.bar(["CREATE TABLE AS"], [one["ctas_s"]], color="grey")
    if r["ok"] and r.get("phase_seconds"):
        bottom = 0
        for ph, c in zip(("read", "method", "write", "verify"), ("C0", "C1", "C2", "C4")):
            v = r["phase_seconds"][ph]; a1.bar(["deid anonymize_request"], [v], bottom=bottom, color=c, label=ph)
            bottom += v
        a1.bar(["deid anonymize_request"], [r["seconds"] - bottom], bottom=bottom, color="lightgrey",
               label="other (catalog, commit, client)")
        a1.set_title(f"{one['rows']:,} rows, K=50, L=10: {one['ratio']:.1f}x CTAS")
    a1.set_ylabel("seconds"); a1.legend(fontsize=7)
    p = s["peers"]; names, vals, cols = [], [], []
    if p["deid"]["ok"]: names.append("deid"); vals.append(p["deid"]["seconds"]); cols.append("C0")
    for lib, x in p["peers"].items():
        if x["ok"]: names.append(lib); vals.append(x["anonymize_s"]); cols.append("C1")
        elif x.get("timeout_s"): names.append(lib + " (timeout)"); vals.append(x["timeout_s"]); cols.append("C3")
    a2.bar(names, vals, color=cols); a2.set_yscale("log"); a2.set_ylabel("seconds (log)")
    for i, v in enumerate(vals): a2.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    a2.set_title(f"{p['rows']:,} rows, k-anonymity K=10 on 4 QIs")
    fig.tight_layout(); f = f"{prefix}_speed.png"; fig.savefig(f, dpi=120); written.append(f); plt.close(fig)
print("\n".join(written))
'''


def plot(py, json_path, prefix):
    r = subprocess.run([str(py), "-c", PLOT_SCRIPT, str(json_path), str(prefix)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        log("  plotting failed: " + r.stderr[-1500:])
        return []
    return r.stdout.split()


# --------------------------------------------------------------------------- main

def provenance():
    """What was measured: the git commit (+ dirty flag) and a digest of the installed
    server-side Python package (another engineer may `make install` mid-run)."""
    import hashlib
    out = {}
    try:
        out["git_head"] = subprocess.check_output(["git", "-C", str(ROOT), "rev-parse", "--short",
                                                   "HEAD"], text=True).strip()
        out["git_dirty"] = bool(subprocess.check_output(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "python_udfs", "sql",
             "extension"], text=True).strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    try:
        pgc = next((p for p in ("/usr/lib/postgresql/15/bin/pg_config", "pg_config")
                    if p == "pg_config" or os.path.exists(p)))
        share = pathlib.Path(subprocess.check_output([pgc, "--sharedir"], text=True).strip())
        h = hashlib.sha256()
        for f in sorted((share / "deid" / "python" / "deid").rglob("*.py")):
            h.update(f.name.encode() + f.read_bytes())
        out["installed_deid_sha256"] = h.hexdigest()[:16]
    except (OSError, subprocess.CalledProcessError, StopIteration):
        pass
    return out


def pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


def verdict(ok):
    return "PASS" if ok else "FAIL"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 10k rows, 500 queries")
    args = ap.parse_args()
    quick = args.quick
    n = 10_000 if quick else PAPER_ROWS
    n_queries = 500 if quick else 8_800
    n_big = 20_000 if quick else 1_000_000
    n_peer = 5_000 if quick else 100_000
    peer_timeout = 120 if quick else 600
    t_start = time.perf_counter()
    py = ensure_peers()
    conn = fresh_database()
    data = make_patients(n)
    load_table(conn, "patients", data, QIS + SAS)
    result = {"quick": quick, "rows": n, "server": conn.execute("SHOW server_version").fetchone()[0],
              "load_avg_at_start": os.getloadavg(), "provenance_at_start": provenance()}

    log(f"a. utility: discernibility, {n} patients (K, L, m sweeps; kl vs exponential_l)")
    result["utility"], done = utility(conn, data, n, quick)
    tu = result["utility"]["target"]
    log(f"   target: discernibility {tu['discernibility']:.1f} at K=50, L=10, m=3 <= 1.5 K = 75"
        f" -> {verdict(tu['pass'])}")

    log(f"b. query error: {n_queries} random COUNT queries, K=50, L=10, m=3")
    q = query_error(conn, data, n, done, n_queries, quick)
    result["query_error"] = q
    for model, r in q["models"].items():
        a = r.get("are") or r.get("are_one_group_as_in_001")
        how = "" if r.get("are") else " [deid refused the request; ARE of one group = |T|, as 001 ran it]"
        log(f"   {model:<13} ARE all {pct(a['all'])} ({a['queries']} q, {a['excluded']} with true "
            f"count 0 left out), < 1% {pct(a['small'])} ({a['small_queries']} q), >= 1% "
            f"{pct(a['large'])} ({a['large_queries']} q){how}")
        if r.get("are"):
            log(f"   {'':<13} release check: {r['release_check']}; cross-check vs deid.metrics "
                f"(300 q): max |diff| estimate {r['crosscheck_max_abs_diff']['estimate']:.2g}, "
                f"exact {r['crosscheck_max_abs_diff']['exact']}; {r['estimate_seconds']:.1f} s "
                f"for {n_queries} estimates")
    tq = q["target"]
    log(f"   target: ARE all {pct(tq['all'])} < 11.3% -> {verdict(tq['pass_all'])}; "
        f">= 1% queries {pct(tq['large'])} < 1.6% -> {verdict(tq['pass_large'])}")

    log(f"c. speed: {n_big} rows, 4 QIs + 3 sensitive, K=50, L=10")
    one = speed_1m(conn, n_big, 1 if quick else 3)
    r = one["request"]
    if r["ok"]:
        ph = r["phase_seconds"]
        log(f"   CTAS {one['ctas_s']:.2f} s (median of {len(one['ctas_runs'])}), deid "
            f"{r['seconds']:.2f} s (median of {len(r['runs_s'])}: "
            f"{', '.join(f'{x:.1f}' for x in r['runs_s'])}; median run: read {ph['read']:.1f}, method {ph['method']:.1f}, write "
            f"{ph['write']:.1f}, verify {ph['verify']:.1f}; inside SQL statements "
            f"{ph.get('in_sql', float('nan')):.1f}), {r['groups']} groups, "
            f"discernibility {r['discernibility']:.1f} -> ratio {one['ratio']:.1f}x CTAS: bar <= 10x "
            f"{verdict(one['pass_bar_10x'])}, aim <= 5x {verdict(one['pass_aim_5x'])}")
        log(f"   backend VmHWM {max(r['backend_vmhwm_kb_runs']) / 1024:.0f} MB (max of the runs;"
            f" fresh backend "
            f"{r['backend_vmhwm_fresh_kb'] / 1024:.0f} MB)")
    else:
        log(f"   deid FAILED: {r['sqlstate']} {r['error']}")
    log(f"   peers: {n_peer} rows, k-anonymity K=10 on the 4 QIs (+ topography carried along)")
    result["speed"] = {"one_million": one, "peers": speed_peers(conn, n_peer, peer_timeout, py)}
    for lib, p in result["speed"]["peers"]["peers"].items():
        if "pass_aim_20x" in p:
            log(f"   target: deid >= 20x faster than {lib}: {p['ratio_peer_over_deid'] if isinstance(p['ratio_peer_over_deid'], str) else round(p['ratio_peer_over_deid'], 1)}x"
                f" -> {verdict(p['pass_aim_20x'])}")

    result["total_seconds"] = time.perf_counter() - t_start
    result["provenance_at_end"] = provenance()
    result["load_avg_at_end"] = os.getloadavg()
    a, b = result["provenance_at_start"], result["provenance_at_end"]
    if a.get("installed_deid_sha256") != b.get("installed_deid_sha256"):
        log("   WARNING: the installed extension changed during the run (make install by someone"
            f" else?): {a} -> {b}; backends that were already open kept the old code")
    else:
        log(f"   measured: installed deid {a.get('installed_deid_sha256')} (git {a.get('git_head')}"
            f"{', working tree dirty' if a.get('git_dirty') else ''})")
    name = "anatomy_quick" if quick else "anatomy"
    path = save(name, result)
    pngs = plot(py, path, RESULTS / name)
    result["plots"] = [str(pathlib.Path(p).relative_to(ROOT)) for p in pngs]
    save(name, result)
    conn.close()
    log(f"wrote {path.relative_to(ROOT)}" + "".join(f", {p}" for p in result["plots"]))
    log(f"total {result['total_seconds'] / 60:.1f} min")


if __name__ == "__main__":
    main()
