"""Shared helpers of the L-diversity checks (paper 001 "Our Model", Defs. 6-7).

Input validation (sensitive codes, L, group ids, the column limits of Def. 7), dense value
codes and small index dtypes, (group, value) pair keys, the stable (group, total frequency)
order of 001 Fig. 6 line 3, and the sampled frequency thresholds with which the Fig. 6
greedies scan large groups in rounds.  Used by every other module of the package.
"""

import numpy as np

from ....errors import DeidError, INVALID_PARAMETER_VALUE

UNBOUNDED_L = 2**31 - 1          # certificate when no allowed deletion set deletes the group

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


# --------------------------------------------------------------------------------------------
# dtypes and (group, value) pair keys
# --------------------------------------------------------------------------------------------

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
        index_t = np.intp if gid.dtype == np.intp else _index_dtype(bins)
        key = gid.astype(index_t, copy=False) * index_t(size)
        key += col
        return key, bins, None
    key = gid.astype(np.int64) * size + col
    uniq, inv = np.unique(key, return_inverse=True)
    return inv.astype(_index_dtype(uniq.size)), uniq.size, uniq // size


# --------------------------------------------------------------------------------------------
# 001 Fig. 6 line 3: stable order by (group, total frequency)
# --------------------------------------------------------------------------------------------

def _order_by_group_then(gid, freq, n_groups):
    """Stable permutation sorting rows by (gid, freq): LSD radix sort over the 16-bit digits
    of the combined key (gid << bits(freq)) | freq (numpy sorts uint16 keys by radix)."""
    fbits = int(freq.max()).bit_length() if freq.size else 0
    total = fbits + int(n_groups - 1).bit_length()
    n = gid.size
    if total == 0:
        return np.arange(n, dtype=_index_dtype(n))
    if total <= 16:
        key = freq.astype(np.uint16)
        if n_groups > 1:
            key |= (gid.astype(np.uint16) << np.uint16(fbits))
        return np.argsort(key, kind="stable").astype(_index_dtype(n), copy=False)
    if fbits <= 16 and n_groups <= 1 << 16:             # one pass on freq, one on gid
        perm = np.argsort(freq.astype(np.uint16), kind="stable")
        perm = perm[np.argsort(gid.astype(np.uint16)[perm], kind="stable")]
        return perm.astype(_index_dtype(n), copy=False)
    key = freq.astype(np.int64)
    if n_groups > 1:
        key |= gid.astype(np.int64) << fbits
    digits = [key.astype(np.uint16)]                  # astype keeps the low 16 bits
    for shift in range(16, total, 16):
        digits.append((key >> shift).astype(np.uint16))
    perm = np.argsort(digits[0], kind="stable")
    for digit in digits[1:]:
        perm = perm[np.argsort(digit[perm], kind="stable")]
    return perm.astype(_index_dtype(n), copy=False)


def _order_grouped_then(gid, freq, n_groups):
    """:func:`_order_by_group_then` for rows already in group order (``gid`` non-decreasing):
    when (gid, freq) needs more than 16 bits, runs of consecutive groups whose (local group,
    freq) key fits 16 bits are sorted with one radix pass each instead of two passes over all."""
    fbits = int(freq.max()).bit_length() if freq.size else 0
    gbits = int(n_groups - 1).bit_length()
    room = 16 - fbits
    if gbits <= room or room < 4 or (n_groups >> room) > 64:
        return _order_by_group_then(gid, freq, n_groups)
    n = gid.size
    per_run = 1 << room                                    # groups per run
    cuts = np.searchsorted(gid, np.arange(per_run, n_groups, per_run, dtype=np.int64))
    bounds = [0] + cuts.tolist() + [n]
    perm = np.empty(n, dtype=_index_dtype(n))
    for run in range(len(bounds) - 1):
        lo, hi = bounds[run], bounds[run + 1]
        if lo == hi:
            continue
        key = (gid[lo:hi] - gid.dtype.type(run * per_run)).astype(np.uint16)
        key <<= np.uint16(fbits)
        key |= freq[lo:hi].astype(np.uint16)
        perm[lo:hi] = np.argsort(key, kind="stable")
        perm[lo:hi] += lo
    return perm


# --------------------------------------------------------------------------------------------
# first thresholds of the round-by-round Fig. 6 scans
# --------------------------------------------------------------------------------------------

def _sampled_thresholds(gid, freq, gsize, big, s, step, n_buckets, want):
    """Per big group, a threshold of ``freq`` below which about ``want`` of its rows lie: a
    histogram of every ``step``-th row over ``n_buckets`` buckets of freq relative to the
    group's size (freq <= s * size), cut where the scaled count reaches ``want`` (a scalar or
    one per big group).  Only speed depends on it: rows above the threshold are scanned later.

    Bucket of freq: (freq * mult) >> 16 with mult = n_buckets * 2^16 // (s * size + 1), in
    32-bit integers (at most n_buckets * 2^16 < 2^31)."""
    n_groups = gsize.size
    n_big = int(np.count_nonzero(big))
    span = s * gsize + 1
    mult = np.where(big, (n_buckets << 16) // span, 0)
    clip = bool((big & (mult == 0)).any())                  # huge groups: clip their buckets
    mult = np.where(big, np.maximum(mult, 1), 0).astype(np.int32)
    base = np.full(n_groups, n_big * n_buckets, dtype=np.int32)   # big groups 0..n_big-1,
    base[big] = np.arange(n_big, dtype=np.int32) * n_buckets      # the others n_big
    sample_gid = gid[::step]
    bucket = np.take(mult, sample_gid)
    bucket *= freq[::step]
    bucket >>= 16
    if clip:
        np.minimum(bucket, n_buckets - 1, out=bucket)
    bucket += np.take(base, sample_gid)
    hist = np.bincount(bucket, minlength=(n_big + 1) * n_buckets)
    cum = np.cumsum(hist.reshape(n_big + 1, n_buckets), axis=1)
    last = (cum[:n_big] * step < np.reshape(want, (-1, 1))).sum(axis=1)
    # rows of bucket <= last have freq * mult < (last + 1) << 16
    return ((last + 1) << 16) // mult[big].astype(np.int64)
