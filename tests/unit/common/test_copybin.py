"""Binary COPY images (copybin): decoded back by an independent parser."""
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deid.write import copybin as cb


def parse(image):
    """A straightforward reader of PostgreSQL's binary COPY format."""
    assert image[:11] == b"PGCOPY\n\xff\r\n\x00" and image[-2:] == b"\xff\xff"
    pos, rows = 19, []
    while pos < len(image) - 2:
        (nf,) = struct.unpack_from(">h", image, pos)
        pos += 2
        row = []
        for _ in range(nf):
            (ln,) = struct.unpack_from(">i", image, pos)
            pos += 4
            row.append(None if ln < 0 else image[pos:pos + ln])
            pos += max(ln, 0)
        rows.append(row)
    assert pos == len(image) - 2
    return rows


def array(raw, elem_oid=20):
    """A one-dimensional array_send() image as a list (None for NULL elements)."""
    ndim, flags, elem = struct.unpack_from(">3i", raw, 0)
    assert elem == elem_oid
    if ndim == 0:
        assert len(raw) == 12
        return []
    dim, lbound = struct.unpack_from(">2i", raw, 12)
    assert ndim == 1 and lbound == 1
    pos, out = 20, []
    for _ in range(dim):
        (ln,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        out.append(None if ln < 0 else raw[pos:pos + ln])
        pos += max(ln, 0)
    assert pos == len(raw)
    assert flags == (None in out)
    return out


def int8_array(raw):
    return [struct.unpack(">q", x)[0] for x in array(raw, 20)]


def test_mixed_fields_roundtrip():
    fields = [cb.Fixed(np.array([1, 2, 3]), ">i4"),
              cb.Text(np.array([0, 2, 1]), ["ab", "c"]),
              cb.Fixed(np.array([1.5, 0, -2]), ">f8", null=np.array([False, True, False])),
              cb.Array(np.array([1, 2, 1]), cb.Fixed(np.array([7, 8, 9, 10]), ">i8"), cb.INT8OID)]
    rows = sorted(parse(cb.records(fields)), key=lambda r: struct.unpack(">i", r[0])[0])
    assert [struct.unpack(">i", r[0])[0] for r in rows] == [1, 2, 3]
    assert [r[1] for r in rows] == [b"ab", None, b"c"]
    assert [None if r[2] is None else struct.unpack(">d", r[2])[0] for r in rows] == [1.5, None, -2.0]
    assert [int8_array(r[3]) for r in rows] == [[7], [8, 9], [10]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 4), st.integers(-2**31, 2**31 - 1)), max_size=6),
                min_size=1, max_size=40))
def test_array_fields_roundtrip(recs):
    """text[] (with NULL elements), int4[] and int8[] per record, empty arrays included,
    next to a text scalar: every record comes back in order."""
    words = ["", "ä", "abc", "x y"]                      # code 4 = NULL element
    counts = np.array([len(r) for r in recs], np.int64)
    codes = np.array([c for r in recs for c, _ in r] or [0], np.int64)[:int(counts.sum())]
    nums = np.array([v for r in recs for _, v in r] or [0], np.int64)[:int(counts.sum())]
    fields = [cb.Fixed(np.arange(len(recs)), ">i4"), cb.Text(np.zeros(len(recs), np.int64), ["attr"]),
              cb.Array(counts, cb.Text(codes, words), cb.TEXTOID),
              cb.Array(counts, cb.Fixed(nums, ">i4"), cb.INT4OID),
              cb.Array(counts, cb.Fixed(nums * 3, ">i8"), cb.INT8OID)]
    rows = parse(cb.records(fields))
    assert [struct.unpack(">i", r[0])[0] for r in rows] == list(range(len(recs)))
    for row, rec in zip(rows, recs):
        assert row[1] == b"attr"
        assert array(row[2], 25) == [None if c == 4 else words[c].encode() for c, _ in rec]
        assert [struct.unpack(">i", x)[0] for x in array(row[3], 23)] == [v for _, v in rec]
        assert int8_array(row[4]) == [3 * v for _, v in rec]


def test_dates_are_days_since_2000():
    rows = parse(cb.records([cb.Fixed.date(np.array([10957, 0]))]))
    assert [struct.unpack(">i", r[0])[0] for r in rows] == [0, -10957]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(0, 5), st.integers(0, 3)),
                min_size=1, max_size=60))
