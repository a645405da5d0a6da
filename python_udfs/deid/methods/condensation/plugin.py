"""method => 'condensation': synthetic rows that keep every cluster's mean vector and covariance
matrix (paper 004). A pure plug-in: no SQL.

    plan_read(req, rid)  -> checks the projection (every column numeric -- int, numeric, float,
                            date -- or categorical -- text, boolean, or a column whose role names
                            a hierarchy) and the survival columns; reads them and the row ids.
    run(frame, req)      -> ReleasePlan: rare categories generalized (the column's hierarchy,
                            else one merged label: rare_values.py), then
                            methods.condensation.condense -- 004 Alg. 2 (step 1 status split,
                            2a weighted k-means, 2b-2c rebalance to >= k, 2.d.i moment-exact
                            Alg. 3, 2.d.ii survival times, 2.d.iii permissible values) or
                            Alg. 1 ('original'), then every released row that copies a source
                            row shared by fewer than k rows moved -- then ONE release table of
                            the projected columns in their own types, synthetic rows in the kernel's
                            seeded random order, no row id; the cluster membership (004 Def. 1)
                            for deid.cluster_member; and the in-memory rows for the verifier.
The independent check of what was stored is verify/condensation.py.

Deviation: k < 3 is refused, not only k < 2. A 2-row cluster's exact mean
and covariance determine its two rows (up to order), so moment-exact synthesis would release
the source rows themselves.
"""
import dataclasses
import re

import numpy as np

from ...catalog import hierarchies
from .. import kept_groups, support as ms
from ...errors import (DeidError, FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE,
                       NULL_VALUE_NOT_ALLOWED)
from ...request.options import COMMON, Option, option_class, typed
from . import report
from ...read.frame import value_dictionary
from ...plan import Clusters, Labels, ReleasePlan, SourceCodes, Synthetic, Table
from ...verify.condensation import Evidence

NAME = "condensation"
RELEASE_HEAP = True             # the heap trimmed after the method and each table (methods/contract.py)
DISTRIBUTION = "shard_local"    # sharded: each node releases its rows (methods/contract.py)
HAS_L = False                   # no l: a policy's min_l does not apply (methods/contract.py)
COMPOSITION = "clusters"        # composition rule (b): its clusters in deid.cluster_member
ESTIMATE_VIEW = False
SHARD_PRECHECK = None           # clusters of at least k rows per node need no pre-check
REPORT = report.REPORT
KEEPS_GROUPS = True             # a re-release keeps the earlier clusters (methods/kept_groups.py)
read_columns = None             # the projection and the source's row id (methods/contract.py)
OPTIONS = (
    Option("survival", "object", "the survival time and vital status columns (004 Alg. 2 step 1 "
           "splits on the status, step 2.d.ii keeps the times' order); both must be projected.",
           choices=("time", "status"),
           example='{"survival": {"time": "surv_months", "status": "vital_status"}}'),
    Option("weights", "map_number", "clustering weight of a column in [0, 1] (004 Alg. 2 step 2a; "
           "the other columns share the rest equally); default 0.5 on the survival time.",
           low=0, high=1, example='{"weights": {"surv_months": 0.5}}'),
    Option("survival_times", "choice", "'recode' (default: each time released as its bin's "
           "value, every (time, status) pair shared by >= k source rows, whole units where k "
           "rows share one), 'ranked' (moved just below itself, as float8: releases the exact "
           "order and, on whole-unit times, the values), 'coarsened' (moved at random inside "
           "its bin; biases Cox on large tables), 'perturbed' (inside its cluster's cell) or "
           "'original' (004 Alg. 2 step 2.d.ii as printed).",
           choices=("recode", "ranked", "coarsened", "perturbed", "original")),
    Option("auto_k", "bool", "raise k to the largest of k, 1.5k, 2k, 3k, 5k, 7.5k, 10k whose "
           "releases (5 seeds) keep <= 10 % of the coefficients of each of the linear, "
           "logistic and Cox models outside the source's 95 % intervals and no mean shift "
           "above 1 SE, leaving every vital status >= 20 clusters (the trials in "
           "metrics.k_rule); never lowers k; needs survival.",
           example='{"auto_k": true}'),
    Option("distance_guard", "int", "redraws (within the exact moments: another random rotation) "
           "of a cluster whose synthetic rows lie closer to a source row than a held-out record "
           "would (its source rows' median nearest-neighbour distance); 0 (default) = none.",
           low=0, high=64, example='{"distance_guard": 8}'),
    Option("lloyd_rounds", "int", "Lloyd rounds of the weighted k-means before rebalancing "
           "(004 Alg. 2 step 2a; R's kmeans default is 10), default 5; fewer run faster "
           "(2 changed no utility figure beyond seed noise on the condensation evaluation).",
           low=1, high=10, example='{"lloyd_rounds": 2}'),
    Option("algorithm", "choice", "'improved' (004 Alg. 2) or 'original' (004 Alg. 1, "
           "Aggarwal's condensation: random seeds, equal weights).",
           choices=("improved", "original")),
)
# the options as typed attributes, derived from OPTIONS (request/options.py): what this
# plug-in reads; the dict itself is what the release log keeps
Options = option_class("CondensationOptions", COMMON + OPTIONS)


