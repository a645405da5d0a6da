"""numpy primitives the checks share: dense integer codes, a linear-time
stable argsort for bounded integer keys, and undoing a permutation.

Nothing here knows about groups or privacy models; every function returns
exactly what its plain numpy counterpart would (``np.unique``,
``np.argsort(kind="stable")``), only faster on the shapes releases have.
"""

import numpy as np


def _dense_codes(a):
    """(sorted distinct values, codes) of an int64 array; O(n) when the
    values span a compact range, else by sorting."""
    if a.size == 0:
        return a, np.zeros(0, np.int64)
    lo, hi = int(a.min()), int(a.max())
    if hi - lo < 2 * a.size + 1024:
        at = a - lo if lo else a                 # (one offset array, none from 0)
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[at] = True
        keys = np.flatnonzero(present)
        rank = np.cumsum(present) - 1
        return keys + lo, rank[at]
    keys, codes = np.unique(a, return_inverse=True)
    return keys, codes.astype(np.int64).ravel()


def _stable_argsort(key, top):
    """np.argsort(key, kind="stable") for integer keys in [0, top): a least
    significant digit radix sort over 16-bit digits (numpy sorts uint16
    stably by radix, in linear time).  Each pass is stable, so the result is
    the same permutation."""
    if key.size < 4096 or top > 2 ** 48:
        return np.argsort(key, kind="stable")
    o = None
    shift = 0
    while shift == 0 or (top - 1) >> shift:
        # the 16-bit digit of every key (the cast keeps the low 16 bits of a key >= 0),
        # taken in the order so far: 2 bytes per key gathered, not 8
        digit = (key >> shift if shift else key).astype(np.uint16)
        s = np.argsort(digit if o is None else digit[o], kind="stable")
        del digit
        o = s if o is None else o[s]
        shift += 16
    return o


def _stable_argsort_by(major, minor, n_major, n_minor):
    """np.argsort(major * n_minor + minor, kind="stable") for integer arrays with values in
    [0, n_major) and [0, n_minor): when both fit 16 bits, two stable radix passes -- the
    minor key, then the major one -- give that permutation without the combined key."""
    if major.size < 4096 or n_major > 1 << 16 or n_minor > 1 << 16:
        return _stable_argsort(major.astype(np.int64) * n_minor + minor, n_major * n_minor)
    by_minor = np.argsort(minor.astype(np.uint16), kind="stable")
    by_major = np.argsort(major.astype(np.uint16)[by_minor], kind="stable")
    return by_minor[by_major]


def _repeat(values, lengths, dtype=None):
    """np.repeat(values, lengths) of integer values (as `dtype`, default theirs) -- when no run
    is empty, a cumulative sum of the steps between runs put at the runs' starts (no repeat;
    exact: the sum wraps as the steps do)."""
    values, lengths = np.asarray(values), np.asarray(lengths)
    dtype = dtype or values.dtype
    if lengths.size == 0 or lengths.min() <= 0:
        return np.repeat(values.astype(dtype, copy=False), lengths)
    values = values.astype(dtype, copy=False)
    out = np.zeros(int(lengths.sum()), dtype)
    out[0] = values[0]
    out[np.cumsum(lengths[:-1])] = np.diff(values)
    return np.cumsum(out, out=out)


def _runs(lengths, first=0, dtype=np.int64):
    """np.repeat(np.arange(first, first + len(lengths)), lengths), as `dtype`: each position's
    run (see _repeat)."""
    lengths = np.asarray(lengths)
    return _repeat(np.arange(first, first + lengths.size, dtype=dtype), lengths)


def _unsort(values, order):
    """Undo ``values = x[order]``: the values back in the original positions."""
    out = np.empty_like(values)
    out[order] = values
    return out
