"""Utility in each paper's own measures, computed by set-based SQL on what the role may read:
the released tables (readable by deid_reader) and, only when `source` is given (the role has
SELECT on the source), the source. No raw row comes to the client: aggregates only.

- anatomy (001 sec. "Experiments"): the average relative error of random COUNT queries with 1 to
  4 conditions, at least one on a sensitive attribute, the others equality or range conditions
  on quasi-identifiers; the release's answer is the anatomy estimate (each group's matching QIT
  rows times the sensitive values' share of the group), the true answer the source's count;
- disassociation (003 sec. 3.3): on a reconstruction drawn inside a rolled-back transaction,
  the MRE of the utility policy's constraints (Def. 3) and the ARE of random itemset COUNT
  queries (Def. 2), against the source;
- condensation (004 sec. 3.5): means and standard deviations, correlations and the coefficients
  of a least-squares model of the survival time (or the last numeric column) on the other
  numeric columns, release against original.
"""
import itertools

import numpy as np
from psycopg import sql

N_QUERIES = 200          # 001 ran 8,800; a report keeps to a few seconds
NUMERIC = ("smallint", "integer", "bigint", "numeric", "real", "double precision")


def _ident(qualified):
    schema, _, table = qualified.partition(".")
    return sql.Identifier(schema, table)


def _columns(conn, qualified):
    """(name, type) of a released table's columns, in order."""
    schema, _, table = qualified.partition(".")
    return conn.execute("SELECT attname, format_type(atttypid, NULL) FROM pg_attribute"
                        " WHERE attrelid = format('%%I.%%I', %s::text, %s::text)::regclass"
                        " AND attnum > 0 AND NOT attisdropped ORDER BY attnum", [schema, table]).fetchall()


# ------------------------------------------------------------------ anatomy: ARE (001)

def _random_queries(conn, qit, counts, qis, sensitive, seed):
    """N_QUERIES conditions [(column, kind, value(s))], drawn from the released values."""
    rng = np.random.default_rng(seed)
    values = {}
    for c in qis:
        values[c] = [r[0] for r in conn.execute(sql.SQL("SELECT DISTINCT {} FROM {} WHERE {} IS NOT NULL ORDER BY 1")
                                                .format(sql.Identifier(c), _ident(qit), sql.Identifier(c)))]
    for s in sensitive:
        values[s] = [r[0] for r in conn.execute(sql.SQL("SELECT DISTINCT {} FROM {} ORDER BY 1").format(
            sql.Identifier(s), _ident(counts[s])))]
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


def _where(conds):
    parts, args = [], []
    for c, kind, v in conds:
        if kind == "between":
            parts.append(sql.SQL("{} BETWEEN %s AND %s").format(sql.Identifier(c)))
            args += list(v)
        else:
            parts.append(sql.SQL("{} = %s").format(sql.Identifier(c)))
            args.append(v)
    return sql.SQL(" AND ").join(parts) if parts else sql.SQL("true"), args


def _estimate(conn, qit, counts, conds):
    """The anatomy estimate of COUNT(*) WHERE conds: per group, the QIT rows matching the
    quasi-identifier conditions times the product of the sensitive conditions' shares."""
    qi = [c for c in conds if c[0] not in counts]
    where, args = _where(qi)
    joins, factor = [], sql.SQL("")
    for i, (c, _, v) in enumerate(c for c in conds if c[0] in counts):
        alias = sql.Identifier(f"s{i}")
        joins.append(sql.SQL(" JOIN (SELECT group_id, sum(count)::float8 AS c FROM {} WHERE {} = %s"
                             " GROUP BY 1) {} USING (group_id)").format(
            _ident(counts[c]), sql.Identifier(c), alias))
        factor += sql.SQL(" * {}.c / q.n").format(alias)
        args.append(v)
    q = sql.SQL("SELECT coalesce(sum(q.m::float8{}), 0) FROM (SELECT group_id, count(*) FILTER (WHERE {}) AS m,"
                " count(*) AS n FROM {} GROUP BY 1) q{}").format(factor, where, _ident(qit), sql.SQL("").join(joins))
    # the QI condition's parameters come first in the text, the sensitive ones after
    return float(conn.execute(q, args).fetchone()[0])