def _opts(options):
    return typed(Options, options)
MIN_K = 3
DEFAULT_SURVIVAL_TIMES = "recode"
NUMERIC = {"int2", "int4", "int8", "float4", "float8", "numeric", "date"}
CATEGORICAL = {"text", "varchar", "bpchar", "bool"}
STATUS_TYPES = {"int2", "int4", "int8", "bool"}
PER_CLUSTER_METRICS = 200          # per-cluster sizes/statistics in the log up to this many


def validate(k, l, opts):
    if k < MIN_K:
        raise DeidError(INVALID_PARAMETER_VALUE, f"k must be at least {MIN_K} for condensation",
                        hint="A cluster of 2 rows is determined by its exact mean and covariance "
                             "(004 Alg. 3 would release its rows): use k >= 3.")
    if l is not None:
        raise DeidError(INVALID_PARAMETER_VALUE, "method condensation has no l",
                        hint="Leave l NULL; k is the least number of rows per cluster.")
    if _opts(opts).weights is not None and _opts(opts).algorithm == "original":
        raise DeidError(INVALID_PARAMETER_VALUE, "options.weights do not apply to algorithm "
                        "'original'", hint="004 Alg. 1 weighs every attribute equally; drop "
                                           "options.weights.")
    if _opts(opts).auto_k and (_opts(opts).survival is None or _opts(opts).algorithm == "original"):
        raise DeidError(INVALID_PARAMETER_VALUE, "options.auto_k needs options.survival and "
                        "algorithm 'improved'",
                        hint="The k rule measures the Cox model of the survival time: give "
                             '{"survival": {"time": "t", "status": "s"}, "auto_k": true}.')
    if _opts(opts).survival_times is not None and (_opts(opts).survival is None or _opts(opts).algorithm == "original"):
        raise DeidError(INVALID_PARAMETER_VALUE, "options.survival_times needs options.survival "
                        "and algorithm 'improved'",
                        hint='e.g. {"survival": {"time": "t", "status": "s"}, '
                             '"survival_times": "original"}')


def is_categorical(req, c):
    """004 sec. 3.1: text, boolean and any column whose role names a hierarchy are categories
    (one-hot coded); int, numeric, float and date are synthesised as numbers."""
    col = req.rel.columns[c]
    return col.hierarchy is not None or col.base_type not in NUMERIC


