"""The utility measures of a release's report (deid.report_source), in each paper's own
measures, by set-based SQL run as the caller: the release side reads only the release's own
relations in schema `release`; the source side runs only when report_source.readable_source
handed over the source (SELECT, the code walk passed, built-in column types) and the release
has no selection (the source's rows are then exactly the released ones). Only aggregates leave.

- anatomy (001 sec. "Experiments"): the average relative error of random COUNT queries with 1 to
  4 conditions, at least one on a sensitive attribute, the others equality or range conditions
  on quasi-identifiers; the release's answer is the anatomy estimate (each group's matching QIT
  rows times the sensitive values' share of the group), the true answer the source's count;
- disassociation (003 sec. 3.3): on a reconstruction drawn inside a subtransaction that is
  rolled back, the MRE of the utility policy's constraints (Def. 3) and the ARE of random
  itemset COUNT queries (Def. 2), against the source;
- condensation (004 sec. 3.5): means and standard deviations, correlations and the coefficients
  of a least-squares model of the survival time (or the last numeric column) on the other
  numeric columns, release against original.
"""
import itertools
import json

import numpy as np

from ..methods import registry
from ..sqltext import qualified, quote_ident

N_QUERIES = 200          # 001 ran 8,800; a report keeps to a few seconds
NUMERIC = ("smallint", "integer", "bigint", "numeric", "real", "double precision")
SCHEMA = "release"
WHOLE_TABLES = "the release has a selection; the report compares whole tables"


def is_release_relation(name):
    """A relation of schema `release` as deid logs it ("release.<table>")."""
    schema, _, table = (name or "").partition(".")
    return schema == SCHEMA and bool(table)


def release_table(name):
    """A relation of schema release, as deid logs it, quoted for SQL."""
    return qualified(*name.split(".", 1))


_table = release_table


def _columns(db, name):
    """(name, type) of a released relation's columns, in order."""
    schema, table = name.split(".", 1)
    return [(r["attname"], r["typ"]) for r in db.query(
        "SELECT a.attname::text AS attname, pg_catalog.format_type(a.atttypid, NULL) AS typ"
        "  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
        " WHERE c.relnamespace = $1::regnamespace AND c.relname = $2 AND a.attnum > 0"
        "   AND NOT a.attisdropped ORDER BY a.attnum", [schema, table], ["text", "text"])]


def numeric_columns(db, name):
    """The numeric columns of a released relation, in order."""
    return [c for c, t in _columns(db, name) if t in NUMERIC]


def readable(db, relations):
    return all(db.value("SELECT pg_catalog.has_table_privilege($1, 'SELECT')", [_table(r)], ["text"])
               for r in relations)


# ------------------------------------------------------------------ anatomy: ARE (001)

def _random_queries(db, qit, counts, qis, sensitive, seed):
    """N_QUERIES conditions [(column, kind, value(s))], drawn from the released values."""
    rng = np.random.default_rng(seed)
    values = {}
    for c in qis:
        values[c] = [r["v"] for r in db.query(f"SELECT DISTINCT {quote_ident(c)} AS v FROM {_table(qit)}"
                                              f" WHERE {quote_ident(c)} IS NOT NULL ORDER BY 1")]
    for s in sensitive:
        values[s] = [r["v"] for r in db.query(f"SELECT DISTINCT {quote_ident(s)} AS v"
                                              f" FROM {_table(counts[s])} ORDER BY 1")]
    queries = []
    for _ in range(N_QUERIES):
        n = int(rng.integers(1, 5))
        s_cols = list(rng.choice(sensitive, size=min(len(sensitive), int(rng.integers(1, n + 1))), replace=False))
        q_cols = list(rng.choice(qis, size=min(len(qis), n - len(s_cols)), replace=False)) if n > len(s_cols) else []
        conds = [(c, "=", values[c][int(rng.integers(len(values[c])))]) for c in s_cols]
        for c in q_cols:
            v = values[c]
            if isinstance(v[0], (int, float)) and rng.random() < 0.5 and len(v) > 1:
                a, b = sorted(rng.choice(len(v), size=2, replace=False))
                conds.append((c, "between", (v[a], v[b])))
            else:
                conds.append((c, "=", v[int(rng.integers(len(v)))]))
        queries.append(conds)
    return queries


def _where(conds, types, first=1):
    """(SQL condition, values, their types), parameters numbered from `first`."""
    parts, args, kinds = [], [], []
    for c, kind, v in conds:
        col = quote_ident(c)
        if kind == "between":
            parts.append(f"{col} BETWEEN ${first + len(args)} AND ${first + len(args) + 1}")
            args += list(v)
            kinds += [types[c]] * 2
        else:
            parts.append(f"{col} = ${first + len(args)}")
            args.append(v)
            kinds.append(types[c])
    return (" AND ".join(parts) if parts else "true"), args, kinds


