"""Proof that the stored ``deid.rid_set`` rows are byte-for-byte the RID sets the verifier
checked in memory (verify the arrays, then prove that what was stored is them: reading 3M RIDs
back cost more than the release's write).

What is compared.  For every stored row (one chunk of one attribute of the release) the server
computes, in one aggregate pass over ``deid.rid_set`` (:data:`_STORED_SQL`)::

    chunk (int4) | entries (int4) | rids (int4) | sha256(image)
    entries = cardinality(value_list), rids = length(rids) / 8
    image = int4send(length(group_ids)) || sha256(group_ids) || array_send(value_list)
            || int4send(length(rid_counts)) || sha256(rid_counts)
            || int4send(length(rids)) || sha256(rids)
                                         (value_list's elements in UTF-8)

and returns, per attribute, those 44-byte records in chunk order.  group_ids, rid_counts and
rids are stored as packed bytea (sql/00_catalog.sql: big-endian int4, int4 and int8 per
element, back to back), so the server hashes the stored bytes as they are.  The same pass
takes the release's digest of deid.rid_set that its log row records (table_digest.CATALOGS:
each row's text holds the same sha256 of group_ids, rid_counts and rids, each computed once):
the catalog is read once, not once for this proof and once for the log.  :func:`check_stored`
builds the same images with numpy from the arrays (each packed number: the value as a
big-endian int4 or int8; ``array_send``'s format for the values, written here from the
PostgreSQL documentation of the binary array format, not with the writer's encoder: ``ndim,
has-null flag, element type OID, length, lower bound 1``, then per element its length word and
its UTF-8 text, -1 and nothing for NULL; an empty array is ``0, 0, OID``) and compares,
attribute by attribute: the same attribute names, chunks numbered 0, 1, ... without gap or
repeat, the entries and RIDs of every chunk adding up to the arrays', and equal digests.

Why that proves equality.  A chunk's image is a prefix-free encoding of its four columns: each
packed column is its length in bytes and its SHA-256 (fixed widths), and array_send's image
carries its own element count and every element its own length word; so the image determines
the SHA-256 of the stored bytes of the packed columns and the values exactly.  Equal SHA-256
digests of different images, or of different packed bytes, would be a SHA-256 collision, which
no known method finds (2^128 work generically).  So equal
digests mean the stored bytes are the packing of the arrays, and
the packing is one-to-one: a group or count is checked to fit int4 (RIDs are int8) before it
is packed, so no two arrays pack to the same bytes.  The chunk numbers, entry counts and RID
counts are compared in the clear, so the stored rows, taken in chunk order, are exactly the
arrays cut at those boundaries: a changed, moved, dropped or added RID, value, group or count
changes an image; a truncated or padded column changes its length word; a dropped,
duplicated or renumbered row changes the list of chunks.  The values are hashed in UTF-8
whatever the session's client_encoding (see _VALUES_UTF8); the packed numbers are the stored
bytes, which do not depend on any setting.
"""
import hashlib

import numpy as np

from ...errors import DeidError, VERIFICATION_FAILED
from . import table_digest
from .failures import _fail

INT4OID, INT8OID, TEXTOID = 23, 20, 25

# array_send of the text[] value_list is its UTF-8 image when the session's client_encoding
# and the server's encoding are UTF8 (textsend converts to the client's encoding); otherwise
# the same image is built element by element with convert_to (slower, same bytes).
_VALUES_UTF8 = (
    "CASE WHEN pg_catalog.pg_client_encoding() = 'UTF8'"
    " AND pg_catalog.current_setting('server_encoding') = 'UTF8' THEN array_send(r.value_list)"
    " WHEN cardinality(r.value_list) = 0 THEN '\\x000000000000000000000019'::bytea"
    " ELSE int4send(1) || int4send((array_position(r.value_list, NULL) IS NOT NULL)::int)"
    " || int4send(25) || int4send(cardinality(r.value_list)) || int4send(1)"
    " || (SELECT string_agg(CASE WHEN v IS NULL THEN '\\xffffffff'::bytea"
    "     ELSE int4send(length(convert_to(v, 'UTF8'))) || convert_to(v, 'UTF8') END,"
    "     ''::bytea ORDER BY o) FROM unnest(r.value_list) WITH ORDINALITY u(v, o)) END")

# the packed columns' SHA-256, once per row (OFFSET 0: evaluated here, not copied into the
# image and the catalog digest's row text, which both use them)
_PACKED_SHA = ("LATERAL (SELECT sha256(c.group_ids) AS g, sha256(c.rid_counts) AS n,"
               " sha256(c.rids) AS r OFFSET 0) s")

