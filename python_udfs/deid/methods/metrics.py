"""Utility metrics of a release: discernibility, class sizes, query error,
generalization loss.

Papers (``shared/papers`` of the project, the index in its README):

* 001 Gal, Chen, Gangopadhyay (2008), sec. "Experimental Evaluation":
  discernibility ("the average group size of all records"; best value K),
  and the average relative error of random COUNT queries with 1-4
  equality or range conditions, at least one on a sensitive attribute,
  split at 1% of the patients (Table 1).  Def. 3 / Fig. 3: the anatomy
  release (QIT plus one count table per sensitive attribute) the queries
  are answered from.
* 002 Stark, Eder, Zatloukal (2007), sec. 4.2-4.5: information-loss
  quantifiers per generalization level, weighted by attribute priorities.

Names follow ARX where ARX has the metric (discernibility "DM", average
equivalence class size "AECS") so results can be cross-checked.

Pure Python + numpy (1.24 compatible); no plpy.  Malformed input raises
:class:`deid.errors.DeidError` with ``INVALID_PARAMETER_VALUE``.
"""

from typing import NamedTuple

import numpy as np

from deid.errors import DeidError, INVALID_PARAMETER_VALUE

__all__ = [
    "group_sizes",
    "discernibility_raw",
    "discernibility",
    "average_class_size",
    "normalized_average_class_size",
    "relative_error",
    "are",
    "generalization_loss",
    "sensitive_table",
    "sensitive_fraction",
    "anatomy_count_estimate",
    "Condition",
    "CountQuery",
    "random_count_queries",
    "condition_mask",
    "query_mask",
    "exact_count",
    "anatomy_estimate",
]


def _bad(message, hint=None):
    raise DeidError(INVALID_PARAMETER_VALUE, message, hint=hint)


def _sizes(group_sizes):
    s = np.asarray(group_sizes)
    if s.ndim != 1:
        _bad(f"group sizes must be one-dimensional, got shape {s.shape}")
    if s.size == 0:
        return np.zeros(0, dtype=np.float64)
    if s.dtype.kind not in "iuf" or not np.all(np.isfinite(s)):
        _bad("group sizes must be numbers")
    if np.any(s < 0) or np.any(s != np.round(s)):
        _bad("group sizes must be non-negative integers")
    s = s.astype(np.float64)
    return s[s > 0]          # an empty group is no equivalence class


# ---------------------------------------------------------------------------
# class sizes
# ---------------------------------------------------------------------------

def group_sizes(group_id):
    """The size of every group (sorted by group id) from one group id per row."""
    g = np.asarray(group_id)
    if g.ndim != 1:
        _bad("group_id must be one-dimensional")
    if g.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.unique(g, return_counts=True)[1].astype(np.int64)


def discernibility_raw(group_sizes, suppressed=0, n_total=None):
    """ARX's discernibility metric DM = sum over classes E of |E|^2
    (Bayardo & Agrawal 2005, cited by 001).

    Each record is charged the size of its class.  ``suppressed`` records
    (none for anatomy) are charged the size of the whole data set each,
    ``n_total`` (default: released records + suppressed), as in ARX.
    Returns 0.0 for an empty release.
    """
    s = _sizes(group_sizes)
    sup = int(suppressed)
    if sup < 0:
        _bad("suppressed must be >= 0")
    n = float(s.sum()) + sup if n_total is None else float(n_total)
    return float(np.dot(s, s)) + sup * n


def discernibility(group_sizes):
    """Normalized discernibility, the value 001 plots (Figs. 9-12):
    sum |E|^2 / n = the average, over records, of the size of the record's
    group ("the average group size of all records"; the best possible value
    is K).  ``discernibility_raw(sizes) / n``.  NaN for an empty release.
    """
    s = _sizes(group_sizes)
    if s.size == 0:
        return float("nan")
    return float(np.dot(s, s) / s.sum())


