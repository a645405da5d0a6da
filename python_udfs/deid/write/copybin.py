"""PostgreSQL binary COPY images built with numpy (pure; no per-row Python).

A record is ``int16 nfields`` then, per field, its chunk (see
:mod:`.copyfields`: Fixed, Text, Array).  Records whose chunks have the same
lengths form one structured array (_by_layout); records with arrays are cut
into a few slices each (_by_pieces: joined, or for few records written slice by slice); otherwise chunks of one width
w are written with one numpy assignment per residue of their destination
modulo w (_by_chunks).
"""

import itertools

import numpy as np

from .copyfields import INT4OID, INT8OID, TEXTOID, Array, Fixed, Text, ranges, taken  # noqa: F401 (re-exported)
from .copyfields import Bytes  # noqa: F401 (re-exported)

HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
TRAILER = b"\xff\xff"
_MAX_RESIDUE_PASSES = 4096            # beyond this, chunks of one field are copied byte by byte
_JOIN_RECORDS = 1 << 15               # up to this many records with variable chunks: _by_records
_BLOCK_BYTES = 1 << 21                # _by_layout builds a layout's records this much at a time
_MAX_RUNS = 4096                      # records with arrays in at most this many runs of one
_MIN_RUN = 16                         # layout, this long on average: copied run by run


def field_order(fields):
    """Constant-width fields first: they form one fixed-size record prefix."""
    return sorted(range(len(fields)), key=lambda i: not fields[i].constant)


def records(fields):
    """The binary COPY image (header, records, trailer) of equal-length fields,
    in the given order (see field_order() for the fast one)."""
    return b"".join(bytes(p) for p in parts(fields))


def write(f, fields):
    """Write records(fields) to the binary file `f` piece by piece (no whole-image copy)."""
    for p in parts(fields):
        f.write(p)


def parts(fields):
    """records(fields) as contiguous buffers (bytes or uint8/structured arrays): a list, or
    an iterator that builds the blocks of one layout at a time."""
    n = len(fields[0])
    lead = 0
    while lead < len(fields) and fields[lead].constant:
        lead += 1
    prefix = _Prefix(fields[:lead], len(fields))
    rest = fields[lead:]
    if not rest:                                # every record has the same size
        return [HEADER, prefix.of(None, n).view(np.uint8), TRAILER]
    if any(isinstance(f, (Array, Bytes)) for f in rest):
        pieces = _by_pieces(prefix.of(None, n), rest)
        return [HEADER, *pieces, TRAILER] if isinstance(pieces, list) else \
            itertools.chain([HEADER], pieces, [TRAILER])
    combined = _combine_texts(rest, n)
    lens = [f.chunk_lengths() for f in combined]
    if n <= _JOIN_RECORDS and all(isinstance(f, (Fixed, Text)) for f in rest):
        # few records (e.g. a release's classes, one long text each): joined record by record
        # in the order the layouts would give them, the same image
        layouts = _layouts(lens)
        order = None if layouts is None else layouts[3]
        return [HEADER, _by_records(prefix.of(None, n), rest, order), TRAILER]
    out = _by_layout(prefix, n, combined, lens)
    return out if out is not None else [HEADER, _by_chunks(prefix.of(None, n), combined, lens), TRAILER]


class _Prefix:
    """The fixed-size start of every record: the field count, then each constant-width
    field's length and value (the leading fields, see field_order)."""

    def __init__(self, fields, n_fields):
        self.fields, self.n_fields = fields, n_fields
        self.dtype = np.dtype([("nf", ">i2")] + [
            (f"f{i}", [("len", ">i4"), ("v", f.dtype)]) for i, f in enumerate(fields)])

    def of(self, idx, n, out=None):
        """The prefixes of records ``idx`` (None: all n), into ``out`` if given: each field
        taken straight from its values (no gather of whole prefixes)."""
        p = np.empty(n if idx is None else len(idx), self.dtype) if out is None else out
        p["nf"] = self.n_fields
        rows = {}                      # fields taken through one `take` compose it with idx once
        for i, f in enumerate(self.fields):
            p[f"f{i}"]["len"] = np.dtype(f.dtype).itemsize
            take = getattr(f, "take", None)
            if id(take) not in rows:
                rows[id(take)] = taken(take, idx)
            at = rows[id(take)]
            p[f"f{i}"]["v"] = f.values if at is None else f.values[at]
        return p