def anatomy(conn, rel, metrics, source):
    """ARE of random COUNT queries (001), when the role may read the source and the release
    has no selection (the source's rows are then exactly the released ones)."""
    if source is None:
        return None
    if (rel["parameters"] or {}).get("selection"):
        return {"are": None, "why": "the release has a selection; the report compares whole tables"}
    qits = [r for r in rel["relations"] if r.endswith("_qit")]
    sensitive = metrics.get("sensitive") or []
    counts = {s: r for s in sensitive for r in rel["relations"] if r.endswith(f"_{s}")}
    qis = metrics.get("quasi_identifiers") or []
    if len(qits) != 1 or len(counts) != len(sensitive) or not sensitive:
        return None
    queries = _random_queries(conn, qits[0], counts, qis, sensitive, rel["seed"] or 0)
    errors, small = [], []
    for conds in queries:
        where, args = _where(conds)
        true = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {}").format(source, where), args).fetchone()[0]
        if true == 0:
            continue
        errors.append(abs(_estimate(conn, qits[0], counts, conds) - true) / true)
        small.append(true < 0.01 * (metrics.get("rows") or 1))
    if not errors:
        return None
    e, s = np.array(errors), np.array(small)
    return {"are": float(e.mean()), "queries": len(e), "queries_drawn": N_QUERIES,
            "are_below_1pct": float(e[s].mean()) if s.any() else None,
            "are_from_1pct": float(e[~s].mean()) if (~s).any() else None,
            "query_seed": rel["seed"] or 0}


# ------------------------------------------------------------ condensation: moments (004)

def _moments(conn, table, cols, target):
    """Means, standard deviations, correlations and the least-squares coefficients of `target`
    on the other columns (with an intercept), from one aggregate query."""
    x = [c for c in cols if c != target]
    terms = [sql.SQL("count(*)")]
    terms += [sql.SQL("avg({0}::float8), stddev_samp({0}::float8)").format(sql.Identifier(c)) for c in cols]
    pairs = list(itertools.combinations(cols, 2))
    terms += [sql.SQL("corr({}::float8, {}::float8)").format(sql.Identifier(a), sql.Identifier(b)) for a, b in pairs]
    design = [sql.SQL("1::float8")] + [sql.SQL("{}::float8").format(sql.Identifier(c)) for c in x]
    y = sql.SQL("{}::float8").format(sql.Identifier(target))
    terms += [sql.SQL("sum({} * {})").format(a, b) for i, a in enumerate(design) for b in design[i:]]
    terms += [sql.SQL("sum({} * {})").format(a, y) for a in design]
    row = conn.execute(sql.SQL("SELECT {} FROM {}").format(sql.SQL(", ").join(terms), table)).fetchone()
    n, row = row[0], list(row[1:])
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


def condensation(conn, rel, metrics, source):
    """004's measures of the release and, when the role may read the source, of the original."""
    if len(rel["relations"]) != 1:
        return None
    table = rel["relations"][0]
    cols = [c for c, t in _columns(conn, table) if t in NUMERIC]
    if len(cols) < 2:
        return None
    survival = ((rel["parameters"] or {}).get("options") or {}).get("survival") or {}
    target = survival.get("time") if survival.get("time") in cols else cols[-1]
    out = {"model": f"least squares: {target} ~ " + " + ".join(c for c in cols if c != target),
           "release": _moments(conn, _ident(table), cols, target)}
    if source is not None and not (rel["parameters"] or {}).get("selection"):
        out["original"] = _moments(conn, source, cols, target)
    return out


# ---------------------------------------------------------- disassociation: ARE, MRE (003)

CONSTRAINTS = ("SELECT ARRAY(SELECT jsonb_array_elements_text(value)) AS codes, ordinality AS i"
               " FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY")


