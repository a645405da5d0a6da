"""method => 'anatomy': (K,L)-anonymity over several sensitive attributes, released as anatomy
(paper 001, Def. 3 / Fig. 3) or as one generalized table. A pure plug-in: no SQL.

    plan_read(req, rid)  -> what to read (the QIs, sensitive and insensitive columns, row ids)
    run(frame, req)      -> ReleasePlan: 001 Fig. 5 Anonymize (methods.anatomy.anatomize, with the
                            k-d split of Fig. 5 and the L checks of Figs. 6-8), then the QIT and
                            one count table per sensitive attribute (Def. 3), the RID sets of
                            Theorem 3 and the groups' generalized values (Def. 2).
The independent check of what was stored is verify/anatomy.py.
"""
import numpy as np

from .. import kept_groups, support as ms, metrics
from ...errors import DeidError, INVALID_PARAMETER_VALUE
from ...read.frame import EncodedColumn, value_dictionary
from ...request.options import COMMON, Option, option_class, typed
from . import report
from ...plan import (Classes, EstimateView, Fixed, Labels, ReadSpec, ReleasePlan, RidSets,
                     SourceCodes, SourceValues, Table)
from ...verify.anatomy import Evidence

NAME = "anatomy"
read_columns = None             # the projection and the source's row id (methods/contract.py)
# the pipeline hands the C heap's free pages back after the method and after each written table
# (deid.heap): anatomy's peak memory, not paid by methods whose phases allocate less
RELEASE_HEAP = True
DISTRIBUTION = "shard_local"    # sharded: each node releases its rows (methods/contract.py)
HAS_L = True                    # its l: (K,L)-anatomy (methods/contract.py)
COMPOSITION = "groups_values"  # composition rule (b): its groups in deid.rid_set (methods/contract.py)
ESTIMATE_VIEW = True            # 001's estimate view over the QIT, also over shards
REPORT = report.REPORT
KEEPS_GROUPS = True             # a re-release keeps the earlier groups (methods/kept_groups.py)
OPTIONS = (
    Option("column_l", "map_int", "column-wise limits L_i per sensitive attribute (001 Def. 7); "
           "needs l.", low=1, high=2 ** 31 - 1, example='{"column_l": {"treatment": 2}}'),
    Option("model", "choice", "'kl' (001 Def. 6) or 'exponential_l' (the baseline of 001).",
           choices=("kl", "exponential_l")),
    Option("output", "choice", "'anatomy' (QIT + one count table per sensitive attribute) or "
           "'generalized' (one table, QIs as group ranges).", choices=("anatomy", "generalized")),
)
# the options as typed attributes, derived from OPTIONS (request/options.py): what this
# plug-in reads; the dict itself is what the release log keeps
Options = option_class("AnatomyOptions", COMMON + OPTIONS)


def _opts(options):
    return typed(Options, options)


def validate(k, l, opts):
    if k < 2:
        raise DeidError(INVALID_PARAMETER_VALUE, f"K must be at least 2 for anatomy, got {k}",
                        hint="K is the smallest group size; K = 1 would release every row alone.")
    if l is not None and l < 1:
        raise DeidError(INVALID_PARAMETER_VALUE, f"L must be at least 1, got {l}",
                        hint="L is the number of sensitive values an attacker must rule out.")
    if (_opts(opts).model or "kl") not in ("kl", "exponential_l"):
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown model {_opts(opts).model!r}",
                        hint="options.model is 'kl' (001 Def. 6) or 'exponential_l' (the baseline).")
    if (_opts(opts).output or "anatomy") not in ("anatomy", "generalized"):
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown output {_opts(opts).output!r}",
                        hint="options.output is 'anatomy' or 'generalized'.")
    cl = _opts(opts).column_l
    if cl is not None:
        if not isinstance(cl, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in cl.values()):
            raise DeidError(INVALID_PARAMETER_VALUE, "options.column_l must map attributes to "
                            "integers >= 1", hint='e.g. {"column_l": {"treatment": 2}}')
        if l is None:
            raise DeidError(INVALID_PARAMETER_VALUE, "options.column_l needs l",
                            hint="Column-wise limits (001 Def. 7) refine an L requirement.")