def test_layout_path_keeps_every_record(recs):
    """Records come back as a multiset (the layout path may reorder them)."""
    words = ["", "x", "héllo", "zz top", "a;b", "NULL-ish"]
    a = np.array([r[0] for r in recs], np.int64)
    t1 = np.array([r[1] for r in recs], np.int64)          # 5 = NULL (len(words) - 1 entries used)
    t2 = np.array([r[2] for r in recs], np.int64)
    fields = [cb.Fixed(a, ">i8"), cb.Text(t1, words[:5]), cb.Text(t2, ["p", "qq", "rrr"])]
    got = [(struct.unpack(">q", r[0])[0], r[1], r[2]) for r in parse(cb.records(fields))]
    got = sorted(got, key=repr)
    want = list((int(x), None if y >= 5 else words[y].encode(), None if z >= 3 else ["p", "qq", "rrr"][z].encode())
                  for x, y, z in zip(a, t1, t2))
    assert got == sorted(want, key=repr)


def test_field_order_puts_constant_fields_first():
    fields = [cb.Text(np.array([0]), ["a"]), cb.Fixed(np.array([1]), ">i4"),
              cb.Fixed(np.array([1]), ">i4", null=np.array([True]))]
    assert cb.field_order(fields) == [1, 0, 2]


@pytest.mark.parametrize("n", [0, 1, 1000])
def test_ranges(n):
    rng = np.random.default_rng(n)
    starts, lens = rng.integers(0, 100, n), rng.integers(0, 5, n)
    want = np.concatenate([np.arange(s, s + l) for s, l in zip(starts, lens)] or [np.zeros(0, int)])
    assert np.array_equal(cb.ranges(starts, lens), want)


def test_frame_sorted_by_rid():
    from deid.read.snapshot import EncodedColumn, Frame
    col = EncodedColumn("a", "category", np.array([0, 1, 2]), np.array([False, True, False]), ["x", "y"])
    f = Frame(3, np.array([30, 10, 20]), {"a": col}).sorted_by_rid()
    assert f.rid.tolist() == [10, 20, 30]
    assert f.columns["a"].values.tolist() == [1, 2, 0]
    assert f.columns["a"].null.tolist() == [True, False, False]


def test_unpack_stored_arrays():
    """verify.shared.rid_set_digest.unpack_arrays reads concatenated array_send(int8[]) images (the
    membership catalog, deid.cluster_member)."""
    from deid.verify.shared.rid_set_digest import unpack_arrays

    def array_send(xs):
        if not xs:
            return struct.pack(">3i", 0, 0, 20)
        return struct.pack(">5i", 1, 0, 20, len(xs), 1) + b"".join(struct.pack(">iq", 8, x) for x in xs)
    recs = [[10, 11], [5], [], [1, 2**62, -3]]
    buf = b"".join(array_send(r) for r in recs)
    assert unpack_arrays(buf, np.array([len(r) for r in recs])).tolist() == [10, 11, 5, 1, 2**62, -3]


def test_unpack_int4_arrays_and_malformed_images():
    """int4[] images too; a NULL element or a wrong count is refused (DE002)."""
    from deid.verify.shared.rid_set_digest import unpack_arrays
    from deid.errors import DeidError

    def int4_send(xs):
        return struct.pack(">5i", 1, 0, 23, len(xs), 1) + b"".join(
            struct.pack(">i", -1) if x is None else struct.pack(">ii", 4, x) for x in xs)
    good = int4_send([3, -4]) + int4_send([7])
    assert unpack_arrays(good, [2, 1], width=4).tolist() == [3, -4, 7]
    for buf, counts in [(good, [1, 1]), (good, [2, 2]), (int4_send([1, None]) + int4_send([1, 2]), [2, 2])]:
        with pytest.raises(DeidError) as e:
            unpack_arrays(buf, counts, width=4)
        assert e.value.sqlstate == "DE002"


def test_none_dictionary_entries_are_null():
    counts = np.array([2, 0, 3])
    text = cb.Text(np.array([0, 1, 2, 3, 1]), ["a", None, "ccc"])     # code 3 = NULL too
    rows = parse(cb.records([cb.Fixed(np.arange(3), ">i4"), cb.Array(counts, text, cb.TEXTOID)]))
    assert [array(r[1], 25) for r in rows] == [[b"a", None], [], [b"ccc", None, None]]