_STORED_SQL = (
    "SELECT c.attribute AS a, string_agg(int4send(c.chunk) || int4send(cardinality(c.value_list))"
    " || int4send(length(c.rids) / 8) || sha256(int4send(length(c.group_ids)) || c.g"
    " || " + _VALUES_UTF8.replace("r.value_list", "c.value_list")
    + " || int4send(length(c.rid_counts)) || c.n"
    " || int4send(length(c.rids)) || c.r), ''::bytea ORDER BY c.chunk) AS d, "
    + table_digest.PARTIAL_SUMS + " FROM (SELECT c.attribute, c.chunk, c.value_list, c.group_ids,"
    " c.rid_counts, c.rids, s.g, s.n, s.r, "
    + table_digest.row_hash(table_digest.CATALOGS["deid.rid_set"]
                            .replace("sha256(c.group_ids)", "s.g")
                            .replace("sha256(c.rid_counts)", "s.n")
                            .replace("sha256(c.rids)", "s.r"))
    + " AS h FROM deid.rid_set c, " + _PACKED_SHA + " WHERE c.release_id = $1) c"
    " GROUP BY c.attribute")

_RECORD = np.dtype([("chunk", ">i4"), ("entries", ">i4"), ("rids", ">i4"), ("digest", "S32")])
_HINT = ("Nothing was released. The stored RID sets differ from the ones the verifier checked: "
         "report it with the request (deid.release keeps no row of a failed request).")


def stored_digests(db, release_id, known=None):
    """{attribute: structured array of (chunk, entries, rids, digest)} of the stored rows;
    into ``known`` (a dict, RunState.digests), the release's digest of deid.rid_set that
    table_digest.digests records (taken with table_digest.PINNED set, as it takes it)."""
    with table_digest.pinned(db):
        rows = db.query(_STORED_SQL, [release_id], ["bigint"])
    if known is not None:
        known["deid.rid_set"] = table_digest.combine(rows)
    out = {}
    for r in rows:
        buf = r["d"] or b""
        if len(buf) % _RECORD.itemsize:
            _fail(f"deid.rid_set of attribute {r['a']!r} could not be digested", hint=_HINT)
        out[r["a"]] = np.frombuffer(buf, _RECORD)
    return out


def check_stored(stored, expected):
    """Compare :func:`stored_digests` with the arrays: ``expected`` is a list of
    (attribute, group, value_code, dictionary, count, rids) -- per entry its group, its value
    as a code into ``dictionary`` (a code >= len(dictionary), or an entry None, is NULL) and
    the size of its RID set, and the RID sets concatenated. Raises DE002 on any difference;
    returns {"chunks": c, "rids": n}."""
    names = sorted(a for a, *_ in expected)
    if sorted(stored) != names:
        _fail("deid.rid_set does not hold the RID sets of exactly the sensitive attributes",
              detail=f"stored {sorted(stored)}, checked {names}", hint=_HINT)
    chunks = rids_total = 0
    for attribute, group, code, dictionary, count, rids in expected:
        got = stored[attribute]
        entries = got["entries"].astype(np.int64)
        if not np.array_equal(got["chunk"], np.arange(len(got))) or np.any(entries < 0) \
                or int(entries.sum()) != len(count):
            _fail(f"deid.rid_set of attribute {attribute!r}: its chunks are not the checked "
                  "entries", detail=f"{len(got)} chunk(s), {int(entries.sum())} of "
                  f"{len(count)} entries", hint=_HINT)
        ends = np.cumsum(entries)
        count = np.asarray(count, np.int64)
        rid_ends = np.concatenate([[0], np.cumsum(count)])[ends]
        per_chunk = np.diff(np.concatenate([[0], rid_ends]))
        if not np.array_equal(per_chunk, got["rids"].astype(np.int64)) or rid_ends[-1:].sum() \
                != len(rids):
            _fail(f"deid.rid_set of attribute {attribute!r}: its RID counts are not the checked "
                  "ones", hint=_HINT)
        digests = _digests(group, code, dictionary, count, rids, entries, per_chunk)
        bad = np.flatnonzero(np.asarray(digests, "S32") != got["digest"])
        if bad.size:
            _fail(f"deid.rid_set of attribute {attribute!r}: chunk {int(bad[0])} is not the RID "
                  "sets the verifier checked", detail=f"{bad.size} chunk(s) differ", hint=_HINT)
        chunks += len(got)
        rids_total += len(rids)
    return {"chunks": chunks, "rids": rids_total, "digest": "sha256 per chunk"}


def _digests(group, code, dictionary, count, rids, entries, per_chunk):
    """SHA-256 of each chunk's image (see the module docstring), built a chunk at a time (a
    chunk's packed numbers go through one reused big-endian buffer per width)."""
    group, count, rids = np.asarray(group), np.asarray(count), np.asarray(rids)
    for name, x in (("group", group), ("count", count)):
        if x.size and (int(x.min()) < -2 ** 31 or int(x.max()) >= 2 ** 31):
            _fail(f"deid.rid_set: a {name} in memory does not fit int4", hint=_HINT)
    code = np.minimum(np.asarray(code, np.int64), len(dictionary))
    words = [b"\xff\xff\xff\xff" if s is None else len(s.encode()).to_bytes(4, "big") + s.encode()
             for s in dictionary] + [b"\xff\xff\xff\xff"]
    null = np.array([x is None for x in dictionary] + [True])
    table = _word_table(words)
    most = (int(entries.max()) if entries.size else 0, int(per_chunk.max()) if per_chunk.size else 0)
    int4s, int8s = np.empty(most[0], ">i4"), np.empty(most[1], ">i8")     # hashed as soon as written
    out, e0, r0 = [], 0, 0
    for ne, nr in zip(entries.tolist(), per_chunk.tolist()):
        e1, r1 = e0 + ne, r0 + nr
        codes = code[e0:e1]
        h = hashlib.sha256()
        _hash_packed(h, group[e0:e1], int4s)
        h.update(array_header(ne, TEXTOID, bool(null[codes].any())))
        h.update(_text_elements(codes, *table))
        _hash_packed(h, count[e0:e1], int4s)
        _hash_packed(h, rids[r0:r1], int8s)
        out.append(h.digest())
        e0, r0 = e1, r1
    return out


