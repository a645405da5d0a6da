"""Rare records in a condensation release (beyond paper 004).

004 synthesises each cluster from its mean vector and covariance matrix (Alg. 3) and keeps its
category counts (Alg. 2 step 2.d.iii, deviation 2 of :mod:`.condensation`).  Two ways the
release could still show a rare source record:

* a categorical value held by fewer than k source rows is released as itself (the counts are
  kept exactly: a value of one source row shows in one released row);
* rounding to the column's grain, clipping to the observed range and cluster constants put
  synthetic rows on the source's grid, where one can equal a source row that fewer than k
  source rows share (a source-unique row released verbatim).

:func:`generalize_column` -- before condensation -- maps a categorical column so that every
released value is held by >= k source rows: through the column's hierarchy, to the lowest
level at which every label has >= k rows; without a hierarchy (or one that does not cover
every value) the rare values merge into one label, :data:`OTHER` ("*", the suppression mark
of a hierarchy's top level), lengthened by "*" until no value of the column equals it.  When
the rare values together hold fewer than k rows, the least frequent other values join them.

:func:`avoid_rare_copies` -- after synthesis, rounding and clipping -- finds the released rows
equal to a source combination (over all released columns) of fewer than k rows and moves
each to the nearest clean permissible row: one value of a numeric column that is not constant
in the row's cluster by whole grains of its column (up to r grains in round r; the move
closest to the row's unrounded synthetic value first), else the row's category swapped with
another row of its cluster (the first clean partner in the cluster's member order, found for
all the round's stuck rows at once; swaps applied together touch disjoint rows, a row that
loses a partner to an earlier row tries again).  A row with no clean move takes a random
permissible move and is tried again next round; a round re-checks the rows it moved at
random (every other row it changed was checked clean), the whole release is checked before
returning.  Numpy throughout: a round costs about linear time in its rows and their
clusters' sizes (rare keys are looked up by bucket, :class:`KeySet`).  The
moment-exact synthetic values (004 Alg. 3, ``synthetic_unrounded``) do not change: a move
picks another permissible value next to them, as rounding does; every cluster keeps its
category counts.  Rows still equal to a rare source row after ``max_rounds`` rounds refuse
the request (DE001).  A cluster whose source rows are all identical releases them as they are:
its k or more rows share them, so they are not rare.
"""
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...errors import DeidError, PRIVACY_MODEL_UNSATISFIABLE

OTHER = "*"
MAX_ROUNDS = 32
CANDIDATE_CELLS = 1 << 22   # values in one batch of candidate rows (bounds the memory)
CONSTANT_COST = 1e6       # a column constant in the row's cluster moves only as the last resort
_NONE = object()          # "no label goes last"


@dataclass
class Generalized:
    mode: str             # "none" (no rare value), "hierarchy" or "other"
    level: int            # hierarchy level (mode "hierarchy"), else 0
    labels: list          # released labels (text); NULL is code len(labels)
    code_of: np.ndarray   # int64 (L,): released code of every source value


def generalize_column(labels, counts, k, levels=None):
    """Released values of one categorical column, each held by >= k source rows.

    ``labels``: the column's distinct source values as text (None: NULL); ``counts``: source
    rows per value; ``levels``: None, or for every hierarchy level 1..top the generalized label
    of every value (None: NULL below the top).  Returns a :class:`Generalized`."""
    counts = np.asarray(counts, np.int64)
    present = counts > 0
    if not (present & (counts < k)).any():
        return Generalized("none", 0, list(labels), np.arange(len(labels), dtype=np.int64))
    held = np.flatnonzero(present)            # values of no source row get no label of their own
    for level, level_labels in enumerate(levels or (), start=1):
        names, code = _codes([level_labels[i] for i in held])
        if np.bincount(code, weights=counts[held], minlength=len(names)).min() >= k:
            return _with_null_last("hierarchy", level, names, _spread(code, held, len(labels)))
    merged = ~present | (counts < k)
    rest = np.flatnonzero(~merged)
    if counts[merged].sum() < k and rest.size:    # the least frequent other value (>= k rows)
        merged[rest[np.argmin(counts[rest])]] = True
    taken = {x for x in labels if x is not None}
    other = OTHER
    while other in taken:
        other += OTHER
    kept = [labels[i] if not merged[i] else other for i in range(len(labels))]
    names, code = _codes(kept, last=other)
    return _with_null_last("other", 0, names, code)


