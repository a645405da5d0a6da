"""Fuzz deid.anonymize_request at scale against the real server: every success
and every refusal checked from outside the methods.

    python -m tests.fuzz.runner --url postgresql://... --n 10000 --seed 1 --workers 2 --out build/fuzz.json

Each worker process opens three connections (a superuser for setup and checking, an analyst
with SELECT on the fuzz tables, a researcher with only a policy), creates a fresh tiny table
per batch of requests (tables.py), sends requests drawn by generator.py through
deid.anonymize_request, checks every success and every refusal with checker.py (which imports
nothing of deid) and drops each release right after its check, so the catalog stays small.
Every method gets exactly --n requests. Seeded and deterministic per worker. Prints a summary
table and writes the tallies as JSON to --out.
"""
import argparse
import json
import multiprocessing
import os
import random
import re
import sys
import time
from collections import Counter, defaultdict

import psycopg
from psycopg import sql

if __package__ in (None, ""):                       # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    __package__ = "tests.fuzz"

from . import generator, tables  # noqa: E402
from .checker import Checker, PENDING  # noqa: E402

ANALYST, RESEARCHER = "deid_fz_analyst", "deid_fz_researcher"
SCHEMA = "fuzz"
REQUEST_TIMEOUT = "60s"
CALL = ("SELECT release_id, rows FROM deid.anonymize_request(%s, %s, k => %s, l => %s, columns => %s,"
        " selection => %s, options => %s, release => %s)")
EXAMPLES = 5                                        # kept per finding kind
PROGRESS = 1000                                     # a line on stderr every so many requests


def setup(url):
    """Roles and the fuzz schema (idempotent); the extension must exist in the database."""
    with psycopg.connect(url, autocommit=True) as c:
        for role in (ANALYST, RESEARCHER):
            if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                c.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        c.execute("CREATE EXTENSION IF NOT EXISTS deid CASCADE")
        schema = sql.Identifier(SCHEMA)
        c.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
        c.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
        c.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO PUBLIC").format(schema))
        for (h,) in c.execute("SELECT name FROM deid.hierarchy WHERE name LIKE 'fz%'").fetchall():
            try:
                c.execute("SELECT deid.drop_hierarchy(%s)", [h])
            except psycopg.Error:       # still bound or named by a release: it stays
                pass


def _connect(url, user=None):
    c = psycopg.connect(url, user=user, autocommit=True) if user else psycopg.connect(url, autocommit=True)
    c.notices = []                                  # the NOTICEs of the current request
    c.add_notice_handler(lambda n: c.notices.append(n.message_primary or ""))
    c.execute("SELECT set_config('statement_timeout', %s, false)", [REQUEST_TIMEOUT])
    return c


class Tally:
    def __init__(self):
        self.methods = {m: Counter() for m in generator.METHODS}
        self.states = {m: Counter() for m in generator.METHODS}
        self.hostile = Counter()
        self.findings = Counter()
        self.examples = defaultdict(list)
        self.checked = Counter()                   # the checker's counts of what it checked
        self.messages = Counter()                  # refusal messages, digits masked
        self.seconds = Counter()                   # where the time went: table, request, check, drop

    def finding(self, kind, text, req):
        self.findings[kind] += 1
        same = re.sub(r"\d+", "#", text[:120])
        if len(self.examples[kind]) < EXAMPLES and not any(
                re.sub(r"\d+", "#", e["finding"][:120]) == same for e in self.examples[kind]):
            self.examples[kind].append({"finding": text, "request": req.as_dict()})

    def as_dict(self):
        return {"methods": {m: dict(c) for m, c in self.methods.items()},
                "refusals_by_sqlstate": {m: dict(c) for m, c in self.states.items()},
                "hostile": dict(self.hostile), "checked": dict(self.checked),
                "messages": dict(self.messages.most_common(60)), "findings": dict(self.findings),
                "examples": dict(self.examples), "seconds": {k: round(v, 2) for k, v in self.seconds.items()}}

    def merge(self, d):
        for m, c in d["methods"].items():
            self.methods[m].update(c)
        for m, c in d["refusals_by_sqlstate"].items():
            self.states[m].update(c)
        self.hostile.update(d["hostile"])
        self.findings.update(d["findings"])
        self.seconds.update(d["seconds"])
        self.messages.update(d["messages"])
        self.checked.update(d["checked"])
        for k, v in d["examples"].items():
            self.examples[k].extend(v[:EXAMPLES - len(self.examples[k])])


