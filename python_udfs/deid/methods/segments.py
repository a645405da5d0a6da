"""Small numpy helpers over segments (runs of rows) shared by the methods."""
import numpy as np


def ranges(starts, lengths):
    """Concatenation of arange(s, s + l) for every (s, l), without a Python loop."""
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