def _estimate(db, qit, counts, conds, types):
    """The anatomy estimate of COUNT(*) WHERE conds: per group, the QIT rows matching the
    quasi-identifier conditions times the product of the sensitive conditions' shares."""
    where, args, kinds = _where([c for c in conds if c[0] not in counts], types)
    joins, factor = [], ""
    for i, (c, _, v) in enumerate(c for c in conds if c[0] in counts):
        args.append(v)
        kinds.append(types[c])
        joins.append(f" JOIN (SELECT group_id, sum(count)::float8 AS c FROM {_table(counts[c])}"
                     f" WHERE {quote_ident(c)} = ${len(args)} GROUP BY 1) s{i} USING (group_id)")
        factor += f" * s{i}.c / q.n"
    return float(db.value(
        f"SELECT coalesce(sum(q.m::float8{factor}), 0) AS e FROM (SELECT group_id,"
        f" count(*) FILTER (WHERE {where}) AS m, count(*) AS n FROM {_table(qit)} GROUP BY 1) q"
        + "".join(joins), args, kinds))


def anatomy(db, rel, source):
    """ARE of random COUNT queries (001), when the source was handed over."""
    if source is None:
        return None
    if rel["parameters"].get("selection"):
        return {"are": None, "why": WHOLE_TABLES}
    metrics = rel["metrics"]
    qits = [r for r in rel["relations"] if r.endswith("_qit")]
    sensitive = metrics.get("sensitive") or []
    counts = {s: r for s in sensitive for r in rel["relations"] if r.endswith(f"_{s}")}
    qis = metrics.get("quasi_identifiers") or []
    if len(qits) != 1 or len(counts) != len(sensitive) or not sensitive:
        return None
    types = dict(_columns(db, qits[0]))
    for s in sensitive:
        types.update((c, t) for c, t in _columns(db, counts[s]) if c == s)
    queries = _random_queries(db, qits[0], counts, qis, sensitive, rel["seed"])
    errors, small = [], []
    for conds in queries:
        where, args, kinds = _where(conds, types)
        true = db.value(f"SELECT count(*) AS n FROM {source.qualified} WHERE {where}", args, kinds)
        if not true:
            continue
        errors.append(abs(_estimate(db, qits[0], counts, conds, types) - true) / true)
        small.append(true < 0.01 * (metrics.get("rows") or 1))
    if not errors:
        return None
    e, s = np.array(errors), np.array(small)
    return {"are": float(e.mean()), "queries": len(e), "queries_drawn": N_QUERIES,
            "are_below_1pct": float(e[s].mean()) if s.any() else None,
            "are_from_1pct": float(e[~s].mean()) if (~s).any() else None,
            "query_seed": rel["seed"]}


# ------------------------------------------------------------ condensation: moments (004)

