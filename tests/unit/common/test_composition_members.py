"""log/composition.py reads clusters' members as PostgreSQL's binary arrays (array_send)."""
import struct

import numpy as np

from deid.log import composition


def _array_send(values):
    if not values:
        return struct.pack(">iii", 0, 0, 20)
    out = struct.pack(">iiiii", 1, 0, 20, len(values), 1)
    return out + b"".join(struct.pack(">iq", 8, v) for v in values)


def test_back_to_back_arrays_decode_to_their_values():
    arrays = [[5, 1, 2 ** 40], [], [7], list(range(100, 130)), [-3]]
    data = b"".join(_array_send(a) for a in arrays)
    got = composition._array_values(data, np.array([len(a) for a in arrays]))
    assert got.tolist() == [x for a in arrays for x in a]


def test_no_arrays():
    assert composition._array_values(b"", np.zeros(0, np.int64)).size == 0
