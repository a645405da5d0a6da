"""Independent check of recoded survival times (condensation, ``survival_times="recode"``):
every released (time, status) pair stands for at least k source rows.

Written from the requirement, not from the method (nothing from ``deid.methods``).  A
recoding releases, per vital status, a non-decreasing function of the time: every source row
of status s gets a value, and sorting the released times of status s lines them up with the
sorted source times of status s.  So, per status s:

1. the release holds as many rows of status s as the source (the status is never moved);
2. every distinct released time of status s is held by >= k released rows -- and, lined up
   by rank, by the same number of source rows: the pair names a set of >= k source rows;
3. every released value lies within the times of the source rows it stands for (their
   lowest and highest, after lining up by rank): a value does not move a row across rows it
   is not binned with, so the order of all times is kept up to the bins;
4. no released value stands for two source times that each hold >= k rows of status s:
   where k rows already share a time, it is released at its own grain; and the rows of one
   source time stand behind one released value (a time is not split between two).

:func:`released_source_times` gives every source row its released value (by that lining
up): the source in the release's representation, which the rare-record check compares
released rows with (a released bin value equals a source row's *bin*, not its time).

:func:`stored_pairs` is what ``deid.verify_release`` checks from the stored table alone: no
(time, status) pair of fewer than k rows.  Failures raise DE002; messages name no value and
no count below k.
"""
import numpy as np

from ...errors import DeidError, VERIFICATION_FAILED
from ...sqltext import qualified, quote_ident

HINT = ("The release was rolled back; nothing was written.  The recoded survival times failed "
        "the (time, status) check, which points to a bug in the method: please report it.")
STORED_HINT = ("The stored release differs from what was verified when it committed: drop it "
               "and release again.")


def _fail(message, hint=HINT):
    raise DeidError(VERIFICATION_FAILED, message, hint=hint)


def check_pairs(source_time, source_status, released_time, released_status, k, grain_k=None):
    """Checks 1-4 of the module docstring; returns the report's entry.  ``k``: the privacy
    floor of check 2; ``grain_k``: the rows that make a time dense in check 4 (the k the
    bins were cut at, >= k when the k rule raised it; default ``k``)."""
    grain_k = k if grain_k is None else grain_k
    source_time = np.asarray(source_time, np.float64)
    released_time = np.asarray(released_time, np.float64)
    source_status = np.asarray(source_status)
    released_status = np.asarray(released_status)
    smallest, pairs = None, 0
    for s in np.union1d(np.unique(source_status), np.unique(released_status)):
        src = _sort(source_time[source_status == s])
        rel = _sort(released_time[released_status == s])
        if src.size != rel.size:
            _fail("the release does not hold the source's rows of each vital status")
        values, first, counts = _runs(rel)
        if counts.size and counts.min() < k:
            _fail("a released (survival time, vital status) pair is shared by fewer than k rows")
        last = first + counts - 1
        if np.any(values < src[first]) or np.any(values > src[last]):
            _fail("a released survival time lies outside the times of the source rows it "
                  "stands for")
        _check_grain(src, first, last, grain_k)
        if np.any(src[last[:-1]] == src[first[1:]]):
            _fail("a source survival time is split between two released values")
        pairs += int(values.size)
        smallest = int(counts.min()) if smallest is None else min(smallest, int(counts.min()))
    return {"pairs": pairs, "smallest_pair_rows": smallest, "rule": "each pair >= k rows"}


def released_source_times(source_time, source_status, released_time, released_status):
    """The released value every source row stands behind (float64, indexed like
    ``source_time``), by lining up the sorted times per status; call after
    :func:`check_pairs`."""
    source_time = np.asarray(source_time, np.float64)
    out = np.empty(source_time.size, np.float64)
    for s in np.unique(source_status):
        rows = np.flatnonzero(np.asarray(source_status) == s)
        order = rows[_argsort_stable(source_time[rows])]
        out[order] = _sort(np.asarray(released_time, np.float64)[
            np.asarray(released_status) == s])
    return out


def _check_grain(src, first, last, k):
    """Check 4: a released value stands for at most one source time held by >= k rows."""
    times, _, counts = _runs(src)
    dense = times[counts >= k]
    if dense.size == 0:
        return
    # dense times inside each released value's rank block [first, last]
    lo = np.searchsorted(dense, src[first], side="left")
    hi = np.searchsorted(dense, src[last], side="right")
    if np.any(hi - lo > 1):
        _fail("a released survival time merges source times that k rows already share")


def _short_range(x):
    """The lowest value of ``x`` when its values are whole numbers of a range below 2^16 (the
    usual survival times: months or days), else None."""
    if x.size == 0:
        return None
    lo, hi = x.min(), x.max()
    if hi - lo >= 1 << 16 or not np.array_equal(x, np.rint(x)):
        return None
    return lo


def _sort(x):
    """``np.sort(x)``; by counting when the values are whole numbers of a short range."""
    lo = _short_range(x)
    if lo is None:
        return np.sort(x)
    counts = np.bincount((x - lo).astype(np.int64))
    return lo + np.repeat(np.arange(counts.size, dtype=np.float64), counts)


def _argsort_stable(x):
    """``np.argsort(x, kind="stable")``; on 16-bit keys (a radix sort) when the values are
    whole numbers of a short range."""
    lo = _short_range(x)
    if lo is None:
        return np.argsort(x, kind="stable")
    return np.argsort((x - lo).astype(np.uint16), kind="stable")


def _runs(ordered):
    """(distinct values, index of each one's first row, its count) of a sorted array, as
    np.unique(return_index=True, return_counts=True) gives them."""
    if ordered.size == 0:
        empty = np.zeros(0, np.int64)
        return ordered[:0], empty, empty
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return ordered[first], first, np.diff(np.r_[first, ordered.size])


def stored_pairs(db, table, time_column, status_column, k):
    """deid.verify_release: no (time, status) pair of the stored table has fewer than k rows
    (one aggregate pass)."""
    t, s = quote_ident(time_column), quote_ident(status_column)
    rare = db.value(f"SELECT count(*) FROM (SELECT 1 FROM {qualified('deid_release', table)}"
                    f" GROUP BY {t}, {s} HAVING count(*) < $1) r", [k], ["bigint"])
    if int(rare):
        _fail("a stored (survival time, vital status) pair is shared by fewer than k rows",
              STORED_HINT)
    return {"time": time_column, "status": status_column, "stored_pairs": "each >= k rows"}
