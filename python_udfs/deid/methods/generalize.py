"""Full-domain generalization over member/dimension hierarchies (paper 002, Stark et al. 2007).

What is implemented
-------------------
* :class:`AttributeHierarchy` - the member hierarchy (002 sec. 4.1, Table 6: value -> aggregated
  value, one array of parent codes per level) together with the dimension hierarchy's information
  loss quantifiers phi (002 sec. 4.2, Table 7), the user's priority and limit (002 sec. 4.3) and the
  source system of the attribute (002 sec. 2).
* :func:`selection_limit` - selection-derived generalization limits (002 sec. 4.5 step 2).
* :func:`greedy` - the paper's anonymisation algorithm (002 sec. 4.5 step 3): repeatedly generalize
  the attribute whose next level edge has the least phi x priority, merge equivalence classes, until
  every class has >= k rows.  It works on the class table (distinct QI combinations + counts, 002
  sec. 4.5 step 1), never on rows; one step is O(classes) numpy work.
* :func:`optimal` - an exact search of the same solution space (all level vectors within the
  limits) for the k-anonymous vector of least total weighted loss sum(priority * phi[level]); the
  paper mentions backtracking over alternative paths (002 sec. 4.5) but does not give it.  It uses
  the monotonicity of full-domain generalization as Flash / OLA do (a k-anonymous vector makes all
  vectors above it k-anonymous, a non-anonymous one all vectors below it non-anonymous).
* :func:`apply_levels` - the release step (002 sec. 4.5 step 4): map level-0 codes to final levels.

Reading of the paper and deviations
-----------------------------------
* Edge cost.  002 sec. 4.2 assigns a quantifier phi(j) to each level L_j (phi = 0 at L_0 and 1 at
  L_max) and says an edge "models the information loss up to generalisation level" L_(j+1); sec. 4.5
  picks the attribute "that has the minimal weighted information loss after being transformed to
  the next generalisation level".  We therefore take the cost of the edge L_i -> L_(i+1) as
  ``priority * info_loss[i+1]`` (phi of the level reached), which is what Table 7 lists for each
  L_i -> L_(i+1) row.  (On the use case, whose edges all start at L_0, the marginal reading
  phi[i+1] - phi[i] would give the same numbers.)
* Ties.  The pseudo-code keeps the first attribute with a strictly smaller cost, so among equal
  costs (compared after rounding to 10 decimals) the attribute listed first wins.  Deterministic.
* k per source system (002 sec. 2 and sec. 4.5: "k-anonymity is to be accomplished in each source
  table T_j separately").  Attributes are grouped by ``source`` (``None`` is one group of its own,
  so with no sources at all this is plain k-anonymity over all QIs); for each group the class table
  is regrouped on that group's attributes only and must have every class >= k.  A step only ever
  moves an attribute of a group that is still violating: the paper builds the solution from
  "subsolutions for every data source", and moving an attribute of a satisfied source would lose
  information for nothing.  The final class table over *all* attributes may then hold classes
  smaller than k when there are several sources: that is the paper's model, not a bug.
* The paper's per-source preprocessing applies only that source's selection criteria before
  counting (sec. 4.5 step 1).  We count every source on the rows actually released (the whole
  selection applied), which can only make classes smaller, i.e. is at least as safe.
* Limits: the effective cap of an attribute is ``min(limit, top)``; the caller combines the user's
  limit and the selection limit by taking the smaller (002 sec. 4.5 step 2).  If no movable
  attribute is left while a class is below k, no data is released (002 sec. 4.4) - we raise
  DeidError(PRIVACY_MODEL_UNSATISFIABLE) naming the blocking limits.
* Selection limits for a value that occurs at several levels (or several values in an IN list)
  take the lowest such level: the more restrictive limit, as the paper takes the smaller limit.
* Input classes that repeat a code combination are tolerated (counted conservatively at first,
  merged after the first step).  With several sources :func:`greedy` merges each source's class
  table before its first step, so rows (one class each) give the same steps, levels and final
  classes as the class table of 002 step 1; the generalization plug-in then skips that table.
* Priorities: the paper asks for equally spaced priorities in [0, 1] (sec. 4.5); we accept any
  value in [0, 1] (equal spacing is the caller's convention, e.g. 0.2/0.4/0.6/0.8 in sec. 5.2).
  A policy minimum for k (sec. 4.5) is enforced by the caller, not here.
* :func:`optimal` returns ``steps == []``: a lattice vector is reached by any order of its edges.
* The use case's class counts (sec. 5.2: 107 classes, 98 after suppressing R, 16 after PT -> 1)
  cannot all hold for (PT, PN, PM, R) with PT in {1a, 1b, 1c, 1mic}: 16 (PN, PM) classes split by
  four PT values give at most 64, not 98.  The tests reproduce the steps, costs, levels and the
  final 16 / 20 classes of Tables 8-9 on generated data instead.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..errors import (
    FEATURE_NOT_SUPPORTED,
    INVALID_PARAMETER_VALUE,
    PRIVACY_MODEL_UNSATISFIABLE,
    DeidError,
)

__all__ = [
    "AttributeHierarchy",
    "GeneralizationResult",
    "selection_limit",
    "greedy",
    "optimal",
    "apply_levels",
    "OPTIMAL_MAX_NODES",
]

OPTIMAL_MAX_NODES = 2_000_000  # lattice vectors per source that optimal() agrees to search
_ROUND = 10  # decimals used to compare costs (ties are decided by rules, not float noise)


# ------------------------------------------------------------------------------------------------
# Hierarchies


@dataclass
class AttributeHierarchy:
    """Member + dimension hierarchy of one quasi-identifier (002 sec. 4.1-4.3, Tables 6-7).

    ``parents[i][c]`` is the level-(i+1) code of level-i code ``c``; ``labels[i][c]`` its text;
    the top level is ``['*']`` (suppression).  ``info_loss[i]`` is phi of level i (0 at level 0,
    1 at the top, non-decreasing); the edge i -> i+1 costs ``priority * info_loss[i+1]``.
    ``limit`` is the highest level allowed (None: the top), ``source`` the source system (sec. 2).
    """

    name: str
    parents: list
    labels: list
    info_loss: list
    priority: float = 1.0
    limit: int | None = None
    source: str | None = None
    _maps: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _label_levels: dict | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        def bad(msg):
            raise DeidError(INVALID_PARAMETER_VALUE, f"hierarchy {self.name!r}: {msg}")

        if not isinstance(self.labels, (list, tuple)) or len(self.labels) < 1:
            bad("needs at least one level of labels")
        self.labels = [list(map(str, lv)) for lv in self.labels]
        nlev = len(self.labels)
        if len(self.labels[-1]) != 1:
            bad(f"the top level must hold exactly one value (suppression), has {len(self.labels[-1])}")
        if len(self.parents) != nlev - 1:
            bad(f"{nlev} levels need {nlev - 1} parent arrays, got {len(self.parents)}")
        parents = []
        for i, p in enumerate(self.parents):
            a = np.asarray(p, dtype=np.int64).reshape(-1)
            if a.shape[0] != len(self.labels[i]):
                bad(f"parents[{i}] has {a.shape[0]} entries for {len(self.labels[i])} level-{i} values")
            if a.size and (a.min() < 0 or a.max() >= len(self.labels[i + 1])):
                bad(f"parents[{i}] points outside level {i + 1}")
            parents.append(a)
        self.parents = parents
        for i, lv in enumerate(self.labels):
            if len(set(lv)) != len(lv):
                bad(f"level {i} repeats a label")
        loss = [float(x) for x in self.info_loss]
        if len(loss) != nlev:
            bad(f"info_loss needs {nlev} values (one per level), got {len(loss)}")
        if loss[0] != 0.0 or loss[-1] != 1.0 or any(b < a for a, b in zip(loss, loss[1:])):
            bad("info_loss must start at 0, end at 1 and never decrease (002 sec. 4.2)")
        self.info_loss = loss
        self.priority = float(self.priority)
        if not (0.0 <= self.priority <= 1.0):
            bad(f"priority must be in [0, 1] (002 sec. 4.5), got {self.priority}")
        if self.limit is not None:
            if int(self.limit) != self.limit or self.limit < 0:
                bad(f"limit must be a level >= 0, got {self.limit!r}")
            self.limit = int(self.limit)

    # -- structure -------------------------------------------------------------------------
    @property
    def top(self) -> int:
        """Index of the suppression level L_max."""
        return len(self.labels) - 1

    @property
    def cap(self) -> int:
        """Highest level the attribute may reach: min(limit, top)."""
        return self.top if self.limit is None else min(self.limit, self.top)

    def size(self, level: int) -> int:
        return len(self.labels[level])

    def edge_cost(self, level: int) -> float:
        """phi x priority of the edge level -> level+1 (002 sec. 4.5, Table 7)."""
        return self.priority * self.info_loss[level + 1]

    def level_map(self, to: int, frm: int = 0) -> np.ndarray:
        """int64 array mapping codes at level ``frm`` to their ancestors at level ``to``."""
        key = (frm, to)
        m = self._maps.get(key)
        if m is None:
            if not (0 <= frm <= to <= self.top):
                raise DeidError(INVALID_PARAMETER_VALUE,
                                f"hierarchy {self.name!r}: no map from level {frm} to level {to}")
            m = np.arange(self.size(frm), dtype=np.int64)
            for i in range(frm, to):
                m = self.parents[i][m]
            self._maps[key] = m
        return m

    def levels_of(self, value: str) -> list[int]:
        """Levels at which ``value`` is a label (ascending)."""
        if self._label_levels is None:
            d: dict = {}
            for i, lv in enumerate(self.labels):
                for c, lab in enumerate(lv):
                    d.setdefault(lab, []).append((i, c))
            self._label_levels = d
        return [i for i, _ in self._label_levels.get(str(value), [])]

    def leaves(self, value: str) -> list[str] | None:
        """Level-0 labels under ``value`` at its lowest level (None if not in the hierarchy).

        For :meth:`deid.request.Selection.render`'s ``expand``: 002 sec. 5.2 step 1, "PT = 1"
        searches for 1a, 1b, 1c, 1mic.
        """
        self.levels_of(value)
        hits = self._label_levels.get(str(value))
        if not hits:
            return None
        level, code = hits[0]
        under = np.flatnonzero(self.level_map(level) == code)
        return [self.labels[0][c] for c in under]

    @classmethod
    def from_paths(cls, name, paths, info_loss, priority=1.0, limit=None, source=None):
        """Build from ARX-style rows ``(value, level1, ..., '*')``, one row per level-0 value.

        Codes follow first appearance.  A label that appears twice at one level must have the
        same parent both times.
        """
        paths = [tuple(map(str, p)) for p in paths]
        if not paths:
            raise DeidError(INVALID_PARAMETER_VALUE, f"hierarchy {name!r} has no values")
        nlev = len(paths[0])
        if any(len(p) != nlev for p in paths):
            raise DeidError(INVALID_PARAMETER_VALUE, f"hierarchy {name!r}: rows have different lengths")
        index = [dict() for _ in range(nlev)]
        for p in paths:
            for i, lab in enumerate(p):
                index[i].setdefault(lab, len(index[i]))
        parents = [np.full(len(index[i]), -1, dtype=np.int64) for i in range(nlev - 1)]
        for p in paths:
            for i in range(nlev - 1):
                c, up = index[i][p[i]], index[i + 1][p[i + 1]]
                if parents[i][c] not in (-1, up):
                    raise DeidError(INVALID_PARAMETER_VALUE,
                                    f"hierarchy {name!r}: {p[i]!r} has two parents at level {i + 1}")
                parents[i][c] = up
        labels = [list(ix) for ix in index]
        return cls(name, parents, labels, info_loss, priority, limit, source)


def selection_limit(h: AttributeHierarchy, values: set[str]) -> int:
    """Generalization limit implied by a selection ``col = v`` / ``col IN (...)`` (002 sec. 4.5 step 2).

    An equality on a leaf pins the attribute at level 0; on a generalized value (e.g. PT = '1',
    a level-1 value of 1a/1b/1c/1mic) the attribute may rise up to that value's level.  With several
    values, or a value present at several levels, the lowest level is taken (the more restrictive
    limit).  A value that is not in the hierarchy raises DeidError.
    """
    if not values:
        return 0
    best = None
    for v in values:
        lv = h.levels_of(v)
        if not lv:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"selection value {v!r} of column {h.name!r} is not in its hierarchy",
                            hint="Use a value of the column or one of its generalized values.")
        best = lv[0] if best is None else min(best, lv[0])
    return best


# ------------------------------------------------------------------------------------------------
# Class tables


@dataclass
class GeneralizationResult:
    """Outcome of :func:`greedy` / :func:`optimal`.

    ``steps`` is the paper's GS list (002 sec. 4.5): ``{"attribute", "from", "to", "cost"}`` with
    cost = phi x priority of the edge taken; empty for :func:`optimal`.  ``loss`` is
    sum(priority * info_loss[level]).  ``class_codes``/``class_counts`` is the class table over all
    attributes at the final levels (codes index ``labels[level]``).  ``stats`` holds counters for
    benchmarks.
    """

    levels: list
    steps: list
    loss: float
    class_codes: np.ndarray
    class_counts: np.ndarray
    stats: dict = field(default_factory=dict)


_MAX_BITS = 62
_PROBES = 4  # witness rows tried before a full merge in the lattice search
_PROBE_MIN_ROWS = 1 << 16  # below this a full merge is cheap enough


def _keys(codes: np.ndarray, sizes) -> tuple[np.ndarray, int, bool]:
    """Mixed-radix int64 key per row (wide tables); (key, key bound, decodable)."""
    n = codes.shape[0]
    key = np.zeros(n, dtype=np.int64)
    bound, decodable = 1, True
    for j, s in enumerate(sizes):
        s = int(s)
        if s == 1:
            continue
        if bound * s >= (1 << _MAX_BITS):  # compress to dense ranks first
            uniq, inv = np.unique(key, return_inverse=True)
            key, bound, decodable = inv.reshape(-1).astype(np.int64), len(uniq), False
        if bound == 1:
            key = codes[:, j].astype(np.int64, copy=True)
        else:
            key *= s
            key += codes[:, j]
        bound *= s
    return key, bound, decodable


def _group(codes: np.ndarray, counts: np.ndarray, sizes):
    """merge() of 002 sec. 4.5 for a code matrix: rows with equal codes become one class."""
    n = codes.shape[0]
    if n == 0:
        return codes, counts
    key, bound, _ = _keys(codes, sizes)
    order = np.argsort(key, kind="stable")
    sk = key[order]
    start = np.empty(n, dtype=bool)
    start[0] = True
    np.not_equal(sk[1:], sk[:-1], out=start[1:])
    idx = np.flatnonzero(start)
    return codes[order[idx]], np.add.reduceat(counts[order], idx)


def _bincount_ok(bits: int, n: int) -> bool:
    """Merge by bincount (O(n + 2**bits), 8 bytes a bin) rather than by sorting (O(n log n))?
    Up to 4 bins a key: at a million keys, 2**22 bins are counted in a fraction of a sort."""
    return (1 << bits) <= max(1 << 16, 4 * n)


def _merge_keys(key: np.ndarray, counts: np.ndarray, bits: int):
    """merge() of 002 sec. 4.5 for packed keys: (sorted distinct keys, summed counts)."""
    n = key.shape[0]
    if n == 0:
        return key, counts
    if _bincount_ok(bits, n):
        tot = np.bincount(key, weights=counts, minlength=1 << bits)  # exact below 2**53 rows
        nz = np.flatnonzero(tot)
        return nz.astype(np.int64), tot[nz].astype(np.int64)
    cbits = int(counts.max()).bit_length()
    if bits + cbits <= 63:  # sort (key, count) packed in one int64: cheaper than argsort
        packed = (key << cbits) | counts
        packed.sort()
        sk = packed >> cbits
        sc = packed & ((1 << cbits) - 1)
    else:
        order = np.argsort(key)
        sk, sc = key[order], counts[order]
    start = np.empty(n, dtype=bool)
    start[0] = True
    np.not_equal(sk[1:], sk[:-1], out=start[1:])
    idx = np.flatnonzero(start)
    return sk[idx], np.add.reduceat(sc, idx)


class _Table:
    """The class table (equivalence classes + cardinalities, 002 sec. 4.5) at one level vector.

    Fast form: ``key`` packs the codes of all its attributes into one int64 (bit fields, the last
    attribute in the low bits), so a generalization step is a few shifts and a gather and merge()
    is one sort or bincount.  Wide form, when the fields need more than 62 bits: a code matrix.
    """

    __slots__ = ("attrs", "levels", "widths", "key", "codes", "counts", "is_merged", "_probe")

    def __init__(self, attrs, levels, counts, key=None, codes=None, is_merged=False):
        self.attrs = attrs
        self.is_merged = is_merged
        self._probe = None
        self.levels = tuple(int(x) for x in levels)
        self.widths = [(h.size(x) - 1).bit_length() for h, x in zip(attrs, self.levels)]
        self.counts, self.key, self.codes = counts, key, codes

    @property
    def n(self) -> int:
        return int(self.counts.shape[0])

    @property
    def cells(self) -> int:
        return self.n * (1 if self.key is not None else len(self.attrs))

    def min_count(self):
        return int(self.counts.min()) if self.n else None

    @classmethod
    def bottom(cls, codes, counts, attrs, merge=True):
        levels = (0,) * len(attrs)
        widths = [(h.size(0) - 1).bit_length() for h in attrs]
        if sum(widths) <= _MAX_BITS:
            key = np.zeros(codes.shape[0], dtype=np.int64)
            off = 0
            for j in range(len(attrs) - 1, -1, -1):
                if widths[j]:
                    key |= codes[:, j] << off
                off += widths[j]
            t = cls(attrs, levels, counts, key=key)
        else:
            t = cls(attrs, levels, counts, codes=codes)
        return t.merged() if merge else t

    def merged(self) -> "_Table":
        if self.key is not None:
            key, counts = _merge_keys(self.key, self.counts, sum(self.widths))
            return _Table(self.attrs, self.levels, counts, key=key, is_merged=True)
        codes, counts = _group(self.codes, self.counts, [h.size(x) for h, x in zip(self.attrs, self.levels)])
        return _Table(self.attrs, self.levels, counts, codes=codes, is_merged=True)

    def probe_rows(self, m=_PROBES):
        """Rows with the smallest counts: the likeliest to stay in a class below k when rolled up."""
        if self._probe is None:
            m = min(m, self.n)
            self._probe = np.argpartition(self.counts, m - 1)[:m] if m < self.n else np.arange(self.n)
        return self._probe

    def rolled(self, levels, merge=True) -> "_Table":
        """generalise() + merge() (002 sec. 4.5): the table at ``levels`` (>= own levels)."""
        if self.key is not None:
            key, widths = self.key, list(self.widths)
            for j in range(len(self.attrs) - 1, -1, -1):  # low bits first: offsets above stay valid
                a, b = self.levels[j], int(levels[j])
                if a == b:
                    continue
                h = self.attrs[j]
                off, w, nw = sum(widths[j + 1:]), widths[j], (h.size(b) - 1).bit_length()
                if w:
                    f = np.right_shift(key, off)
                    np.bitwise_and(f, (1 << w) - 1, out=f)
                else:
                    f = np.zeros_like(key)
                nf = h.level_map(b, a).take(f)
                if nw == w:  # same field width: flip the changed bits in place
                    np.bitwise_xor(nf, f, out=nf)
                    np.left_shift(nf, off, out=nf)
                    np.bitwise_xor(nf, key, out=nf)
                    key = nf
                else:
                    del f
                    high = np.right_shift(key, off + w)
                    np.left_shift(high, off + nw, out=high)
                    np.left_shift(nf, off, out=nf)
                    np.bitwise_or(high, nf, out=high)
                    if off:
                        np.bitwise_and(key, (1 << off) - 1, out=nf)
                        np.bitwise_or(high, nf, out=high)
                    key = high
                widths[j] = nw
            t = _Table(self.attrs, levels, self.counts, key=key)
            return t.merged() if merge else t
        codes = self.codes.copy()
        for j, h in enumerate(self.attrs):
            if self.levels[j] != levels[j]:
                codes[:, j] = h.level_map(int(levels[j]), self.levels[j])[codes[:, j]]
        t = _Table(self.attrs, levels, self.counts, codes=codes)
        return t.merged() if merge else t

    def decoded(self) -> np.ndarray:
        if self.codes is not None:
            return self.codes
        out = np.zeros((self.n, len(self.attrs)), dtype=np.int64)
        off = 0
        for j in range(len(self.attrs) - 1, -1, -1):
            w = self.widths[j]
            if w:
                out[:, j] = (self.key >> off) & ((1 << w) - 1)
            off += w
        return out


def apply_levels(codes, attributes, levels) -> np.ndarray:
    """Map level-0 codes (rows or classes, shape (n, d)) to codes at ``levels`` (002 sec. 4.5 step 4)."""
    codes = np.asarray(codes, dtype=np.int64)
    if codes.ndim != 2 or codes.shape[1] != len(attributes) or len(levels) != len(attributes):
        raise DeidError(INVALID_PARAMETER_VALUE, "codes, attributes and levels do not match")
    out = np.empty_like(codes)
    for j, (h, lv) in enumerate(zip(attributes, levels)):
        out[:, j] = h.level_map(int(lv))[codes[:, j]]
    return out


def _check_inputs(codes, counts, attributes, k):
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise DeidError(INVALID_PARAMETER_VALUE, f"k must be a positive integer, got {k!r}")
    codes = np.asarray(codes, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64).reshape(-1)
    d = len(attributes)
    if d == 0:
        raise DeidError(INVALID_PARAMETER_VALUE, "no quasi-identifying attributes to generalize")
    if codes.ndim != 2 or codes.shape[1] != d or codes.shape[0] != counts.shape[0]:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"class table shape {codes.shape} does not match {d} attributes and "
                        f"{counts.shape[0]} counts")
    for h in attributes:  # limits may have been set after construction (selection limits)
        lim = h.limit
        if lim is not None and (isinstance(lim, bool) or int(lim) != lim or lim < 0):
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"hierarchy {h.name!r}: limit must be a level >= 0, got {lim!r}")
    if len({h.name for h in attributes}) != d:
        raise DeidError(INVALID_PARAMETER_VALUE, "attribute names must be unique")
    if counts.size:
        if counts.min() < 1:
            raise DeidError(INVALID_PARAMETER_VALUE, "class counts must be >= 1")
        lo, hi = codes.min(axis=0), codes.max(axis=0)
        for j, h in enumerate(attributes):
            if lo[j] < 0 or hi[j] >= h.size(0):
                raise DeidError(INVALID_PARAMETER_VALUE,
                                f"codes of {h.name!r} outside 0..{h.size(0) - 1}")
    return codes, counts, int(k)


def _source_groups(attributes):
    groups: OrderedDict = OrderedDict()
    for j, h in enumerate(attributes):
        groups.setdefault(h.source, []).append(j)
    return list(groups.items())


def _unsatisfiable(k, source, nsources, attrs, smallest, total):
    where = f" for source {source!r}" if nsources > 1 else ""
    blocking = [h for h in attrs if h.cap < h.top]
    if not blocking:
        return DeidError(
            PRIVACY_MODEL_UNSATISFIABLE,
            f"k-anonymity (k={k}) cannot be reached{where}: too few rows match the request",
            detail=f"{total} row(s) match",
            hint="Widen the selection or lower k.")
    names = ", ".join(f"{h.name} (limit {h.cap} of {h.top})" for h in blocking)
    return DeidError(
        PRIVACY_MODEL_UNSATISFIABLE,
        f"k-anonymity (k={k}) cannot be reached{where}: with every attribute at its limit some "
        f"class stays below k; blocking limits: {names}",
        hint="Raise or remove the generalization limits of " + ", ".join(h.name for h in blocking)
        + " (a column pinned by an equality in the selection cannot rise above the selected value), "
        "drop such columns from the request, widen the selection, or lower k.",
        detail=f"smallest class: {smallest} row(s); levels at the limit: "
        + ", ".join(f"{h.name}={h.cap}" for h in attrs))


def _finish(codes, counts, attributes, levels, steps, final, stats):
    if final is None:
        final = _Table.bottom(codes, counts, attributes, merge=False).rolled(levels)
    loss = float(sum(h.priority * h.info_loss[lv] for h, lv in zip(attributes, levels)))
    return GeneralizationResult([int(x) for x in levels], steps, loss, final.decoded(), final.counts, stats)


# ------------------------------------------------------------------------------------------------
# The greedy loop (002 sec. 4.5)


def greedy(codes, counts, attributes, k) -> GeneralizationResult:
    """The anonymisation algorithm of 002 sec. 4.5 on a class table.

    ``codes`` (c, d) level-0 codes of the distinct classes, ``counts`` (c,) their cardinalities,
    ``attributes`` the d hierarchies in column order.  While some source (002 sec. 2) has a class
    below k, generalize by one level the attribute of a violating source with the least
    phi(next level) x priority among those below min(limit, top) (ties: first listed), then merge
    classes.  Raises DeidError(PRIVACY_MODEL_UNSATISFIABLE) when a violating source can move no
    attribute.
    """
    codes, counts, k = _check_inputs(codes, counts, attributes, k)
    groups = _source_groups(attributes)
    levels = [0] * len(attributes)
    steps: list = []
    total = int(counts.sum())
    tables = {}
    for g, idx in groups:
        # one source: the caller's classes are distinct already (duplicates would only be conservative)
        tables[g] = _Table.bottom(codes[:, idx], counts, [attributes[j] for j in idx], merge=len(groups) > 1)
    where = {j: (g, p) for g, idx in groups for p, j in enumerate(idx)}
    while True:
        cand = []
        for g, idx in groups:
            tab = tables[g]
            if tab.n == 0 or tab.min_count() >= k:
                continue
            movable = [j for j in idx if levels[j] < attributes[j].cap]
            if not movable:
                raise _unsatisfiable(k, g, len(groups), [attributes[j] for j in idx], tab.min_count(), total)
            cand.extend(movable)
        if not cand:
            break
        j = min(cand, key=lambda j: (round(attributes[j].edge_cost(levels[j]), _ROUND), j))
        h, lv = attributes[j], levels[j]
        g, p = where[j]
        tab = tables[g]
        new = list(tab.levels)
        new[p] = lv + 1
        tables[g] = tab.rolled(new)
        levels[j] = lv + 1
        steps.append({"attribute": h.name, "from": lv, "to": lv + 1, "cost": h.edge_cost(lv)})
    final = tables[groups[0][0]] if len(groups) == 1 else None
    if final is not None and not steps:
        final = final.merged()
    return _finish(codes, counts, attributes, levels, steps, final, {"steps": len(steps)})


# ------------------------------------------------------------------------------------------------
# Exact lattice search


class _Lattice:
    """Search of one source's level lattice for the cheapest k-anonymous vector."""

    def __init__(self, bottom: _Table, attrs, k, max_nodes):
        self.attrs, self.k = attrs, k
        self.caps = np.array([h.cap for h in attrs], dtype=np.int64)
        n_nodes = int(np.prod(self.caps + 1, dtype=np.float64))
        if n_nodes > max_nodes:
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"the generalization lattice has {n_nodes} level vectors; the optimal search "
                            f"handles at most {max_nodes}",
                            hint="Use the greedy method, set generalization limits, or request fewer columns.")
        grids = np.indices(tuple(int(c) + 1 for c in self.caps)).reshape(len(attrs), -1).T
        self.nodes = np.ascontiguousarray(grids, dtype=np.int64)  # row-major: index = mixed radix
        self.strides = np.r_[np.cumprod((self.caps + 1)[::-1])[::-1][1:], 1].astype(np.int64)
        cost = np.zeros(len(self.nodes))
        for j, h in enumerate(attrs):
            cost += h.priority * np.asarray(h.info_loss)[self.nodes[:, j]]
        self.cost = np.round(cost, _ROUND)
        # ascending cost, then fewer steps, then lexicographic (deterministic)
        keys = [self.nodes[:, j] for j in range(len(attrs) - 1, -1, -1)]
        self.order = np.lexsort(keys + [self.nodes.sum(axis=1), self.cost])
        self.status = np.zeros(len(self.nodes), dtype=np.int8)  # 1 k-anonymous, -1 not, 0 unknown
        self.bottom = bottom
        self.cache: OrderedDict = OrderedDict()
        self.cache_cells = 0
        self.checks = 0
        self.refuted = 0

    def index(self, v) -> int:
        return int(np.dot(v, self.strides))

    def remember(self, tab):
        if not tab.is_merged or tab.levels in self.cache or not any(tab.levels):
            return
        self.cache[tab.levels] = tab
        self.cache_cells += tab.cells
        while self.cache_cells > 2 * self.bottom.cells and len(self.cache) > 1:
            _, old = self.cache.popitem(last=False)
            self.cache_cells -= old.cells

    def source_for(self, v) -> _Table:
        """The smallest cached table below v (the bottom if none)."""
        best = self.bottom
        for u, tab in self.cache.items():
            if tab.n < best.n and all(a <= b for a, b in zip(u, v)):
                best = tab
        if best.levels in self.cache:
            self.cache.move_to_end(best.levels)
        return best

    def evaluate(self, src: _Table, v):
        """(k-anonymous?, table at v) from a table below v.

        Before the O(n log n) merge, a few witness rows (smallest counts in ``src``) are looked up:
        if one of them lands in a class below k, v is refuted after O(n) work and the returned
        table is left unmerged (still exact for further roll-ups).
        """
        raw = src if src.levels == tuple(int(x) for x in v) else src.rolled(v, merge=False)
        if (raw.key is not None and not raw.is_merged and raw.n >= _PROBE_MIN_ROWS
                and not _bincount_ok(sum(raw.widths), raw.n)):
            for r in src.probe_rows():
                if int(raw.counts[raw.key == raw.key[r]].sum()) < self.k:
                    self.refuted += 1
                    return False, raw
        tab = raw if raw.is_merged else raw.merged()
        self.checks += 1
        return (tab.n == 0 or tab.min_count() >= self.k), tab

    def mark(self, v, feasible: bool):
        if feasible:
            self.status[np.all(self.nodes >= v, axis=1)] = 1
        else:
            self.status[np.all(self.nodes <= v, axis=1)] = -1

    def increments(self, v):
        """Movable attributes of v, cheapest weighted loss increase first (ties: listed first)."""
        inc = [(round(h.priority * (h.info_loss[int(v[j]) + 1] - h.info_loss[int(v[j])]), _ROUND), j)
               for j, h in enumerate(self.attrs) if v[j] < self.caps[j]]
        return [j for _, j in sorted(inc)]

    def climb(self, v, tab):
        """From a non-anonymous v, find a maximal non-anonymous vector above it; tag its down-set.

        Flash-style: binary search along the cheapest-increment path from v (anonymity is monotone
        on a chain), then try the other up-neighbours; repeat from any that is still non-anonymous.
        """
        while True:
            path, u = [], v
            while True:
                inc = self.increments(u)
                if not inc:
                    break
                u = u.copy()
                u[inc[0]] += 1
                if self.status[self.index(u)] == 1:
                    break
                path.append(u)
            lo, hi = -1, len(path)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                node = path[mid]
                if self.status[self.index(node)] == -1:
                    lo, tab = mid, tab.rolled(node, merge=False)
                    continue
                good, t = self.evaluate(tab, node)
                if good:
                    self.mark(node, True)
                    self.remember(t)
                    hi = mid
                else:
                    lo, tab = mid, t
            if lo >= 0:
                v = path[lo]
            moved = False
            for j in self.increments(v):
                ui = self.index(v) + int(self.strides[j])
                if self.status[ui] == 1:
                    continue
                u = v.copy()
                u[j] += 1
                if self.status[ui] == -1:
                    v, tab, moved = u, tab.rolled(u, merge=False), True
                    break
                good, tu = self.evaluate(tab, u)
                if not good:
                    v, tab, moved = u, tu, True
                    break
                self.mark(u, True)
                self.remember(tu)
            if not moved:
                break
        self.mark(v, False)
        self.remember(tab)

    def solve(self):
        top = self.caps.copy()
        good, t_top = self.evaluate(self.bottom, top)
        if not good:
            return None, t_top if t_top.is_merged else t_top.merged()
        self.mark(top, True)
        for i in self.order:
            s = self.status[i]
            if s == -1:
                continue
            v = self.nodes[i].copy()
            if s == 1:
                return v, None
            good, tab = self.evaluate(self.source_for(v), v)
            if good:
                self.mark(v, True)
                return v, None
            self.climb(v, tab)
        raise AssertionError("lattice exhausted without the top vector")  # pragma: no cover