def average_class_size(group_sizes):
    """ARX's AECS: records / classes, the mean class size averaged over
    classes (not over records as :func:`discernibility`).  NaN if empty."""
    s = _sizes(group_sizes)
    if s.size == 0:
        return float("nan")
    return float(s.sum() / s.size)


def normalized_average_class_size(group_sizes, k):
    """LeFevre et al.'s C_AVG = (records / classes) / k; 1.0 is optimal."""
    if not k or k <= 0:
        _bad("k must be positive")
    return average_class_size(group_sizes) / float(k)


# ---------------------------------------------------------------------------
# query error
# ---------------------------------------------------------------------------

def relative_error(actual, estimated):
    """|actual - estimated| / actual, elementwise (001 Table 1).

    Undefined (NaN) where ``actual`` is 0; negative counts are rejected.
    """
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(estimated, dtype=np.float64)
    if a.shape != e.shape:
        _bad(f"actual and estimated differ in shape: {a.shape} vs {e.shape}")
    if np.any(a < 0) or np.any(np.isnan(a)):
        _bad("actual counts must be >= 0")
    out = np.full(a.shape, np.nan)
    pos = a > 0
    np.divide(np.abs(a - e), a, out=out, where=pos)
    return out


def are(actual, estimated, threshold_fraction=None, n=None):
    """Average relative error over queries, as in 001 Table 1.

    ``actual``/``estimated``: the true and the estimated answer of every
    query.  Queries with a true answer of 0 have no relative error and are
    left out (counted in ``excluded``).  With ``n`` (records in the data
    set) the queries are also split into those whose true answer is below
    ``threshold_fraction * n`` (default 1%, 001: "queries returning < 1% of
    patients") and the rest.

    Returns ``{"all": ARE, "queries": count, "excluded": count, and with n:
    "threshold": threshold_fraction * n, "small": ARE, "small_queries":
    count, "large": ARE, "large_queries": count}``; an ARE over no query is
    None.
    """
    re = relative_error(actual, estimated).ravel()
    a = np.asarray(actual, dtype=np.float64).ravel()
    ok = ~np.isnan(re)

    def mean(mask):
        return float(re[mask].mean()) if np.any(mask) else None

    res = {"all": mean(ok), "queries": int(ok.sum()), "excluded": int((~ok).sum())}
    if n is None:
        if threshold_fraction is not None:
            _bad("threshold_fraction needs n, the number of records")
        return res
    if n <= 0:
        _bad("n must be positive")
    frac = 0.01 if threshold_fraction is None else float(threshold_fraction)
    if not 0 < frac <= 1:
        _bad("threshold_fraction must be in (0, 1]")
    thr = frac * float(n)
    small = ok & (a < thr)
    large = ok & (a >= thr)
    res.update(threshold=thr, small=mean(small), small_queries=int(small.sum()),
               large=mean(large), large_queries=int(large.sum()))
    return res


# ---------------------------------------------------------------------------
# 002 information loss
# ---------------------------------------------------------------------------