def _columns(req):
    return (ms.columns_with_role(req, "quasi_identifier"), ms.columns_with_role(req, "sensitive"),
            ms.columns_with_role(req, "insensitive"))


def plan_read(req, rid):
    """Check the request's columns; what to read (by deid_owner, before anything is read)."""
    qis, sas, others = _columns(req)
    if not qis:
        raise DeidError(INVALID_PARAMETER_VALUE, "anatomy needs at least one quasi-identifier",
                        hint="Project a column whose role is quasi_identifier.")
    if req.l is not None and not sas:
        raise DeidError(INVALID_PARAMETER_VALUE, "L needs at least one sensitive attribute",
                        hint="Project a column whose role is sensitive, or leave l NULL.")
    column_l = _opts(req.options).column_l or {}
    for a in column_l:
        if a not in sas:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"options.column_l names {a!r}, which is not a projected sensitive attribute",
                            hint="Sensitive attributes: " + ", ".join(sas) + ".")
    names = qis + sas + others
    reserved = {"group_id"} | ({"count"} & set(sas))
    clash = sorted(reserved & set(names))
    if clash:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f'column "{clash[0]}" clashes with a column of the anatomy tables',
                        hint="Release it under another name: a view over the source that renames it.")
    named = sorted({"qit", "estimate"} & set(sas)) if (_opts(req.options).output or "anatomy") == "anatomy" else []
    if named:       # its count table would be named like the QIT or the estimate view
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f'sensitive column "{named[0]}" clashes with a relation of the anatomy release',
                        hint="Release it under another name: a view over the source that renames it.")
    return ms.read_spec(req, names, rid)


def eligibility_read(req, spec):
    """What a sharded request's pre-check reads on each node (distributed/eligibility.py): of
    the rows `spec` reads, the sensitive attributes and the row id (their order), and, unless
    NULL is a value of its own (options.nulls), the quasi-identifiers that may hold a NULL
    (declared NOT NULL: none can), so that a node refuses a NULL quasi-identifier before any
    node stores a part, as its store would."""
    qis, sas, _ = _columns(req)
    nullable = [] if (_opts(req.options).nulls or "error") != "error" else [
        q for q in qis if not getattr(spec.rel.columns.get(q), "not_null", False)]
    return ReadSpec(spec.rel, nullable + sas, spec.rid, spec.selection)


def check_eligibility(frame, req):
    """Refuse, with the request's own error, rows that cannot satisfy (K,L) as one group (001
    Fig. 5's root: partition.check_eligible); `frame` holds eligibility_read's columns."""
    from . import partition as anatomy
    qis, sas, _ = _columns(req)
    ms.refuse_null_qis(frame, [q for q in qis if q in frame.columns], req.options)  # as run's first step
    anatomy.check_eligible(_sensitive_codes(frame, sas, [value_dictionary(frame.columns[s])
                                                         for s in sas]),
                           req.k, req.l, column_l=_column_l(req, sas),
                           model=(_opts(req.options).model or "kl"))


# over shards: every node's pre-check before any node writes (distributed/eligibility.py)
SHARD_PRECHECK = (eligibility_read, check_eligibility)


def _sensitive_codes(frame, sas, sa_dicts):
    return (np.stack([codes for codes, _ in sa_dicts], axis=1) if sas
            else np.zeros((frame.n, 0), np.int64))


def _column_l(req, sas):
    column_l = _opts(req.options).column_l or {}
    return {sas.index(a): v for a, v in column_l.items()} or None