def plan_read(req, rid):
    """Check the projection's types and the survival and weight options (before anything is
    read); read every projected column and the row ids, by row id."""
    for c in req.columns:
        col = req.rel.columns[c]
        if col.base_type not in NUMERIC | CATEGORICAL and col.hierarchy is None:
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f'condensation cannot synthesise column "{c}" of type {col.type}',
                            hint="Project int, numeric, float, date, text or boolean columns, or "
                                 "give the column a hierarchy (it is then a category); a view "
                                 "over the source can cast it.")
    survival = _opts(req.options).survival
    if survival:
        for key in ("time", "status"):
            if survival[key] not in req.columns:
                raise DeidError(INVALID_PARAMETER_VALUE,
                                f'options.survival.{key} "{survival[key]}" is not a projected column',
                                hint="Add it to columns: " + ", ".join(req.columns) + ".")
        if survival["time"] == survival["status"]:
            raise DeidError(INVALID_PARAMETER_VALUE, "options.survival names one column twice",
                            hint="time is the survival time, status the vital status (0/1).")
        if is_categorical(req, survival["time"]):
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f'the survival time "{survival["time"]}" must be a number',
                            hint="Use an int, numeric, float or date column without a hierarchy.")
        if _opts(req.options).survival_times == "ranked" and \
                req.rel.columns[survival["time"]].base_type == "date":
            raise DeidError(INVALID_PARAMETER_VALUE, "survival_times 'ranked' needs a numeric "
                            "survival time, not a date",
                            hint="Release the time as a number of days (a view can compute it), "
                                 "or use survival_times 'recode'.")
        if req.rel.columns[survival["status"]].base_type not in STATUS_TYPES:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f'the vital status "{survival["status"]}" must be an integer or '
                            "boolean column", hint="Code the status 0/1 (or false/true).")
    for c in (_opts(req.options).weights or {}):
        if c not in req.columns:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f'options.weights names "{c}", which is not a projected column',
                            hint="Projected columns: " + ", ".join(req.columns) + ".")
        if survival and c == survival["status"]:
            raise DeidError(INVALID_PARAMETER_VALUE, "the vital status cannot be weighted",
                            hint="004 Alg. 2 splits on the status instead of clustering on it.")
    record_defaults(req)
    return ms.read_spec(req, list(req.columns), rid)


def survival_times_of(req):
    """The survival-time mode: the option, else "recode"."""
    return _opts(req.options).survival_times or DEFAULT_SURVIVAL_TIMES


def record_defaults(req):
    """The survival-time mode goes into the request's options, so the release log's
    parameters name the mode used like any option given (a default can change)."""
    if _opts(req.options).survival and (_opts(req.options).algorithm or "improved") == "improved":
        req.options.setdefault("survival_times", DEFAULT_SURVIVAL_TIMES)


def _refuse_nulls(req, frame):
    """NULLs: a categorical (text/boolean) column may treat NULL as a category of its own with
    options.nulls = 'value'; a number, the status or a hierarchy column never holds NULL."""
    survival = _opts(req.options).survival or {}
    for c in req.columns:
        col = frame.columns[c]
        n = int(col.null.sum())
        if not n:
            continue
        as_value = ((_opts(req.options).nulls or "error") == "value" and col.kind == "category"
                    and c != survival.get("status"))
        if not as_value:
            raise DeidError(NULL_VALUE_NOT_ALLOWED, f'column "{c}" is NULL in some selected rows',
                            detail=f"{n} selected row(s)",
                            hint=f"Filter them out with selection => '{c} IS NOT NULL'"
                                 + ("" if col.kind != "category" else
                                    ", or pass options => '{\"nulls\": \"value\"}' to make NULL a "
                                    "category of its own") + ".", data_dependent=True)


def source_matrix(req, frame):
    """(X, kinds): every projected column as float64 in its frame encoding (numbers, days,
    category codes -- NULL is the code after the last), and its kernel kind."""
    X = np.empty((frame.n, len(req.columns)))
    kinds = []
    for j, c in enumerate(req.columns):
        col = frame.columns[c]
        X[:, j] = col.values
        kinds.append("categorical" if is_categorical(req, c) else
                     "float" if col.kind == "float" else "int")
    return X, kinds