def _quota(n, workers, w):
    return n // workers + (1 if w < n % workers else 0)


def run_worker(url, seed, worker, n_per_method, batch, progress=False):
    """Run this worker's share of requests; returns Tally.as_dict()."""
    rng, start = random.Random(f"{seed}:{worker}"), time.monotonic()
    admin, analyst, researcher = _connect(url), _connect(url, ANALYST), _connect(url, RESEARCHER)
    checker = Checker(admin, analyst)
    left = {m: n_per_method for m in generator.METHODS}
    tally, b, seq = Tally(), 0, 0
    while any(left.values()):
        t = tables.generate(rng, SCHEMA, f"{worker}_{b}")
        b += 1
        clock = time.perf_counter()
        tables.create(admin, t, rng, RESEARCHER, ANALYST)
        tally.seconds["table"] += time.perf_counter() - clock
        secrets = [v for c in t.columns for v in c.texts() if len(v) >= 4]
        for _ in range(batch):
            todo = [m for m in generator.METHODS if left[m]]
            if not todo:
                break
            method = rng.choice(todo)
            left[method] -= 1
            seq += 1
            req = generator.request(rng, method, t, f"fz{worker}n{seq}")
            conn = {"admin": admin, "analyst": analyst, "researcher": researcher}[req.role]
            one(checker, conn, req, t, secrets, tally)
            if progress and seq % PROGRESS == 0:
                print(f"worker {worker}: {seq} requests in {time.monotonic() - start:.0f} s, "
                      f"findings {dict(tally.findings)}", file=sys.stderr, flush=True)
            if conn.closed or admin.closed:             # a crashed backend: reconnect, go on
                admin, analyst, researcher = _connect(url), _connect(url, ANALYST), _connect(url, RESEARCHER)
                checker = Checker(admin, analyst, checker.stats)
        clock = time.perf_counter()
        tables.drop(admin, t)
        tally.seconds["table"] += time.perf_counter() - clock
    tally.checked.update(checker.stats)
    o = checker.orphans()
    if o:
        tally.finding("orphan_catalog_rows", f"{o} catalog rows without a log row", req)
    for c in (admin, analyst, researcher):
        c.close()
    return tally.as_dict()


def one(checker, conn, req, t, secrets, tally):
    stats = tally.methods[req.method]
    stats["requests"] += 1
    stats["policy_requests"] += req.role == "researcher"
    if req.hostile:
        tally.hostile[req.hostile] += 1
    clock = time.perf_counter()
    conn.notices.clear()
    try:
        row = conn.execute(CALL, [req.relation, req.method, req.k, req.l, req.columns, req.selection,
                                  req.options_text(), req.release]).fetchone()
    except psycopg.errors.QueryCanceled:
        stats["timeouts"] += 1
        tally.finding("timeout", f"no answer within {REQUEST_TIMEOUT}", req)
        return
    except psycopg.OperationalError as e:
        stats["refusals"] += 1
        tally.finding("internal", f"connection lost: {e}", req)
        return
    except psycopg.Error as e:
        stats["refusals"] += 1
        tally.seconds["request"] += time.perf_counter() - clock
        clock = time.perf_counter()
        state, found = checker.check_refusal(
            e, req.release, req.role == "researcher", req.k, json.dumps(req.as_dict()), secrets,
            conn.notices)
        tally.states[req.method][state or "none"] += 1
        primary = re.sub(r"\d+", "#", (e.diag.message_primary or str(e))[:90])
        tally.messages[f"{req.method} {state} {primary}"] += 1
        for kind, text in found:
            tally.finding(kind, text, req)
        tally.seconds["check"] += time.perf_counter() - clock
        return
    stats["successes"] += 1
    stats["policy_successes"] += req.role == "researcher"
    if req.hostile:
        tally.hostile[req.hostile + "_accepted"] += 1
    tally.seconds["request"] += time.perf_counter() - clock
    clock = time.perf_counter()
    release_id, rows = row
    for kind, text in checker.check_release(release_id, rows):
        tally.finding(kind, text, req)
    tally.seconds["check"] += time.perf_counter() - clock
    clock = time.perf_counter()
    checker.conn.execute("SELECT deid.drop_release(name) FROM deid.release WHERE release_id = %s", [release_id])
    tally.seconds["drop"] += time.perf_counter() - clock