def run(frame, req):
    """001 Fig. 5 on the snapshot (rows ordered by row id) -> the release as a ReleasePlan."""
    from . import partition as anatomy
    qis, sas, others = _columns(req)
    column_l = _opts(req.options).column_l or {}
    ms.refuse_null_qis(frame, qis, req.options)
    sa_dicts = [value_dictionary(frame.columns[s]) for s in sas]
    qi = ms.qi_matrix(req, frame, qis)
    sa = _sensitive_codes(frame, sas, sa_dicts)
    kept = kept_groups.split(frame.rid, req.run.kept)
    grouping = anatomy.anatomize_kept if kept.n_kept else anatomy.anatomize
    result = grouping(qi, sa, req.k, req.l, column_l=_column_l(req, sas),
                      model=(_opts(req.options).model or "kl"),
                      **({"kept": kept} if kept.n_kept else {}))
    del qi, sa
    group = result.group_id.astype(np.int64, copy=False)
    order = by_group(group, result.n_groups)         # rows by group, then row id (frame is by rid)
    in_order = group[order]                          # their groups (one gather for every use)
    labels = group_labels(req, frame, qis, group, result.n_groups, order, in_order)
    flat = RidArrays(frame.rid, in_order, order, [(codes, len(d) + 1) for codes, d in sa_dicts])
    # a count table needs each value once, not the snapshot's column and every row's code
    distinct = [distinct_values(frame.columns[s], codes, d) for s, (codes, d) in zip(sas, sa_dicts)]
    del sa_dicts
    group_col = Fixed("group_id", in_order.astype(np.int32))
    estimate = None
    if (_opts(req.options).output or "anatomy") == "anatomy":
        tables = [Table(f"{req.name}_qit", [group_col] + [
            SourceValues(c, frame.columns[c], req.rel.columns[c], order) for c in qis + others])]
        for i, (s, (col, codes, dictionary)) in enumerate(zip(sas, distinct)):
            g, code, _, count, _ = flat.of(i, dictionary)
            tables.append(Table(table_name(req.name, s), [
                Fixed("group_id", g),
                SourceCodes(s, col, req.rel.columns[s], code, dictionary, codes),
                Fixed("count", count)]))
        if sas:         # 001's estimate of COUNT queries, as a view a BI tool sums
            estimate = EstimateView(table_name(req.name, "estimate"), tables[0].name,
                                    [(s, t.name) for s, t in zip(sas, tables[1:])])
    else:
        gen = []
        for q in qis:
            codes, dictionary = factorize(labels[q])
            gen.append(Labels(q, codes[in_order], dictionary))
        tables = [Table(req.name, [group_col] + gen + [
            SourceValues(c, frame.columns[c], req.rel.columns[c], order) for c in sas + others])]
    sizes = np.bincount(group, minlength=result.n_groups)
    rid_sets = [RidSets(s, *flat.of(i, d)) for i, (s, (_, _, d)) in enumerate(zip(sas, distinct))]
    return ReleasePlan(
        tables=tables, rows=frame.n, groups=int(result.n_groups),
        discernibility=float(metrics.discernibility(sizes)),
        rid_sets=rid_sets, estimate=estimate,
        classes=Classes(sizes, {q: labels[q] for q in qis}),
        metrics={"model": result.model, "min_group": int(sizes.min()),
                 "min_certified_l": int(result.certified_l.min()) if sas else None,
                 "quasi_identifiers": qis, "sensitive": sas},
        # the arrays the writer stores: the verifier checks them and proves the stored rows
        # are they (verify/rid_set_digest.py)
        evidence=Evidence(rid_sets=flat.evidence(sas, [d for _, _, d in distinct]),
                          rids=frame.rid, sensitive=sas, column_l=column_l,
                          l=req.l if (_opts(req.options).model or "kl") == "kl" else None))


def by_group(group, n_groups):
    """np.argsort(group, kind="stable"), by one 16-bit radix pass when the ids fit (the same
    permutation, 4 x faster at 1M rows)."""
    if n_groups <= 1 << 16:
        return np.argsort(group.astype(np.uint16), kind="stable")
    return np.argsort(group, kind="stable")


def distinct_values(col, codes, dictionary):
    """(column, row codes, dictionary) of one sensitive attribute for its count table, from
    frame.value_dictionary's (codes, dictionary): a column of one row per dictionary entry,
    row i holding the value of code i (every row of a code holds the same value), and the
    codes of those rows, 0, 1, ...: what SourceCodes needs, without the snapshot's column."""
    size = len(dictionary)
    if col.kind == "category":
        values = np.arange(size, dtype=np.int64)
    else:
        value_of = np.zeros(size + 1, dtype=col.values.dtype)
        value_of[codes] = col.values
        values = value_of[:size]
    return (EncodedColumn(col.name, col.kind, values, np.zeros(size, bool), col.dictionary),
            np.arange(size, dtype=np.int64), dictionary)


