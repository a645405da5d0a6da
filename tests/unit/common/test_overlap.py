"""overlap.py's pure set logic: packing (log/rowids.py), and the differences."""
import numpy as np

from deid.log import overlap


def test_pack_of_sparse_ids_is_big_endian_int8_and_round_trips():
    ids = overlap.selected([5, 1, 1, 2 ** 40, -3])
    assert ids.tolist() == [-3, 1, 5, 2 ** 40]
    data = overlap.pack(ids)
    assert data[:9] == b"I" + (-3).to_bytes(8, "big", signed=True) and len(data) == 33
    assert overlap.unpack(data).tolist() == ids.tolist()
    assert overlap.unpack(overlap.pack([])).size == 0 and overlap.selected(None).size == 0


def test_differences_either_way():
    a, b = np.arange(100), np.arange(1, 100)
    assert overlap.differences(a, b) == (1, 0)
    assert overlap.differences(b, a) == (0, 1)
    assert overlap.too_close(a, b, 5) and overlap.too_close(b, a, 5)
    assert not overlap.too_close(a, a, 5)                       # identical
    assert not overlap.too_close(a, np.arange(5, 100), 5)       # exactly k
    assert overlap.too_close(a, np.arange(4, 100), 5)           # k - 1
    assert not overlap.too_close(a, np.arange(200, 300), 5)     # disjoint
    c = np.concatenate([np.arange(10, 100), np.arange(100, 103)])   # 10 fewer, 3 more
    assert overlap.differences(a, c) == (10, 3) and overlap.too_close(a, c, 5)


def test_differences_agree_with_sets():
    rng = np.random.default_rng(7)
    for _ in range(200):
        a = overlap.selected(rng.integers(-50, 50, rng.integers(0, 60)))
        b = overlap.selected(rng.integers(-50, 50, rng.integers(0, 60)))
        sa, sb = set(a.tolist()), set(b.tolist())
        assert overlap.differences(a, b) == (len(sa - sb), len(sb - sa))