def _spread(code, held, size):
    """Codes of the held values, code 0 for the others (values of no source row)."""
    out = np.zeros(size, dtype=np.int64)
    out[held] = code
    return out


def _codes(values, last=_NONE):
    """(distinct values in first-seen order, ``last`` at the end; code of every value)."""
    names = list(dict.fromkeys(v for v in values if last is _NONE or v != last))
    if last is not _NONE and last in values:
        names.append(last)
    index = {v: i for i, v in enumerate(names)}
    return names, np.array([index[v] for v in values], dtype=np.int64)


def _with_null_last(mode, level, names, code):
    """NULL (None) as the code after the last label, as release tables code it."""
    if None in names:
        null = names.index(None)
        remap = np.arange(len(names))
        remap[null + 1:] -= 1
        remap[null] = len(names) - 1
        names = names[:null] + names[null + 1:]
        code = remap[code]
    return Generalized(mode, level, names, code.astype(np.int64))


_MULT = np.uint64(0xBF58476D1CE4E5B9)
_MULT2 = np.uint64(0x94D049BB133111EB)


def _mix(h):
    """splitmix64's finalizer (in place on a uint64 array)."""
    h ^= h >> np.uint64(30)
    h *= _MULT
    h ^= h >> np.uint64(27)
    h *= _MULT2
    h ^= h >> np.uint64(31)
    return h


def _keys(rows):
    """A 64-bit hash per row of its values' bits (-0.0 counts as 0.0).  Two different rows
    share a key with probability about 2^-64: a missed copy would then fail the independent
    verifier (an exact comparison), never pass it."""
    a = np.asarray(rows, np.float64).reshape(-1, np.shape(rows)[-1]) + 0.0
    h = np.zeros(a.shape[0], np.uint64)
    with np.errstate(over="ignore"):
        for j in range(a.shape[1]):
            h ^= np.ascontiguousarray(a[:, j]).view(np.uint64) + np.uint64(j + 1) * _MULT2
            _mix(h)
    return h


def _any_row_of_source_values(source, released):
    """Whether some released row has, in every column, a value its source column holds (only
    such a row can equal a source row).  Columns are tested on the rows still left; a column
    of synthetic numbers usually leaves none, and the rows' keys are then never made."""
    if source.shape[0] == 0 or released.shape[0] == 0:
        return False
    alive = np.arange(released.shape[0])
    for j in range(source.shape[1]):
        values = _sorted_values(source[:, j])
        x = released[alive, j]
        at = np.minimum(np.searchsorted(values, x), values.size - 1)
        alive = alive[values[at] == x]
        if alive.size == 0:
            return False
    return True


def _sorted_values(column):
    """The sorted distinct values of a column (a presence table for whole numbers of a short
    range)."""
    if np.array_equal(column, np.rint(column)):
        lo, hi = column.min(), column.max()
        if hi - lo < max(2 * column.size, 1024):
            present = np.bincount((column - lo).astype(np.int64)) > 0
            return lo + np.flatnonzero(present).astype(np.float64)
    return np.unique(column)


def rare_keys(source, k):
    """Sorted keys of the source rows' combinations held by fewer than k rows."""
    keys, counts = np.unique(_keys(source), return_counts=True)
    return keys[counts < k]


