"""A set-valued read's records (read/snapshot._sorted_sets): each record's codes ascending and
de-duplicated, empty records kept, whichever order the items came in."""
import numpy as np

from deid.read.snapshot import _sorted_sets


def test_each_record_sorted_and_unique():
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 9, 500)
    codes = rng.integers(0, 40, int(lengths.sum())).astype(np.int64)
    offsets, got = _sorted_sets(codes, lengths)
    start = np.r_[0, np.cumsum(lengths)]
    want = [sorted(set(codes[start[i]:start[i + 1]].tolist())) for i in range(lengths.size)]
    assert offsets.tolist() == np.r_[0, np.cumsum([len(w) for w in want])].tolist()
    assert got.tolist() == [c for w in want for c in w]
    assert got.dtype == np.int64


def test_no_records_and_no_codes():
    offsets, codes = _sorted_sets(np.zeros(0, np.int64), np.zeros(3, np.int64))
    assert offsets.tolist() == [0, 0, 0, 0] and codes.size == 0