def _layouts(lens, max_layouts=4096):
    """(each field's distinct chunk lengths, how many each field has, records per layout, the
    records by layout -- stable) of records whose fields have chunk lengths `lens`; None when
    there are more than `max_layouts` layouts (tuples of lengths)."""
    n = len(lens[0])
    widths = [np.flatnonzero(np.bincount(ln)) for ln in lens]
    sizes = [len(w) for w in widths]
    if np.prod(sizes, dtype=float) > max_layouts:
        return None
    layout = np.zeros(n, np.int64)
    for w, ln in zip(widths, lens):            # mixed-radix layout number
        rank = np.zeros(int(w[-1]) + 1, np.int64)
        rank[w] = np.arange(len(w))
        layout *= len(w)
        layout += rank[ln]
    count = np.bincount(layout, minlength=int(np.prod(sizes)))
    order = np.argsort(layout.astype(np.uint16) if len(count) <= 1 << 16 else layout, kind="stable")
    return widths, sizes, count, order


def _by_layout(prefix, n, fields, lens, max_layouts=4096, header=HEADER, trailer=TRAILER):
    """Records grouped by layout (the tuple of their variable chunk lengths):
    within a layout every record has the same size, so a block is one
    structured array -- no per-byte scatter. Records keep their relative order
    within a layout (COPY does not care about row order). Returns the image's
    parts, or None when there are more than `max_layouts` layouts. `prefix` None:
    records have no fixed prefix (a text-format image, copytext)."""
    layouts = _layouts(lens, max_layouts)
    if layouts is None:
        return None
    widths, sizes, count, order = layouts
    bounds = np.concatenate([[0], np.cumsum(count)])

    def blocks():                              # built one at a time, as the file takes them
        yield header
        for lay in np.flatnonzero(count).tolist():
            chunk_lens = [int(w[p]) for w, p in zip(widths, np.unravel_index(lay, sizes))]
            dt = np.dtype(([] if prefix is None else [("prefix", prefix.dtype)]) + [
                (f"c{i}", np.uint8, (ln,)) for i, ln in enumerate(chunk_lens)])
            # a layout's records a slice of about _BLOCK_BYTES at a time: the memory of one
            # slice (and its temporaries) is used again by the next, not paged in afresh
            step = max(1, _BLOCK_BYTES // dt.itemsize)
            for lo in range(int(bounds[lay]), int(bounds[lay + 1]), step):
                idx = order[lo:min(lo + step, int(bounds[lay + 1]))]
                block = np.empty(len(idx), dtype=dt)
                if prefix is not None:
                    prefix.of(idx, len(idx), out=block["prefix"])
                for i, (f, ln) in enumerate(zip(fields, chunk_lens)):
                    block[f"c{i}"] = f.chunks(idx, ln)
                yield block.view(np.uint8)
        yield trailer
    return blocks()


def _by_chunks(prefix, fields, lens):
    """Records written chunk column by chunk column at computed positions (for
    fields with too many distinct chunk lengths to group by layout)."""
    n = len(lens[0])
    width = 0 if prefix is None else prefix.dtype.itemsize
    size = width + np.sum(lens, axis=0)
    start = np.cumsum(size) - size
    image = np.empty(int(size.sum()), np.uint8)
    if prefix is not None:
        _write(image, start, _Rows(prefix.view(np.uint8).reshape(n, width)),
               np.full(n, width, np.int64))
    pos = start + width
    for f, ln in zip(fields, lens):
        _write(image, pos, f, ln)
        pos = pos + ln
    return image


def _by_records(prefix, fields, order=None):
    """The records, in `order` (None: as they are), each its prefix and its fields' chunks
    joined as slices of bytes: for few records with variable chunks (a text chunk is a slice of
    its field's dictionary chunks -- no padded table, no index of every byte)."""
    n = len(prefix)
    width = prefix.dtype.itemsize
    take = (lambda a: a) if order is None else (lambda a: a[order])
    k = 1 + len(fields)
    pieces = [None] * (k * n)
    head = take(prefix).tobytes()
    pieces[0::k] = [head[i:i + width] for i in range(0, n * width, width)]
    for j, f in enumerate(fields, 1):
        if isinstance(f, Text):
            blob, offs, lens = f._chunks()
            codes = f._codes()
            starts, lens = offs[codes], lens[codes]
        else:
            blob, lens = _compact(f)
            starts = np.cumsum(lens) - lens
        blob, starts = blob.tobytes(), take(starts)
        pieces[j::k] = [blob[s:e] for s, e in zip(starts.tolist(), (starts + take(lens)).tolist())]
    return b"".join(pieces)


_GATHER_BYTES = 1 << 21
_FEW_RECORDS = 4096            # records with arrays: their slices are the image's parts


def _by_pieces(prefix, fields):
    """Records with arrays: per record a handful of byte pieces -- the prefix,
    then per field its chunk, or an array's header and its elements (all of a
    field's elements are built once, back to back, in record order) -- gathered
    into one image with numpy, piece column by piece column, about 2 MB at a
    time (arrays give records no common layout; a disassociation release (003)
    has millions of records with arrays); up to _FEW_RECORDS records are not joined: their
    slices, in order, are the parts (a RID-set chunk is one record with some 64k RIDs; the
    file takes the slices as they are, no joined copy). Returns a list of buffers."""
    n = len(prefix)
    width = prefix.dtype.itemsize
    columns = [(prefix.view(np.uint8), width * np.arange(n, dtype=np.int64), np.full(n, width))]
    for f in fields:
        if isinstance(f, Array):
            head, head_lens = _array_headers(f)
            columns.append((head.reshape(-1), 24 * np.arange(n, dtype=np.int64), head_lens))
            buf, lens = _compact(f.elements)
            counts = np.asarray(f.counts, np.int64)
            body = _per_record(lens, counts)
            columns.append((buf, np.cumsum(body) - body, body))
        elif isinstance(f, Bytes):                  # its length words, then its bytes as they are
            columns.extend(f.pieces())
        else:
            buf, lens = _compact(f)
            columns.append((buf, np.cumsum(lens) - lens, lens))
    runs = _runs(columns, n) if n > _FEW_RECORDS else None
    if runs is not None:
        return _by_runs(columns, runs)
    merged = _merge_fixed(columns, n)
    if n <= _FEW_RECORDS:       # e.g. RID-set chunks: few records, long arrays -- their slices,
        return [buf[int(s):int(s) + int(ln)] for i in range(n)     # written as they are
                for buf, s, ln in ((b, st[i], ls[i]) for b, st, ls in merged)]
    record_len = np.zeros(n, np.int64)
    for _, _, lens in merged:
        record_len += lens
    out = np.empty(int(record_len.sum()), np.uint8)
    at = np.cumsum(record_len) - record_len          # where each record's next piece goes
    for buf, starts, lens in merged:                 # gathered a block of bytes at a time
        ends = np.cumsum(lens)
        cuts = np.searchsorted(ends, np.arange(_GATHER_BYTES, int(ends[-1]) if n else 0,
                                               _GATHER_BYTES))
        for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, n].tolist()):
            out[ranges(at[lo:hi], lens[lo:hi])] = buf[ranges(starts[lo:hi], lens[lo:hi])]
        at += lens
    return [out]