def optimal(codes, counts, attributes, k, max_nodes: int = OPTIMAL_MAX_NODES) -> GeneralizationResult:
    """Exact minimum of sum(priority * phi[level]) over k-anonymous level vectors within the limits.

    Same solution space and per-source k rule as :func:`greedy` (002 sec. 2, 4.5).  Sources are
    independent (disjoint attributes, separable loss), so each source's lattice is searched alone:
    vectors are visited in ascending loss (ties: fewer steps, then lexicographic); the first
    k-anonymous one is optimal.  Monotone pruning as in Flash / OLA: from a non-anonymous vector
    we climb (binary search along the cheapest-increment path, then the other up-neighbours) to a
    maximal non-anonymous vector and tag its whole down-set; every k-anonymous vector tags its
    up-set.  Class tables are rolled up from the smallest cached table below the vector; on large
    tables a few witness rows are looked up first, so most non-anonymous vectors are refuted with
    O(classes) work instead of a sort.  Exact: a vector is only ever tagged by monotonicity or by
    an exact count.  ``stats``: checks (full merges), refuted (witness refutations), lattice size.
    """
    codes, counts, k = _check_inputs(codes, counts, attributes, k)
    groups = _source_groups(attributes)
    levels = [0] * len(attributes)
    total = int(counts.sum())
    stats = {"checks": 0, "lattice": 0}
    final = None
    for g, idx in groups:
        attrs = [attributes[j] for j in idx]
        bottom = _Table.bottom(codes[:, idx], counts, attrs, merge=True)
        lat = _Lattice(bottom, attrs, k, max_nodes)
        v, t_top = lat.solve()
        stats["checks"] += lat.checks
        stats["refuted"] = stats.get("refuted", 0) + lat.refuted
        stats["lattice"] += len(lat.nodes)
        if v is None:
            raise _unsatisfiable(k, g, len(groups), attrs, t_top.min_count(), total)
        for p, j in enumerate(idx):
            levels[j] = int(v[p])
        if len(groups) == 1:
            final = lat.source_for(v).rolled(v)
    return _finish(codes, counts, attributes, levels, [], final, stats)
