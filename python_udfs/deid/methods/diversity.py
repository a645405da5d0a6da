"""L-diversity over several sensitive attributes (paper 001: Gal, Chen, Gangopadhyay 2008).

A group's sensitive values are an int64 array ``codes`` of shape (m, s): m rows, s sensitive
attributes, each column integer codes (NULL is just another code).  Deleting a distinct value
(attribute a, code v) deletes every row holding it (001 "Our Model").  A group is L-diverse
(001 Def. 6) when at least L such deletions are needed to delete all its rows; with column-wise
limits (001 Def. 7, ``column_l = {attribute_index: L_i}``) at most L_i of the deletions may come
from attribute i (attributes not listed are unlimited).  Deciding this is NP-hard (001 Theorem 3:
it is a minimum set cover over the RID sets), so the release path uses the sound greedy checks:

* :func:`greedy_check` / :func:`certified_l` / :func:`certified_l_per_group` -- 001 Fig. 6
  (an independent row set C, Theorems 4-5) and, when ``column_l`` is given, 001 Figs. 7-8
  (grow C row by row and certify it with Theorem 6).  All groups are processed together with
  numpy (one vectorised "lockstep" pass per greedy step); :func:`greedy_trace` is the literal,
  row-at-a-time reference of the same algorithm and the tests check that both agree.
* :func:`exact_min_deletions` -- exact hitting-set branch and bound, for tests and small groups.
* :func:`exponential_l_per_group` -- the "Exponential-L" baseline of 001 (Machanavajjhala et al.).

Deviations from / additions to the paper (all keep the check sound):

1. Theorem 6 / Fig. 7 lines 7-13 certify "C is x-diverse" when the x most frequent allowed
   values have total frequency <= |C|.  That is unsound when fewer than x allowed values exist
   (e.g. C = {(a1,b1), (a2,b1)} with L_a = 0: the only allowed value b1 has frequency 2 <= |C|,
   yet deleting b1 alone deletes C).  We use the strict form: C needs more than j deletions if
   the j most frequent allowed values cover fewer than |C| rows (Lemma 1), so
   ``x(C) = 1 + max{j : T_j(C) < |C|}`` where T_j is the largest total frequency of j values
   with at most L_i from attribute i.  Whenever the paper's test holds and x values exist, ours
   holds too, so we never certify less than the paper.  T_j is computed exactly by the greedy
   "top L_i per attribute, then top j overall" rule (a partition matroid), and, as the paper
   suggests, from an incrementally merged top list (only the new row's values can change rank).
2. Fig. 7 accepts a row when C stays x-diverse and then tests x+1; we recompute x(C) and keep
   the row iff x does not drop, which is the same rule.  The Fig. 7 loop examines at most
   ``PHASE2_MAX_SCAN`` candidate rows and adds at most ``PHASE2_MAX_KEEP`` rows per group, and
   keeps a top list of at most ``PHASE2_MAX_WIDTH`` values (so column-wise certificates are
   capped at PHASE2_MAX_WIDTH + 1).  Stopping early can only answer "no" more often, never
   "yes" wrongly.  Since a candidate's fate depends only on C, candidates are tested in
   batches against the same C (exactly equivalent to the row-at-a-time loop).
3. If the column limits make it impossible to delete every row (e.g. all attributes limited and
   the limits exhausted), the group resists every attack allowed by Def. 7 and its certificate
   is ``UNBOUNDED_L``.  Attributes not in ``column_l`` are unlimited (L_i = L in Def. 7).
4. Ties in Fig. 6 line 3 (equal total frequency) keep the input row order (stable sort).
5. Empty groups certify 0.
"""

import numpy as np

from .segments import ranges

from ..errors import DeidError, INVALID_PARAMETER_VALUE

UNBOUNDED_L = 2**31 - 1          # certificate when no allowed deletion set deletes the group
EXACT_MAX_ROWS = 48              # exact search: at most this many distinct rows per group ...
EXACT_MAX_NODES = 200_000        # ... and this many search nodes
PHASE2_MAX_SCAN = 1 << 16        # Fig. 7: candidate rows examined after Fig. 6 (per group) ...
PHASE2_MAX_KEEP = 1024           # ... and rows added to C
PHASE2_MAX_WIDTH = 128           # Fig. 7: length of the top-frequency list (caps the certificate)

_NO_LIMIT = UNBOUNDED_L


# --------------------------------------------------------------------------------------------
# input handling
# --------------------------------------------------------------------------------------------

def as_codes(codes):
    """Return ``codes`` as a C-contiguous int64 array of shape (m, s)."""
    arr = np.asarray(codes)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        "sensitive codes must be a 2-D array (rows x attributes)",
                        hint="pass one integer column per sensitive attribute")
    if arr.shape[1] == 0:
        raise DeidError(INVALID_PARAMETER_VALUE, "at least one sensitive attribute is required",
                        hint="list the sensitive columns of the release")
    if arr.dtype.kind not in "iub":
        raise DeidError(INVALID_PARAMETER_VALUE, "sensitive values must be integer codes",
                        hint="encode sensitive values as integers (NULL is just another code)")
    return np.ascontiguousarray(arr, dtype=np.int64)


def column_caps(column_l, s):
    """Per-attribute deletion limits (001 Def. 7) as an int64 array, or None without limits."""
    if not column_l:
        return None
    caps = np.full(s, _NO_LIMIT, dtype=np.int64)
    for key, value in dict(column_l).items():
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)) \
                or not 0 <= int(key) < s:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"column_l key {key!r} is not a sensitive attribute index",
                            hint=f"use attribute indexes 0..{s - 1}")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or int(value) < 0:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"column_l[{key}] = {value!r} must be an integer >= 0",
                            hint="L_i is the largest number of values an attacker may delete "
                                 "from attribute i (001 Def. 7)")
        caps[int(key)] = int(value)
    return caps


def dense_columns(codes):
    """Map each column to codes 0..V-1: returns (list of contiguous 1-D columns, V per column).

    Columns use the smallest integer type that holds them (all internal functions take this
    list of columns).
    """
    m, s = codes.shape
    cols = []
    sizes = np.zeros(s, dtype=np.int64)
    for a in range(s):
        col = codes[:, a]
        if m and (col.min() < 0 or col.max() >= 2 * m + 64):
            uniq, col = np.unique(col, return_inverse=True)
            sizes[a] = uniq.size
        else:
            sizes[a] = int(col.max()) + 1 if m else 0
        cols.append(np.ascontiguousarray(col, dtype=_code_dtype(int(sizes[a]))))
    return cols, sizes