def test_many_layouts_use_positioned_chunks():
    """Three text fields with big dictionaries (not combined) and 20 lengths each
    (8,000 layouts) take the chunk-by-chunk path, which keeps the record order."""
    words = ["x" * (i % 20) + "é" * (i % 3) for i in range(3000)]
    rng = np.random.default_rng(3)
    cols = [rng.integers(0, 3001, 2000) for _ in range(3)]           # 3000 = NULL
    fields = [cb.Fixed(np.arange(2000), ">i4")] + [cb.Text(c, words) for c in cols]
    rows = parse(cb.records(fields))
    assert [struct.unpack(">i", r[0])[0] for r in rows] == list(range(2000))
    for j, c in enumerate(cols):
        assert [r[j + 1] for r in rows] == [None if x == 3000 else words[x].encode() for x in c]


def test_text_runs_too_wide_to_combine_whole_combine_in_parts():
    """Six adjacent text fields whose value combinations do not fit one histogram are combined
    three and three (each part fits): same records, as a multiset."""
    rng = np.random.default_rng(5)
    n = 3000
    dicts = [[f"v{j}-" + "y" * (i % 4) for i in range(size)] for j, size in enumerate([40, 30, 12] * 2)]
    cols = [rng.integers(0, len(d) + 1, n) for d in dicts]                 # len(d) = NULL
    fields = [cb.Text(c, d) for c, d in zip(cols, dicts)]
    parts = cb._combine_texts(fields, n)
    assert [type(f).__name__ for f in parts] == ["_Combined", "_Combined"]
    got = sorted((tuple(r) for r in parse(cb.records(fields))), key=repr)
    want = [tuple(None if x == len(d) else d[x].encode() for x, d in zip(row, dicts))
            for row in zip(*cols)]
    assert got == sorted(want, key=repr)


def test_rid_chunks_cut_at_entry_boundaries():
    from deid.log.release_log import rid_chunks
    counts = np.array([3, 4, 1, 9, 2, 2])            # RIDs before each entry: 0 3 7 8 17 19
    assert rid_chunks(counts, limit=8).tolist() == [3, 1, 2]
    assert rid_chunks(counts, limit=100).tolist() == [6]
    assert rid_chunks(np.zeros(0, np.int64)).tolist() == []
    assert int(rid_chunks(counts, limit=1).sum()) == 6


@pytest.mark.parametrize("records", [1, 3, 50])
def test_few_records_path_is_the_gather_path(records, monkeypatch):
    """Records with arrays: joined slice by slice (few records) or gathered in blocks (many),
    the same image."""
    rng = np.random.default_rng(records)
    counts = rng.integers(0, 3000, size=records)
    total = int(counts.sum())
    fields = [cb.Fixed(np.arange(records), ">i8"), cb.Text(np.zeros(records, np.int64), ["diagnosis"]),
              cb.Array(counts, cb.Fixed(rng.integers(0, 99, size=total), ">i4"), cb.INT4OID),
              cb.Array(counts, cb.Text(rng.integers(0, 4, size=total), ["a", "bb", None]), cb.TEXTOID),
              cb.Array(counts, cb.Fixed(rng.integers(0, 2 ** 40, size=total), ">i8"), cb.INT8OID)]
    few = cb.records(fields)
    monkeypatch.setattr(cb, "_FEW_RECORDS", 0)
    assert cb.records(fields) == few


def packed(raw, fmt):
    """Big-endian numbers packed back to back (a bytea of deid.rid_set) as a list."""
    size = struct.calcsize(">" + fmt)
    assert len(raw) % size == 0
    return list(struct.unpack(f">{len(raw) // size}{fmt}", raw))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(-2**31, 2**31 - 1), max_size=7), min_size=1, max_size=40))
