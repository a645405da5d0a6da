"""Fuzz releases read together: sequences of 2-6 releases of one source, attacked by
check_composition.py (which imports nothing of deid).

    python -m tests.fuzz.sequences --url postgresql://... --n 1000 --seed 1 --out build/seq.json
    python -m tests.fuzz.sequences ... --chunk 100 --out build/seq.json   # kept per chunk:
                                        # build/seq.<start>.json, skipped when run again
    python -m tests.fuzz.sequences --merge build/seq.*.json --out build/all.json

A chunk (--start) draws its own stream from the seed and its start, so chunks of a long run
are independent and each can be replayed alone. Each sequence gets a fresh table (tables.py,
at least 30 rows) and a main method (every method gets exactly --n sequences); each release
is of the main method or, one time in four, of another; in three disassociation sequences in
ten, every disassociation release is k^m by generalization (the AA model). Selections are
random (generator.py), all rows, the previous release's again, or crafted: the three parts of a tracker (``age < m OR <one row's exact
quasi-identifiers>``, all rows, ``age >= m``) and all rows but one. Between releases, rows
may be appended (copies of existing rows' values under new ids). Requests come from the
analyst (SELECT) or the researcher (a policy); no override is ever passed.

After each sequence a deid_reader reads the releases; the attacker knows every row's
quasi-identifiers and each release's selection (evaluated on the source when it was
released), and each release's groups (_grouping: anatomy's groups and disassociation's
clusters exactly, generalization's classes and AA's records placed through the public
hierarchies, condensation's clusters given). Attacks: totals, per-group statistics per
column, crowds per method, anatomy's values, AA's records of one patient linked
(check_composition.py). Tallies: sequences, releases and refusals
(by reason: the analyst's DETAIL, the researcher's uniform refusal) per method, attacks
tried, and the successes, which must be 0. `regroup` (tests): every release of all rows by
the main method, its parameters drawn anew.
"""
import argparse
import json
import os
import random
import re
import sys
from collections import Counter, defaultdict
from decimal import Decimal

import psycopg
from psycopg import sql

if __package__ in (None, ""):                       # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    __package__ = "tests.fuzz"

from . import check_composition, checker, generator, tables  # noqa: E402
from .checkers import generalization as classes_checker  # noqa: E402
from .runner import ANALYST, RESEARCHER, SCHEMA, _connect, setup  # noqa: E402

READER = "deid_fz_reader"
CALL = ("SELECT relations FROM deid.anonymize_request(%s, %s, k => %s, l => %s, columns => %s,"
        " selection => %s, options => %s, release => %s)")
QIS = ("age", "sex", "zip")
AA_SHARE = 0.3     # disassociation sequences whose every disassociation is k^m by generalization


def _table(rng, tag):
    """A fuzz table of at least 30 rows whose age, sex and zip are mostly set."""
    while True:
        t = tables.generate(rng, SCHEMA, tag)
        if t.rows >= 30 and t.shape not in ("constant", "nulls"):
            return t


