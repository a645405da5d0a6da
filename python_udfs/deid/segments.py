"""Small numpy helpers over segments (runs of rows), shared by read, methods and write."""
import numpy as np


def ranges(starts, lengths):
    """Concatenation of arange(s, s + l) for every (s, l)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    keep = lengths > 0
    starts = np.asarray(starts, dtype=np.int64)[keep]
    lengths = lengths[keep]
    if lengths.size == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    step = np.ones(int(ends[-1]), dtype=np.int64)
    step[0] = starts[0]
    step[ends[:-1]] = starts[1:] - (starts[:-1] + lengths[:-1]) + 1
    return np.cumsum(step)


def segment_ids(sizes, dtype=np.intp):
    """``np.repeat(np.arange(len(sizes), dtype=dtype), sizes)``: the run of every row, for runs
    of ``sizes`` (>= 0) rows laid out back to back.

    Built from the runs' starts with one cumulative sum: np.repeat copies element by element
    and is several times slower at a million rows."""
    sizes = np.asarray(sizes)
    ends = np.cumsum(sizes)
    n = int(ends[-1]) if ends.size else 0
    if ends.size <= 1 or n == 0:
        return np.zeros(n, dtype=dtype)
    if bool(sizes.all()):                              # no empty run: one step per start
        out = np.zeros(n, dtype=dtype)
        out[ends[:-1]] = 1
        return np.cumsum(out, out=out)
    steps = np.bincount(ends[:-1], minlength=n + 1)[:n]   # empty runs: several steps at once
    return np.cumsum(steps, dtype=dtype)