def _code_dtype(size):
    for dtype in (np.uint8, np.int16, np.int32):
        if size <= np.iinfo(dtype).max:
            return dtype
    return np.int64


def _index_dtype(top):
    return np.int32 if top < 2**31 - 1 else np.int64


def _pair_index(gid, col, n_groups, size):
    """Index of each row's (group, value) pair, the number of pairs, and each pair's group
    (None: pair // size)."""
    size = max(int(size), 1)
    bins = n_groups * size
    if bins <= max(4 * gid.size, 1 << 20):
        it = np.intp if gid.dtype == np.intp else _index_dtype(bins)
        key = gid.astype(it, copy=False) * it(size)
        key += col
        return key, bins, None
    key = gid.astype(np.int64) * size + col
    uniq, inv = np.unique(key, return_inverse=True)
    return inv.astype(_index_dtype(uniq.size)), uniq.size, uniq // size


def _order_by_group_then(gid, f, n_groups):
    """Stable permutation sorting rows by (gid, f): LSD radix sort over the 16-bit digits of
    the combined key (gid << bits(f)) | f (numpy sorts uint16 keys by radix)."""
    fbits = int(f.max()).bit_length() if f.size else 0
    total = fbits + int(n_groups - 1).bit_length()
    n = gid.size
    if total == 0:
        return np.arange(n, dtype=_index_dtype(n))
    if total <= 16:
        key = f.astype(np.uint16)
        if n_groups > 1:
            key |= (gid.astype(np.uint16) << np.uint16(fbits))
        return np.argsort(key, kind="stable").astype(_index_dtype(n), copy=False)
    if fbits <= 16 and n_groups <= 1 << 16:             # one pass on f, one on gid
        perm = np.argsort(f.astype(np.uint16), kind="stable")
        perm = perm[np.argsort(gid.astype(np.uint16)[perm], kind="stable")]
        return perm.astype(_index_dtype(n), copy=False)
    key = f.astype(np.int64)
    if n_groups > 1:
        key |= gid.astype(np.int64) << fbits
    digits = [key.astype(np.uint16)]                  # astype keeps the low 16 bits
    for shift in range(16, total, 16):
        digits.append((key >> shift).astype(np.uint16))
    perm = np.argsort(digits[0], kind="stable")
    for digit in digits[1:]:
        perm = perm[np.argsort(digit[perm], kind="stable")]
    return perm.astype(_index_dtype(n), copy=False)


def _order_grouped_then(gid, f, n_groups):
    """:func:`_order_by_group_then` for rows already in group order (``gid`` non-decreasing):
    when (gid, f) needs more than 16 bits, runs of consecutive groups whose (local group, f)
    key fits 16 bits are sorted with one radix pass each instead of two passes over all."""
    fbits = int(f.max()).bit_length() if f.size else 0
    gbits = int(n_groups - 1).bit_length()
    room = 16 - fbits
    if gbits <= room or room < 4 or (n_groups >> room) > 64:
        return _order_by_group_then(gid, f, n_groups)
    n = gid.size
    per = 1 << room                                        # groups per run
    cuts = np.searchsorted(gid, np.arange(per, n_groups, per, dtype=np.int64))
    bounds = [0] + cuts.tolist() + [n]
    perm = np.empty(n, dtype=_index_dtype(n))
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        if lo == hi:
            continue
        key = (gid[lo:hi] - gid.dtype.type(i * per)).astype(np.uint16)
        key <<= np.uint16(fbits)
        key |= f[lo:hi].astype(np.uint16)
        perm[lo:hi] = np.argsort(key, kind="stable")
        perm[lo:hi] += lo
    return perm


# --------------------------------------------------------------------------------------------
# vectorised greedy certificate (001 Figs. 6-8) for many groups at once
# --------------------------------------------------------------------------------------------

def certify_dense(gid, dense, sizes, n_groups, caps=None, max_l=None):
    """Greedy L certificate of every group 0..n_groups-1 (internal, dense codes).

    ``gid``: int (n,), ``dense``: list of s columns from :func:`dense_columns` with column
    sizes ``sizes``; ``caps`` from :func:`column_caps`; ``max_l`` stops as soon as a group
    reaches it (the result is then min(certificate, max_l)).
    """
    s = len(dense)
    n = gid.size
    G = int(n_groups)
    cert = np.zeros(G, dtype=np.int64)
    if n == 0 or G == 0:
        return cert
    grouped = G == 1 or bool((gid[1:] >= gid[:-1]).all())   # rows already in group order
    if grouped:
        gsize = np.diff(np.searchsorted(gid, np.arange(G + 1, dtype=gid.dtype)))
    else:
        gsize = np.bincount(gid, minlength=G).astype(np.int64)
    if caps is None and max_l is not None and _capped_fits(G, sizes, n):
        return _capped_count(gid, dense, sizes, G, gsize, int(max_l), grouped)
    pks, npairs, pgroups, counts = [], [], [], []
    f = np.zeros(n, dtype=_index_dtype(n * s))
    gid_p = gid.astype(np.intp, copy=False)
    for a in range(s):
        pk, npair, pgroup = _pair_index(gid_p, dense[a], G, sizes[a])
        cnt = np.bincount(pk, minlength=npair)
        f += np.take(cnt.astype(f.dtype, copy=False), pk)   # Fig. 6 lines 1-2
        pks.append(pk)
        npairs.append(npair)
        pgroups.append(pgroup)
        counts.append(cnt)
    if caps is None:                                  # Fig. 6 only: count the rows of C
        count = _independent_count(gid, f, pks, npairs, gsize, G, max_l, s)
        return count if max_l is None else np.minimum(count, int(max_l))
    order = _order_by_group_then(gid, f, G)          # Fig. 6 line 3 (stable)
    srt = _Sorted(order, gid, pks)
    gstart = np.cumsum(gsize) - gsize

    target = np.full(G, _NO_LIMIT if max_l is None else int(max_l), dtype=np.int64)
    unbounded = np.zeros(G, dtype=bool)
    if caps is not None:
        target, unbounded = _column_targets(caps, counts, pgroups, sizes, G, target)

    count, picked = _independent_rows(srt, npairs, gstart, gsize, G, target)
    cert = np.minimum(count, target)
    if caps is not None:
        width = min(int(target[cert < target].max(initial=1)) - 1, PHASE2_MAX_WIDTH)
        need = np.flatnonzero((cert < np.minimum(target, width + 1)) & (gsize > cert))
        if need.size:
            cert[need] = _grow_column_wise(need, G, srt, npairs, gstart, gsize, picked,
                                           np.minimum(target[need], width + 1), caps, width)
        cert[unbounded & (cert >= target)] = UNBOUNDED_L
    if max_l is not None:
        cert = np.minimum(cert, int(max_l))
    return cert