def _member(keys, sorted_keys):
    """keys found in sorted_keys."""
    if sorted_keys.size == 0:
        return np.zeros(keys.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    return sorted_keys[pos] == keys


class KeySet:
    """Membership in a set of 64-bit row keys (:func:`_keys`: uniformly spread): the sorted
    keys cut into buckets by their top bits (about one key per bucket), so that a look-up
    reads one bucket instead of a binary search over the whole set."""

    def __init__(self, sorted_keys):
        self.keys = np.asarray(sorted_keys, np.uint64)
        self.bits = max(1, int(self.keys.size).bit_length())
        self.shift = np.uint64(64 - self.bits)
        self.starts = np.searchsorted(self.keys >> self.shift,
                                      np.arange((1 << self.bits) + 1, dtype=np.uint64))
        self.depth = int(np.diff(self.starts).max()) if self.keys.size else 0

    def member(self, keys):
        """keys found in the set."""
        out = np.zeros(keys.shape, dtype=bool)
        if self.depth == 0:
            return out
        bucket = (keys >> self.shift).astype(np.int64)
        at = self.starts[bucket]
        end = self.starts[bucket + 1]
        last = self.keys.size - 1
        for _ in range(self.depth):
            live = at < end
            if not live.any():
                break
            out |= live & (self.keys[np.minimum(at, last)] == keys)
            at = at + 1
        return out



@dataclass(frozen=True)
class ColumnRules:
    """Per released column, how :func:`avoid_rare_copies` may move its values: ``decimals``
    (int, or -1) -- the column is on the grain 10^-decimals; ``relative`` (float, or 0) -- a
    float column moved by that fraction of its value's magnitude (at least of 1); ``float32``
    -- stored as float4; ``categorical``; ``fixed`` -- never moved (the vital status; the
    survival time under 004's original times); ``reluctant`` -- moved only when nothing else
    is clean, like a column constant in the row's cluster (the survival time otherwise)."""
    decimals: list
    relative: list
    float32: list
    categorical: list
    fixed: list
    reluctant: list = None


class Release(NamedTuple):
    """The released rows (n, m), in place; their cluster ids (n,); the synthetic values before
    rounding (n, m), never changed."""
    values: np.ndarray
    cluster: np.ndarray
    unrounded: np.ndarray


def avoid_rare_copies(source, source_cluster, release, k, rules, rng, max_rounds=MAX_ROUNDS):
    """Move the released rows that equal a rare source row (module docstring); in place.

    ``source`` (n, m) in the released representation (categories as released codes) with
    ``source_cluster`` (n,); ``release``: a :class:`Release`; ``rules``: a
    :class:`ColumnRules`.  Returns the number of rows moved; raises DE001 when a row cannot be
    moved off every rare source row.
    """
    n, m = source.shape
    released = release.values
    if not _any_row_of_source_values(source, released):
        return 0                 # no released row equals any source row: nothing to hash
    rare = KeySet(rare_keys(source, k) if n and m else np.zeros(0, np.uint64))
    bad = np.flatnonzero(rare.member(_keys(released))) if rare.keys.size else \
        np.zeros(0, np.int64)
    if bad.size == 0:
        return 0
    mover = _Mover(source, source_cluster, release, rules, rare, rng)
    moved = np.zeros(released.shape[0], dtype=bool)
    for round_ in range(max_rounds):
        moved[bad] = True
        chunk = max(1, CANDIDATE_CELLS // max(1, 2 * (round_ + 1) * len(mover.numeric) * m))
        for start in range(0, bad.size, chunk):
            mover.move(bad[start:start + chunk], round_ + 1)
        # every row a round changed was checked clean, except the random moves of rows left
        # stuck (all among ``bad``); the whole release is checked again before returning
        bad = bad[mover.is_rare(released[bad])]
        if bad.size == 0:
            bad = np.flatnonzero(mover.is_rare(released))
        if bad.size == 0:
            return int(moved.sum())
    if mover.is_rare(released).any():
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE,
                        "condensation cannot release rows that differ from every rare source row",
                        hint="Raise the variety of the released columns: release fewer columns, "
                             "lower k, or give low-cardinality columns a hierarchy.")
    return int(moved.sum())


class _Mover:
    """What a round of :func:`avoid_rare_copies` needs: the release, the columns it may move,
    the source's ranges and spreads, and which columns vary in each cluster."""

    def __init__(self, source, source_cluster, release, rules, rare, rng):
        m = source.shape[1]
        self.release, self.rules, self.rare, self.rng = release, rules, rare, rng
        self.lo, self.hi = source.min(axis=0), source.max(axis=0)
        self.scale = source.std(axis=0)
        self.scale[self.scale == 0] = 1.0
        n_clusters = int(max(source_cluster.max(), release.cluster.max())) + 1
        self.varies = _varies(source, source_cluster, n_clusters)
        if rules.reluctant is not None:
            self.varies &= ~np.asarray(rules.reluctant, dtype=bool)
        self.numeric = [j for j in range(m) if not rules.categorical[j] and not rules.fixed[j]
                        and (rules.decimals[j] >= 0 or rules.relative[j] > 0)]
        self.swappable = [j for j in range(m) if rules.categorical[j] and not rules.fixed[j]]
        self.members = _members(release.cluster, n_clusters)
        self.mixed = _varies_grouped(release.values, self.members, self.swappable)  # swaps keep it

    def is_rare(self, rows):
        return self.rare.member(_keys(rows))

    def move(self, bad, radius):
        """One round for the rows ``bad``: the cheapest clean numeric move, else a clean
        category swap, else a random permissible move."""
        released, m = self.release.values, self.release.values.shape[1]
        cand, valid, cost = self.numeric_moves(bad, radius)
        if cand is not None:
            b, c = cand.shape[:2]
            clean = valid & ~self.is_rare(cand.reshape(b * c, m)).reshape(b, c)
            best = np.where(clean, cost, np.inf).argmin(axis=1)
            done = clean[np.arange(b), best]
            released[bad[done]] = cand[done, best[done]]
            bad, cand, valid, cost = bad[~done], cand[~done], valid[~done], cost[~done]
        stuck = _swaps(released, bad, self.release.cluster, self.members, self.swappable,
                       self.is_rare, self.mixed)
        if stuck.size and cand is not None:       # a random permissible move, tried again
            rows = np.searchsorted(bad, stuck)
            pick = _random_valid(valid[rows], cost[rows] < CONSTANT_COST, self.rng)
            ok = pick >= 0
            # only the numeric columns: a swap of this round may have given a stuck row (as a
            # partner) another category since its candidates were drawn, and writing the stale
            # category back would change its cluster's category counts (004 Alg. 2 step 2.d.i)
            cols = np.asarray(self.numeric)
            released[np.ix_(stuck[ok], cols)] = cand[rows[ok], pick[ok]][:, cols]

    def numeric_moves(self, bad, radius):
        """Every move of one movable numeric column of the rows ``bad`` by 1..radius grains
        either way: candidates (b, c, m), whether each is permissible (b, c) and its distance
        to the unrounded values (b, c), a column constant in the row's cluster (or reluctant)
        last."""
        numeric, r = self.numeric, self.rules
        if not numeric:
            return None, None, None
        rows, clusters = self.release.values[bad], self.release.cluster[bad]
        unrounded = self.release.unrounded[bad]
        b, width = rows.shape[0], 2 * radius
        cand = np.repeat(rows[:, None, :], width * len(numeric), axis=1)
        valid = np.zeros((b, width * len(numeric)), dtype=bool)
        cost = np.zeros((b, width * len(numeric)))
        for t, j in enumerate(numeric):
            v = rows[:, j]
            step = 10.0 ** -r.decimals[j] if r.decimals[j] >= 0 else \
                r.relative[j] * np.maximum(np.abs(v), 1.0)
            for d, shift in enumerate(np.r_[np.arange(1, radius + 1), -np.arange(1, radius + 1)]):
                new = v + shift * step
                if r.decimals[j] >= 0:
                    new = np.round(new, r.decimals[j])
                if r.float32[j]:
                    new = new.astype(np.float32).astype(np.float64)
                c = width * t + d
                cand[:, c, j] = new
                valid[:, c] = (new >= self.lo[j]) & (new <= self.hi[j]) & (new != v)
                cost[:, c] = np.abs(new - unrounded[:, j]) / self.scale[j] \
                    + np.where(self.varies[clusters, j], 0.0, CONSTANT_COST)
        return cand, valid, cost


def _varies(source, cluster, n_clusters):
    """(n_clusters, m): the column is not constant among the cluster's source rows."""
    return _varies_grouped(source, _members(cluster, n_clusters), range(source.shape[1]))


def _varies_grouped(values, members, columns):
    """(n_clusters, m): the column is not constant among the cluster's rows of ``values``
    (checked for ``columns`` only; members = :func:`_members`)."""
    order, bounds = members
    sizes = np.diff(bounds)
    out = np.zeros((sizes.size, values.shape[1]), dtype=bool)
    nonempty = sizes > 0
    s = bounds[:-1][nonempty]
    for j in columns:
        col = values[order, j]
        out[nonempty, j] = np.maximum.reduceat(col, s) > np.minimum.reduceat(col, s)
    return out


def _members(cluster, n_clusters):
    order = np.argsort(cluster, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(cluster, minlength=n_clusters))]
    return order, bounds


