"""The fields of a PostgreSQL binary COPY record, built with numpy.

Each field yields *chunks* (``int32 length`` (-1 = NULL) + bytes) per record:

* :class:`Fixed`   -- fixed-width numbers (int2/int4/int8/float4/float8/date),
* :class:`Text`    -- text chosen from a dictionary by integer code,
* :class:`Array`   -- a one-dimensional array per record (RID sets of a cluster),
* :class:`Bytes`   -- bytea per record: numbers packed back to back (RID-set chunks).

:mod:`.copybin` lays the chunks out into a COPY image.
"""
from dataclasses import dataclass

import numpy as np

from ..segments import ranges

INT4OID, INT8OID, TEXTOID = 23, 20, 25
_POSTGRES_EPOCH_DAYS = 10957          # 2000-01-01 - 1970-01-01


def _length_prefixed(blobs):
    """Chunks ``int32 length + bytes`` of a list of bytes (None = NULL) as one
    uint8 blob, with each chunk's offset and length."""
    chunks = [(-1).to_bytes(4, "big", signed=True) if b is None else len(b).to_bytes(4, "big") + b
              for b in blobs]
    lens = np.array([len(c) for c in chunks], np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]])
    return np.frombuffer(b"".join(chunks), np.uint8), offs, lens


def taken(take, idx):
    """Positions in a field's arrays of its records `idx` (None: all), the field's records being
    the rows `take` of them (None: as they are); None for all rows as they are."""
    if take is None:
        return idx
    return take if idx is None else take[idx]


@dataclass
class Fixed:
    """Fixed-width numbers; `dtype` is a big-endian numpy dtype ('>i2' '>i4' '>i8' '>f4' '>f8').
    With `take`, record i holds values[take[i]] (and null[take[i]]): rows are gathered as the
    image is laid out, not copied into record order first."""
    values: np.ndarray
    dtype: str
    null: np.ndarray = None
    take: np.ndarray = None

    @classmethod
    def date(cls, days_since_1970, null=None, take=None):
        return cls(np.asarray(days_since_1970, np.int64) - _POSTGRES_EPOCH_DAYS, ">i4", null, take)

    def __len__(self):
        return len(self.values) if self.take is None else len(self.take)

    @property
    def constant(self):
        if self.null is None:
            return True
        return not (self.null.any() if self.take is None else self.null[self.take].any())

    def nulls(self):
        if self.constant:
            return np.zeros(len(self), bool)
        return np.asarray(self.null if self.take is None else self.null[self.take], bool)

    def chunk_lengths(self):
        out = np.full(len(self), 4 + np.dtype(self.dtype).itemsize, np.int64)
        if not self.constant:
            out[self.nulls()] = 4
        return out

    def chunks(self, idx, length):
        """(m, length) bytes of records `idx` (None: all), all of chunk length `length`."""
        m = len(self) if idx is None else len(idx)
        if length == 4:
            return np.full((m, 4), 255, np.uint8)
        rows = taken(self.take, idx)
        rec = np.empty(m, dtype=[("len", ">i4"), ("v", self.dtype)])
        rec["len"], rec["v"] = length - 4, self.values if rows is None else self.values[rows]
        return rec.view(np.uint8).reshape(m, length)


@dataclass
class Text:
    """Text chosen from a dictionary by code; a code >= len(dictionary), or an
    entry None, is NULL. With `take`, record i holds codes[take[i]]."""
    codes: np.ndarray
    dictionary: list
    take: np.ndarray = None

    def __len__(self):
        return len(self.codes) if self.take is None else len(self.take)

    constant = False

    def _chunks(self):
        if not hasattr(self, "_memo"):
            self._memo = _length_prefixed([None if s is None else s.encode() for s in self.dictionary]
                                          + [None])
        return self._memo

    def _codes(self, idx=None):
        rows = taken(self.take, idx)
        codes = self.codes if rows is None else self.codes[rows]
        return np.minimum(codes, len(self.dictionary))

    def nulls(self):
        null = np.array([s is None for s in self.dictionary] + [True])
        return null[self._codes()]

    def chunk_lengths(self):
        _, _, lens = self._chunks()
        return lens[self._codes()]

    def _table(self):
        """The dictionary's chunks as a zero-padded (D + 1, width) table."""
        if not hasattr(self, "_padded"):
            blob, _, lens = self._chunks()
            table = np.zeros((len(lens), int(lens.max())), np.uint8)
            table[np.arange(table.shape[1]) < lens[:, None]] = blob     # row by row: the chunks
            self._padded = table
        return self._padded

    def chunks(self, idx, length):
        return self._table()[self._codes(idx), :length]

    def compact(self, block=1 << 24):
        """Every record's chunk back to back (uint8): rows of the padded
        dictionary table, trimmed by a mask, a block of records at a time."""
        table = self._table()
        _, _, lens = self._chunks()
        codes = self._codes()
        keep = np.arange(table.shape[1]) < lens[:, None]          # (D + 1, width)
        step = max(1, block // table.shape[1])
        parts = [table[c][keep[c]] for c in (codes[i:i + step] for i in range(0, len(codes), step))]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


@dataclass
class Array:
    """A one-dimensional array per record: record i holds the next ``counts[i]``
    elements of ``elements`` (a Fixed or Text field over every element, in
    record order); ``oid`` is the element type (INT4OID, INT8OID, TEXTOID)."""
    counts: np.ndarray
    elements: object
    oid: int

    def __len__(self):
        return len(self.counts)

    constant = False


@dataclass
class Bytes:
    """bytea per record: record i holds the next ``counts[i]`` of ``values`` packed back to
    back as ``dtype``, a big-endian numpy dtype ('>i4': int4send's bytes per value, '>i8':
    int8send's). The values are converted once (``data``: every record's bytes in order)."""
    counts: np.ndarray
    values: np.ndarray
    dtype: str

    constant = False

    def __post_init__(self):
        self.counts = np.asarray(self.counts, np.int64)
        self.data = np.ascontiguousarray(self.values, dtype=self.dtype).reshape(-1).view(np.uint8)
        self.lens = self.counts * np.dtype(self.dtype).itemsize
        if int(self.lens.sum()) != self.data.size:
            raise ValueError(f"Bytes: counts add up to {int(self.counts.sum())} values,"
                             f" {self.data.size // np.dtype(self.dtype).itemsize} given")
        self.starts = np.cumsum(self.lens) - self.lens

    def __len__(self):
        return len(self.counts)

    def nulls(self):
        return np.zeros(len(self), bool)

    def chunk_lengths(self):
        return 4 + self.lens

    def chunks(self, idx, length):
        """(m, length) bytes of records `idx` (None: all), all of chunk length `length`."""
        starts = self.starts if idx is None else self.starts[idx]
        out = np.empty((len(starts), length), np.uint8)
        out[:, :4] = np.array([length - 4], ">i4").view(np.uint8)
        out[:, 4:] = self.data[ranges(starts, np.full(len(starts), length - 4))].reshape(
            len(starts), length - 4)
        return out

    def pieces(self):
        """The record's chunks as two piece columns (buffer, starts, lengths): every record's
        length word, then its bytes -- the data as they are, no copy (copybin._by_pieces)."""
        n = len(self)
        words = self.lens.astype(">i4").view(np.uint8)
        return [(words, 4 * np.arange(n, dtype=np.int64), np.full(n, 4, np.int64)),
                (self.data, self.starts, self.lens)]
