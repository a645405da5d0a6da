"""The stored form of a release's selected row ids (deid.release_selection.rids), read by the
composition rule for every earlier release of the source before each commit.

Sorted distinct int64 ids, in one of two self-describing layouts (the first byte says which):

- ``B`` (a bitmap): the smallest id as int8 big-endian, then one bit per id of the span,
  most significant bit first (bit i: id lo + i is selected). Row ids are mostly dense, so a
  million selected rows take 125 kB instead of 8 MB, and a hundred earlier releases are read
  and decoded in milliseconds rather than copying 800 MB out of the catalog;
- ``R`` (runs): per run of consecutive ids, its first id and its length, int8 big-endian
  (all rows but a band, a range: a few runs, a few bytes; log/runs.py checks them as runs);
- ``I`` (the ids): int8 big-endian, back to back (sparse ids, where a bitmap would be larger).

The smallest is written (ties: in that order); equal sets always give equal bytes (the rule compares selections by
their bytes). Pure numpy, no plpy.
"""
import numpy as np

BITMAP, RUNS, IDS = b"B", b"R", b"I"


def pack(ids: np.ndarray) -> bytes:
    """Sorted distinct int64 ids as stored."""
    ids = np.asarray(ids, np.int64)
    if ids.size == 0:
        return IDS
    lo = int(ids[0])
    span = int(ids[-1]) - lo + 1
    cut = np.flatnonzero(np.diff(ids) != 1) + 1
    runs = cut.size + 1
    sizes = {BITMAP: 9 + (span + 7) // 8, RUNS: 1 + 16 * runs, IDS: 1 + 8 * ids.size}
    best = min((BITMAP, RUNS, IDS), key=lambda layout: sizes[layout])
    if best == IDS:
        return IDS + ids.astype(">i8").tobytes()
    if best == RUNS:
        starts = ids[np.concatenate([[0], cut])]
        lengths = np.diff(np.concatenate([[0], cut, [ids.size]]))
        return RUNS + np.stack([starts, lengths], axis=1).astype(">i8").tobytes()
    bits = np.zeros(span, bool)
    bits[ids - lo] = True
    return BITMAP + lo.to_bytes(8, "big", signed=True) + np.packbits(bits).tobytes()


def unpack(data) -> np.ndarray:
    """The sorted int64 ids of a stored value (either layout)."""
    data = bytes(data or b"")
    if data[:1] == BITMAP:
        lo = int(np.frombuffer(data, ">i8", 1, 1)[0])
        bits = np.unpackbits(np.frombuffer(data, np.uint8, offset=9))
        return np.flatnonzero(bits).astype(np.int64) + lo
    if data[:1] == RUNS:
        pairs = np.frombuffer(data, ">i8", offset=1).astype(np.int64).reshape(-1, 2)
        starts, lengths = pairs[:, 0], pairs[:, 1]
        offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        return offsets + np.arange(int(lengths.sum()), dtype=np.int64)
    if data[:1] == IDS:
        return np.frombuffer(data, ">i8", offset=1).astype(np.int64)
    raise ValueError("deid.release_selection holds a value of no known layout")


def count(data) -> int:
    """How many ids a stored value holds (without decoding a bitmap's positions)."""
    data = bytes(data or b"")
    if data[:1] == BITMAP:
        return int(np.unpackbits(np.frombuffer(data, np.uint8, offset=9)).sum())
    if data[:1] == RUNS:
        return int(np.frombuffer(data, ">i8", offset=1).reshape(-1, 2)[:, 1].sum())
    return (len(data) - 1) // 8