def summarize(d, elapsed, workers, seed, n):
    findings = d["findings"]
    internal = findings.get("internal", 0)
    no_hint = findings.get("no_hint", 0)
    failures = {k: v for k, v in findings.items() if k not in PENDING | {"internal", "no_hint"}}
    total = sum(m.get("requests", 0) for m in d["methods"].values())
    d.update({"seed": seed, "per_method": n, "workers": workers, "elapsed_s": round(elapsed, 1),
              "requests": total, "requests_per_s": round(total / elapsed, 1) if elapsed else None,
              "internal_errors": internal, "errors_without_hint": no_hint,
              "checker_failures": sum(failures.values()),
              "pending": {k: findings[k] for k in PENDING if k in findings}})
    return d


def print_summary(d, out=sys.stdout):
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"deid fuzz: seed {d['seed']}, {d['per_method']} per method, {d['workers']} workers, "
      f"{d['requests']} requests in {d['elapsed_s']} s ({d['requests_per_s']} requests/s)")
    p(f"{'method':<16}{'requests':>9}{'success':>9}{'refused':>9}{'policy':>8}{'pol.ok':>8}  refusals by SQLSTATE")
    for m, c in d["methods"].items():
        states = ", ".join(f"{s} {n}" for s, n in sorted(d["refusals_by_sqlstate"][m].items(), key=lambda x: -x[1]))
        p(f"{m:<16}{c.get('requests', 0):>9}{c.get('successes', 0):>9}{c.get('refusals', 0):>9}"
          f"{c.get('policy_requests', 0):>8}{c.get('policy_successes', 0):>8}  {states}")
    p(f"seconds: {d['seconds']}")
    p(f"checked: {dict(sorted(d['checked'].items()))}")
    p(f"hostile inputs: {dict(sorted(d['hostile'].items()))}")
    p(f"checker failures: {d['checker_failures']}   internal errors: {d['internal_errors']}   "
      f"errors without HINT: {d['errors_without_hint']}   pending: {d['pending']}")
    for kind, ex in sorted(d["examples"].items()):
        p(f"  [{kind}] {d['findings'].get(kind)} x, e.g. {ex[0]['finding'][:300]}")


def run(url, n, seed, workers=2, batch=40, out=None, quiet=False):
    setup(url)
    start = time.monotonic()
    args = [(url, seed, w, _quota(n, workers, w), batch, not quiet) for w in range(workers)]
    if workers == 1:
        results = [run_worker(*args[0])]
    else:
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            results = pool.starmap(run_worker, args)
    total = Tally()
    for r in results:
        total.merge(r)
    d = summarize(total.as_dict(), time.monotonic() - start, workers, seed, n)
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w") as f:
            json.dump(d, f, indent=2, sort_keys=True, default=str)
    if not quiet:
        print_summary(d)
    return d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("DEID_FUZZ_URL"), help="superuser URL of the fuzz database")
    ap.add_argument("--n", type=int, default=10000, help="requests per method")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=40, help="requests per fresh table")
    ap.add_argument("--out", default=None, help="JSON summary (default build/fuzz_<seed>.json)")
    a = ap.parse_args(argv)
    if not a.url:
        ap.error("--url or DEID_FUZZ_URL is required")
    d = run(a.url, a.n, a.seed, a.workers, a.batch, a.out or f"build/fuzz_{a.seed}.json")
    return 1 if d["checker_failures"] or d["internal_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
