"""Dictionary codes of categorical values from their hashes (pure numpy; no SQL).

The read (snapshot.read) packs each categorical value as a hash: hashtext() (32 bits), matched
against the dictionary's hashes (codes_from_hashes), or hashtextextended() with a random seed
(64 bits), whose distinct values are found in O(n) (distinct_hashes: a table indexed by 16 of their
bits, read straight from the packed big-endian rows by low_16_bits) and given each a row that
holds it, whose text the read then fetches.
"""
import numpy as np

from ..errors import DeidError, SERIALIZATION_FAILURE


def codes_from_hashes(name, hashes, dictionary_hashes, null):
    """Dictionary codes of the rows from their hashtext() values."""
    dh = np.asarray(dictionary_hashes, dtype=np.int32)
    if len(dh) == 0:
        return np.zeros(len(hashes), np.int64)
    slot = perfect_slots(dh)
    if slot is not None:                  # a table indexed by some bits of the hash
        shift, mask = slot
        table_code = np.zeros(mask + 1, np.int32)
        table_hash = np.zeros(mask + 1, np.int32)
        where = (dh >> shift) & mask
        table_code[where], table_hash[where] = np.arange(len(dh)), dh
        where = (hashes >> shift) & mask
        codes, seen = table_code[where].astype(np.int64), table_hash[where]
    else:
        order = np.argsort(dh, kind="stable")
        pos = np.minimum(np.searchsorted(dh[order], hashes), len(dh) - 1)
        codes, seen = order[pos], dh[order][pos]
    if not np.all((seen == hashes) | null):
        raise DeidError(SERIALIZATION_FAILURE, f'the values of "{name}" changed while the request read them',
                        hint="Run the request again (the source was written to concurrently).")
    codes[null] = len(dh)
    return codes


def perfect_slots(dh, max_bits=20):
    """(shift, mask) such that the bits (h >> shift) & mask of the dictionary's
    hashes are all different -- a collision-free table of at most 2^max_bits
    slots (random hashes need about D^2 slots for that) -- or None."""
    bits = max(4, (len(dh) * len(dh)).bit_length())
    for size in range(bits, max_bits + 1):
        mask = (1 << size) - 1
        for shift in range(0, 32 - size + 1, 2):
            if len(np.unique((dh >> shift) & mask)) == len(dh):
                return shift, mask
    return None


def low_16_bits(buf, layout, i, n):
    """The low 16 bits of the big-endian 8-byte field f{i} of each of the n packed rows of
    `buf` (its last two bytes), as intp; None for no rows."""
    if n == 0:
        return None
    return np.ndarray((n,), ">u2", buffer=buf, offset=layout.fields[f"f{i}"][1] + 6,
                      strides=(layout.itemsize,)).astype(np.intp)


def distinct_hashes(h, bits=16, slot=None):
    """(distinct values of the int64 array h -- native or big-endian --, a row holding each, a
    RowIndex of every row's index into them) in O(n) when they are few: a table indexed by
    the low `bits` bits of h (`slot`: those bits as intp, if at hand) keeps the first hash of
    each slot; rows whose slot another hash took are ranked by np.unique (all rows, when more
    than a quarter collide)."""
    n = len(h)
    size = 1 << bits
    if slot is None:
        slot = np.bitwise_and(h, size - 1, dtype=np.int64).astype(np.intp, copy=False)
    first = np.full(size, n, np.int64)
    used = np.flatnonzero(np.bincount(slot, minlength=size))
    head = min(n, 4 * size)        # the first row of a slot is most often among the first rows
    first[slot[:head][::-1]] = np.arange(head - 1, -1, -1)
    if np.any(first[used] == n):
        first[slot[::-1]] = np.arange(n - 1, -1, -1)     # last write wins: the first row
    kept = np.zeros(size, h.dtype)               # each slot's hash, gathered from a small table
    kept[used] = h[first[used]]
    same = kept[slot] == h
    if same.all():
        rest = np.zeros(0, np.intp)
    else:
        rest = np.flatnonzero(~same)
    del same
    if len(rest) > n // 4:
        distinct, rows, index = np.unique(np.asarray(h, np.int64), return_index=True,
                                          return_inverse=True)
        return distinct, rows, RowIndex(index=index.ravel())
    index_of = np.zeros(size, np.int64)
    index_of[used] = np.arange(len(used))
    distinct, rows = np.asarray(h[first[used]], np.int64), first[used]
    rest_index = None
    if len(rest):
        d2, r2, i2 = np.unique(np.asarray(h[rest], np.int64), return_index=True, return_inverse=True)
        rest_index = len(used) + i2.ravel()
        distinct, rows = np.concatenate([distinct, d2]), np.concatenate([rows, rest[r2]])
    return distinct, rows, RowIndex(slot, index_of, rest, rest_index)


class RowIndex:
    """Every row's index into distinct_hashes's values, as the rows' slots and each slot's index
    (rows whose slot another hash took: `rest`, with their own indexes), or as an array:
    take(a) is a[index] for every row, one gather from a table of the slots."""

    def __init__(self, slot=None, index_of=None, rest=None, rest_index=None, index=None):
        self.slot, self.index_of, self.rest, self.rest_index = slot, index_of, rest, rest_index
        self.index = index

    def take(self, a):
        a = np.asarray(a)
        if self.index is not None:
            return a[self.index]
        out = (a[self.index_of] if len(a) else np.zeros(len(self.index_of), a.dtype))[self.slot]
        if self.rest_index is not None:
            out[self.rest] = a[self.rest_index]
        return out
