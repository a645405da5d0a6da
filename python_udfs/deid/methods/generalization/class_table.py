"""The class table of paper 002 (sec. 4.5 step 1: distinct quasi-identifier combinations with
their counts) at given hierarchy levels: packed integer keys, merging, roll-up to higher levels,
the release mapping of step 4 (:func:`apply_levels`), the checks of a solver's inputs and its
result type.  Shared by the greedy loop (:mod:`generalize`) and the exact search (:mod:`lattice`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ...errors import INVALID_PARAMETER_VALUE, PRIVACY_MODEL_UNSATISFIABLE, DeidError

ROUND = 10  # decimals used to compare costs (ties are decided by rules, not float noise)


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
    final: "_Table"
    class_counts: np.ndarray
    stats: dict = field(default_factory=dict)

    @property
    def class_codes(self) -> np.ndarray:
        """The final classes' codes, decoded from the packed keys when asked for: a release
        needs only the counts, and with nearly unique classes the decoding is a (classes, d)
        matrix built for nothing."""
        return self.final.decoded()


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


def _unsatisfiable(k, source, nsources, attrs, smallest, total, joint=False):
    """The refusal when no level vector within the limits reaches k: for one source (002 sec.
    4.4: no data is released), or, with ``joint``, over all quasi-identifiers together (a
    policy's minimum holds jointly). The message names limits, never a count."""
    where = " over all quasi-identifiers jointly" if joint else \
        f" for source {source!r}" if nsources > 1 else ""
    blocking = [h for h in attrs if h.cap < h.top]
    if not blocking:
        return DeidError(
            PRIVACY_MODEL_UNSATISFIABLE,
            f"k-anonymity (k={k}) cannot be reached{where}: too few rows match the request",
            detail=f"{total} row(s) match",
            hint="Widen the selection or lower k.", data_dependent=True)
    names = ", ".join(f"{h.name} (limit {h.cap} of {h.top})" for h in blocking)
    return DeidError(
        PRIVACY_MODEL_UNSATISFIABLE,
        f"k-anonymity (k={k}) cannot be reached{where}: with every attribute at its limit some "
        f"class stays below k; blocking limits: {names}",
        hint="Raise or remove the generalization limits of " + ", ".join(h.name for h in blocking)
        + " (a column pinned by an equality in the selection cannot rise above the selected value), "
        "drop such columns from the request, widen the selection, or lower k"
        + (" (the policy's minimum holds over all the request's quasi-identifiers together; "
           "fewer quasi-identifiers make it easier to reach)." if joint else "."),
        detail=f"smallest class: {smallest} row(s); levels at the limit: "
        + ", ".join(f"{h.name}={h.cap}" for h in attrs), data_dependent=True)


def _finish(codes, counts, attributes, levels, steps, final, stats):
    if final is None:
        final = _Table.bottom(codes, counts, attributes, merge=False).rolled(levels)
    loss = float(sum(h.priority * h.info_loss[lv] for h, lv in zip(attributes, levels)))
    return GeneralizationResult([int(x) for x in levels], steps, loss, final, final.counts, stats)
