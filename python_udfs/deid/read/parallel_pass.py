"""The read's one aggregate pass (see snapshot.read): every row's fields sent as big-endian
binary and concatenated by one string_agg (packed), fields laid out for numpy (layout); for
a large plain table the pass runs as complementary ctid ranges that PostgreSQL may read in
parallel workers (run)."""
import numpy as np

PARALLEL_PARTS = 4             # page ranges of a large plain table read side by side
PARALLEL_MIN_PAGES = 1024      # smaller tables: one pass (worker start-up would not pay)


def parallel_cuts(db, rel):
    """The pages where the read's parts of `rel` begin (after the first): a plain, permanent
    table without inheritance children of at least PARALLEL_MIN_PAGES pages and at most a
    quarter of shared_buffers; [] otherwise. The parts are complementary ctid ranges, so every
    row is in exactly one whatever the table's size when the statement runs. (A sequential
    scan of a larger table reads through a small ring of buffers so as not to evict the rest
    of shared_buffers; a TID range scan has no such ring, so such a table keeps the one
    serial pass.)"""
    if rel.kind != "r":
        return []
    r = db.query("SELECT c.relpersistence = 'p' AND NOT c.relhassubclass AS plain,"
                 " pg_catalog.pg_relation_size(c.oid)"
                 " / pg_catalog.current_setting('block_size')::int8 AS pages,"
                 " (SELECT s.setting::int8 FROM pg_catalog.pg_settings s"
                 "   WHERE s.name = 'shared_buffers') AS buffers"
                 " FROM pg_catalog.pg_class c WHERE c.oid = $1", [rel.oid], ["oid"])
    if not r or not r[0]["plain"] \
            or not PARALLEL_MIN_PAGES <= r[0]["pages"] <= r[0]["buffers"] // 4:
        return []
    pages = int(r[0]["pages"])
    return [pages * i // PARALLEL_PARTS for i in range(1, PARALLEL_PARTS)]


def run(db, aggregates, base, params, types, cuts):
    """One row of `aggregates` (the packed column "c", bytes-like, then counts) over
    base = (FROM, WHERE).
    With `cuts` (no bound parameters then), one UNION ALL of one aggregate per ctid range:
    PostgreSQL may run the parts in parallel workers (a Parallel Append of whole aggregates;
    string_agg has no combine function in PostgreSQL 15, and PL/Python's prepared plans never
    run parallel), all on the statement's one snapshot. The parts' packs are joined in page
    order -- the order of one sequential scan -- and their counts added."""
    src, where = base
    if not cuts:
        row = dict(db.query(f"SELECT {aggregates} FROM {src} WHERE {where}", params, types)[0])
        row["c"] = row["c"] or b""
        return row
    assert all(isinstance(c, int) for c in cuts)
    bounds = [None, *cuts, None]
    parts = []
    for i in range(len(cuts) + 1):
        tid = [f"t.ctid {op} '({b},0)'::tid" for op, b in ((">=", bounds[i]), ("<", bounds[i + 1]))
               if b is not None]
        parts.append(f"SELECT {i} AS part, {aggregates} FROM {src} WHERE ({where})"
                     f" AND {' AND '.join(tid)}")
    rows = sorted(db.query(" UNION ALL ".join(parts)), key=lambda r: r["part"])
    packed = np.empty(sum(len(r["c"] or b"") for r in rows), np.uint8)
    at = 0
    for r in rows:            # each part's bytes freed once copied
        c, r["c"] = r["c"] or b"", None
        packed[at:at + len(c)] = np.frombuffer(c, np.uint8)
        at += len(c)
        del c
    out = {k: sum(int(r[k] or 0) for r in rows) for k in rows[0] if k not in ("part", "c")}
    out["c"] = packed
    return out


def layout(dtypes):
    return np.dtype([(f"f{i}", dt) for i, dt in enumerate(dtypes)])


def int4_last(select, dtypes, names):
    """The fields reordered (the same permutation of the three lists) so that the 4-byte ones
    come last, in their order: packed() sends them two at a time. The layout follows the
    fields, and every field is read by its name, so the order is free."""
    order = sorted(range(len(select)), key=lambda i: select[i][0] == "int4send")
    return [select[i] for i in order], [dtypes[i] for i in order], [names[i] for i in order]


def packed(fields, nulls):
    """One string_agg of every row's fields concatenated (column c); with `nulls`, a NULL
    value is packed as its field's default (the row id has none: its NULL drops the row).
    Two consecutive 4-byte fields go out as one int8send((a::int8 << 32) | (b::int8 &
    4294967295)): the same 8 bytes as int4send(a) || int4send(b) (big-endian: a's, then b's
    two's complement), for one send and one concatenation instead of two each (the read
    statement of 1M rows x 6 int fields ~25 % faster); a NULL in either is NULL, as before."""
    def value(v, default):
        return f"coalesce({v}, {default})" if nulls and default is not None else v
    parts, i = [], 0
    while i < len(fields):
        send, v, default = fields[i]
        if send == "int4send" and i + 1 < len(fields) and fields[i + 1][0] == "int4send":
            _, v2, default2 = fields[i + 1]
            parts.append(f"int8send((({value(v, default)})::int8 << 32)"
                         f" | (({value(v2, default2)})::int8 & 4294967295))")
            i += 2
            continue
        parts.append(f"{send}({value(v, default)})")
        i += 1
    return f"string_agg({' || '.join(parts)}, ''::bytea) AS c"