def test_bytes_fields_roundtrip(recs):
    """bytea per record (Bytes): the values packed big-endian, back to back, empty ones too,
    next to a scalar, a text[] and each other -- on the slice and on the gather path."""
    counts = np.array([len(r) for r in recs], np.int64)
    nums = np.array([v for r in recs for v in r], np.int64)
    for extra in ([cb.Array(counts, cb.Text(np.zeros(len(nums), np.int64), ["v"]), cb.TEXTOID)], []):
        fields = [cb.Fixed(np.arange(len(recs)), ">i4"), cb.Bytes(counts, nums, ">i4"), *extra,
                  cb.Bytes(counts, nums * 3, ">i8")]
        images = [cb.records(fields)]
        few, cb._FEW_RECORDS = cb._FEW_RECORDS, 0
        try:
            images.append(cb.records(fields))
        finally:
            cb._FEW_RECORDS = few
        for image in images:
            rows = sorted(parse(image), key=lambda r: struct.unpack(">i", r[0])[0])
            assert [struct.unpack(">i", r[0])[0] for r in rows] == list(range(len(recs)))
            for row, rec in zip(rows, recs):
                assert packed(row[1], "i") == rec and packed(row[-1], "q") == [3 * v for v in rec]
                if extra:
                    assert array(row[2], 25) == [b"v"] * len(rec)
    # the generic chunk interface (any other layout path) gives the same chunks
    f = cb.Bytes(counts, nums, ">i4")
    lens = f.chunk_lengths()
    for i, rec in enumerate(recs):
        chunk = f.chunks(np.array([i]), int(lens[i]))[0].tobytes()
        assert struct.unpack(">i", chunk[:4])[0] == 4 * len(rec) and packed(chunk[4:], "i") == rec


def test_bytes_counts_must_match_the_values():
    with pytest.raises(ValueError):
        cb.Bytes(np.array([2, 2]), np.arange(3), ">i8")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400), st.integers(0, 2 ** 32 - 1), st.booleans())
def test_few_records_are_joined_into_the_same_image(n, seed, many_lengths):
    """Up to _JOIN_RECORDS records with variable chunks are joined record by record (_by_records),
    in the order the layout or chunk path gives them: the very same image."""
    rng = np.random.default_rng(seed)
    width = 40 if many_lengths else 3                   # > 4096 layouts: the chunk path's order
    words = ["é" * (i % width) + "x" * (i % 7) for i in range(600)] + [None]
    fields = [cb.Fixed(np.arange(n), ">i4"),
              cb.Text(rng.integers(0, len(words) + 1, n), words),
              cb.Fixed(rng.normal(size=n), ">f8", null=rng.random(n) < 0.3),
              cb.Text(rng.integers(0, 4, n), ["p", "qq", "rrr"]),
              cb.Text(rng.integers(0, len(words) + 1, n), words[::-1])]
    fields = [fields[i] for i in cb.field_order(fields)]
    joined = cb.records(fields)
    old, cb._JOIN_RECORDS = cb._JOIN_RECORDS, 0          # (no monkeypatch in a @given test)
    try:
        assert cb.records(fields) == joined
    finally:
        cb._JOIN_RECORDS = old
    rows = parse(joined)
    assert sorted(struct.unpack(">i", r[0])[0] for r in rows) == list(range(n))


def test_text_table_holds_each_chunk_zero_padded():
    text = cb.Text(np.array([0, 1, 2]), ["abc", None, ""])
    table = text._table()
    assert table.tolist() == [[0, 0, 0, 3, 97, 98, 99], [255, 255, 255, 255, 0, 0, 0],
                              [0, 0, 0, 0, 0, 0, 0], [255, 255, 255, 255, 0, 0, 0]]


def test_layout_blocks_are_bounded_slices_of_the_same_image(monkeypatch):
    """_by_layout builds a layout's records _BLOCK_BYTES at a time: small blocks, one image."""
    rng = np.random.default_rng(9)
    n = 5000
    fields = [cb.Fixed(np.arange(n), ">i4"), cb.Text(rng.integers(0, 4, n), ["a", "bb", "ccc"]),
              cb.Text(rng.integers(0, 3, n), ["x", "yy"])]
    monkeypatch.setattr(cb, "_JOIN_RECORDS", 0)
    whole = cb.records(fields)
    monkeypatch.setattr(cb, "_BLOCK_BYTES", 256)
    parts = [bytes(p) for p in cb.parts(fields)]
    assert b"".join(parts) == whole
    assert len(parts) > 2 * 12 and max(len(p) for p in parts[1:-1]) <= 256
    assert sorted(struct.unpack(">i", r[0])[0] for r in parse(whole)) == list(range(n))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 2 ** 32 - 1), st.booleans(), st.booleans())