def generalization_loss(levels, info_loss, priorities):
    """Priority-weighted information loss of a full-domain generalization
    (002 sec. 4.2-4.5): sum over attributes of
    ``priorities[a] * info_loss[a][levels[a]]``.

    ``levels[a]``: the generalization level of attribute a (0 = original
    values).  ``info_loss[a]``: the information-loss quantifier of every
    level of a's dimension hierarchy, index = level: 0 at L_0, 1 at L_max
    (suppression), the expert's phi_j in between, non-decreasing.
    ``priorities[a]``: in [0, 1], higher = more important.  Mappings keyed
    by attribute, or sequences aligned by position.  Attributes without a
    level (or at level 0) cost nothing.

    002 use case, Table 8 (setting A): R suppressed (phi = 1.0, priority
    0.2) and PT at level 1 (phi = 0.3, priority 0.8): 0.2 + 0.24 = 0.44.
    """
    def as_map(x, name):
        if hasattr(x, "items"):
            return dict(x.items())
        try:
            return dict(enumerate(x))
        except TypeError:
            _bad(f"{name} must be a mapping or a sequence")

    lv, il, pr = as_map(levels, "levels"), as_map(info_loss, "info_loss"), \
        as_map(priorities, "priorities")
    total = 0.0
    for a, level in lv.items():
        if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or level < 0:
            _bad(f"level of {a!r} must be a non-negative integer, got {level!r}")
        if a not in il:
            _bad(f"no information-loss quantifiers for {a!r}")
        q = np.asarray(il[a], dtype=np.float64)
        if q.ndim != 1 or q.size == 0:
            _bad(f"info_loss[{a!r}] must list one quantifier per level")
        if q[0] != 0 or np.any(q < 0) or np.any(q > 1) or np.any(np.diff(q) < 0):
            _bad(f"info_loss[{a!r}] must start at 0 (level 0 keeps the values), stay in "
                 f"[0, 1] and never decrease (002 sec. 4.2)")
        if level >= q.size:
            _bad(f"level {level} of {a!r} is beyond its hierarchy (max {q.size - 1})")
        if level == 0:
            continue
        if a not in pr:
            _bad(f"no priority for {a!r}")
        p = float(pr[a])
        if not 0 <= p <= 1:
            _bad(f"priority of {a!r} must be in [0, 1] (002 sec. 4.5), got {p}")
        total += p * float(q[level])
    return total


# ---------------------------------------------------------------------------
# anatomy count estimates (001 Def. 3, Fig. 3)
# ---------------------------------------------------------------------------

def sensitive_table(group_id, values):
    """The sensitive table (ST) of one attribute, 001 Def. 3 / Fig. 3:
    ``(st_group, st_value, st_count)``, one row per (group, value)."""
    g = np.asarray(group_id)
    v = np.asarray(values)
    if g.shape != v.shape or g.ndim != 1:
        _bad("group_id and values must be one-dimensional and aligned")
    if g.size == 0:
        return g.astype(np.int64), v, np.zeros(0, dtype=np.int64)
    o = np.lexsort((v, g))
    gs, vs = g[o], v[o]
    start = np.flatnonzero(np.r_[True, (gs[1:] != gs[:-1]) | (vs[1:] != vs[:-1])])
    count = np.diff(np.r_[start, g.size])
    return gs[start].astype(np.int64), vs[start], count.astype(np.int64)


def sensitive_fraction(st_group, st_count, st_match, n_groups):
    """Per group, the fraction of its rows whose value of one sensitive
    attribute satisfies a condition, from that attribute's ST:
    sum(count of matching values) / sum(count), shape (n_groups,).
    ``st_group`` are group codes 0..n_groups-1; groups absent from the ST
    get 0."""
    g = np.asarray(st_group, dtype=np.int64)
    c = np.asarray(st_count, dtype=np.float64)
    mt = np.asarray(st_match, dtype=bool)
    if not (g.shape == c.shape == mt.shape) or g.ndim != 1:
        _bad("st_group, st_count and st_match must be aligned one-dimensional arrays")
    if g.size and (g.min() < 0 or g.max() >= n_groups):
        _bad("st_group must hold group codes 0..n_groups-1")
    tot = np.bincount(g, weights=c, minlength=n_groups)
    hit = np.bincount(g, weights=c * mt, minlength=n_groups)
    out = np.zeros(n_groups, dtype=np.float64)
    np.divide(hit, tot, out=out, where=tot > 0)
    return out