def _moments(db, table, cols, target):
    """Means, standard deviations, correlations and the least-squares coefficients of `target`
    on the other columns (with an intercept), from one aggregate query."""
    x = [c for c in cols if c != target]
    terms = ["count(*)"]
    terms += [f"avg({quote_ident(c)}::float8), stddev_samp({quote_ident(c)}::float8)" for c in cols]
    pairs = list(itertools.combinations(cols, 2))
    terms += [f"corr({quote_ident(a)}::float8, {quote_ident(b)}::float8)" for a, b in pairs]
    design = ["1::float8"] + [f"{quote_ident(c)}::float8" for c in x]
    y = f"{quote_ident(target)}::float8"
    terms += [f"sum({a} * {b})" for i, a in enumerate(design) for b in design[i:]]
    terms += [f"sum({a} * {y})" for a in design]
    row = db.value(f"SELECT ARRAY[{', '.join(terms)}]::float8[] AS m FROM {table}")
    n, row = int(row[0]), list(row[1:])
    means = {c: row[2 * i] for i, c in enumerate(cols)}
    sds = {c: row[2 * i + 1] for i, c in enumerate(cols)}
    row = row[2 * len(cols):]
    corr = {f"{a}, {b}": row[i] for i, (a, b) in enumerate(pairs)}
    row = row[len(pairs):]
    d = len(design)
    xtx = np.zeros((d, d))
    xtx[np.triu_indices(d)] = row[:d * (d + 1) // 2]
    xtx = xtx + np.triu(xtx, 1).T
    xty = np.array(row[d * (d + 1) // 2:], dtype=float)
    beta = np.linalg.lstsq(xtx, xty, rcond=None)[0]
    return {"rows": n, "mean": means, "sd": sds, "corr": corr,
            "coefficients": dict(zip(["(intercept)"] + x, map(float, beta)))}


def condensation(db, rel, source):
    """004's measures of the release and, when the source was handed over, of the original."""
    if len(rel["relations"]) != 1:
        return None
    table = rel["relations"][0]
    cols = numeric_columns(db, table)
    if len(cols) < 2:
        return None
    survival = (rel["parameters"].get("options") or {}).get("survival") or {}
    target = survival.get("time") if survival.get("time") in cols else cols[-1]
    out = {"model": f"least squares: {target} ~ " + " + ".join(c for c in cols if c != target),
           "release": _moments(db, _table(table), cols, target)}
    if source is not None and not rel["parameters"].get("selection") \
            and all(c in source.columns and not source.columns[c].as_text for c in cols):
        out["original"] = _moments(db, source.qualified, cols, target)
    return out


# ---------------------------------------------------------- disassociation: ARE, MRE (003)

CONSTRAINTS = ("SELECT ARRAY(SELECT jsonb_array_elements_text(value)) AS codes, ordinality AS i"
               " FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY")


def _set_counts(db, recon, source, record, item, sets, match):
    """Per code set, the records matching it in the reconstruction and in the source: `match`
    'any' (003 Def. 3: the record holds a code of the constraint) or 'all' (a COUNT query of
    Def. 2: the record holds every code of the itemset)."""
    op = "&&" if match == "any" else "@>"
    having = "" if match == "any" else \
        f" HAVING count(DISTINCT s.{quote_ident(item)}::text) = cardinality(u.codes)"
    released = db.query(f"SELECT count(r.codes) AS n FROM ({CONSTRAINTS}) u LEFT JOIN {recon} r"
                        f" ON r.codes {op} u.codes GROUP BY u.i ORDER BY u.i", [json.dumps(sets)], ["text"])
    original = db.query(
        f"SELECT count(m.r) AS n FROM ({CONSTRAINTS}) u LEFT JOIN LATERAL (SELECT s.{quote_ident(record)}"
        f" AS r FROM {source} s WHERE s.{quote_ident(item)}::text = ANY (u.codes)"
        f" GROUP BY s.{quote_ident(record)}{having}) m ON true GROUP BY u.i ORDER BY u.i",
        [json.dumps(sets)], ["text"])
    return (np.array([r["n"] for r in released], float), np.array([r["n"] for r in original], float))


class _Undo(Exception):
    """Rolls the reconstruction's subtransaction back: nothing of it stays."""


def disassociation(db, rel, source):
    """003's measures on a reconstruction (003 Fig. 5) drawn by deid.reconstruct inside a
    subtransaction that is rolled back: the MRE of each constraint of the request's utility
    policy (Def. 3) and the ARE of random itemset COUNT queries of 1 to m codes (Def. 2),
    against the source."""
    options = rel["parameters"].get("options") or {}
    if source is None or options.get("model", rel["method"]) != rel["method"]:   # not k^m generalization
        return None
    if rel["parameters"].get("selection"):
        return {"why": WHOLE_TABLES}
    record, item, m = options.get("record"), options.get("item"), int(rel["metrics"].get("m") or 2)
    if not record or not item:
        return None
    seed = rel["seed"]
    target = f"report_{rel['release_id']}_{seed % 100000}"
    out = {"reconstruction_seed": seed}
    try:
        with db.subtransaction():
            db.value("SELECT deid.reconstruct($1, $2, $3)", [rel["name"], target, seed],
                     ["text", "text", "int"])
            _reconstruction_measures(db, qualified(SCHEMA, target), source.qualified, record, item,
                                     m, seed, options.get("utility"), out)
            raise _Undo
    except _Undo:
        pass
    return out


def _reconstruction_measures(db, recon, source, record, item, m, seed, policy, out):
    if policy:
        released, original = _set_counts(db, recon, source, record, item, policy, "any")
        keep = original > 0
        mre = (original[keep] - released[keep]) / original[keep]
        out.update(mre_constraints=int(keep.sum()), mre_mean=float(mre.mean()),
                   mre_within_5pct=float(np.mean(np.abs(mre) < 0.05)),
                   mre_min=float(mre.min()), mre_max=float(mre.max()))
    codes = [r["c"] for r in db.query(f"SELECT DISTINCT unnest(codes) AS c FROM {recon} ORDER BY 1")]
    rng = np.random.default_rng(seed)
    sets = [sorted(rng.choice(codes, size=min(len(codes), int(rng.integers(1, m + 1))), replace=False).tolist())
            for _ in range(N_QUERIES)]
    released, original = _set_counts(db, recon, source, record, item, sets, "all")
    keep = original > 0
    out.update(are=float(np.mean(np.abs(released[keep] - original[keep]) / original[keep])),
               queries=int(keep.sum()), queries_drawn=N_QUERIES)


# the source-side measures a method's report declares (methods/<method>/report.py: measures)
MEASURES = {"count_queries": anatomy, "moments": condensation, "reconstruction": disassociation}


def measures(db, rel, source):
    """The method's measures (or None); `source` a catalog Relation, or None."""
    fn = MEASURES.get(registry.report_of(rel["method"]).measures)
    if fn is None or not rel["relations"] or not readable(db, rel["relations"]):
        return None
    return fn(db, rel, source)