def test_fields_taking_their_rows_write_the_image_of_the_gathered_rows(n, seed, shared, few):
    """Fixed and Text fields with `take` (record i is row take[i]: gathered as the image is laid
    out, keys of texts sharing one take combined before one gather) write the very image of
    fields holding the gathered rows -- binary and text format, any path."""
    from deid.write import copytext
    rng = np.random.default_rng(seed)
    rows = 2 * n
    take = rng.permutation(rows)[:n]                        # a subset of the rows, shuffled
    other = take if shared else rng.integers(0, rows, n)
    words = ["", "a", "bb", "héllo", None]
    days, nums = rng.integers(-9000, 9000, rows), rng.normal(size=rows)
    null = rng.random(rows) < 0.2
    c1, c2, c3 = (rng.integers(0, k, rows) for k in (6, 3, 40))
    big = [f"w{i}" * (i % 5) for i in range(39)]
    lazy = [cb.Fixed(np.arange(n), ">i4"), cb.Fixed.date(days, None, take),
            cb.Fixed(nums, ">f8", null, other), cb.Text(c1, words, take),
            cb.Text(c2, ["x", "yy"], other), cb.Text(c3, big, take)]
    eager = [cb.Fixed(np.arange(n), ">i4"), cb.Fixed.date(days[take]),
             cb.Fixed(nums[other], ">f8", null[other]), cb.Text(c1[take], words),
             cb.Text(c2[other], ["x", "yy"]), cb.Text(c3[take], big)]
    order = cb.field_order(eager)
    assert cb.field_order(lazy) == order
    old = cb._JOIN_RECORDS
    cb._JOIN_RECORDS = old if few else 0
    try:
        assert cb.records([lazy[i] for i in order]) == cb.records([eager[i] for i in order])
        texts = [3, 4, 5]
        assert copytext.records([lazy[i] for i in texts]) == copytext.records([eager[i] for i in texts])
    finally:
        cb._JOIN_RECORDS = old


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2 ** 31), st.booleans(), st.integers(1, 12))
def test_records_in_runs_of_one_length_are_copied_as_blocks(seed, two_arrays, n_lengths):
    """Many records with arrays (empty ones and NULL elements included), ordered so that
    records whose pieces have the same lengths come together (a disassociation release's
    record chunks): one block per run, the same image as the gathered one."""
    rng = np.random.default_rng(seed)
    n = 6000
    words = ["ab", "c", None]                                       # None: a NULL element
    counts = rng.integers(0, n_lengths, size=n)
    codes = rng.integers(0, 3, size=int(counts.sum()))
    body = np.add.reduceat(np.r_[np.array([6, 5, 4])[codes], 0],
                           np.r_[0, np.cumsum(counts)[:-1]])       # text bytes per record
    body[counts == 0] = 0
    order = np.lexsort((body, counts))                              # records in runs
    start = np.r_[0, np.cumsum(counts)[:-1]]
    codes = np.concatenate([codes[start[i]:start[i] + counts[i]] for i in order] + [codes[:0]])
    counts, body = counts[order], body[order]
    fields = [cb.Fixed(np.arange(n), ">i4"), cb.Fixed(rng.integers(0, 9, size=n), ">i4"),
              cb.Array(counts, cb.Text(codes, words), cb.TEXTOID)]
    if two_arrays:
        fields.append(cb.Array(counts, cb.Fixed(rng.integers(0, 99, size=codes.size), ">i4"),
                               cb.INT4OID))
    blocks = list(cb.parts(fields))
    image = b"".join(bytes(p) for p in blocks)
    # a run: records whose pieces have the same lengths (header, elements, the int4[])
    key = body + 10 ** 6 * (counts == 0) + (10 ** 7 * counts if two_arrays else 0)
    assert len(blocks) - 2 == 1 + int(np.count_nonzero(key[1:] != key[:-1]))
    gathered = cb._MAX_RUNS
    try:
        cb._MAX_RUNS = 0
        assert cb.records(fields) == image
    finally:
        cb._MAX_RUNS = gathered
    rows = parse(image)
    assert [struct.unpack(">i", r[0])[0] for r in rows] == list(range(n))
    assert [len(array(r[2], 25)) for r in rows] == counts.tolist()