def run(frame, req):
    """004 Alg. 2 (or Alg. 1) on the snapshot (rows by row id) -> the release as a ReleasePlan.
    Rare categories are generalized first and released rows that copy a rare source row are
    moved afterwards (rare_values.py: a rare source row copied would be re-identified)."""
    from .condense import condense, released_kinds
    from .kmeans import DEFAULT_MAX_ITER
    _refuse_nulls(req, frame)
    X, kinds = source_matrix(req, frame)
    index = {c: j for j, c in enumerate(req.columns)}
    survival = _opts(req.options).survival
    algorithm = (_opts(req.options).algorithm or "improved")
    split = survival is not None and algorithm == "improved"
    survival_columns = (index[survival["status"]], index[survival["time"]]) if split else ()
    generalized = generalize_categories(req, frame, X, kinds, survival_columns)
    weights = {index[c]: w for c, w in (_opts(req.options).weights or {}).items()} or None
    kept = kept_groups.split(frame.rid, req.run.kept)     # a re-release keeps its clusters

    def release(k, trial=0, progress=None):
        # the k rule's trial i > 0 is another seed of the same request (derived, reproducible)
        seed = req.seed if not trial else (req.seed * 1_000_003 + trial) % (1 << 62)
        return condense(X, kinds, k, status=index[survival["status"]] if survival else None,
                        time_col=index[survival["time"]] if survival else None, weights=weights,
                        survival_times=survival_times_of(req) if split else None,
                        algorithm=algorithm, seed=seed,
                        distance_guard=(_opts(req.options).distance_guard or 0), progress=progress,
                        kept=kept, max_iter=_opts(req.options).lloyd_rounds or DEFAULT_MAX_ITER)

    def released(k, trial=0, progress=None):
        # what is released: rounded to the grains and moved off rare source rows (the k rule
        # judges these rows: the moves shift a model too, not only the clustering)
        res = release(k, trial, progress)
        out_kinds = released_kinds(kinds, res.time_col, res.survival_times)
        avoid_copies(req, res, recoded_source(X, kinds, res, survival_columns, k), out_kinds,
                     release_grains(req, out_kinds, res), survival_columns)
        return res

    k_rule = None
    if _opts(req.options).auto_k:
        from .choose_k import choose_k
        status_col, time_col = survival_columns
        k_used, res, trials = choose_k(released, X, kinds, time_col, status_col, req.k, frame.n)
        k_rule = k_rule_metrics(req.k, k_used, trials, res.survival_times)
    else:
        k_used = req.k
        res = released(req.k, progress=getattr(req, "progress", None))
    # a kept cluster publishes its members' exact moments again: its rows must be unchanged
    row_hash = kept_groups.row_hashes(frame.rid, [frame.columns[c] for c in req.columns])
    kept_groups.check_moments_kept(req.run.kept, kept, res.cluster_id, row_hash)
    kinds = released_kinds(kinds, res.time_col, res.survival_times)
    columns = []
    for j, c in enumerate(req.columns):
        col, meta = frame.columns[c], req.rel.columns[c]
        if j in generalized:
            columns.append(Labels(c, res.synthetic[:, j].astype(np.int64), generalized[j].labels))
        elif col.kind == "category":
            codes = res.synthetic[:, j].astype(np.int64)
            columns.append(SourceCodes(c, col, meta, codes, list(col.dictionary), col.values))
        else:
            columns.append(Synthetic(c, res.synthetic[:, j], released_column(meta, j, res)))
    order = _by_cluster_then_rid(res.cluster_id, res.n_clusters, frame.rid)
    sizes = res.cluster_size.astype(np.int64)
    member_rids = frame.rid[order]
    metrics = _metrics(req, res, kinds)
    metrics["kept"] = {"digest": kept_groups.groups_digest(res.cluster_id, res.n_clusters,
                                                           row_hash)}
    if k_rule:
        metrics["k_rule"] = k_rule
    if res.close_rows is not None:
        metrics["distance_guard"] = {"rounds": _opts(req.options).distance_guard,
                                     "close_rows_before": res.close_rows[0],
                                     "close_rows_after": res.close_rows[1]}
    if generalized:
        metrics["categories"] = {req.columns[j]: {"mode": g.mode, "level": g.level} if
                                 g.mode == "hierarchy" else {"mode": g.mode, "label": g.labels[-1]}
                                 for j, g in generalized.items()}
    return ReleasePlan(
        tables=[Table(req.name, columns)], rows=frame.n, groups=int(res.n_clusters),
        discernibility=float((sizes.astype(float) ** 2).sum() / max(frame.n, 1)),
        clusters=Clusters(sizes, member_rids),
        metrics=metrics,
        evidence=Evidence(kinds=kinds, released=res.synthetic, membership=(sizes, member_rids),
                          unrounded=res.synthetic_unrounded, cluster=res.synthetic_cluster_id,
                          status=index[survival["status"]] if split else None,
                          time=index[survival["time"]] if split else None,
                          survival_times=res.survival_times, bin_rows=k_used,
                          generalized={req.columns[j]: {"labels": g.labels,
                                                        "map": generalized_map(frame, req.columns[j], g)}
                                       for j, g in generalized.items()}))