def _target(rng, t):
    """One row's exact quasi-identifiers as a selection, and the age median."""
    cols = {c: t.col(c) for c in QIS}
    rows = [i for i in range(t.rows) if all(cols[c].values[i] not in (None, "NULL") for c in QIS)]
    ages = sorted(v for v in cols["age"].values if v is not None)
    if not rows or not ages:
        return None, None
    i = rng.choice(rows)
    exact = " AND ".join(f"{c} = {generator._literal(_Fixed(cols[c].values[i]), cols[c], t)}"
                         for c in QIS)
    return f"({exact})", ages[len(ages) // 2]


class _Fixed:
    """A random.Random whose choice is one value (a literal of exactly that value)."""
    def __init__(self, v):
        self.v = v

    def random(self):
        return 1.0

    def choice(self, _):
        return self.v


def plan(rng, t, main, count, regroup=False):
    """The sequence's requests: [(method, selection)]; `regroup`: all rows, each time by the
    main method (its parameters drawn anew: the groupings cross)."""
    if regroup:
        return [(main, None)] * count
    target, median = _target(rng, t)
    methods = [main if rng.random() < 0.75 else rng.choice(generator.METHODS)
               for _ in range(count)]
    qis = [c for c in t.columns if c.name in QIS]
    if target and rng.random() < 0.35 and count >= 3:
        sels = [f"age < {median} OR {target}", None, f"age >= {median}"]
        sels += [generator.selection(rng, qis, t) for _ in range(count - 3)]
        return list(zip(methods, sels))
    out, last = [], None
    for m in methods:
        r = rng.random()
        if r < 0.25:
            s = None
        elif r < 0.45:
            s = last
        elif r < 0.6 and target:
            s = f"NOT {target}"
        else:
            s = generator.selection(rng, qis, t)
        out.append((m, s))
        last = s
    return out


def _append(rng, admin, t):
    """Copies of existing rows' values under new ids (a growing source)."""
    n = rng.randint(1, 30)
    start = max(t.ids) + 1
    cols = sql.SQL(", ").join(sql.Identifier(c.name) for c in t.columns)
    for j in range(n):
        src = rng.choice(t.ids)
        admin.execute(sql.SQL("INSERT INTO {} (id, {}) SELECT %s, {} FROM {} WHERE id = %s").format(
            sql.SQL(t.name), cols, cols, sql.SQL(t.name)), [start + j, src])
    t.ids = t.ids + list(range(start, start + n))


def _selected(admin, t, selection):
    q = sql.SQL("SELECT id FROM {}").format(sql.SQL(t.name))
    if selection:
        q = q + sql.SQL(" WHERE ") + sql.SQL(selection)
    return {r[0] for r in admin.execute(q).fetchall()}


def _request(rng, t, method, selection, name, override=False, aa=False):
    names, cols, k, l, opts = generator._base(rng, method, t)
    if method == "disassociation" and aa:          # k^m by generalization, every time
        opts.update(model="generalization", hierarchy=t.code_hierarchy)
        opts.pop("max_cluster_size", None)
        opts.pop("utility", None)
    if method == "anatomy":
        names = [n for n in names if n != "note"]
        opts.pop("output", None)                   # the generalized layout: linear only
        opts.pop("column_l", None)                 # l per attribute is the checker's l
        opts.pop("model", None)
        if l is None and rng.random() < 0.7:
            l = rng.choice((2, 3))
    role = "researcher" if rng.random() < 0.3 else "analyst"
    if override:                                   # the checker's own check: attacks succeed
        role, opts["allow_overlap"] = "analyst", True
    return dict(method=method, k=k, l=l, columns=names, selection=selection, options=opts,
                release=name, role=role)


def run_sequence(conns, rng, tag, main, tally, override=False, regroup=False):
    admin = conns["admin"]
    t = _table(rng, tag)
    tables.create(admin, t, rng, RESEARCHER, ANALYST)
    stats = tally["methods"][main]
    stats["sequences"] += 1
    done = []
    # drawn apart from rng: the sequences' stream stays what it was without the AA model
    aa = main == "disassociation" and random.Random(f"aa:{tag}").random() < AA_SHARE
    try:
        for i, (method, selection) in enumerate(plan(rng, t, main, rng.randint(2, 6), regroup)):
            if i and rng.random() < 0.3 and not regroup:
                _append(rng, admin, t)
            r = _request(rng, t, method, selection, f"fzs{tag}r{i}", override, aa)
            outcome = _send(conns[r["role"]], t, r)
            stats["releases" if outcome is None else "refusals"] += 1
            if outcome is None:
                r["ids"] = _selected(admin, t, selection)
                done.append(r)
            else:
                tally["refusals"][f"{r['role']}: {outcome}"] += 1
                tally["method_refusals"][main][f"{r['role']}: {outcome}"] += 1
        if len(done) >= 2:                         # releases read together
            stats["sequences with 2+ releases"] += 1
        _attack(conns["reader"], admin, t, done, tally, main)
    finally:
        for r in done:
            admin.execute("SELECT deid.drop_release(%s)", [r["release"]])
        tables.drop(admin, t)


def _send(conn, t, r):
    """None when released, else the refusal's reason (a uniform refusal is checked so)."""
    try:
        conn.execute(CALL, [t.name, r["method"], r["k"], r["l"], r["columns"], r["selection"],
                            json.dumps(r["options"]), r["release"]])
        return None
    except psycopg.Error as e:
        d = e.diag
        if r["role"] == "researcher" and d.sqlstate == "DE001":     # refused for the data
            text = " ".join(x for x in (d.message_primary, d.message_hint) if x)
            if d.message_detail or any(ch.isdigit() for ch in text):
                return f"NOT UNIFORM {d.sqlstate}"
            return f"uniform {d.sqlstate}"
        return f"{d.sqlstate} " + re.sub(r"\d+", "N", d.message_detail or d.message_primary)[:110]


def _attack(reader, admin, t, done, tally, main):
    if len(done) >= 2:
        _tried(tally, main, "linear")
    found = check_composition.linear([r["ids"] for r in done], [r["k"] for r in done]) \
        if len(done) >= 2 else None
    if found and found[2] != "span" and sum(1 for c in found[2] if c) < 2:
        found = None                                # one release alone: not composition's
    if found:
        _success(tally, main, "linear", t, done, f"{len(found[0])} rows < k {found[1]}")
    if len(done) >= 2:
        _attack_groups(reader, admin, t, done, tally, main)
    _attack_aa(admin, t, done, tally, main)
    anatomy = [r for r in done if r["method"] == "anatomy" and r["l"]]
    if len(anatomy) < 2:
        return
    patients = _patients(admin, t)
    for sensitive in ("dx", "tr"):
        releases = [_anatomy_view(reader, r, t, sensitive) for r in anatomy
                    if sensitive in r["columns"]]
        if len([x for x in releases if x]) >= 2:
            _tried(tally, main, "intersection")
        hit = check_composition.intersection(patients, [x for x in releases if x])
        if hit:
            _success(tally, main, "intersection", t, done,
                     f"row {hit[0]}: {len(hit[1])} values < l {hit[2]}")


def _attack_aa(admin, t, done, tally, main):
    """Two AA releases' records of one patient narrow each other (check_composition.km_joint)."""
    aa = [r for r in done if r["method"] == "disassociation"
          and r["options"].get("model") == "generalization"]
    placed = [r["aa"] for r in aa if r.get("aa")]
    if len(aa) >= 2 and len(placed) < len(aa):      # a release the reader could not place
        tally["attacks"]["km_unplaced"] += len(aa) - len(placed)
    if len(placed) < 2:
        return
    _tried(tally, main, "km_joint")
    records = {rid: [c for c in codes or [] if c is not None] for rid, codes in admin.execute(
        sql.SQL("SELECT id, codes FROM {}").format(sql.SQL(t.name)))}
    hit = check_composition.km_joint(records, placed)
    if hit:
        _success(tally, main, "km_joint", t, done,
                 f"row {hit[0]}: itemset {hit[1]} in {hit[2]} records < k {hit[3]}")


def _attack_groups(reader, admin, t, done, tally, main):
    """Linear over per-group statistics, per attribute, and crowds per method. Anatomy's
    groups, generalization's classes and disassociation's clusters are read or placed from
    the releases (a reader knows anatomy's groups from its quasi-identifier table, a class from
    the generalized values, a record's cluster from its codes; the attacker is given the exact
    membership where rows tie); condensation's clusters (no id in the release) only with
    condensation releases, given exactly: a stronger attacker than a reader."""
    for r in done:
        if "groups" not in r:
            r["groups"] = _grouping(reader, admin, t, r)
    grouped = [r for r in done if r["groups"]]
    families = defaultdict(list)
    for r in grouped:
        for a in _published(t, r):
            families[(a, r["method"] == "condensation")].append(r)
    for (a, _), rs in families.items():
        if len(rs) < 2:
            continue
        _tried(tally, main, "linear_groups")
        hit = check_composition.linear_groups([r["groups"] for r in rs], [r["k"] for r in rs])
        if hit:
            _success(tally, main, "linear_groups", t, rs, f"{a}: {len(hit[0])} rows < k {hit[1]}")
    for method in generator.METHODS:
        rs = [r for r in grouped if r["method"] == method]
        if len(rs) >= 2:
            _tried(tally, main, "crowds")
            hit = check_composition.crowds([r["groups"] for r in rs], [r["k"] for r in rs])
            if hit:
                _success(tally, main, "crowd", t, rs, f"{method}: {len(hit[0])} rows < k {hit[1]}")


def _tried(tally, main, kind):
    tally["attacks"][kind] += 1
    tally["method_attacks"][main][kind] += 1


def _published(t, r):
    """The attributes whose statistics the release publishes per group."""
    if r["method"] == "disassociation":
        return ["codes"]
    if r["method"] == "anatomy":
        return [c for c in r["columns"] if t.col(c).role == "sensitive"]
    if r["method"] == "generalization":
        return [c for c in r["columns"] if t.col(c).role != "quasi_identifier"] or ["rows"]
    return list(r["columns"])


def _release_id(admin, name):
    row = admin.execute("SELECT release_id FROM deid.release WHERE name = %s AND status ="
                        " 'committed'", [name]).fetchone()
    return row and row[0]


def _grouping(reader, admin, t, r):
    """{row id: group} as the attacker holds it, or None."""
    rid = _release_id(admin, r["release"])
    if rid is None:
        return None
    if r["method"] == "anatomy":
        rows = admin.execute("SELECT DISTINCT group_id, unnest(rids) FROM deid.rid_sets"
                             " WHERE release_id = %s", [rid]).fetchall()
        return {x: g for g, x in rows}
    if r["method"] == "disassociation" and r["options"].get("model") == "generalization":
        return _aa_classes(reader, admin, t, r)
    if r["method"] in ("condensation", "disassociation"):
        rows = admin.execute("SELECT cluster_id, unnest(rids) FROM deid.cluster_member"
                             " WHERE release_id = %s", [rid]).fetchall()
        return {x: g for g, x in rows}
    return _classes(reader, admin, t, r)


def _aa_classes(reader, admin, t, r):
    """An AA release's records placed by a reader (check_composition.aa_images): a class is
    the records of one released set. Keeps the placement for km_joint in r["aa"]."""
    released = [s or [] for (s,) in reader.execute(sql.SQL("SELECT codes FROM release.{}").format(
        sql.Identifier(r["release"] + "_generalized")))]
    records = {rid: [c for c in codes or [] if c is not None] for rid, codes in admin.execute(
        sql.SQL("SELECT id, codes FROM {} WHERE id = ANY(%s)").format(sql.SQL(t.name)),
        [sorted(r["ids"])])}
    parent = dict(admin.execute("SELECT value, parent FROM deid.hierarchy_member"
                                " WHERE hierarchy = %s", [t.code_hierarchy]).fetchall())
    placed = check_composition.aa_images(released, records, parent)
    if placed is None:
        return None
    r["aa"] = (placed[0], placed[1], r["k"], r["options"].get("m", 2))
    return {rid: tuple(sorted(image)) for rid, image in placed[0].items()}


def _classes(reader, admin, t, r):
    qis = [c for c in r["columns"] if t.col(c).role == "quasi_identifier"]
    if not qis:
        return None
    released = {c: Counter(classes_checker.canon(v) for (v,) in reader.execute(
        sql.SQL("SELECT {}::text FROM release.{}").format(sql.Identifier(c),
                                                         sql.Identifier(r["release"]))))
        for c in qis}
    cols = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in qis)
    source = {x[0]: {c: classes_checker.canon(v) for c, v in zip(qis, x[1:])} for x in admin.execute(
        sql.SQL("SELECT id, {} FROM {} WHERE id = ANY(%s)").format(cols, sql.SQL(t.name)),
        [sorted(r["ids"])])}
    levels = {c: _levels(admin, t.col(c).hierarchy) for c in qis if t.col(c).hierarchy}
    return check_composition.generalization_classes(released, source, levels)


