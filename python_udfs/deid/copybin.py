"""PostgreSQL binary COPY images built with numpy (pure; no per-row Python).

A record is ``int16 nfields`` then, per field, ``int32 length`` (-1 = NULL)
and the field's bytes. Fields here:

* :class:`Fixed`   -- fixed-width numbers (int2/int4/int8/float4/float8/date),
* :class:`Text`    -- text chosen from a dictionary by integer code,
* :class:`Int8Array` -- a one-dimensional bigint[] per record (RID sets).
"""
from dataclasses import dataclass

import numpy as np

HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
TRAILER = b"\xff\xff"
INT8OID = 20
_POSTGRES_EPOCH_DAYS = 10957          # 2000-01-01 - 1970-01-01


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


def _scatter_fixed(buf, starts, raw, width):
    """buf[starts[i] : starts[i] + width] = raw[i] for every record i."""
    buf[(starts[:, None] + np.arange(width)).reshape(-1)] = raw.reshape(-1)


def _length_prefixed(blobs):
    """Chunks ``int32 length + bytes`` of a list of bytes (None = NULL) as one
    uint8 blob, with each chunk's offset and length."""
    chunks = [(-1).to_bytes(4, "big", signed=True) if b is None else len(b).to_bytes(4, "big") + b
              for b in blobs]
    lens = np.array([len(c) for c in chunks], np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]])
    return np.frombuffer(b"".join(chunks), np.uint8), offs, lens


@dataclass
class Fixed:
    """Fixed-width numbers; `dtype` is a big-endian numpy dtype ('>i2' '>i4' '>i8' '>f4' '>f8')."""
    values: np.ndarray
    dtype: str
    null: np.ndarray = None

    @classmethod
    def date(cls, days_since_1970, null=None):
        return cls(np.asarray(days_since_1970, np.int64) - _POSTGRES_EPOCH_DAYS, ">i4", null)

    def __len__(self):
        return len(self.values)

    @property
    def constant(self):
        return self.null is None or not self.null.any()

    def chunk_lengths(self):
        width = 4 + np.dtype(self.dtype).itemsize
        out = np.full(len(self.values), width, np.int64)
        if not self.constant:
            out[self.null] = 4
        return out

    def fill(self, buf, starts):
        """Write ``length + value`` (or -1 for NULL) at `starts`."""
        w = np.dtype(self.dtype).itemsize
        rec = np.empty(len(self.values), dtype=[("len", ">i4"), ("v", self.dtype)])
        rec["len"], rec["v"] = w, self.values
        if self.constant:
            _scatter_fixed(buf, starts, rec.view(np.uint8), 4 + w)
            return
        ok = ~self.null
        _scatter_fixed(buf, starts[ok], rec[ok].view(np.uint8), 4 + w)
        _scatter_fixed(buf, starts[~ok], np.tile(np.full(4, 255, np.uint8), int((~ok).sum())), 4)

    def chunks(self, idx, length):
        """(m, length) bytes of records `idx`, all of chunk length `length`."""
        if length == 4:
            return np.full((len(idx), 4), 255, np.uint8)
        rec = np.empty(len(idx), dtype=[("len", ">i4"), ("v", self.dtype)])
        rec["len"], rec["v"] = length - 4, self.values[idx]
        return rec.view(np.uint8).reshape(len(idx), length)


@dataclass
class Text:
    """Text chosen from a dictionary by code; a code >= len(dictionary) is NULL."""
    codes: np.ndarray
    dictionary: list

    def __len__(self):
        return len(self.codes)

    constant = False

    def _chunks(self):
        if not hasattr(self, "_memo"):
            self._memo = _length_prefixed([s.encode() for s in self.dictionary] + [None])
        return self._memo

    def chunk_lengths(self):
        _, _, lens = self._chunks()
        return lens[np.minimum(self.codes, len(self.dictionary))]

    def _table(self):
        """The dictionary's chunks as a zero-padded (D + 1, width) table."""
        if not hasattr(self, "_padded"):
            blob, _, lens = self._chunks()
            table = np.zeros((len(lens), int(lens.max())), np.uint8)
            table[np.repeat(np.arange(len(lens)), lens), ranges(np.zeros(len(lens), np.int64), lens)] = blob
            self._padded = table
        return self._padded

    def fill(self, buf, starts):
        blob, offs, lens = self._chunks()
        c = np.minimum(self.codes, len(self.dictionary))
        buf[ranges(starts, lens[c])] = blob[ranges(offs[c], lens[c])]

    def chunks(self, idx, length):
        return self._table()[np.minimum(self.codes[idx], len(self.dictionary)), :length]