def k_rule_metrics(requested, used, trials, survival_times=None):
    """The log's account of the k rule (methods.condensation.choose_k): what was tried, what
    was used, and why."""
    from .choose_k import MAX_MISS, MAX_SHIFT, MIN_CLUSTERS, SEEDS
    last = trials[-1]
    why = (f"k = {used}: the largest k tried from the requested {requested} whose releases "
           f"({SEEDS} seeds) keep <= {MAX_MISS:.0%} of the coefficients of each model (linear, "
           f"logistic, Cox) outside the source's 95 % intervals and no mean shift above "
           f"{MAX_SHIFT:g} SE, every vital status keeping >= {MIN_CLUSTERS} clusters")
    missed = last["ci_miss"] > MAX_MISS or last.get("mean_shift_se", 0) > MAX_SHIFT
    if last["k"] != used:
        why += (f"; k = {last['k']} left {last['ci_miss']:.0%} outside, mean shift up to "
                f"{last.get('mean_shift_se', float('nan')):.1f} SE")
    elif missed:
        why = (f"k = {used} as requested (never lowered), though its releases leave "
               f"{last['ci_miss']:.0%} of a model's coefficients outside (mean shift up to "
               f"{last.get('mean_shift_se', float('nan')):.1f} SE): a smaller k attenuates "
               "less" + ("; coarsened survival times themselves bias the Cox model of a "
                         "large table ('recode' keeps their order at the grain of k rows)"
                         if survival_times == "coarsened" else ""))
    return {"requested": requested, "used": used, "max_miss": MAX_MISS, "max_shift": MAX_SHIFT,
            "trials": trials, "why": why}


def generalize_categories(req, frame, X, kinds, fixed):
    """Every categorical column whose rare values must be generalized ({index: Generalized});
    X's column then holds the released codes (NULL: the code after the last label)."""
    from .rare_values import generalize_column
    out = {}
    for j, c in enumerate(req.columns):
        if kinds[j] != "categorical" or j in fixed:
            continue
        codes, labels = value_dictionary(frame.columns[c])
        labels = list(labels) + [None]
        counts = np.bincount(codes, minlength=len(labels))
        g = generalize_column(labels, counts, req.k, hierarchy_levels(req, c, labels))
        if g.mode != "none":
            X[:, j] = g.code_of[codes]
            out[j] = g
    return out


def hierarchy_levels(req, c, labels):
    """The labels of every value at levels 1..top of the column's hierarchy, or None (no
    hierarchy, or a value it does not generalize: those columns merge rare values instead)."""
    h = getattr(req, "hierarchies", {}).get(c)
    if h is None:
        return None
    chains = []
    for v in labels:
        if v is None:
            chains.append([None] * (h.levels - 2) + [hierarchies.TOP])
            continue
        if h.kind == "member":
            if v not in h.members[0]:
                return None
            chain = h.chain(v, unknown=None)[1:]
        else:
            chain = hierarchies.interval_chain(v, *hierarchies.check_interval(h.low, h.high,
                                                                             h.widths))
        if chain is None or None in chain:
            return None
        chains.append(chain)
    return [list(level) for level in zip(*chains)]


def generalized_map(frame, c, g):
    """{source value as text (None: NULL): released code} of a generalized column."""
    _, labels = value_dictionary(frame.columns[c])
    return {v: int(code) for v, code in zip(list(labels) + [None], g.code_of.tolist())}


def release_grains(req, kinds, res=None):
    """Per column: (decimals, relative step, float4): the grain a released value lies on."""
    out = []
    for j, c in enumerate(req.columns):
        meta = req.rel.columns[c] if res is None else released_column(req.rel.columns[c], j, res)
        scale = numeric_scale(meta.type)
        if kinds[j] == "categorical":
            out.append((-1, 0.0, False))
        elif scale is not None:
            out.append((scale, 0.0, False))
        elif kinds[j] == "int":
            out.append((0, 0.0, False))
        else:                                    # float8, float4, numeric: a relative step
            out.append((-1, 1e-6 if meta.base_type == "float4" else 1e-12,
                        meta.base_type == "float4"))
    return out