def _levels(admin, hierarchy):
    """A public hierarchy's levels above 0, each as a value -> label function."""
    row = admin.execute("SELECT kind, levels, low, widths FROM deid.hierarchy WHERE name = %s",
                        [hierarchy]).fetchone()
    if not row:
        return []
    kind, levels, low, widths = row
    null, star = classes_checker.NULL, (lambda v: "*")
    if kind == "member":
        parent = {(lv, v): p for lv, v, p in admin.execute(
            "SELECT level, value, parent FROM deid.hierarchy_member WHERE hierarchy = %s",
            [hierarchy])}
        out = []
        for top in range(1, levels - 1):
            def f(v, top=top):
                for lv in range(top):
                    v = null if v == null else parent.get((lv, v), v)
                return v
            out.append(f)
        return out + [star]
    bands = [lambda v, w=w: v if v == null else classes_checker.band(Decimal(v), low, w)
             for w in widths or ()]
    return bands + [star]


def _anatomy_view(reader, r, t, sensitive):
    qis = [c for c in r["columns"] if t.col(c).role == "quasi_identifier"]
    if not qis:
        return None
    cand = check_composition.anatomy_candidates(
        reader, f'release.{r["release"]}_qit', f'release.{r["release"]}_{sensitive}', qis,
        sensitive)
    return r["ids"], qis, r["l"], cand


