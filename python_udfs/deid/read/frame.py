"""Columns of a snapshot as numpy arrays, and their pure encodings (no SQL, no plpy): what
the data path reads into, and what methods compute on.

Encodings: int -> int64 values; date -> int64 days since 1970-01-01; float/numeric ->
float64; timestamps -> float64 epoch seconds; anything else -> int64 dictionary codes in sort
order (the dictionary holds the labels; NULL is the code after the last). ``null`` marks NULLs.
"""
from dataclasses import dataclass

import numpy as np


@dataclass
class EncodedColumn:
    name: str
    kind: str
    values: np.ndarray            # int64 or float64 (codes for categories)
    null: np.ndarray              # bool mask
    dictionary: list = None       # category labels (code -> text); NULL is code len(dictionary)

    @property
    def numeric(self):
        """float64 view for the algorithms (NULL -> NaN)."""
        v = self.values.astype(np.float64)
        if self.null.any():
            v[self.null] = np.nan
        return v

    def labels(self):
        """Text of each value (categories only), None for NULL."""
        lab = np.array(list(self.dictionary) + [None], dtype=object)
        return lab[self.values]


@dataclass
class Frame:
    n: int
    rid: np.ndarray               # int64 row ids, or None
    columns: dict                 # name -> EncodedColumn, in request order

    def sorted_by_rid(self):
        """The same rows ordered by row id: the order every method and the
        verifier agree on (ties in 001's greedy are broken by row order)."""
        if self.rid is None or self.n < 2 or bool(np.all(self.rid[1:] > self.rid[:-1])):
            return self
        o = np.argsort(self.rid, kind="stable")
        cols = {k: EncodedColumn(c.name, c.kind, c.values[o], c.null[o], c.dictionary)
                for k, c in self.columns.items()}
        return Frame(self.n, self.rid[o], cols)


def value_dictionary(col):
    """(codes, labels): every row's code into the text labels of the distinct
    values (sort order); NULL has the code len(labels). The labels cast back to
    the column's type."""
    if col.kind == "category":
        return col.values, list(col.dictionary)
    uniq, codes = _sorted_codes(col.values, col.null)
    if col.kind == "int":
        labels = [str(int(v)) for v in uniq]
    elif col.kind == "date":
        labels = [str(np.datetime64(int(v), "D")) for v in uniq]
    elif col.kind == "time":
        labels = [str(np.datetime64(int(round(v * 1e6)), "us")) + "+00" for v in uniq]
    else:
        labels = [repr(float(v)) for v in uniq]
    return codes, labels


def _sorted_codes(values, null):
    """(sorted distinct non-NULL values, every row's rank among them; NULL
    rows get len(distinct)). Integers spanning a compact range are ranked
    with a presence table (O(n)), anything else by sorting."""
    n = len(values)
    if values.dtype.kind in "iu" and n:
        anynull = bool(null.any())
        vals = values[~null] if anynull else values
        if vals.size:
            lo, hi = int(vals.min()), int(vals.max())
            if hi - lo < 2 * n + 1024:
                present = np.zeros(hi - lo + 1, dtype=bool)
                present[vals - lo] = True
                rank = np.cumsum(present, dtype=np.int64) - 1
                uniq = (np.flatnonzero(present) + lo).astype(values.dtype)
                if anynull:
                    codes = np.full(n, uniq.size, dtype=np.int64)
                    codes[~null] = rank[vals - lo]
                else:
                    codes = rank[vals - lo]
                return uniq, codes
    uniq = np.unique(values[~null])
    codes = np.searchsorted(uniq, values).astype(np.int64)
    codes[null] = len(uniq)
    return uniq, codes


def encoded_array(col):
    """The array that stores an encoded column in a staging table."""
    if col.kind in ("int", "date", "category"):
        return col.values.astype(np.int64)
    return col.values.astype(np.float64)