def avoid_copies(req, res, X, kinds, grains, split):
    """Round the released rows to their columns' grains (004 Alg. 2 step 2.d.iii), then move
    every row that equals a source row shared by fewer than k rows (rare_values.py). The
    vital status never moves, nor the survival time under 004's original times (their
    multisets are the method's promise) nor under "recode" (its pairs of >= k rows are); a
    coarsened or perturbed time moves last."""
    from .rare_values import ColumnRules, Release, avoid_rare_copies
    for j, (decimals, _, float32) in enumerate(grains):
        if kinds[j] != "categorical" and decimals >= 0:
            res.synthetic[:, j] = np.round(res.synthetic[:, j], decimals)
        if float32:
            res.synthetic[:, j] = res.synthetic[:, j].astype(np.float32).astype(np.float64)
    m = len(kinds)
    status, time_col = split if split else (None, None)
    # "ranked" times equal no source time, so no released row equals a source row; they stay
    fixed = {status, time_col} if res.survival_times in ("original", "ranked", "recode") \
        else {status}
    rules = ColumnRules(decimals=[g[0] for g in grains], relative=[g[1] for g in grains],
                        float32=[g[2] for g in grains],
                        categorical=[kd == "categorical" for kd in kinds],
                        fixed=[j in fixed for j in range(m)],
                        reluctant=[j == time_col for j in range(m)])
    avoid_rare_copies(X, res.cluster_id,
                      Release(res.synthetic, res.synthetic_cluster_id, res.synthetic_unrounded),
                      req.k, rules,
                      np.random.default_rng(np.random.SeedSequence(req.seed, spawn_key=(9,))))


def recoded_source(X, kinds, res, split, k):
    """The source in the release's representation for the rare-record moves: under "recode"
    a source row's time is its bin's value (what the release says of it), else X itself."""
    if res.survival_times != "recode" or not split:
        return X
    from .survival_recode import recoded_times
    status, time_col = split
    out = X.copy()
    out[:, time_col] = recoded_times(X[:, time_col], X[:, status], k, kinds[time_col] == "int")
    return out


def released_column(meta, j, res):
    """The catalog column a synthesized column is released as: its own, except the survival
    time under "ranked", which is float8 (its values lie between the source's times)."""
    if res.survival_times != "ranked" or j != res.time_col:
        return meta
    return dataclasses.replace(meta, type="double precision", base_type="float8")


def _by_cluster_then_rid(cluster_id, n_clusters, rid):
    """Row order by cluster, then RID (the membership's order). The frame's rows are in RID
    order, so a stable sort by cluster gives it; 16-bit keys use numpy's radix sort."""
    if n_clusters <= 1 << 16 and rid.size > 1 and bool(np.all(rid[1:] > rid[:-1])):
        return np.argsort(cluster_id.astype(np.uint16), kind="stable")
    return np.lexsort((rid, cluster_id))


def numeric_scale(type_text):
    """The scale of a numeric(p,s) column (its permissible grain), None otherwise. Values
    rounded to it stay in the observed range: the observed bounds lie on that grain."""
    m = re.fullmatch(r"numeric\(\d+,(\d+)\)", type_text.replace(" ", ""))
    return int(m.group(1)) if m else None


def _metrics(req, res, kinds):
    """Cluster sizes and statistics for the log: per cluster when there are at most
    PER_CLUSTER_METRICS clusters, summarized otherwise."""
    sizes = res.cluster_size
    numeric = [j for j, kd in enumerate(kinds) if kd != "categorical"]
    out = {"algorithm": res.algorithm, "survival_times": res.survival_times,
           "blocks": int(res.n_blocks), "clusters": int(res.n_clusters),
           "weights": {c: float(w) for c, w in zip(req.columns, res.weights)},
           "cluster_sizes": {"min": int(sizes.min()), "max": int(sizes.max()),
                             "mean": float(sizes.mean()),
                             "quartiles": [float(q) for q in np.percentile(sizes, [25, 50, 75])]},
           "kernel_seconds": {k: round(float(v), 4) for k, v in res.timings.items()}}
    if res.cluster_status.size and (res.cluster_status >= 0).any():
        out["clusters_by_status"] = {str(s): int((res.cluster_status == s).sum()) for s in (0, 1)}
    if res.n_clusters <= PER_CLUSTER_METRICS:
        out["per_cluster"] = {
            "size": sizes.tolist(), "status": res.cluster_status.tolist(),
            "mean": {req.columns[j]: np.round(res.cluster_mean[:, j], 6).tolist() for j in numeric},
            "sd": {req.columns[j]: np.round(res.cluster_sd[:, j], 6).tolist() for j in numeric}}
    else:
        out["cluster_sd_mean"] = {req.columns[j]: float(np.nanmean(res.cluster_sd[:, j]))
                                  for j in numeric}
    return out
