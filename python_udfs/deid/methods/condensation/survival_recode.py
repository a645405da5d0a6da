"""Survival times recoded to bins of >= k rows per status: ``survival_times="recode"``, the
default (paper 004 Alg. 2 step 2.d.ii, changed).

Why.  004 step 2.d.ii gives each cluster's synthetic rows the cluster's original survival
times, because the Cox partial likelihood depends only on the order of the times (004
sec. 3.2: the risk sets).  Released as printed, every original time is back in the release,
and a time is identifying exactly where few rows share it (anonymeter singled patients out
through ``time == x``).  Moving times at random inside wide bins (``"coarsened"``) hides them
but scrambles the order across the bin independently of the covariates, which attenuates Cox
on registry-sized tables; moving each time just below itself (``"ranked"``) keeps the order
but rounding gives every whole-unit time back.  Recoding does neither: it *releases less
detail* instead of moving values.

What.  For each vital status s, the distinct source times of the rows of status s are cut
into bins of consecutive values, each holding >= k rows of status s:

* a value held by >= k rows of status s is a bin of its own (released as itself: k rows
  already share it, the finest grain there is);
* a maximal stretch of consecutive sparser values (each < k rows) is cut from its low end
  into bins of >= k rows, the smallest that reach k; what is left at the stretch's end
  (fewer than k rows) joins the stretch's last bin, or, when the whole stretch holds fewer
  than k rows, the adjacent dense value nearer in time (tails included: a long sparse tail
  becomes a few wide bins).

Every row of a bin is released as the bin's value: the mean of the bin's source times
(for integer and date times a whole unit, down or up so that the bins' rounding errors carry
over and the total of the released times stays the source's up to half a bin; it stays inside
the bin).  No row
moves at random and nothing orders the rows inside a bin, so a released (time, status) pair
names a set of >= k source rows and nothing finer; rounding a released time gives back the
bin's value, not a row's time.  Bin values increase with the bins, so the order of the times
across the table is the source's up to ties inside a bin (the Cox risk sets are those of the
binned source).  The verifier (verify/shared/survival_pairs.py) checks the >= k rule and
that every value lies within the times of the rows it stands for.

Pure numpy; no SQL, no plpy.
"""
from typing import Tuple

import numpy as np

from ...errors import DeidError, PRIVACY_MODEL_UNSATISFIABLE


def recoded_times(times: np.ndarray, status: np.ndarray, k: int,
                  integer: bool) -> np.ndarray:
    """The released time of every source row (float64, indexed like ``times``): its bin's
    value, bins cut per status as in the module docstring.  ``status``: the 0/1 vital status
    of every row.  A status subset with fewer than k rows is refused (004 Alg. 2 step 1
    needs >= k rows per subset; the caller checks it first, this is the last guard)."""
    times = np.asarray(times, dtype=np.float64)
    status = np.asarray(status)
    if times.shape != status.shape or times.ndim != 1:
        raise ValueError("times and status must be 1-d arrays of one length")
    if k < 1:
        raise ValueError("k must be at least 1")
    out = np.empty(times.size, dtype=np.float64)
    for s in np.unique(status):
        rows = np.flatnonzero(status == s)
        if rows.size < k:
            raise DeidError(PRIVACY_MODEL_UNSATISFIABLE,
                            f"a vital-status subset has fewer than k = {k} rows",
                            hint="004 Alg. 2 condenses each status apart: lower k, release "
                                 "more rows, or condense without survival columns",
                            data_dependent=True)
        out[rows] = _recode_subset(times[rows], k, integer)
    return out


def _recode_subset(t: np.ndarray, k: int, integer: bool) -> np.ndarray:
    values, inverse, counts = _distinct(t)
    bin_of_value = bin_values(counts, values, k)
    sums = np.bincount(bin_of_value, weights=values * counts)
    rows = np.bincount(bin_of_value, weights=counts)
    value = sums / rows
    if integer:
        value = _whole_units(value, rows)
    lo = np.minimum.reduceat(values, _starts(bin_of_value))
    hi = np.maximum.reduceat(values, _starts(bin_of_value))
    value = np.clip(value, lo, hi)                  # float rounding: stay inside the bin
    return value[bin_of_value][inverse.reshape(-1)]


