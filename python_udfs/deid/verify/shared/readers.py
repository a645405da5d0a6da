"""Reading stored artefacts into checked numpy arrays.

The checks receive what the release stored, as the SQL side read it back:
numpy arrays or Python lists of row ids, group ids, attribute names and
values (text, numbers, NULL).  These readers turn them into int64 arrays or
integer codes, and reject malformed input (NULLs where ids belong,
non-integral numbers, wrong shapes, misaligned lengths) with
``INVALID_PARAMETER_VALUE`` before any privacy check runs.
"""

import itertools

import numpy as np

from .arrays import _dense_codes
from .failures import _bad


def _int_array(x, name):
    """x as a 1-D int64 array; rejects NULLs, non-integral floats, 2-D."""
    try:
        a = np.asarray(x)
    except Exception as exc:  # ragged input and the like
        _bad(f"{name} must be a one-dimensional array of integers ({exc})")
    if a.ndim == 0:
        _bad(f"{name} must be a one-dimensional array of integers, "
             f"not a scalar")
    if a.ndim != 1:
        _bad(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    kind = a.dtype.kind
    if kind in "iu":
        if kind == "u" and a.dtype.itemsize == 8 and a.max() > np.iinfo(np.int64).max:
            _bad(f"{name} has values beyond the bigint range")
        return a.astype(np.int64, copy=False)
    if kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            _bad(f"{name} must hold integers, found non-integral values")
        return a.astype(np.int64)
    if kind == "O":
        if any(v is None for v in a):
            _bad(f"{name} must not contain NULL")
        try:
            b = np.asarray(a.tolist())
        except (TypeError, ValueError):   # ragged or mixed objects: keep as they are
            b = a
        if b.dtype.kind in "iuf":
            return _int_array(b, name)
    _bad(f"{name} must hold integers, got dtype {a.dtype}")


def _count_param(v, name, allow_none=False):
    """A non-negative integer parameter (k, K, L, L_i)."""
    if v is None:
        if allow_none:
            return None
        _bad(f"{name} must be given")
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        _bad(f"{name} must be an integer, got {v!r}")
    v = int(v)
    if v < 0:
        _bad(f"{name} must be >= 0, got {v}")
    return v


def _run_heads(values):
    """Where each run of equal adjacent values starts, or None when the values do not compare
    one to one (objects whose comparison is not a truth value: the caller's dict decides)."""
    try:
        differs = values[1:] != values[:-1]
    except (TypeError, ValueError):
        return None
    if not isinstance(differs, np.ndarray) or differs.shape != (values.size - 1,):
        return None
    return np.flatnonzero(np.r_[True, differs.astype(bool, copy=False)])


class Coded:
    """A column given as integer codes into a list of values: entry i holds keys[codes[i]]
    (e.g. the attribute of each RID-set entry, without an array of 1M name objects)."""

    def __init__(self, codes, keys):
        self.codes, self.keys = codes, list(keys)

    def __len__(self):
        return len(self.codes)


def _factorize(values, name, n):
    """(distinct keys, int64 codes) of a 1-D column of n values.

    Numbers use numpy; anything else (text, NULL) a dict, which is faster
    than sorting strings.  Equal values get equal codes; NULL (None) is a
    value of its own (a NULL in a sensitive column is a RID set like any
    other, 001 Theorem 3).  A :class:`Coded` column is factorized by its
    codes: its keys that occur, equal keys one key.
    """
    if isinstance(values, Coded):
        codes = _int_array(values.codes, name)
        if codes.size != n:
            _bad(f"{name} has {codes.size} entries but rid_group has {n}")
        if n and (codes.min() < 0 or codes.max() >= len(values.keys)):
            _bad(f"{name} holds codes outside its {len(values.keys)} values")
        used = np.flatnonzero(np.bincount(codes, minlength=len(values.keys))).tolist()
        keys = list(dict.fromkeys(values.keys[i] for i in used))
        try:
            index = {k: i for i, k in enumerate(keys)}
            remap = np.zeros(len(values.keys), np.int64)
            remap[used] = [index[values.keys[i]] for i in used]
        except TypeError:
            _bad(f"{name} must hold scalar values (text, numbers or NULL)")
        return keys, remap[codes]
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            _bad(f"{name} must be one-dimensional, got shape {values.shape}")
        if values.size != n:
            _bad(f"{name} has {values.size} entries but rid_group has {n}")
        if values.dtype.kind in "iub":
            keys, codes = _dense_codes(values.astype(np.int64))
            return keys.tolist(), codes
        if values.dtype.kind == "f":
            keys, codes = np.unique(values, return_inverse=True)
            return keys.tolist(), codes.astype(np.int64).ravel()
        if values.dtype.kind in "USO" and n:
            # catalog order gives long runs of equal names: factorize the runs (their heads
            # hold every distinct value, in order of first appearance)
            head = _run_heads(values)
            if head is not None:
                keys, hcode = _factorize(values[head].tolist(), name, head.size)
                return keys, np.repeat(hcode, np.diff(np.r_[head, n]))
        values = values.tolist()
    try:
        seq = values if isinstance(values, list) else list(values)
    except TypeError:
        _bad(f"{name} must be a one-dimensional array")
    if len(seq) != n:
        _bad(f"{name} has {len(seq)} entries but rid_group has {n}")
    try:
        keys = list(dict.fromkeys(seq))
        index = {k: i for i, k in enumerate(keys)}
        codes = np.fromiter(map(index.__getitem__, seq), dtype=np.int64, count=n)
    except TypeError:
        _bad(f"{name} must hold scalar values (text, numbers or NULL)")
    return keys, codes


def _flat_rids(rids, rid_counts, e):
    """(entry lengths (e,), all rids concatenated) from either input form:
    a list of e arrays (``rid_counts`` None), or a flat array with
    ``rid_counts[i]`` rids for entry i."""
    if rid_counts is None:
        if isinstance(rids, np.ndarray) and rids.dtype != object:
            _bad("rids must be a list of arrays (or pass rid_counts with a flat array)")
        try:
            rids = list(rids)
        except TypeError:
            _bad("rids must be a list of arrays")
        if len(rids) != e:
            _bad(f"rids has {len(rids)} entries but rid_group has {e}")
        try:
            lens = np.fromiter(map(len, rids), dtype=np.int64, count=e)
        except TypeError:
            _bad("every element of rids must be an array of row ids")
        total = int(lens.sum())
        if e == 0:
            flat = np.zeros(0, np.int64)
        elif all(isinstance(r, np.ndarray) for r in rids[:64]):
            try:
                flat = np.concatenate(rids)
            except ValueError:
                _bad("rids must be a list of one-dimensional arrays")
        else:
            try:
                flat = np.fromiter(itertools.chain.from_iterable(rids), dtype=np.int64,
                                   count=total)
            except (TypeError, ValueError):
                flat = np.concatenate([np.asarray(r).ravel() for r in rids])
        flat = _int_array(flat, "rids")
        if flat.size != total:
            _bad("rids must be a list of one-dimensional arrays")
    else:
        lens = _int_array(rid_counts, "rid_counts")
        if lens.size != e or (e and lens.min() < 0):
            _bad("rid_counts must hold one non-negative count per entry")
        # int32 row ids stay int32 (exact; half the memory of the flat list)
        flat = rids if isinstance(rids, np.ndarray) and rids.ndim == 1 and rids.dtype == np.int32 \
            else _int_array(rids, "rids")
        if flat.size != lens.sum():
            _bad(f"rid_counts add up to {int(lens.sum())} but rids has {flat.size} ids")
    return lens, flat