def _patients(admin, t):
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in QIS + ("stage", "seen", "bmi"))
    rows = admin.execute(sql.SQL("SELECT id, {} FROM {}").format(cols, sql.SQL(t.name))).fetchall()
    names = QIS + ("stage", "seen", "bmi")
    return {r[0]: dict(zip(names, r[1:])) for r in rows}


def _success(tally, main, kind, t, done, what):
    tally["successes"][f"{main}: {kind}"] += 1
    if tally["successes"][f"{main}: {kind}"] <= 3:         # the first three of each kind
        tally["examples"].append({"kind": kind, "table": t.name, "what": what,
                                  "releases": [{k: v for k, v in r.items() if k != "ids"}
                                               for r in done]})


def run(url, n, seed, quiet=True, override=False, progress=None, regroup=False, start=0,
        methods=generator.METHODS):
    """n sequences per method; `override`: every request passes the composition rule's
    override, so the attacks must then succeed (that the checker finds what the rule stops).
    `start`: the chunk of sequences start .. start + n - 1 of a long run (its own random
    stream, drawn from seed and start, and its own table names), so a run in chunks keeps
    what each chunk found and any chunk can be replayed alone. `methods`: the main methods
    (a run of one method draws another stream than a run of all four)."""
    setup(url)
    with psycopg.connect(url, autocommit=True) as c:
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [READER]).fetchone():
            c.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(READER)))
        c.execute(sql.SQL("GRANT deid_reader TO {}").format(sql.Identifier(READER)))
    conns = {"admin": _connect(url), "analyst": _connect(url, ANALYST),
             "researcher": _connect(url, RESEARCHER), "reader": _connect(url, READER)}
    rng = random.Random(f"sequences:{seed}" + (f":{start}" if start else ""))
    tally = {"methods": defaultdict(Counter), "refusals": Counter(), "successes": Counter(),
             "attacks": Counter(), "examples": [], "method_refusals": defaultdict(Counter),
             "method_attacks": defaultdict(Counter)}
    try:
        for i in range(start, start + n):
            for main in methods:
                run_sequence(conns, rng, f"{seed}_{i}_{main[:2]}", main, tally, override, regroup)
            if progress:                           # a long run's tallies so far
                with open(progress, "w") as f:
                    json.dump(_summary(tally, i + 1 - start), f, indent=1, default=str)
            if not quiet and (i + 1 - start) % 50 == 0:
                print(f"{i + 1 - start} sequences per method; successes {dict(tally['successes'])}",
                      file=sys.stderr, flush=True)
    finally:
        for c in conns.values():
            c.close()
    return _summary(tally, n)