def _whole_units(mean: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Bin means to whole units, each down or up so that the rounding errors of the bins,
    weighted by their rows, carry over instead of adding up: the released times' total stays
    within half the largest bin of the source's (rounding every mean to nearest can move the
    mean time of a table by more).  floor and ceil of a mean lie within its bin's span (its
    ends are whole units), so the values still increase with the bins."""
    out = np.floor(mean)
    carry = 0.0
    for b in np.flatnonzero(out != mean):          # dense single-value bins are exact
        down = carry + rows[b] * (out[b] - mean[b])
        up = down + rows[b]
        if abs(up) < abs(down):
            out[b] += 1.0
            carry = up
        else:
            carry = down
    return out


def _distinct(t: np.ndarray):
    """np.unique(t, return_inverse=True, return_counts=True); by counting when the times are
    whole numbers of a short range without a negative zero (months, days: no sort)."""
    if t.size:
        lo, hi = t.min(), t.max()
        if hi - lo < max(2 * t.size, 1024) and np.array_equal(t, np.rint(t)) \
                and not np.signbit(t).any():
            offset = (t - lo).astype(np.int64)
            every = np.bincount(offset)
            present = every > 0
            return lo + np.flatnonzero(present).astype(np.float64), \
                (np.cumsum(present) - 1)[offset], every[present]
    values, inverse, counts = np.unique(t, return_inverse=True, return_counts=True)
    return values, inverse.reshape(-1), counts


def _starts(bin_of_value: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.r_[True, bin_of_value[1:] != bin_of_value[:-1]])


def bin_values(counts: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """The bin (0, 1, ... in value order) of every distinct value, from the rows holding each
    (``counts``) and the values themselves (to choose the nearer neighbour of a short
    stretch).  Every bin holds >= k rows when counts.sum() >= k."""
    d = counts.size
    dense = counts >= k
    # a bin starts at every dense value and at the first value after one
    starts = np.zeros(d, dtype=bool)
    starts[0] = True
    starts[dense] = True
    starts[1:] |= dense[:-1]
    for lo, hi in _sparse_stretches(dense):
        cuts = _greedy_cuts(counts[lo:hi], k)
        starts[lo:hi] = False
        if cuts is not None:
            starts[lo + cuts] = True
        elif _joins_previous(values, lo, hi):       # the whole stretch < k rows: a neighbour
            pass                                    # (values[hi], if any, is dense: a start)
        else:
            starts[lo] = True
            if hi < d:
                starts[hi] = False
    starts[0] = True
    return np.cumsum(starts) - 1


def _joins_previous(values, lo, hi) -> bool:
    """A short stretch values[lo:hi] joins the dense value before it (True) or after it
    (False): the one nearer in time; the one before on a tie; whichever exists."""
    if lo == 0:
        return False
    if hi >= values.size:
        return True
    return values[lo] - values[lo - 1] <= values[hi] - values[hi - 1]


def _sparse_stretches(dense: np.ndarray):
    """(lo, hi) of every maximal run of values held by fewer than k rows."""
    edges = np.diff(np.r_[0, (~dense).astype(np.int8), 0])
    return zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist())


def _greedy_cuts(counts: np.ndarray, k: int):
    """Start offsets of the bins of a sparse stretch: from its low end, each bin the fewest
    values that reach k rows; a remainder below k joins the last bin.  None when the stretch
    holds fewer than k rows."""
    cum = np.cumsum(counts)
    if cum[-1] < k:
        return None
    cuts, before = [0], 0
    while True:
        end = int(np.searchsorted(cum, before + k, side="left")) + 1   # exclusive
        if end >= counts.size or cum[-1] - cum[end - 1] < k:
            break
        cuts.append(end)
        before = cum[end - 1]
    return np.asarray(cuts, dtype=np.int64)


def bins_of(times: np.ndarray, status: np.ndarray, k: int, integer: bool
            ) -> Tuple[np.ndarray, np.ndarray]:
    """(bin value, rows per bin) over both statuses, for reports: the distinct released
    (value, status) pairs' values and sizes."""
    released = recoded_times(times, status, k, integer)
    pairs, counts = np.unique(np.stack([released, np.asarray(status, np.float64)], axis=1),
                              axis=0, return_counts=True)
    return pairs, counts