def _hash_packed(h, values, buf):
    """Hash int4send(length in bytes) || sha256(the values packed big-endian) (a packed column
    of deid.rid_set); the values are written into the front of ``buf`` ('>i4' or '>i8')."""
    out = buf[:len(values)]
    out[...] = values
    h.update(np.array([out.nbytes], ">i4").tobytes())
    h.update(hashlib.sha256(out).digest())      # hashlib takes the buffer: no bytes copy


def array_header(n, oid, has_null=False):
    """array_send's header of a one-dimensional array of n elements."""
    if n == 0:
        return np.array([0, 0, oid], ">i4").tobytes()
    return np.array([1, int(has_null), oid, n, 1], ">i4").tobytes()


def array_elements(values, dtype):
    """Every element as array_send writes it: its length word, then its value."""
    out = np.empty(len(values), [("len", ">i4"), ("v", dtype)])
    out["len"] = np.dtype(dtype).itemsize
    out["v"] = values
    return out.view(np.uint8)            # hashlib takes the buffer: no bytes copy


def _word_table(words):
    """The words zero-padded as rows of a uint8 table, and their lengths."""
    lens = np.array([len(w) for w in words], np.int64)
    table = np.zeros((len(words), int(lens.max())), np.uint8)
    for i, w in enumerate(words):
        table[i, :len(w)] = np.frombuffer(w, np.uint8)
    return table, lens


def _text_elements(code, table, lens):
    """The value elements of entries with these codes, back to back: word code[i] each (int4
    length + UTF-8 bytes, or int4 -1 for NULL; rows of _word_table)."""
    rows = table[code]
    return rows[np.arange(table.shape[1]) < lens[code][:, None]]     # a contiguous uint8 array


ARRAY_HINT = ("Nothing was released. A stored array differs from what the method computed: "
              "a bug, or the catalog was changed; report it with the request.")


def unpack_arrays(buf, counts, width=8):
    """The elements of concatenated ``array_send`` images of one-dimensional
    int8[] (width 8) or int4[] (width 4) arrays without NULLs (header 20
    bytes -- 12 for an empty array -- then (int4 length, value) per element),
    as one int64 array (deid.cluster_member's rids: verify/condensation.py).
    Raises DE002 if the images are not exactly that."""
    counts = np.asarray(counts, dtype=np.int64)
    buf = buf or b""
    head = np.where(counts > 0, 20, 12)
    sizes = head + (4 + width) * counts
    if int(sizes.sum()) != len(buf):
        raise DeidError(VERIFICATION_FAILED, "deid's catalog holds arrays of an unexpected shape",
                        hint="RID arrays must be one-dimensional arrays without NULLs")
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    starts = np.cumsum(sizes) - sizes
    _check_array_headers(buf, starts, counts, {8: 20, 4: 23}[width])
    before = np.cumsum(counts) - counts
    # element j of the whole stream, i-th of entry e: its length word at
    # starts[e] + head[e] + (4 + width) i, its value 4 bytes later
    word = (4 + width) * np.arange(total, dtype=np.int64) + \
        np.repeat(starts + head - (4 + width) * before, counts)
    lengths = np.ndarray((len(buf) - 3,), dtype=">i4", buffer=buf, strides=(1,))[word]
    if np.any(lengths != width):
        raise DeidError(VERIFICATION_FAILED, "deid's catalog holds NULL or malformed array elements",
                        hint=ARRAY_HINT)
    every = np.ndarray((len(buf) - width + 1,), dtype=f">i{width}", buffer=buf, strides=(1,))
    return every[word + 4].astype(np.int64)


def _check_array_headers(buf, starts, counts, oid):
    """Each image's header at its expected start: ndim (1, or 0 when empty), no NULL flag,
    the element type, one dimension of `counts` elements from lower bound 1 (sizes that add
    up by chance, e.g. a NULL element against an extra dimension, fail here)."""
    words = np.ndarray((max(len(buf) - 3, 0),), dtype=">i4", buffer=buf, strides=(1,))
    full = counts > 0
    ok = np.array_equal(words[starts], full.astype(np.int64)) and \
        not np.any(words[starts + 4]) and np.all(words[starts + 8] == oid)
    at = starts[full]
    ok = ok and np.array_equal(words[at + 12], counts[full]) and np.all(words[at + 16] == 1)
    if not ok:
        raise DeidError(VERIFICATION_FAILED, "deid's catalog holds arrays of an unexpected shape",
                        hint=ARRAY_HINT)
