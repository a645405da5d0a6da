"""method_support.qi_matrix: the k-d split's float matrix, written in place column by column."""

import types

import numpy as np
import pytest

from deid.methods import support as ms
from deid.read.frame import EncodedColumn, Frame


def reference_qi_matrix(req, frame, qis):
    """The matrix as built before (one float copy per column, then np.stack)."""
    cols = []
    for q in qis:
        col = frame.columns[q]
        if col.kind == "category":
            h = req.hierarchies.get(q)
            rank = np.append(ms.hierarchy_rank(h, col.dictionary), len(col.dictionary))
            v = rank[col.values].astype(np.float64)
        else:
            v = col.values.astype(np.float64)
            if col.null.any():
                top = v[~col.null].max() + 1 if (~col.null).any() else 0
                v = np.where(col.null, top, v)
        cols.append(v)
    return np.stack(cols, axis=1) if cols else np.zeros((frame.n, 0))


class _Member:
    kind = "member"

    def __init__(self, order):
        self.order = order

    def rank(self, labels):
        return list(self.order)


@pytest.mark.parametrize("seed", range(12))
def test_qi_matrix_matches_reference_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([0, 1, 7, 1000, 70_000, 150_001]))
    cols, hierarchies = {}, {}
    for j in range(int(rng.integers(0, 5))):
        name = f"q{j}"
        kind = ["category", "int", "float"][int(rng.integers(0, 3))]
        null = rng.random(n) < [0.0, 0.02, 1.0][int(rng.integers(0, 3))]
        if kind == "category":
            k = int(rng.integers(1, 900))
            values = np.where(null, k, rng.integers(0, k, n)).astype(np.int64)
            if rng.random() < 0.5:                       # a member hierarchy's order
                hierarchies[name] = _Member(rng.permutation(k))
            cols[name] = EncodedColumn(name, "category", values, null, [str(i) for i in range(k)])
        else:
            values = (rng.normal(0, 1e6, n) if kind == "float"
                      else rng.integers(-10**12, 10**12, n).astype(np.int64))
            values[null] = 0
            cols[name] = EncodedColumn(name, "number", values, null)
    req = types.SimpleNamespace(hierarchies=hierarchies)
    frame = Frame(n, np.arange(n), cols)
    got = ms.qi_matrix(req, frame, list(cols))
    want = reference_qi_matrix(req, frame, list(cols))
    assert got.dtype == want.dtype == np.float64 and got.shape == want.shape
    assert got.flags["C_CONTIGUOUS"] and got.tobytes() == want.tobytes()
