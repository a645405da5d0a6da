"""PostgreSQL's ``hash_record_extended`` of a release row, computed with numpy over arrays.

The condensation verifier (``verify/condensation.py``) proves that the stored release table
holds exactly the rows it checked in memory with ONE aggregate pass over the table::

    SELECT count(*), sum(hashint8extended(h, seed)), sum(hashint8extended(h >> 32, seed))
      FROM table, LATERAL (SELECT hash_record_extended(ROW(c1, c2, ...), seed) AS h) r

(31 times the first sum plus the second is, mod 2^64, the sum of
``hash_record_extended(ROW(h, h >> 32), seed)``: a two-column record hashes as 31 e1 + e2)

against :func:`row_hash_sum` of the arrays with the same seed (a fresh random one for every
verification).  Written from the PostgreSQL 15 sources (``common/hashfn.c``, ``access/hash/
hashfunc.c``, ``utils/adt/rowtypes.c``), not from the writer's encoder:

* ``hash_record_extended(r, seed)``: ``h = 0``; for every column ``h = 31 * h + e`` (mod 2^64),
  ``e`` the column type's extended hash of the value with ``seed``, 0 for NULL.  That is
  LINEAR in the columns' hashes: summed over rows it would only fingerprint every column's
  multiset of values (two rows swapping a value would go unseen).  So every row's ``h`` is
  hashed once more, as the record ``(h, h >> 32)`` (its two int8 elements fold to the low
  and the high word: all 64 bits of ``h`` enter lookup3's non-linear ``final``), and those
  are summed;
* int2, int4, date (days since 2000-01-01): ``hash_bytes_uint32_extended(v, seed)``; int8:
  the low word xor the high word (its complement when negative), then the same;
* float8, float4 (widened to float8): ``seed`` for +-0, otherwise ``hash_bytes_extended`` of
  the 8 bytes of the double (two little-endian words; Bob Jenkins' lookup3 ``mix``/``final``);
* any other type (the categories: text, boolean, ...): the server hashes each dictionary
  label once (:func:`label_hashes`), the rows take their label's hash.

Only little-endian servers are handled (the byte order of ``hash_bytes_extended``'s words);
elsewhere the digests differ and the verifier falls back to comparing the values.
"""
import numpy as np

MASK32 = np.uint32(0xFFFFFFFF)
_INIT_8 = np.uint32((0x9E3779B9 + 8 + 3923095) & 0xFFFFFFFF)
_INIT_4 = np.uint32((0x9E3779B9 + 4 + 3923095) & 0xFFFFFFFF)
PG_EPOCH_DAYS = 10957                 # 2000-01-01 - 1970-01-01
HASHED_TYPES = ("int2", "int4", "int8", "date", "float4", "float8")


def _rot(x, k):
    return (x << np.uint32(k)) | (x >> np.uint32(32 - k))


def _mix(a, b, c):
    a -= c; a ^= _rot(c, 4); c += b           # noqa: E702 (lookup3's layout)
    b -= a; b ^= _rot(a, 6); a += c           # noqa: E702
    c -= b; c ^= _rot(b, 8); b += a           # noqa: E702
    a -= c; a ^= _rot(c, 16); c += b          # noqa: E702
    b -= a; b ^= _rot(a, 19); a += c          # noqa: E702
    c -= b; c ^= _rot(b, 4); b += a           # noqa: E702
    return a, b, c


def _final(a, b, c):
    c ^= b; c -= _rot(b, 14)                  # noqa: E702
    a ^= c; a -= _rot(c, 11)                  # noqa: E702
    b ^= a; b -= _rot(a, 25)                  # noqa: E702
    c ^= b; c -= _rot(b, 16)                  # noqa: E702
    a ^= c; a -= _rot(c, 4)                   # noqa: E702
    b ^= a; b -= _rot(a, 14)                  # noqa: E702
    c ^= b; c -= _rot(b, 24)                  # noqa: E702
    return a, b, c