def _swaps(released, stuck, clusters, members, swappable, is_rare, mixed=None):
    """Swap the category of every row of ``stuck`` with another row of its cluster so that
    neither equals a rare source row, for all rows at once (numpy over (row, partner) pairs);
    in place.  Per column in order, each stuck row takes its first clean partner in the
    cluster's member order; when two rows want one row (as partner or as a stuck row), the
    earlier in ``stuck`` swaps and the later tries again.  The swaps applied together touch
    disjoint rows, so every row stored is the row that was checked.  Returns the stuck rows
    no swap freed (a stuck row taken as another row's partner is freed: its new row was
    checked).  ``mixed``: (clusters, m), the column takes two or more values in the cluster's
    released rows (swaps keep it; computed when None): a row of a cluster constant in the
    column has no partner there."""
    order, bounds = members
    if mixed is None:
        mixed = _varies_grouped(released, members, swappable)
    left = np.asarray(stuck, np.int64)
    for j in swappable:
        trying = left[mixed[clusters[left], j]]
        while trying.size:
            first, partner = _first_clean_partners(released, trying, clusters, order, bounds,
                                                   j, is_rare)
            if first.size == 0:
                break
            mine = trying[first]
            ok = _disjoint(mine, partner)
            mine_ok, theirs = mine[ok], partner[ok]
            released[mine_ok, j], released[theirs, j] = released[theirs, j], released[mine_ok, j]
            freed = np.r_[mine_ok, theirs]
            left = left[~np.isin(left, freed)]
            trying = mine[~ok]
            trying = trying[~np.isin(trying, freed)]
    return left