CAPPED_LOCAL_PAIRS = 1 << 21     # (group, value) tables above this: work in group order


def _capped_fits(G, sizes, n):
    """Whether :func:`_capped_count` can index (group, value) pairs directly."""
    return G * max(int(np.max(sizes)), 1) <= max(8 * n, 1 << 22)


def _capped_count(gid, dense, sizes, G, gsize, limit, grouped=False):
    """001 Fig. 6 without column limits, capped: min(|C|, ``limit``) for every group.

    Same answer as the sequential greedy (the tests compare it with :func:`greedy_trace`):

    * Fig. 6 lines 1-2: the total frequency f of every row from one histogram of
      (group, value) per attribute.  When those tables are large, the rows are first put in
      group order (stable, so each group keeps its rows in input order and the tie order of
      Fig. 6 line 3 is unchanged): the histogram and f then touch one group's small part of
      the table at a time instead of the whole table at random.  ``grouped``: the rows
      already are in group order (each group's rows in input order).
    * Fig. 6 lines 3-8 in rounds: a round takes, for every group still short of ``limit``, its
      rows with below < f <= top (inclusive thresholds never split rows of equal f), sorts
      them by (group, f, row) and continues the greedy from the state (values used, count)
      of the earlier rounds.  Every round is therefore exactly the next slice of each group's
      Fig. 6 order.  The first threshold of a group aims at an eighth of its rows (at
      least 4 x ``limit``; estimated from a histogram of f, on a 1/16 sample for large
      groups); it doubles while a group needs more rows.  Thresholds only affect speed.
      Groups of at most 8 x ``limit`` rows take all their rows in the first round.  After the
      first sort, only the first sixth of each group's sorted rows (at least 3 x ``limit``)
      is scanned, and the rest -- the next slice of the same sorted order -- only for the
      groups still short of ``limit`` (the greedy typically needs 12-16 % of a large group,
      about 2-3 x ``limit`` rows of a small one).  Rows already in group order are sorted by
      :func:`_order_grouped_then` (one 16-bit radix pass per run of groups).
    * Inside a round (:func:`_pick_sorted`) every row whose values do not occur in any
      earlier live row of its group is certainly picked by the sequential greedy, so all of
      them are taken at once and the rows sharing a value with them die; repeat.  Every
      repetition picks at least one row in every group still below ``limit``, so a round
      takes at most ``limit`` repetitions.
    """
    n = gid.size
    s = len(dense)
    # 32-bit indices where they fit: fewer bytes of fresh memory per call
    it = _index_dtype(G * max(int(np.max(sizes)), 1))
    if grouped:
        cols = dense
        gid = gid.astype(it, copy=False)
        grouped = G > 1
    elif G > 1 and G * int(np.max(sizes)) > CAPPED_LOCAL_PAIRS:
        grouped = True
        order = _order_by_group_then(gid, np.zeros(n, dtype=np.uint8), G)
        gid = np.repeat(np.arange(G, dtype=it), gsize)
        cols = [np.take(c, order) for c in dense]
    else:
        cols = dense
        gid = gid.astype(it, copy=False)
    f = np.zeros(n, dtype=_index_dtype(s * int(gsize.max()) + 1))
    pks, npairs = [], []
    for a in range(s):
        size = max(int(sizes[a]), 1)
        if G == 1:
            pk = cols[a]
        else:
            pk = gid * it(size)
            pk += cols[a]
        cnt = np.bincount(pk, minlength=G * size)
        f += np.take(cnt.astype(f.dtype, copy=False), pk)   # Fig. 6 lines 1-2
        pks.append(pk)
        npairs.append(G * size)
    target = np.full(G, limit, dtype=np.int64)
    count = np.zeros(G, dtype=np.int64)
    if limit <= 0:
        return count
    used = [np.zeros(p, dtype=bool) for p in npairs]
    first_at = [np.empty(p, dtype=np.int32) for p in npairs]
    # first threshold per group: the lowest buckets of f (relative to the group's size) holding
    # about `want` rows (an eighth of the group, at least 4 x limit; the greedy typically
    # needs 10-30 %), counted on every row, or on every 16th row when the groups are large;
    # groups of at most 2 x want rows take all their rows
    top = np.full(G, _NO_LIMIT, dtype=np.int64)
    want = np.maximum(4 * limit, gsize // 8)
    big = gsize > 2 * want
    if big.any():
        nb = int(np.count_nonzero(big))
        step = 16 if n >= 16 * 256 * nb else 1
        top[big] = _sampled_thresholds(gid, f, gsize, big, s, step, 256 if step > 1 else 32,
                                       want[big])
    below = np.full(G, -1, dtype=np.int64)
    scanned = np.zeros(G, dtype=np.int64)
    gstart = np.cumsum(gsize) - gsize
    rows = None
    first = True
    while True:
        if rows is None:                                    # first round: every row
            sel = f <= (top[0] if G == 1 else np.take(top, gid))
            rows = np.flatnonzero(sel)
        else:                                               # the rows of groups needing more
            if grouped:
                rows = ranges(gstart[more], gsize[more])
            else:
                rows = np.flatnonzero(np.take(more, gid))
            fr = f[rows]
            g_r = gid[rows]
            rows = rows[(fr > np.take(below, g_r)) & (fr <= np.take(top, g_r))]
        g_sub = gid[rows] if G > 1 else np.zeros(rows.size, dtype=np.uint8)
        per = np.bincount(g_sub, minlength=G)
        scanned += per
        sort = _order_grouped_then if grouped else _order_by_group_then
        rows = rows[sort(g_sub, f[rows], G)]                 # Fig. 6 line 3 (stable)
        if first:
            # the first `quota` rows of every group's Fig. 6 order now, the rest (already in
            # order) only if the group still needs them
            first = False
            quota = np.maximum(3 * limit, gsize // 6)
            if (quota < per).any():
                rank = np.arange(rows.size, dtype=np.intp)
                rank -= np.repeat(np.cumsum(per) - per, per)
                now = rank < np.repeat(quota, per)
                later = rows[~now]
                _pick_sorted(rows[now], gid, pks, target, used, first_at, count)
                later = later[np.take(count < target, gid[later])]
                rows = later
        _pick_sorted(rows, gid, pks, target, used, first_at, count)
        more = (count < target) & (scanned < gsize)
        if not more.any():
            return np.minimum(count, limit)
        below = np.where(more, top, _NO_LIMIT)
        top = np.where(more, np.minimum(2 * top, _NO_LIMIT), _NO_LIMIT)


def _pick_sorted(rows, gid, pks, target, used, first_at, count):
    """Continue 001 Fig. 6 over ``rows`` (sorted by group, f, row) until every group reaches
    ``target`` or runs out of rows; updates ``used`` (values taken) and ``count`` in place.

    A live row none of whose values occurs in an earlier live row of its group is picked by the
    sequential greedy (no earlier pick can hold its values), so all such rows are picked at
    once; rows sharing a value with a pick die.  (A pick past ``target`` is a pick the uncapped
    greedy makes too, so min(count, target) is the capped greedy's answer.)"""
    G = count.size
    grp = gid[rows] if G > 1 else np.zeros(rows.size, dtype=np.intp)
    keys = [pk[rows] for pk in pks]
    live = np.take(count < target, grp)
    for a, key in enumerate(keys):
        live &= ~np.take(used[a], key)
    while True:
        grp = grp[live]
        if grp.size == 0:
            return
        keys = [key[live] for key in keys]
        idx = np.arange(grp.size, dtype=np.int32)
        sure = np.ones(grp.size, dtype=bool)
        for a, key in enumerate(keys):
            first_at[a][key[::-1]] = idx[::-1]          # last write wins: first occurrence
            sure &= first_at[a][key] == idx
        for a, key in enumerate(keys):
            used[a][key[sure]] = True
        count += np.bincount(grp[sure], minlength=G)
        live = ~sure
        live &= np.take(count < target, grp)
        for a, key in enumerate(keys):
            live &= ~np.take(used[a], key)


def _column_targets(caps, counts, pgroups, sizes, G, target):
    """Per-group search target under column limits and whether reaching it means 'unbounded'.

    If some attribute i has L_i >= its number of distinct values d_i, deleting all of it is
    allowed, so no certificate can exceed min d_i.  Otherwise every allowed deletion set has at
    most S = sum_i min(L_i, d_i) values, and certifying S + 1 means no allowed set deletes the
    group (UNBOUNDED_L).
    """
    best = np.full(G, _NO_LIMIT, dtype=np.int64)
    total = np.zeros(G, dtype=np.int64)
    for a, cnt in enumerate(counts):
        present = np.flatnonzero(cnt)
        grp = present // max(int(sizes[a]), 1) if pgroups[a] is None else pgroups[a][present]
        distinct = np.bincount(grp, minlength=G).astype(np.int64)
        deletable = caps[a] >= distinct
        best = np.where(deletable, np.minimum(best, distinct), best)
        total += np.minimum(caps[a], distinct)
    unbounded = best == _NO_LIMIT
    limit = np.where(unbounded, total + 1, best)
    unbounded &= limit <= target
    return np.minimum(target, limit), unbounded


class _Sorted:
    """Rows in Fig. 6 order, read lazily: position p is row order[p]."""

    def __init__(self, order, gid, pks):
        self.order, self.gid, self.pks = order, gid, pks

    def group(self, pos):
        return self.gid[self.order[pos]]

    def keys(self, pos):
        rows = self.order[pos]
        return [pk[rows] for pk in self.pks]


def _independent_count(gid, f, pks, npairs, gsize, G, max_l, s):
    """001 Fig. 6 for all groups without column limits: the number of rows of C per group,
    stopping at ``max_l`` (None: no limit).  Same result as :func:`_independent_rows`.

    The greedy scans each group's rows by increasing total frequency f (ties: input order).
    With a limit it usually stops long before the end of a large group, so large groups scan
    their rows in rounds: the rows with below < f <= top (thresholds per group; the first one
    estimated from a 1/16 sample, then doubled while the group needs more rows).  Each round is
    an exact slice of the group's Fig. 6 order and continues from the greedy's state, so the
    result is the sequential greedy's.
    """
    limit = _NO_LIMIT if max_l is None else int(max_l)
    target = np.full(G, limit, dtype=np.int64)
    used = [np.zeros(p, dtype=bool) for p in npairs]
    count = np.zeros(G, dtype=np.int64)
    if limit <= 0:
        return count
    top = None
    if max_l is not None:
        W = 6 * limit + 8
        big = gsize > 4 * W
        if big.any():
            # first threshold per big group from a 1/16 sample of the rows: the lowest buckets
            # of f (relative to the group's size) holding about 2W sampled-and-scaled rows
            top = np.full(G, _NO_LIMIT, dtype=np.int64)
            top[big] = _sampled_thresholds(gid, f, gsize, big, s, 16, 256, 2 * W)
    if top is None:
        _scan_sorted(None, gid, f, pks, npairs, G, target, used, count)
        return count
    # rows with below < f <= top, in rounds; a group's threshold doubles while it needs more
    below = np.full(G, -1, dtype=np.int64)
    scanned = np.zeros(G, dtype=np.int64)
    while True:
        if G == 1:
            sel = f <= top[0]
            if below[0] >= 0:
                sel &= f > below[0]
        else:
            sel = f <= np.take(top, gid)
            if below.max() >= 0:
                sel &= f > np.take(below, gid)
        scanned += _scan_sorted(np.flatnonzero(sel), gid, f, pks, npairs, G, target, used, count)
        more = (count < target) & (scanned < gsize)
        if not more.any():
            return count
        below = np.where(more, top, _NO_LIMIT)
        top = np.where(more, np.minimum(2 * top, _NO_LIMIT), _NO_LIMIT)


def _sampled_thresholds(gid, f, gsize, big, s, step, B, want):
    """Per big group, a threshold of f below which about ``want`` of its rows lie: a
    histogram of every ``step``-th row over B buckets of f relative to the group's size
    (f <= s * size), cut where the scaled count reaches ``want`` (a scalar or one per big
    group).  Only speed depends on it: rows above the threshold are scanned later.

    Bucket of f: (f * mult) >> 16 with mult = B * 2^16 // (s * size + 1), in 32-bit integers
    (at most B * 2^16 < 2^31)."""
    G = gsize.size
    nb = int(np.count_nonzero(big))
    span = s * gsize + 1
    mult = np.where(big, (B << 16) // span, 0)
    clip = bool((big & (mult == 0)).any())                  # huge groups: clip their buckets
    mult = np.where(big, np.maximum(mult, 1), 0).astype(np.int32)
    base = np.full(G, nb * B, dtype=np.int32)                # big groups 0..nb-1, others nb
    base[big] = np.arange(nb, dtype=np.int32) * B
    g = gid[::step]
    key = np.take(mult, g)
    key *= f[::step]
    key >>= 16
    if clip:
        np.minimum(key, B - 1, out=key)
    key += np.take(base, g)
    cum = np.cumsum(np.bincount(key, minlength=(nb + 1) * B).reshape(nb + 1, B), axis=1)
    last = (cum[:nb] * step < np.reshape(want, (-1, 1))).sum(axis=1)
    # rows of bucket <= last have f * mult < (last + 1) << 16
    return ((last + 1) << 16) // mult[big].astype(np.int64)


LOCKSTEP_STEPS = 256


def _scan_sorted(rows, gid, f, pks, npairs, G, target, used, count):
    """Continue Fig. 6 over ``rows`` (None: all rows; ascending), sorted by (group, f, row):
    the first LOCKSTEP_STEPS rows of every group in lockstep, the rest by windows.  Updates
    ``used`` and ``count``; returns the number of rows given per group."""
    if rows is None:
        g_sub, f_sub = gid, f
    else:
        g_sub, f_sub = gid[rows], f[rows]
    order = _order_by_group_then(g_sub, f_sub, G)
    if rows is not None:
        order = rows[order]
    size = np.bincount(g_sub, minlength=G).astype(np.int64)
    start = np.cumsum(size) - size
    steps = _lockstep(order, gid, pks, start, size, target, used, count)
    more = (count < target) & (size > steps)
    if more.any():
        srt = _Sorted(order, gid, pks)
        rest = np.where(more, size - steps, 0)
        count[:], _ = _independent_rows(srt, npairs, start + steps, rest, G, target,
                                        used=used, count=count)
    return size


def _lockstep(order, gid, pks, start, size, target, used, count):
    """Fig. 6 on the first rows of the sorted segments, one row of every active group per
    step (rows of distinct groups never share a (group, value) pair).  Returns the number of
    steps taken (every group's rows before that position have been scanned)."""
    act = np.flatnonzero((size > 0) & (count < target))
    if act.size == 0:
        return 0
    act = act[np.argsort(-size[act], kind="stable")]
    depth = min(LOCKSTEP_STEPS, int(size[act[0]]))
    finite = bool((target[act] < _NO_LIMIT).any())
    st, neg = start[act], -size[act]
    for t in range(depth):
        if finite and t and t % 4 == 0:
            keep = count[act] < target[act]
            if not keep.all():
                act, st, neg = act[keep], st[keep], neg[keep]
                if act.size == 0:
                    return depth
        A = int(np.searchsorted(neg, -t, "left"))          # groups with more than t rows
        if A == 0:
            return depth
        g = act[:A]
        r = order[st[:A] + t]
        keys = [pk[r] for pk in pks]
        free = ~used[0][keys[0]]
        for a in range(1, len(keys)):
            free &= ~used[a][keys[a]]
        if finite:
            free &= count[g] < target[g]
        for a, k in enumerate(keys):
            used[a][k[free]] = True
        count[g[free]] += 1
    return depth


def _independent_rows(srt, npairs, gstart, gsize, G, target, used=None, count=None):
    """001 Fig. 6 for all groups: rows (in sorted order) sharing no value, up to ``target``.

    Rows are scanned in windows of each group's sorted order.  Inside a window, every alive row
    whose values do not occur in any earlier alive row of its group is certainly picked by the
    sequential greedy, so all of them are taken at once; rows conflicting with the picks die.
    Returns (count per group, picked mask over sorted positions).  ``used`` (values taken, per
    attribute, updated in place) and ``count`` continue an earlier scan of the same groups.
    """
    n = srt.order.size
    count = np.zeros(G, dtype=np.int64) if count is None else count.copy()
    picked = np.zeros(n, dtype=bool)
    if used is None:
        used = [np.zeros(p, dtype=bool) for p in npairs]
    first_at = [np.empty(p, dtype=np.int32) for p in npairs]
    finite = bool((target < _NO_LIMIT).any())
    active = (gsize > 0) & (target > 0)
    lo = 0
    width = int(min(max(int(target.max()), 4), 64))
    while True:
        groups = np.flatnonzero(active)
        if groups.size == 0:
            break
        hi = lo + width
        pos = ranges(gstart[groups] + lo, np.minimum(gsize[groups], hi) - lo)
        keys = srt.keys(pos)
        alive = np.ones(pos.size, dtype=bool)
        for a, key in enumerate(keys):
            alive &= ~used[a][key]
        pos, grp = pos[alive], srt.group(pos[alive])
        keys = [key[alive] for key in keys]
        while pos.size:
            idx = np.arange(pos.size, dtype=np.int32)
            sure = np.ones(pos.size, dtype=bool)
            for a, key in enumerate(keys):
                first_at[a][key[::-1]] = idx[::-1]     # last write wins: first occurrence
                sure &= first_at[a][key] == idx
            picked[pos[sure]] = True
            for a, key in enumerate(keys):
                used[a][key[sure]] = True
            count += np.bincount(grp[sure], minlength=G)
            rest = ~sure
            if finite:
                rest &= count[grp] < target[grp]
            for a, key in enumerate(keys):
                rest &= ~used[a][key]
            pos, grp = pos[rest], grp[rest]
            keys = [key[rest] for key in keys]
        active &= (gsize > hi) & (count < target)
        lo = hi
        width *= 2
    return count, picked


def _grow_column_wise(groups, G, srt, npairs, gstart, gsize, picked, t, caps, width):
    """001 Fig. 7 for the given groups: add rows to C in sorted order, keep a row iff the
    certificate x(C) does not drop; stop at x = t.  Returns the final x per group."""
    B = groups.size
    s = len(srt.pks)
    offsets = np.concatenate([[0], np.cumsum(npairs)[:-1]]).astype(np.int64)
    cnt_c = np.zeros(int(np.sum(npairs)), dtype=np.int64)
    W = int(width)
    top_p = np.full((B, W), -1, dtype=np.int64)     # merged top list: global pair id
    top_a = np.full((B, W), -1, dtype=np.int64)     # attribute of the entry
    top_c = np.zeros((B, W), dtype=np.int64)        # its frequency in C
    n_c = np.zeros(B, dtype=np.int64)
    x = np.zeros(B, dtype=np.int64)
    limited = [a for a in range(s) if caps[a] < W]
    attr_row = np.arange(s, dtype=np.int64)
    slot = np.arange(W, dtype=np.int64)

    def evaluate(bs, rows):
        new_p = np.stack([k + offsets[a] for a, k in enumerate(srt.keys(rows))], axis=1)
        new_c = cnt_c[new_p] + 1
        tp, tc = top_p[bs], top_c[bs]
        match = tp[:, :, None] == new_p[:, None, :]           # (N, W, s)
        dup = match.any(axis=1)
        hit = match.any(axis=2)
        tc = np.where(hit, (match * new_c[:, None, :]).sum(axis=2), tc)
        cand_p = np.concatenate([tp, np.where(dup, -1, new_p)], axis=1)
        cand_a = np.concatenate([top_a[bs], np.where(dup, -1, attr_row[None, :])], axis=1)
        cand_c = np.concatenate([tc, np.where(dup, 0, new_c)], axis=1)
        width_c = cand_c.shape[1]
        flat = np.argsort(-cand_c, axis=1, kind="stable")
        flat += (np.arange(bs.size) * width_c)[:, None]
        cand_p = cand_p.ravel()[flat]
        cand_a = cand_a.ravel()[flat]
        cand_c = cand_c.ravel()[flat]
        ok = cand_c > 0
        for a in limited:                           # at most L_a values of attribute a
            is_a = cand_a == a
            ok &= ~is_a | (np.cumsum(is_a, axis=1) <= caps[a])
        ok &= np.cumsum(ok, axis=1) <= W
        flat = np.argsort(~ok, axis=1, kind="stable")[:, :W]
        flat += (np.arange(bs.size) * width_c)[:, None]
        ok = ok.ravel()[flat]
        nt_p = np.where(ok, cand_p.ravel()[flat], -1)
        nt_a = np.where(ok, cand_a.ravel()[flat], -1)
        nt_c = np.where(ok, cand_c.ravel()[flat], 0)
        size = n_c[bs] + 1
        csum = np.cumsum(nt_c, axis=1)               # T_1 .. T_W
        n_sel = ok.sum(axis=1)
        j = ((csum < size[:, None]) & (slot[None, :] < n_sel[:, None])).sum(axis=1)
        j = np.where(csum[:, -1] < size, W, j)       # allowed values exhausted: T_j = T_all
        x_new = 1 + np.minimum(j, t[bs] - 1)
        return x_new, new_p, nt_p, nt_a, nt_c

    def commit(bs, x_new, new_p, nt_p, nt_a, nt_c):
        top_p[bs], top_a[bs], top_c[bs] = nt_p, nt_a, nt_c
        cnt_c[new_p.ravel()] += 1                    # distinct pairs: one row per group
        n_c[bs] += 1
        x[bs] = x_new

    gmap = np.full(G, -1, dtype=np.int64)
    gmap[groups] = np.arange(B)
    # C from Fig. 6, added one row per group per step (its x is computed on the way)
    pp = np.flatnonzero(picked)
    bi = gmap[srt.group(pp)]
    pp, bi = pp[bi >= 0], bi[bi >= 0]
    c1 = np.bincount(bi, minlength=B)
    rank = np.arange(pp.size) - (np.cumsum(c1) - c1)[bi]
    for k in range(int(c1.max(initial=0))):
        sel = rank == k
        bs, rows = bi[sel], pp[sel]
        commit(bs, *evaluate(bs, rows))
    # Fig. 7 lines 3-14: remaining rows in ascending total frequency.  Whether a candidate is
    # kept depends only on C and the candidate, so each group tests a batch of its next
    # candidates against the same C and keeps the first one that passes (the rows before it
    # are exactly the ones the sequential loop rejects).  Batches double while nothing passes.
    take = np.minimum(gsize[groups], c1 + PHASE2_MAX_SCAN)
    pos = ranges(gstart[groups], take)
    pos = pos[~picked[pos]]
    bpos = gmap[srt.group(pos)]
    count = np.bincount(bpos, minlength=B)
    rlen = np.minimum(count, PHASE2_MAX_SCAN)
    rstart = np.cumsum(count) - count
    cursor = np.zeros(B, dtype=np.int64)
    batch = np.ones(B, dtype=np.int64)
    kept = np.zeros(B, dtype=np.int64)
    active = x < t
    while True:
        bs = np.flatnonzero(active & (cursor < rlen))
        if bs.size == 0:
            break
        k = np.minimum(batch[bs], rlen[bs] - cursor[bs])
        flat_b = np.repeat(bs, k)
        offs = ranges(cursor[bs], k)
        x_new, new_p, nt_p, nt_a, nt_c = evaluate(flat_b, pos[rstart[flat_b] + offs])
        ok = np.flatnonzero(x_new >= x[flat_b])
        first = ok[np.unique(flat_b[ok], return_index=True)[1]] if ok.size else ok
        won = flat_b[first]
        if first.size:
            commit(won, x_new[first], new_p[first], nt_p[first], nt_a[first], nt_c[first])
        kept[won] += 1
        cursor[bs] += k                                 # no pass: the whole batch is rejected
        cursor[won] = offs[first] + 1                   # pass: resume after the kept row
        batch[bs] = np.minimum(batch[bs] * 2, 4096)
        batch[won] = 1
        active[bs] = (x[bs] < t[bs]) & (kept[bs] < PHASE2_MAX_KEEP)
    return x


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------

def _check_l(L):
    if isinstance(L, (bool, np.bool_)) or not isinstance(L, (int, np.integer)) or L < 1:
        raise DeidError(INVALID_PARAMETER_VALUE, f"L must be an integer >= 1, got {L!r}",
                        hint="L is the number of sensitive values an attacker must delete "
                             "to delete every row of a group (001 Def. 6)")
    return int(L)


def _group_ids(group_id, n, n_groups):
    gid = np.asarray(group_id).ravel()
    if gid.size != n:
        raise DeidError(INVALID_PARAMETER_VALUE, "group_id and codes have different lengths",
                        hint="pass one group id per row of codes")
    if gid.size and gid.dtype.kind not in "iu":
        raise DeidError(INVALID_PARAMETER_VALUE, "group ids must be integers",
                        hint="number groups 0..G-1")
    gid = gid.astype(np.int64, copy=False)
    if gid.size and gid.min() < 0:
        raise DeidError(INVALID_PARAMETER_VALUE, "group ids must be >= 0",
                        hint="number groups 0..G-1")
    G = (int(gid.max()) + 1 if gid.size else 0) if n_groups is None else int(n_groups)
    if gid.size and gid.max() >= G:
        raise DeidError(INVALID_PARAMETER_VALUE, "group id out of range for n_groups",
                        hint="number groups 0..n_groups-1")
    return gid, G


def certified_l_per_group(group_id, codes, column_l=None, *, n_groups=None, max_l=None):
    """Greedy L certificate (001 Fig. 6, or Figs. 7-8 with ``column_l``) of each group.

    Returns an int64 array of length ``n_groups`` (default: max(group_id) + 1): for group g the
    largest L for which :func:`greedy_check` on the rows of g says yes (capped at ``max_l`` if
    given, which makes a ">= L" test cheaper; ``UNBOUNDED_L`` when the column limits forbid
    deleting the whole group; 0 for an empty group).
    """
    codes = as_codes(codes)
    gid, G = _group_ids(group_id, codes.shape[0], n_groups)
    if max_l is not None:
        max_l = _check_l(max_l)
    dense, sizes = dense_columns(codes)
    caps = column_caps(column_l, codes.shape[1])
    return certify_dense(gid, dense, sizes, G, caps, max_l)


def greedy_check(codes, L, column_l=None):
    """001 Fig. 6 (and Figs. 7-8 with ``column_l``): True only if the group needs >= L deletions.

    Sound (Theorems 4-6): a True answer is always right; False may mean "could not certify".
    """
    L = _check_l(L)
    codes = as_codes(codes)
    gid = np.zeros(codes.shape[0], dtype=np.int64)
    return bool(certified_l_per_group(gid, codes, column_l, n_groups=1, max_l=L)[0] >= L)


def certified_l(codes, column_l=None):
    """Largest L for which :func:`greedy_check` says yes (the number of distinct values when
    there is one sensitive attribute and no limit)."""
    codes = as_codes(codes)
    gid = np.zeros(codes.shape[0], dtype=np.int64)
    return int(certified_l_per_group(gid, codes, column_l, n_groups=1)[0])


def greedy_trace(codes, column_l=None, L=None):
    """Literal row-at-a-time 001 Fig. 6 / Fig. 7 (reference for tests, O(m^2) per group).

    Returns a dict: ``order`` (Fig. 6 line 3), ``independent`` (Fig. 6's C, in pick order),
    ``rows`` (final C), ``history`` (list of (row, x) for every row Fig. 7 kept) and
    ``certified`` (the certificate, capped at L when L is given).
    """
    codes = as_codes(codes)
    m, s = codes.shape
    caps = column_caps(column_l, s)
    freq = {}
    for row in codes:
        for a in range(s):
            freq[(a, int(row[a]))] = freq.get((a, int(row[a])), 0) + 1
    total = [sum(freq[(a, int(row[a]))] for a in range(s)) for row in codes]
    order = sorted(range(m), key=lambda i: (total[i], i))
    target = _NO_LIMIT if L is None else _check_l(L)
    chosen, taken = [], set()
    for i in order:
        vals = {(a, int(codes[i, a])) for a in range(s)}
        if not vals & taken:
            chosen.append(i)
            taken |= vals
            if len(chosen) >= target:
                break
    result = {"order": order, "independent": list(chosen), "rows": list(chosen),
              "history": [], "certified": min(len(chosen), target)}
    if caps is None or len(chosen) >= target or m == 0:
        return result

    def x_of(rows):
        cnt = {}
        for i in rows:
            for a in range(s):
                cnt[(a, int(codes[i, a]))] = cnt.get((a, int(codes[i, a])), 0) + 1
        allowed, per_attr = [], {}
        for (a, v), c in sorted(cnt.items(), key=lambda kv: -kv[1]):
            if per_attr.get(a, 0) < caps[a]:
                per_attr[a] = per_attr.get(a, 0) + 1
                allowed.append(c)
        if sum(allowed) < len(rows):
            return _NO_LIMIT                         # allowed values cannot delete C
        run, j = 0, 0
        for c in allowed[:PHASE2_MAX_WIDTH]:
            run += c
            if run >= len(rows):
                break
            j += 1
        return 1 + j

    x = x_of(chosen)
    in_c = set(chosen)
    rest = [i for i in order if i not in in_c][:PHASE2_MAX_SCAN]
    rows = list(chosen)
    for i in rest:
        if x >= target or len(rows) - len(chosen) >= PHASE2_MAX_KEEP:
            break
        x_new = x_of(rows + [i])
        if x_new >= x:
            rows.append(i)
            x = x_new
            result["history"].append((i, min(x, target)))
    result["rows"] = rows
    best = min(x, target)
    if best == _NO_LIMIT:
        best = UNBOUNDED_L
    result["certified"] = best
    return result


def exact_min_deletions(codes, column_l=None):
    """Exact minimum number of (attribute, value) deletions that delete every row.

    Branch and bound over the hitting-set formulation (001 Theorem 3), honouring the column
    limits; returns ``UNBOUNDED_L`` when the limits make it impossible.  Groups with more than
    ``EXACT_MAX_ROWS`` distinct rows, or searches exceeding ``EXACT_MAX_NODES`` nodes, raise
    DeidError(INVALID_PARAMETER_VALUE).
    """
    codes = as_codes(codes)
    s = codes.shape[1]
    caps = column_caps(column_l, s)
    caps = [int(c) for c in caps] if caps is not None else [_NO_LIMIT] * s
    rows = np.unique(codes, axis=0) if codes.shape[0] else codes
    r = rows.shape[0]
    if r == 0:
        return 0
    if r > EXACT_MAX_ROWS:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"exact L check is limited to {EXACT_MAX_ROWS} distinct rows, got {r}",
                        hint="use certified_l() / greedy_check() for larger groups")
    # items: (attribute, value) -> bit mask of rows holding it
    item_attr, item_mask, row_items = [], [], [[] for _ in range(r)]
    for a in range(s):
        if caps[a] == 0:
            continue
        for v in np.unique(rows[:, a]):
            members = np.flatnonzero(rows[:, a] == v)
            row_idx = len(item_mask)
            item_attr.append(a)
            item_mask.append(sum(1 << int(i) for i in members))
            for i in members:
                row_items[int(i)].append(row_idx)
    full = (1 << r) - 1
    best = [_NO_LIMIT]
    nodes = [0]

    def uncovered_rows(uncovered, left):
        """(row, its bit, its items still allowed by `left`) of every uncovered row."""
        rem = uncovered
        while rem:
            low = rem & -rem
            rem ^= low
            i = low.bit_length() - 1
            yield i, low, [it for it in row_items[i] if left[item_attr[it]] > 0]

    def lower_bound(uncovered, left):
        # rows pairwise sharing no allowed item each need their own deletion
        lb, blocked = 0, 0
        for _, low, items in uncovered_rows(uncovered, left):
            if not items:
                return None                         # row cannot be deleted any more
            hit = 0
            for it in items:
                hit |= item_mask[it]
            if not blocked & low:
                lb += 1
                blocked |= hit
        return lb

    def search(uncovered, depth, left):
        nodes[0] += 1
        if nodes[0] > EXACT_MAX_NODES:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"exact L check exceeded {EXACT_MAX_NODES} search nodes",
                            hint="use certified_l() / greedy_check() for this group")
        if uncovered == 0:
            best[0] = min(best[0], depth)
            return
        lb = lower_bound(uncovered, left)
        if lb is None or depth + lb >= best[0]:
            return
        # branch on the uncovered row with the fewest allowed items
        pick, pick_items = None, None
        for i, _, items in uncovered_rows(uncovered, left):
            if pick_items is None or len(items) < len(pick_items):
                pick, pick_items = i, items
        pick_items.sort(key=lambda it: -bin(item_mask[it] & uncovered).count("1"))
        for it in pick_items:
            a = item_attr[it]
            left[a] -= 1
            search(uncovered & ~item_mask[it], depth + 1, left)
            left[a] += 1

    search(full, 0, list(caps))
    return int(best[0])


# --------------------------------------------------------------------------------------------
# Exponential-L baseline (001 "Experimental Evaluation", after Machanavajjhala et al. 2006)
# --------------------------------------------------------------------------------------------

def exponential_l_dense(gid, dense, sizes, n_groups):
    """Largest L such that, in each group, every sensitive attribute has >= L distinct values
    among the rows sharing any one combination of the other attributes' values (internal)."""
    s = len(dense)
    n = gid.size
    G = int(n_groups)
    if n == 0 or G == 0:
        return np.zeros(G, dtype=np.int64)
    gid = gid.astype(np.int64)
    shape = [G] + [max(int(v), 1) for v in sizes]
    if np.prod(np.array(shape, dtype=float)) <= 1 << 24:
        # presence cube group x value_0 x ... x value_{s-1}
        key = gid.copy()
        for a in range(s):
            key *= shape[a + 1]
            key += dense[a]
        cube = np.zeros(int(np.prod(shape)), dtype=bool)
        cube[key] = True
        cube = cube.reshape(shape)
        level = np.full(G, _NO_LIMIT, dtype=np.int64)
        for a in range(s):
            per_combo = cube.sum(axis=a + 1).reshape(G, -1)
            worst = np.where(per_combo > 0, per_combo, _NO_LIMIT).min(axis=1)
            level = np.minimum(level, worst)
    else:
        level = _exponential_l_sorted(gid, dense, sizes, G)
    level[np.bincount(gid, minlength=G) == 0] = 0
    return level


def _exponential_l_sorted(gid, dense, sizes, G):
    s = len(dense)
    level = np.full(G, _NO_LIMIT, dtype=np.int64)
    # one id per distinct (group, full tuple)
    tup = gid.copy()
    for a in range(s):
        tup = _combine(tup, dense[a], sizes[a])
    uniq_rows = np.unique(tup, return_index=True)[1]
    g_u = gid[uniq_rows]
    d_u = np.stack([np.asarray(c, dtype=np.int64)[uniq_rows] for c in dense], axis=1)
    for a in range(s):
        others = g_u.copy()
        for b in range(s):
            if b != a:
                others = _combine(others, d_u[:, b], sizes[b])
        # distinct tuples = distinct (others, value of a): count per "others" combination
        key_ids, inv = np.unique(others, return_inverse=True)
        per_combo = np.bincount(inv, minlength=key_ids.size)
        combo_group = np.zeros(key_ids.size, dtype=np.int64)
        combo_group[inv] = g_u
        worst = np.full(G, _NO_LIMIT, dtype=np.int64)
        np.minimum.at(worst, combo_group, per_combo)
        level = np.minimum(level, worst)
    return level


def _combine(ids, col, size):
    """Dense ids of (ids, col) pairs (re-densified to stay within int64)."""
    size = max(int(size), 1)
    top = int(ids.max()) + 1 if ids.size else 1
    if top * size < (1 << 62):
        key = ids * size + col
    else:
        _, ids = np.unique(ids, return_inverse=True)
        key = ids.astype(np.int64) * size + col
    _, inv = np.unique(key, return_inverse=True)
    return inv.astype(np.int64)


def exponential_l_per_group(group_id, codes, *, n_groups=None):
    """Exponential-L level of each group (the model of 001's baseline; >= L^s rows needed)."""
    codes = as_codes(codes)
    gid, G = _group_ids(group_id, codes.shape[0], n_groups)
    dense, sizes = dense_columns(codes)
    return exponential_l_dense(gid, dense, sizes, G)