def _start(init, n, seed):
    a = np.full(n, init, np.uint32)
    b, c = a.copy(), a.copy()
    if seed:
        a += np.uint32(seed >> 32)
        b += np.uint32(seed & 0xFFFFFFFF)
        a, b, c = _mix(a, b, c)
    return a, b, c


def _result(b, c):
    return (b.astype(np.uint64) << np.uint64(32)) | c.astype(np.uint64)


def hash_uint32(words, seed):
    """``hash_bytes_uint32_extended`` of uint32 words: uint64."""
    a, b, c = _start(_INIT_4, words.size, seed)
    a += words.astype(np.uint32)
    a, b, c = _final(a, b, c)
    return _result(b, c)


def hash_int(values, base_type, seed):
    """The extended hash of int2/int4/date (already int32 values) or int8 values."""
    v = np.asarray(values, np.int64)
    if base_type == "int8":
        lo = (v & 0xFFFFFFFF).astype(np.uint32)
        hi = ((v >> 32) & 0xFFFFFFFF).astype(np.uint32)
        words = lo ^ np.where(v >= 0, hi, ~hi)
    else:
        words = v.astype(np.int32).view(np.uint32)
    return hash_uint32(words, seed)


def hash_float8(values, seed):
    """``hashfloat8extended`` (and ``hashfloat4extended`` of float4 values widened)."""
    v = np.ascontiguousarray(values, dtype="<f8")
    words = v.view("<u4").reshape(-1, 2)
    a, b, c = _start(_INIT_8, v.size, seed)
    a += words[:, 0]
    b += words[:, 1]
    a, b, c = _final(a, b, c)
    out = _result(b, c)
    out[v == 0.0] = np.uint64(seed)
    return out


def label_hashes_sql(type_text):
    """SQL giving, for $1 (text[] of labels) and $2 (seed), each label's extended hash as the
    release column's type hashes it (a one-column record hashes as its column), in order."""
    return ("SELECT hash_record_extended(ROW(v::" + type_text + "), $2) AS h"
            " FROM unnest($1::text[]) WITH ORDINALITY d(v, o) ORDER BY o")


def column_hash(values, base_type, seed, labels=None):
    """Element hashes (uint64) of one column: ``values`` in the release's encoding (numbers;
    dates as days since 1970-01-01; categories as codes into ``labels``, the server's hashes
    of the dictionary labels as int64, a code past the end is NULL)."""
    if labels is not None:
        table = np.append(np.asarray(labels, np.int64).view(np.uint64), np.uint64(0))
        return table[np.minimum(np.asarray(values, np.int64), len(labels))]
    if base_type in ("float8", "float4"):
        return hash_float8(values, seed)
    if base_type == "date":
        return int_column_hash(np.asarray(values, np.int64) - PG_EPOCH_DAYS, "int4", seed)
    return int_column_hash(values, base_type, seed)


def row_hash_sum(columns, seed):
    """Sum mod 2^64 over the rows of hash_record_extended(ROW(h, h >> 32), seed), h the row's
    hash_record_extended: ``columns`` are the element hashes of every column in table order
    (uint64 arrays of equal length). Returns an int."""
    if not columns:
        return 0
    h = np.zeros(columns[0].size, np.uint64)
    with np.errstate(over="ignore"):
        for e in columns:
            h = (h << np.uint64(5)) - h + e
        signed = h.view(np.int64)
        g = hash_int(signed, "int8", seed)
        g = (g << np.uint64(5)) - g + hash_int(signed >> 32, "int8", seed)
    return int(g.sum(dtype=np.uint64))


def int_column_hash(values, base_type, seed):
    """:func:`hash_int` through a table of the column's range when it is short (ages, dates)."""
    v = np.asarray(values, np.int64)
    if v.size:
        lo, hi = int(v.min()), int(v.max())
        if hi - lo < max(v.size // 4, 1):
            return hash_int(np.arange(lo, hi + 1), base_type, seed)[v - lo]
    return hash_int(v, base_type, seed)