def anatomy_count_estimate(group_id, qi_match=None, sa_fractions=(), n_groups=None):
    """Estimated COUNT(*) of a query over an anatomy release (001 Def. 3).

    The QIT keeps every row's exact quasi-identifiers and its group; each
    sensitive table keeps only per-group value counts.  So a row of group g
    that satisfies the QI conditions satisfies a sensitive condition with
    probability p_g = the fraction of g's rows whose value satisfies it (the
    count a random guess in g gets right, 001 Fig. 3 discussion).  With
    conditions on several sensitive attributes (one table each) the
    fractions are multiplied: within a group the attributes are taken as
    independent, which is all the separate tables allow.

        estimate = sum_g q_g * prod_j p_{g,j}

    ``group_id`` (n,): group code (0..G-1) of every QIT row.
    ``qi_match`` (n,) bool: the QIT rows that satisfy the QI conditions
    (None: no QI condition).  ``sa_fractions``: one (G,) array per sensitive
    condition (see :func:`sensitive_fraction`; combine several conditions on
    the same attribute into one fraction first).  Exact when the query has
    only QI conditions, or only one sensitive condition and whole groups.
    """
    g = np.asarray(group_id)
    if g.ndim != 1:
        _bad("group_id must be one-dimensional")
    if g.size and (g.dtype.kind not in "iu" or g.min() < 0):
        _bad("group_id must hold group codes 0..G-1")
    g = g.astype(np.int64)
    fr = [np.asarray(f, dtype=np.float64) for f in sa_fractions]
    G = n_groups
    if G is None:
        G = fr[0].size if fr else (int(g.max()) + 1 if g.size else 0)
    if g.size and g.max() >= G:
        _bad("group_id has codes beyond the number of groups")
    for f in fr:
        if f.shape != (G,):
            _bad(f"every sensitive fraction must have shape ({G},), got {f.shape}")
        if np.any(f < 0) or np.any(f > 1):
            _bad("sensitive fractions must be in [0, 1]")
    if qi_match is None:
        q = np.bincount(g, minlength=G).astype(np.float64)
    else:
        mt = np.asarray(qi_match, dtype=bool)
        if mt.shape != g.shape:
            _bad("qi_match must have one entry per QIT row")
        q = np.bincount(g[mt], minlength=G).astype(np.float64)
    for f in fr:
        q = q * f
    return float(q.sum())


# ---------------------------------------------------------------------------
# 001-style random COUNT queries
# ---------------------------------------------------------------------------

class Condition(NamedTuple):
    """``lo <= attribute <= hi`` on an integer-coded column (equality when
    lo == hi); ``sensitive`` tells which table answers it in an anatomy
    release."""
    attribute: str
    sensitive: bool
    lo: int
    hi: int

    def sql(self):
        if self.lo == self.hi:
            return f"{self.attribute} = {self.lo}"
        return f"{self.attribute} BETWEEN {self.lo} AND {self.hi}"


class CountQuery(NamedTuple):
    """SELECT COUNT(*) WHERE c1 AND c2 AND ... (conditions on distinct
    attributes)."""
    conditions: tuple

    def sql(self):
        return " AND ".join(c.sql() for c in self.conditions)