def _runs(merged, n):
    """(first, end) of every run of records whose pieces have the lengths of the previous
    record's and lie at one stride in their buffers (records sorted by their lengths, e.g. a
    disassociation release's record chunks), or None when there are too many or too short
    runs (then the records are gathered byte by byte)."""
    change = np.zeros(n, bool)
    change[0] = True
    for _, starts, lens in merged:
        change[1:] |= lens[1:] != lens[:-1]
    head = np.flatnonzero(change)
    if head.size > min(_MAX_RUNS, n // _MIN_RUN):
        return None
    end = np.r_[head[1:], n]
    if n > 1:
        inside = ~change[1:]                            # records i and i + 1: one run
        run_of_next = (np.cumsum(change) - 1)[1:][inside]
        for _, starts, _ in merged:
            step = np.diff(starts)
            if not np.array_equal(step[inside], step[np.minimum(head, n - 2)][run_of_next]):
                return None
    return head, end


def _by_runs(merged, runs):
    """The image of records in runs (_runs): per run one block, each piece column's bytes of
    the run viewed as a (records, length) array at its stride, side by side -- no byte-level
    index. A generator: a block is built when the file takes it."""
    for lo, hi in zip(*(r.tolist() for r in runs)):
        cols = []
        for buf, starts, lens in merged:
            ln = int(lens[lo])
            if ln:
                s0 = int(starts[lo])
                stride = int(starts[lo + 1]) - s0 if hi - lo > 1 else ln
                cols.append(np.lib.stride_tricks.as_strided(
                    buf[s0:], shape=(hi - lo, ln), strides=(stride * buf.strides[0], buf.strides[0]),
                    writeable=False))
        yield np.concatenate(cols, axis=1).reshape(-1)


def _merge_fixed(columns, n):
    """Adjacent piece columns whose pieces all have one width become one column
    (a 2-D concatenation), so records are cut into fewer slices."""
    out, run = [], []

    def flush():
        if len(run) == 1:
            out.append(run[0])
        elif run:
            rows = np.concatenate([buf[ranges(starts, lens)].reshape(n, -1) for buf, starts, lens in run],
                                  axis=1)
            w = rows.shape[1]
            out.append((rows.reshape(-1), w * np.arange(n, dtype=np.int64), np.full(n, w)))
        run.clear()
    for col in columns:
        lens = col[2]
        if n and np.all(lens == lens[0]):
            run.append(col)
        else:
            flush()
            out.append(col)
    flush()
    return out


def _compact(field):
    """Every chunk of a scalar field, back to back: (bytes, chunk lengths)."""
    lens = field.chunk_lengths()
    if isinstance(field, Fixed) and field.constant:
        return field.chunks(None, int(lens[0]) if len(lens) else 0).reshape(-1), lens
    if isinstance(field, Text):
        return field.compact(), lens
    buf = np.empty(int(lens.sum()), np.uint8)
    _write(buf, np.cumsum(lens) - lens, field, lens)
    return buf, lens


def _per_record(element_lengths, counts):
    """Total length of each record's elements."""
    counts = np.asarray(counts, np.int64)
    if len(element_lengths) and element_lengths.min() == element_lengths.max():
        return counts * element_lengths[0]      # one width (numbers, no NULL): no running sum
    cum = np.concatenate([[0], np.cumsum(element_lengths)])
    first = np.cumsum(counts) - counts
    return cum[first + counts] - cum[first]


def _array_headers(f):
    """Per record its array header chunk: length word, ndim, flags, element
    type, then (one-dimensional) dimension and lower bound -- 24 bytes, or 16
    for an empty array (ndim 0, no dimension)."""
    counts = np.asarray(f.counts, np.int64)
    lens = f.elements.chunk_lengths()
    null = f.elements.nulls()
    has_null = _per_record(null.astype(np.int64), counts) > 0
    body = _per_record(lens, counts)
    head = np.empty(len(counts), dtype=[("len", ">i4"), ("ndim", ">i4"), ("flags", ">i4"),
                                        ("type", ">i4"), ("dim", ">i4"), ("lbound", ">i4")])
    empty = counts == 0
    head["len"] = np.where(empty, 12, 20 + body)
    head["ndim"] = np.where(empty, 0, 1)
    head["flags"], head["type"], head["dim"], head["lbound"] = has_null, f.oid, counts, 1
    return head.view(np.uint8).reshape(len(counts), 24), np.where(empty, 16, 24).astype(np.int64)


class _Rows:
    """Fixed-width chunks given as the rows of a (records, width) uint8 array."""

    def __init__(self, rows):
        self.rows = rows

    def chunks(self, idx, length):
        return self.rows[slice(None) if idx is None else idx, :length]


class _Combined:
    """Several adjacent Text fields as one: per record a code of its combination
    of values, whose chunks (one after the other) are row `code` of `table`."""

    def __init__(self, codes, table, lens):
        self.codes, self.table, self.lens = codes, table, lens

    def chunk_lengths(self):
        return self.lens[self.codes]

    def chunks(self, idx, length):
        return self.table[self.codes if idx is None else self.codes[idx], :length]


def _combine_texts(fields, n):
    """Runs of adjacent Text fields whose value combinations are few (a
    histogram of them fits in O(n)) become one _Combined field: fewer chunks
    per record to lay out. A run is cut where adding the next field would
    overflow that histogram, so six fields too many to combine at once may
    still become two or three (e.g. the quasi-identifiers of two sources)."""
    out, run = [], []

    def flush():
        sizes = [len(f.dictionary) + 1 for f in run]
        space = int(np.prod(sizes, dtype=float)) if run else 0
        if len(run) < 2 or space > 4 * n + (1 << 16):
            out.extend(run)
        else:
            # fields taking their records through one `take`: keys of their rows as they are,
            # then one gather of the keys (not one of every field's codes)
            take = run[0].take if all(f.take is run[0].take for f in run) else None
            key = np.zeros(n if take is None else len(run[0].codes), np.int64)
            for f, size in zip(run, sizes):
                key *= size
                key += f._codes() if take is None else np.minimum(f.codes, size - 1)
            if take is not None:
                key = key[take]
            present = np.flatnonzero(np.bincount(key, minlength=space))
            remap = np.zeros(space, np.int64)
            remap[present] = np.arange(len(present))
            subs = np.unravel_index(present, sizes)
            tables = [f._table()[sub] for f, sub in zip(run, subs)]
            lens = [f._chunks()[2][sub] for f, sub in zip(run, subs)]
            valid = np.concatenate([np.arange(t.shape[1]) < ln[:, None] for t, ln in zip(tables, lens)],
                                   axis=1)
            flat = np.concatenate(tables, axis=1)[valid]          # row by row: the chunks in order
            total = np.sum(lens, axis=0)
            table = np.zeros((len(present), int(total.max())), np.uint8)
            table[np.repeat(np.arange(len(present)), total), ranges(np.zeros(len(present)), total)] = flat
            out.append(_Combined(remap[key], table, total))
        run.clear()
    limit = 4 * n + (1 << 16)
    for f in fields:
        if isinstance(f, Text):
            if run and np.prod([len(g.dictionary) + 1 for g in run + [f]], dtype=float) > limit:
                flush()
            run.append(f)
        else:
            flush()
            out.append(f)
    flush()
    return out


def _write(image, dest, field, lens):
    """image[dest[i] : dest[i] + lens[i]] = chunk i of `field`, a width at a time."""
    if len(lens) == 0:
        return
    lens = np.asarray(lens)
    present = np.bincount(lens)
    widths = np.flatnonzero(present)
    if len(widths) == 1:
        groups = [(int(widths[0]), None)]
    else:
        key = lens.astype(np.uint16) if widths[-1] < 1 << 16 else lens
        order = np.argsort(key, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(present[widths])])
        groups = [(int(w), order[bounds[i]:bounds[i + 1]]) for i, w in enumerate(widths)]
    bytewise = sum(min(w, len(lens) if idx is None else len(idx)) for w, idx in groups) \
        > _MAX_RESIDUE_PASSES
    for w, idx in groups:
        if w == 0:
            continue
        d = dest if idx is None else dest[idx]
        items = field.chunks(idx, w)
        if bytewise:
            image[ranges(d, np.full(len(d), w))] = np.ascontiguousarray(items).reshape(-1)
        else:
            _place(image, d, items)


def _place(image, dest, items):
    """image[dest[i] : dest[i] + w] = items[i] for (k, w) uint8 items: one
    assignment per residue r of dest modulo w, through the view of image[r:]
    as rows of w bytes."""
    k, w = items.shape
    residue = dest % w
    present = np.bincount(residue, minlength=w)
    rs = np.flatnonzero(present)
    if len(rs) == 1:
        groups = [(int(rs[0]), None)]
    else:
        order = np.argsort(residue.astype(np.uint16) if w < 1 << 16 else residue, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(present[rs])])
        groups = [(int(r), order[bounds[i]:bounds[i + 1]]) for i, r in enumerate(rs)]
    for r, sel in groups:
        rows = np.ndarray(((len(image) - r) // w, w), dtype=np.uint8, buffer=image, offset=r)
        if sel is None:
            rows[(dest - r) // w] = items
        else:
            rows[(dest[sel] - r) // w] = items[sel]