class ValuePairs:
    """The distinct (group, value) pairs of one sensitive attribute, the rows
    holding each (001 Theorem 3's RID sets) and their counts.

    `order` sorts the rows by (group, row id), `in_order` is their groups (int64); a
    stable sort on the combined key then orders them by (group, value, row id)."""

    def __init__(self, in_order, codes, width, order):
        n = len(order)
        key = in_order * width
        key += np.take(codes, order)
        bits = max(n - 1, 1).bit_length()
        if n and (int(in_order[-1]) + 1) * width < 1 << (62 - bits):
            # each key with its position in its low bits: one sort of distinct values (no
            # argsort, no gathers of the keys) -- the stable argsort's permutation
            key <<= bits
            key |= np.arange(n)
            key.sort(kind="stable")            # timsort: the keys come in runs of groups
            self.rows = np.take(order, key & ((1 << bits) - 1))
            key >>= bits
        else:
            s = np.argsort(key, kind="stable")
            self.rows = order[s]
            key = key[s]
        start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if n else np.zeros(0, int)
        # sorting within groups left every position's group as it was: in_order's
        self.group = in_order[start]
        self.code = key[start] - self.group * width
        self.count = np.diff(np.r_[start, n])


class RidArrays:
    """The RID sets of every sensitive attribute as one array per kind -- entries' groups
    and codes (int32), counts (int64, the count tables' bigint) and the RIDs (int32 when
    every row id fits) -- attribute
    after attribute (``entries``: offsets of each attribute's entries, ``rid_bounds``: of
    its RIDs); each attribute's RidSets and count-table columns are views into them (no
    per-attribute copies for the writer and the verifier to hold). Built an attribute at a
    time: only one attribute's row order is alive at once."""

    def __init__(self, rid, in_order, order, attributes):
        n = len(rid)
        self.rid_bounds = n * np.arange(len(attributes) + 1, dtype=np.int64)  # every row once each
        if n and rid.dtype.itemsize > 4 and -2 ** 31 <= int(rid.min()) and int(rid.max()) < 2 ** 31:
            rid = rid.astype(np.int32)                 # exact: 4 bytes per stored RID in memory
        self.rids = np.empty(n * len(attributes), rid.dtype)
        groups, codes, counts = [], [], []
        for i, (values, width) in enumerate(attributes):
            p = ValuePairs(in_order, values, width, order)
            np.take(rid, p.rows, out=self.rids[i * n:(i + 1) * n])
            groups.append(p.group.astype(np.int32))
            codes.append(p.code.astype(np.int32))
            counts.append(p.count)
            del p
        cat = (lambda xs, dt: np.concatenate(xs).astype(dt, copy=False) if xs else np.zeros(0, dt))
        self.entries = np.cumsum([0] + [len(c) for c in counts]).astype(np.int64)
        self.group, self.code = cat(groups, np.int32), cat(codes, np.int32)
        self.count = cat(counts, np.int64)

    def of(self, i, dictionary):
        """(group, code, dictionary, count, rids) of attribute i: views."""
        e0, e1 = int(self.entries[i]), int(self.entries[i + 1])
        r0, r1 = int(self.rid_bounds[i]), int(self.rid_bounds[i + 1])
        return (self.group[e0:e1], self.code[e0:e1], dictionary, self.count[e0:e1],
                self.rids[r0:r1])

    def evidence(self, attributes, dictionaries):
        """What the verifier checks (verify/anatomy.py: memory_rid_sets, check_stored)."""
        return {"attributes": list(attributes), "dictionaries": list(dictionaries),
                "entries": self.entries, "group": self.group, "code": self.code,
                "count": self.count, "rids": self.rids}


