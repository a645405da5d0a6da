"""log/rowids.py: the stored layouts of a release's selected row ids."""
import numpy as np
import pytest

from deid.log import rowids


def test_dense_ids_are_a_bitmap_of_their_span():
    ids = np.arange(1000, 2000, dtype=np.int64)[::3]
    data = rowids.pack(ids)
    assert data[:1] == b"B" and data[1:9] == (1000).to_bytes(8, "big")
    assert len(data) == 9 + (int(ids[-1]) - 1000 + 1 + 7) // 8
    assert rowids.unpack(data).tolist() == ids.tolist()
    assert rowids.count(data) == ids.size


def test_sparse_ids_keep_eight_bytes_each():
    ids = np.array([-2 ** 40, 0, 2 ** 62], np.int64)
    data = rowids.pack(ids)
    assert data[:1] == b"I" and len(data) == 1 + 8 * 3
    assert rowids.unpack(data).tolist() == ids.tolist() and rowids.count(data) == 3


def test_the_smaller_layout_is_written_and_equal_sets_give_equal_bytes():
    rng = np.random.default_rng(7)
    for density in (1.0, 0.5, 1 / 64, 1 / 70, 1 / 1000):
        span = 5000
        ids = np.flatnonzero(rng.random(span) < density).astype(np.int64) + 17
        if ids.size == 0:
            continue
        data = rowids.pack(ids)
        assert len(data) <= 1 + 8 * ids.size
        assert rowids.pack(rowids.unpack(data)) == data
        assert rowids.unpack(data).tolist() == ids.tolist()


def test_empty_and_unknown():
    assert rowids.pack([]) == b"I" and rowids.unpack(b"I").size == 0
    with pytest.raises(ValueError):
        rowids.unpack(b"\x00" * 16)


def test_runs_of_consecutive_ids():
    ids = np.concatenate([np.arange(10, 5000), np.arange(7000, 9000)]).astype(np.int64)
    data = rowids.pack(ids)
    assert data[:1] == b"R" and len(data) == 1 + 2 * 16
    assert rowids.unpack(data).tolist() == ids.tolist() and rowids.count(data) == ids.size