@dataclass
class Int8Array:
    """One bigint[] per record: `counts` elements each, all of them in `flat`."""
    counts: np.ndarray
    flat: np.ndarray

    def __len__(self):
        return len(self.counts)

    constant = False

    def chunk_lengths(self):
        return 24 + 12 * self.counts.astype(np.int64)

    def fill(self, buf, starts):
        n = len(self.counts)
        head = np.empty(n, dtype=[("len", ">i4"), ("ndim", ">i4"), ("flags", ">i4"), ("type", ">i4"),
                                  ("dim", ">i4"), ("lbound", ">i4")])
        head["len"] = 20 + 12 * self.counts.astype(np.int64)
        head["ndim"], head["flags"], head["type"], head["lbound"] = 1, 0, INT8OID, 1
        head["dim"] = self.counts
        _scatter_fixed(buf, starts, head.view(np.uint8), 24)
        elems = np.empty(len(self.flat), dtype=[("len", ">i4"), ("v", ">i8")])
        elems["len"], elems["v"] = 8, self.flat
        buf[ranges(starts + 24, 12 * self.counts.astype(np.int64))] = elems.view(np.uint8)

    def chunks(self, idx, length):
        """(m, length) bytes of records `idx`, which all hold (length - 24) / 12 elements."""
        n = (length - 24) // 12
        if not hasattr(self, "_first"):
            self._first = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)
        rec = np.empty(len(idx), dtype=[("len", ">i4"), ("ndim", ">i4"), ("flags", ">i4"),
                                        ("type", ">i4"), ("dim", ">i4"), ("lbound", ">i4"),
                                        ("e", [("len", ">i4"), ("v", ">i8")], (n,))])
        rec["len"], rec["ndim"], rec["flags"], rec["type"], rec["dim"], rec["lbound"] = \
            length - 4, 1, 0, INT8OID, n, 1
        rec["e"]["len"] = 8
        rec["e"]["v"] = self.flat[self._first[idx][:, None] + np.arange(n)]
        return rec.view(np.uint8).reshape(len(idx), length)


def field_order(fields):
    """Constant-width fields first: they form one fixed-size record prefix."""
    return sorted(range(len(fields)), key=lambda i: not fields[i].constant)


def records(fields):
    """The binary COPY image (header, records, trailer) of equal-length fields,
    in the given order (see field_order() for the fast one)."""
    n = len(fields[0])
    lead = 0
    while lead < len(fields) and fields[lead].constant:
        lead += 1
    prefix = np.empty(n, dtype=[("nf", ">i2")] + [
        (f"f{i}", [("len", ">i4"), ("v", f.dtype)]) for i, f in enumerate(fields[:lead])])
    prefix["nf"] = len(fields)
    for i, f in enumerate(fields[:lead]):
        prefix[f"f{i}"]["len"] = np.dtype(f.dtype).itemsize
        prefix[f"f{i}"]["v"] = f.values
    lens = [f.chunk_lengths() for f in fields[lead:]]
    if lens and all(hasattr(f, "chunks") for f in fields[lead:]):
        out = _by_layout(prefix, fields[lead:], lens)
        if out is not None:
            return HEADER + out + TRAILER
    rec = prefix.dtype.itemsize + (sum(lens) if lens else 0)
    rec = np.broadcast_to(rec, (n,)).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(rec)[:-1]]) + len(HEADER)
    buf = np.empty(len(HEADER) + int(rec.sum()) + len(TRAILER), np.uint8)
    buf[:len(HEADER)] = np.frombuffer(HEADER, np.uint8)
    buf[len(buf) - 2:] = 255
    if lead == len(fields):                     # every record has the same size
        buf[len(HEADER):len(buf) - 2] = prefix.view(np.uint8)
        return buf.tobytes()
    _scatter_fixed(buf, start, prefix.view(np.uint8), prefix.dtype.itemsize)
    pos = start + prefix.dtype.itemsize
    for f, ln in zip(fields[lead:], lens):
        f.fill(buf, pos)
        pos = pos + ln
    return buf.tobytes()


def _by_layout(prefix, fields, lens, max_layouts=4096):
    """Records grouped by layout (the tuple of their variable chunk lengths):
    within a layout every record has the same size, so a block is one
    structured array -- no per-byte scatter. Records keep their relative order
    within a layout (COPY does not care about row order)."""
    uniq = [np.unique(ln, return_inverse=True) for ln in lens]
    sizes = [len(u) for u, _ in uniq]
    if np.prod(sizes, dtype=float) > max_layouts:
        return None
    layout = np.ravel_multi_index([inv.reshape(-1) for _, inv in uniq], sizes) if len(sizes) > 1 \
        else uniq[0][1].reshape(-1)
    order = np.argsort(layout, kind="stable")
    bounds = np.searchsorted(layout[order], np.arange(int(np.prod(sizes)) + 1))
    blocks = []
    for lay in range(len(bounds) - 1):
        idx = order[bounds[lay]:bounds[lay + 1]]
        if len(idx) == 0:
            continue
        parts = np.unravel_index(lay, sizes)
        chunk_lens = [int(u[p]) for (u, _), p in zip(uniq, parts)]
        dt = [("prefix", prefix.dtype)] + [(f"c{i}", np.uint8, (ln,)) for i, ln in enumerate(chunk_lens)]
        block = np.empty(len(idx), dtype=dt)
        block["prefix"] = prefix[idx]
        for i, (f, ln) in enumerate(zip(fields, chunk_lens)):
            block[f"c{i}"] = f.chunks(idx, ln)
        blocks.append(block.tobytes())
    return b"".join(blocks)
