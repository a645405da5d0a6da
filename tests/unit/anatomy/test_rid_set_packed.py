"""deid.rid_set's packed form (group_ids, rid_counts: big-endian int4 per entry; rids:
big-endian int8 per RID) as the verifier reads it: the digest image of a chunk
(verify/rid_set_digest.py) against one built here from its documented layout with struct, and
the stored-only reader (verify/anatomy.py read_rid_sets) on well-formed and malformed rows."""
import hashlib
import struct

import numpy as np
import pytest

from deid.errors import DeidError
from deid.verify import anatomy
from deid.verify.shared import rid_set_digest as rd

# two chunks of one attribute: entries (group, value, RIDs)
CHUNKS = [[(0, "flu", [3, 9]), (0, None, [4]), (1, "Ökö ✓", [1, 2, 2**40])],
          [(2, "flu", [7]), (2, "", [5, 6])]]
DICTIONARY = ["flu", "Ökö ✓", ""]


def image(chunk):
    """The chunk's image as the module docstring defines it, written with struct."""
    groups = b"".join(struct.pack(">i", g) for g, _, _ in chunk)
    counts = b"".join(struct.pack(">i", len(r)) for _, _, r in chunk)
    rids = b"".join(struct.pack(">q", x) for _, _, r in chunk for x in r)
    has_null = any(v is None for _, v, _ in chunk)
    head = struct.pack(">5i", 1, int(has_null), 25, len(chunk), 1) if chunk else struct.pack(">3i", 0, 0, 25)
    values = head + b"".join(
        struct.pack(">i", -1) if v is None else struct.pack(">i", len(v.encode())) + v.encode()
        for _, v, _ in chunk)
    sha = (lambda b: hashlib.sha256(b).digest())
    return (struct.pack(">i", len(groups)) + sha(groups) + values + struct.pack(">i", len(counts))
            + sha(counts) + struct.pack(">i", len(rids)) + sha(rids))


def arrays(chunks=CHUNKS):
    """The in-memory form: (group, code, count, rids) of all entries, and the chunk cuts."""
    entries = [e for c in chunks for e in c]
    code = np.array([len(DICTIONARY) if v is None else DICTIONARY.index(v) for _, v, _ in entries])
    return (np.array([g for g, _, _ in entries], np.int32), code,
            np.array([len(r) for _, _, r in entries], np.int64),
            np.array([x for _, _, r in entries for x in r], np.int64),
            np.array([len(c) for c in chunks]), np.array([sum(len(r) for *_, r in c) for c in chunks]))


def stored(chunks=CHUNKS):
    """What the server's digest statement returns for these chunks."""
    rec = np.zeros(len(chunks), rd._RECORD)
    for i, c in enumerate(chunks):
        rec[i] = (i, len(c), sum(len(r) for *_, r in c), hashlib.sha256(image(c)).digest())
    return rec


def test_digests_are_the_documented_images():
    group, code, count, rids, entries, per_chunk = arrays()
    got = rd._digests(group, code, DICTIONARY, count, rids, entries, per_chunk)
    assert got == [hashlib.sha256(image(c)).digest() for c in CHUNKS]
    small = [CHUNKS[1], [(3, "flu", [8])], []]          # int32 RIDs in memory; an empty chunk
    group, code, count, rids, entries, per_chunk = arrays(small)
    got = rd._digests(group, code, DICTIONARY, count, rids.astype(np.int32), entries, per_chunk)
    assert got == [hashlib.sha256(image(c)).digest() for c in small]


def test_check_stored_accepts_the_same_and_refuses_a_changed_rid():
    group, code, count, rids, *_ = arrays()
    expected = [("diagnosis", group, code, DICTIONARY, count, rids)]
    assert rd.check_stored({"diagnosis": stored()}, expected)["rids"] == len(rids)
    changed = [[(g, v, [x + 1 for x in r]) for g, v, r in c] for c in CHUNKS]
    with pytest.raises(DeidError) as e:
        rd.check_stored({"diagnosis": stored(changed)}, expected)
    assert e.value.sqlstate == "DE002" and "chunk 0" in e.value.message