def _summary(tally, done):
    return {"per_method": done, "methods": {m: dict(c) for m, c in tally["methods"].items()},
            "refusals": dict(tally["refusals"]), "successes": dict(tally["successes"]),
            "attacks": dict(tally["attacks"]), "examples": tally["examples"],
            "refusals_by_method": {m: dict(c) for m, c in tally["method_refusals"].items()},
            "attacks_by_method": {m: dict(c) for m, c in tally["method_attacks"].items()}}


def merge(chunks):
    """The chunks' summaries added up (a long run's result), per method and in all."""
    out = {"per_method": sum(c["per_method"] for c in chunks), "examples": []}
    for key in ("methods", "refusals_by_method", "attacks_by_method"):
        out[key] = {}
        for c in chunks:
            for m, counts in c.get(key, {}).items():
                out[key][m] = dict(Counter(out[key].get(m, {})) + Counter(counts))
    for key in ("refusals", "successes", "attacks"):
        out[key] = dict(sum((Counter(c.get(key, {})) for c in chunks), Counter()))
    for c in chunks:
        out["examples"] += c.get("examples", [])
    return out


def _chunk(a, start):
    """One chunk's summary: read from OUT.<start>.json if an earlier run left it, else run."""
    path = f"{os.path.splitext(a.out)[0]}.{start}.json"
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        part = run(a.url, min(a.chunk, a.start + a.n - start), a.seed, quiet=False,
                   override=a.override, progress=path + ".partial", start=start,
                   methods=tuple(a.methods.split(",")))
        with open(path, "w") as f:
            json.dump(part, f, indent=1, default=str)
        if os.path.exists(path + ".partial"):
            os.remove(path + ".partial")
    with open(path) as f:
        return json.load(f)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url")
    p.add_argument("--n", type=int, default=1000, help="sequences per method")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", type=int, default=0,
                   help="first sequence of this chunk (a long run in chunks: 0, n, 2n, ...)")
    p.add_argument("--methods", default=",".join(generator.METHODS),
                   help="main methods, comma-separated")
    p.add_argument("--out")
    p.add_argument("--chunk", type=int, default=0,
                   help="run in chunks of this many sequences per method, each kept in"
                        " OUT.<start>.json (a chunk already there is not run again)")
    p.add_argument("--merge", nargs="+", metavar="CHUNK",
                   help="only add up the chunks' JSON files into --out")
    p.add_argument("--override", action="store_true",
                   help="pass the rule's override: the attacks must succeed (a check of the checker)")
    a = p.parse_args(argv)
    if not a.url and not a.merge:
        p.error("--url is needed to run sequences")
    if a.merge:
        result = merge([json.load(open(f)) for f in a.merge])
    elif a.chunk and a.out:
        result = merge([_chunk(a, s) for s in range(a.start, a.start + a.n, a.chunk)])
    else:
        result = run(a.url, a.n, a.seed, quiet=False, override=a.override,
                     progress=a.out and a.out + ".partial", start=a.start,
                     methods=tuple(a.methods.split(",")))
    print(json.dumps({k: v for k, v in result.items() if k != "examples"}, indent=1))
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1, default=str)
    return int(bool(result["successes"]) != a.override)


if __name__ == "__main__":
    sys.exit(main())