def random_count_queries(rng, columns, qi, sensitive, n_queries, max_conditions=4,
                         range_prob=0.5, categorical=(), max_sensitive=1):
    """Random COUNT queries as in 001's experiments.

    Each query has 1..``max_conditions`` conditions (uniform), at least one
    on a randomly chosen sensitive attribute and the others on distinct
    randomly chosen quasi-identifiers (001: "at least one condition was on a
    randomly selected sensitive attribute; the other conditions were on
    randomly selected quasi-identifier attributes").  With
    ``max_sensitive`` > 1, up to that many of the conditions are sensitive.
    A condition is a range with probability ``range_prob`` (never for
    attributes in ``categorical``), else an equality.  Bounds are values of
    random rows of the column, so a lone condition always matches something;
    a range spans the values of two random rows.

    ``rng``: numpy Generator (or an int seed).  ``columns``: {name: integer
    array}, the raw data (all columns the same length).  Returns a list of
    :class:`CountQuery`, usable with :func:`exact_count` on the raw data and
    :func:`anatomy_estimate` on a release.
    """
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        rng = np.random.default_rng(int(rng))
    if not isinstance(rng, np.random.Generator):
        _bad("rng must be a numpy Generator or an integer seed")
    qi, sensitive = list(qi), list(sensitive)
    if not sensitive:
        _bad("at least one sensitive attribute is needed")
    if set(qi) & set(sensitive):
        _bad("an attribute cannot be both quasi-identifier and sensitive")
    n_queries, max_conditions, max_sensitive = int(n_queries), int(max_conditions), \
        int(max_sensitive)
    if n_queries < 0 or max_conditions < 1 or max_sensitive < 1:
        _bad("n_queries must be >= 0, max_conditions and max_sensitive >= 1")
    cols = {}
    n = None
    for name in qi + sensitive:
        if name not in columns:
            _bad(f"no column {name!r}")
        c = np.asarray(columns[name])
        if c.ndim != 1 or c.dtype.kind not in "iu":
            _bad(f"column {name!r} must be a one-dimensional integer array")
        if n is None:
            n = c.size
        elif c.size != n:
            _bad("all columns must have the same length")
        cols[name] = c
    if not n:
        _bad("the columns are empty")
    categorical = set(categorical)
    sens = set(sensitive)
    out = []
    for _ in range(n_queries):
        c = int(rng.integers(1, max_conditions + 1))
        ns = int(rng.integers(1, min(max_sensitive, len(sensitive), c) + 1))
        nq = min(c - ns, len(qi))
        attrs = [sensitive[i] for i in rng.choice(len(sensitive), ns, replace=False)]
        if nq:
            attrs += [qi[i] for i in rng.choice(len(qi), nq, replace=False)]
        conds = []
        for a in attrs:
            col = cols[a]
            if a not in categorical and rng.random() < range_prob:
                x, y = col[rng.integers(0, n, 2)]
                lo, hi = (int(x), int(y)) if x <= y else (int(y), int(x))
            else:
                lo = hi = int(col[rng.integers(0, n)])
            conds.append(Condition(a, a in sens, lo, hi))
        out.append(CountQuery(tuple(conds)))
    return out


def condition_mask(cond, values):
    """Rows (or ST values) satisfying one condition."""
    v = np.asarray(values)
    return (v >= cond.lo) & (v <= cond.hi)


def query_mask(query, columns):
    """Rows of the raw data satisfying every condition of the query."""
    mask = None
    for cond in query.conditions:
        if cond.attribute not in columns:
            _bad(f"no column {cond.attribute!r}")
        m = condition_mask(cond, columns[cond.attribute])
        mask = m if mask is None else mask & m
    if mask is None:
        _bad("a query needs at least one condition")
    return mask


def exact_count(query, columns):
    """The true COUNT(*) of a query on the raw data {name: array}."""
    return int(np.count_nonzero(query_mask(query, columns)))


def anatomy_estimate(query, qit_columns, group_id, st_tables, n_groups=None):
    """A query's COUNT(*) estimated from an anatomy release (see
    :func:`anatomy_count_estimate`).

    ``qit_columns``: {QI name: array aligned with ``group_id``} (the QIT).
    ``st_tables``: {sensitive name: (st_group, st_value, st_count)}, one ST
    per sensitive attribute (:func:`sensitive_table`).  Group ids must be
    codes 0..G-1.  Several conditions on one sensitive attribute are
    intersected on that attribute's ST before the fractions are multiplied.
    """
    g = np.asarray(group_id)
    if n_groups is None:
        n_groups = int(g.max()) + 1 if g.size else 0
    qi_mask = None
    per_sa = {}
    for cond in query.conditions:
        if cond.sensitive:
            per_sa.setdefault(cond.attribute, []).append(cond)
            continue
        if cond.attribute not in qit_columns:
            _bad(f"no QIT column {cond.attribute!r}")
        m = condition_mask(cond, qit_columns[cond.attribute])
        qi_mask = m if qi_mask is None else qi_mask & m
    fractions = []
    for a, conds in per_sa.items():
        if a not in st_tables:
            _bad(f"no sensitive table for {a!r}")
        st_group, st_value, st_count = st_tables[a]
        match = np.ones(np.shape(st_value), dtype=bool)
        for cond in conds:
            match &= condition_mask(cond, st_value)
        fractions.append(sensitive_fraction(st_group, st_count, match, n_groups))
    return anatomy_count_estimate(g, qi_mask, fractions, n_groups=n_groups)