def _disjoint(a, b):
    """Pairs (a[q], b[q]) taken in order q so that no row is in two: pair q is kept when it is
    the first pair of both its rows (the first pair is always kept)."""
    q = np.arange(a.size)
    ends, owner = np.r_[a, b], np.r_[q, q]
    srt = np.lexsort((owner, ends))
    e = ends[srt]
    head = np.r_[True, e[1:] != e[:-1]]
    first = np.empty_like(owner)
    first[srt] = owner[srt][np.maximum.accumulate(np.where(head, np.arange(e.size), 0))]
    return (first[:a.size] == q) & (first[a.size:] == q)


def _first_clean_partners(released, rows, clusters, order, bounds, j, is_rare):
    """For ``rows`` (stuck rows), the first row of the same cluster (member order) with another
    value in column j such that both rows, their values of j exchanged, equal no rare source
    row.  Returns (index into ``rows`` of every row that has one, its partner)."""
    m = released.shape[1]
    c = clusters[rows]
    lo = bounds[c]
    cnt = bounds[c + 1] - lo
    budget = max(1, CANDIDATE_CELLS // max(1, 2 * m))
    ends = np.cumsum(cnt)
    found, partners = [], []
    start = 0
    while start < rows.size:
        base = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, base + budget, side="right")))
        f, p = _clean_partners_chunk(released, rows[start:stop], lo[start:stop],
                                     cnt[start:stop], order, j, is_rare)
        found.append(f + start)
        partners.append(p)
        start = stop
    return np.concatenate(found), np.concatenate(partners)


def _clean_partners_chunk(released, rows, lo, cnt, order, j, is_rare):
    total = int(cnt.sum())
    owner = np.repeat(np.arange(rows.size), cnt)
    pos = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt - lo, cnt)
    p = order[pos]
    u = released[rows, j]
    v = released[p, j]
    keep = v != u[owner]
    owner, p, v = owner[keep], p[keep], v[keep]
    # my row with each value of j my cluster holds: one check per (row, value)
    levels, code = np.unique(v, return_inverse=True)
    key, inv = np.unique(owner * levels.size + code.reshape(-1), return_inverse=True)
    mine = released[rows[key // levels.size]]
    mine[:, j] = levels[key % levels.size]
    keep = ~is_rare(mine)[inv.reshape(-1)]
    owner, p = owner[keep], p[keep]
    theirs = released[p]
    theirs[:, j] = u[owner]
    keep = ~is_rare(theirs)
    owner, p = owner[keep], p[keep]
    first, at = np.unique(owner, return_index=True)
    return first, p[at]


def _random_valid(valid, preferred, rng):
    """Per row, a random index of a valid entry, a preferred one if there is one (-1 when
    none is valid)."""
    noise = rng.random(valid.shape) + preferred
    noise[~valid] = -1.0
    pick = noise.argmax(axis=1)
    pick[~valid.any(axis=1)] = -1
    return pick