def _set_counts(conn, recon, source, record, item, sets, match):
    """Per code set, the records matching it in the reconstruction and in the source: `match`
    'any' (003 Def. 3: the record holds a code of the constraint) or 'all' (a COUNT query of
    Def. 2: the record holds every code of the itemset)."""
    import json
    op = sql.SQL("&&" if match == "any" else "@>")
    having = sql.SQL("" if match == "any" else " HAVING count(DISTINCT s.{}::text) = cardinality(u.codes)").format(
        sql.Identifier(item))
    released = conn.execute(sql.SQL("SELECT count(r.codes) FROM ({}) u LEFT JOIN {} r ON r.codes {} u.codes"
                                    " GROUP BY u.i ORDER BY u.i").format(sql.SQL(CONSTRAINTS), recon, op),
                            [json.dumps(sets)]).fetchall()
    original = conn.execute(sql.SQL(
        "SELECT count(m.r) FROM ({0}) u LEFT JOIN LATERAL (SELECT s.{1} AS r FROM {2} s"
        " WHERE s.{3}::text = ANY (u.codes) GROUP BY s.{1}{4}) m ON true GROUP BY u.i ORDER BY u.i").format(
        sql.SQL(CONSTRAINTS), sql.Identifier(record), source, sql.Identifier(item), having),
        [json.dumps(sets)]).fetchall()
    return np.array([r[0] for r in released], float), np.array([r[0] for r in original], float)


def disassociation(conn, rel, metrics, source):
    """003's measures on a reconstruction (003 Fig. 5) drawn by deid.reconstruct inside a
    transaction that is rolled back (nothing stays): the MRE of each constraint of the request's
    utility policy (Def. 3) and the ARE of random itemset COUNT queries of 1 to m codes (Def. 2),
    against the source; only for a role with SELECT on it and a release without a selection."""
    options = (rel["parameters"] or {}).get("options") or {}
    if source is None or options.get("model") not in (None, "disassociation"):
        return None
    if (rel["parameters"] or {}).get("selection"):
        return {"why": "the release has a selection; the report compares whole tables"}
    record, item, m = options.get("record"), options.get("item"), int(metrics.get("m") or 2)
    if not record or not item:
        return None
    seed = rel["seed"] or 0
    target = f"report_{rel['release_id']}_{seed % 100000}"
    recon = sql.Identifier("release", target)
    out = {"reconstruction_seed": seed}
    with conn.transaction(force_rollback=True):
        conn.execute("SELECT deid.reconstruct(%s, %s, %s)", [rel["name"], target, seed])
        policy = options.get("utility")
        if policy:
            released, original = _set_counts(conn, recon, source, record, item, policy, "any")
            keep = original > 0
            mre = (original[keep] - released[keep]) / original[keep]
            out.update(mre_constraints=int(keep.sum()), mre_mean=float(mre.mean()),
                       mre_within_5pct=float(np.mean(np.abs(mre) < 0.05)),
                       mre_min=float(mre.min()), mre_max=float(mre.max()))
        codes = [r[0] for r in conn.execute(sql.SQL("SELECT DISTINCT unnest(codes) FROM {} ORDER BY 1").format(recon))]
        rng = np.random.default_rng(seed)
        sets = [sorted(rng.choice(codes, size=min(len(codes), int(rng.integers(1, m + 1))), replace=False).tolist())
                for _ in range(N_QUERIES)]
        released, original = _set_counts(conn, recon, source, record, item, sets, "all")
        keep = original > 0
        out.update(are=float(np.mean(np.abs(released[keep] - original[keep]) / original[keep])),
                   queries=int(keep.sum()), queries_drawn=N_QUERIES)
    return out


MEASURES = {"anatomy": anatomy, "condensation": condensation, "disassociation": disassociation}


def measures(conn, rel, metrics, source):
    """The method's measures (or None), `source` an sql.Identifier when readable, else None."""
    fn = MEASURES.get(rel["method"])
    return fn(conn, rel, metrics, source) if fn else None