def test_groups_beyond_int4_are_refused():
    group, code, count, rids, entries, per_chunk = arrays()
    with pytest.raises(DeidError) as e:
        rd._digests(group.astype(np.int64) + 2**31, code, DICTIONARY, count, rids, entries, per_chunk)
    assert e.value.sqlstate == "DE002"


class FakeDb:
    def __init__(self, rows):
        self.rows = rows

    def query(self, sql, params=None, types=None):
        assert "FROM deid.rid_set" in sql and params == [7]
        return self.rows


def row(attribute, chunks, **change):
    """read_rid_sets' aggregate row of an attribute's chunks (the server's string_agg's)."""
    i4 = (lambda xs: b"".join(struct.pack(">i", x) for x in xs))
    out = {"a": attribute,
           "nv": i4([len(c) for c in chunks]), "ng": i4([4 * len(c) for c in chunks]),
           "nc": i4([4 * len(c) for c in chunks]),
           "nr": i4([8 * sum(len(r) for *_, r in c) for c in chunks]),
           "g": i4([g for c in chunks for g, _, _ in c]),
           "v": i4([hash(v) % 2**31 if v is not None else -2**31 for c in chunks for _, v, _ in c]),
           "c": i4([len(r) for c in chunks for *_, r in c]),
           "r": b"".join(struct.pack(">q", x) for c in chunks for *_, r in c for x in r)}
    out.update(change)
    return out


def test_read_rid_sets_decodes_the_packed_chunks():
    g, a, v, n, flat = anatomy.read_rid_sets(FakeDb([row("diagnosis", CHUNKS)]), 7)
    assert g.tolist() == [0, 0, 1, 2, 2] and list(a) == ["diagnosis"] * 5
    assert n.tolist() == [2, 1, 3, 1, 2]
    assert flat.tolist() == [3, 9, 4, 1, 2, 2**40, 7, 5, 6]
    assert v[0] == v[3] and len(set(v.tolist())) == 4


@pytest.mark.parametrize("change", [
    {"ng": struct.pack(">2i", 12, 4)},                         # group bytes not 4 per value
    {"nc": struct.pack(">2i", 12, 9)},                         # count bytes not 4 per value
    {"v": struct.pack(">i", 1)},                               # values missing
    {"nr": struct.pack(">2i", 48, 21)},                        # rids not whole int8s
    {"c": struct.pack(">5i", 2, 1, 3, 1, 3)},                  # counts do not add up
    {"c": struct.pack(">5i", 2, 1, 3, 4, -1)},                 # a negative count
    {"r": b"\x00" * 71},                                       # rids bytes not whole numbers
    {"g": b"\x00" * 19},                                     # groups not whole int4s
    {"g": b"\x00" * 16},                                     # a group missing
])
def test_read_rid_sets_refuses_malformed_chunks(change):
    with pytest.raises(DeidError) as e:
        anatomy.read_rid_sets(FakeDb([row("diagnosis", CHUNKS, **change)]), 7)
    assert e.value.sqlstate == "DE002" and e.value.hint and "deid.rid_set" in e.value.message


def test_unpack_packed_counts_its_numbers():
    assert anatomy.unpack_packed(struct.pack(">2q", 1, 2), ">i8", 2).tolist() == [1, 2]
    with pytest.raises(DeidError):
        anatomy.unpack_packed(struct.pack(">2q", 1, 2), ">i8", 3)


def test_unpack_packed_rid_sets():
    """verify.anatomy.unpack_packed reads deid.rid_set's packed int4 / int8 bytes; bytes that
    are not whole numbers are refused (DE002)."""
    unpack_packed = anatomy.unpack_packed
    assert unpack_packed(struct.pack(">3q", 10, 2**62, -3), ">i8").tolist() == [10, 2**62, -3]
    assert unpack_packed(struct.pack(">2i", 7, -1), ">i4").tolist() == [7, -1]
    assert unpack_packed(None, ">i8").tolist() == []
    for buf, dtype in [(b"\x00" * 12, ">i8"), (b"\x00" * 5, ">i4")]:
        with pytest.raises(DeidError) as e:
            unpack_packed(buf, dtype)
        assert e.value.sqlstate == "DE002" and e.value.hint