def distinct_pairs(group, codes, width, n_groups):
    """The distinct (group, code) pairs, by group then code: a presence table of the pair
    space (one byte a pair) when it is not much larger than the rows, else by sorting."""
    key = group * width
    key += codes
    bins = n_groups * width
    if bins <= 16 * len(key) + (1 << 20):
        seen = np.zeros(bins, bool)
        seen[key] = True
        key = np.flatnonzero(seen)
    else:
        key = np.unique(key)
    g = key // width
    return g, key - g * width


def table_name(release, attribute):
    name = f"{release}_{attribute}"
    if len(name.encode()) > 63:
        raise DeidError(INVALID_PARAMETER_VALUE, f"release table name {name!r} is too long",
                        hint="Choose a shorter release name.", data_dependent=False)
    return name


def factorize(values):
    uniq, codes = np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)
    return codes.astype(np.int64), [str(u) for u in uniq]


def _fmt_array(col, v):
    """Text of numbers (vectorised): dates as ISO dates, integers without a point."""
    if col.kind == "date":
        return np.datetime_as_string(v.astype(np.int64).astype("datetime64[D]")).tolist()
    if col.kind == "int":
        return v.astype(np.int64).astype(str).tolist()
    return [f"{x:g}" for x in v.tolist()]


def group_labels(req, frame, qis, group, n_groups, order, in_order):
    """Per group and QI, the generalized value (001 Def. 2): a range for numbers,
    the lowest common hierarchy ancestor or the value set for categories.
    `order` sorts the rows by group, `in_order` is their groups."""
    bounds = np.searchsorted(in_order, np.arange(n_groups + 1))
    out = {}
    for q in qis:
        col = frame.columns[q]
        if col.kind == "category":
            h = req.hierarchies.get(q)
            g, c = distinct_pairs(group, col.values, len(col.dictionary) + 1, n_groups)
            first = np.searchsorted(g, np.arange(n_groups)).tolist()
            distinct = np.bincount(g, minlength=n_groups).tolist()
            texts = np.array(list(col.dictionary) + ["NULL"], dtype=object)
            words, codes = texts[c].tolist(), c.tolist()     # each pair's text: one gather
            labels = []
            for f, d in zip(first, distinct):
                if d == 1:
                    labels.append(words[f])
                elif h is not None:
                    labels.append(category_label(col, h, codes[f:f + d]))
                else:
                    labels.append("{" + ",".join(words[f:f + d]) + "}")
        elif not col.null.any():           # no NULL: each group's extremes, then as floats
            vals = np.take(col.values, order)
            lo = np.minimum.reduceat(vals, bounds[:-1]).astype(float)
            hi = np.maximum.reduceat(vals, bounds[:-1]).astype(float)
            del vals
            anynull = [False] * n_groups
            finite = np.isfinite(lo)
        else:
            vals, nulls = col.values[order].astype(float), col.null[order]
            lo = np.minimum.reduceat(np.where(nulls, np.inf, vals), bounds[:-1])
            hi = np.maximum.reduceat(np.where(nulls, -np.inf, vals), bounds[:-1])
            anynull = (np.maximum.reduceat(nulls.astype(np.int8), bounds[:-1]) > 0).tolist()
            finite = np.isfinite(lo)
        if col.kind != "category":
            lo_s = _fmt_array(col, np.where(finite, lo, 0))
            hi_s = _fmt_array(col, np.where(finite, hi, 0))
            labels = [("NULL" if not ok else a if a == b else f"[{a}-{b}]") + (" or NULL" if nn and ok else "")
                      for ok, a, b, nn in zip(finite.tolist(), lo_s, hi_s, anynull)]
        out[q] = labels
    return out


def category_label(col, h, codes):
    values = [col.dictionary[c] if c < len(col.dictionary) else None for c in codes]
    if len(values) == 1:
        return "NULL" if values[0] is None else values[0]
    if h is not None and h.kind == "member" and None not in values:
        ancestor, found = h.common_ancestor(values)
        if found:
            return ancestor
    return "{" + ",".join("NULL" if v is None else v for v in values) + "}"
