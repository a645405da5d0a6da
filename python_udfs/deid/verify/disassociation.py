"""The independent check of a disassociation release (003), from what was STORED, before commit.

Reads back the four release tables (003 Figs. 4 and 10: clusters, record chunks with one row
per subrecord, item chunks, shared chunks) and the record -> cluster membership stored in
deid.cluster_member (each cluster's record ids), rebuilds the flat arrays of verify.km and checks there, against the
snapshot the request read (the source records, not the method's output):
  * every cluster has >= k records, and the stored sizes agree with the membership;
  * every record chunk and every shared chunk is k^m-anonymous (003 Def. 1, Guarantee 1);
  * the multiset of (cluster, code) in record, shared and item chunks is the source's, record
    for record through the stored membership.
Stored codes are mapped back to the snapshot's dictionary (a code that is not in it fails).
Nothing from deid.methods is imported.
"""
import numpy as np

from ..sqltext import qualified
from .shared.km import verify_km, verify_stored_km
from .shared.rid_set_digest import unpack_arrays
from .shared.stored_release import STORE_SCHEMA, _fail, _ints, dictionary_keys

READS_SNAPSHOT_VALUES = True     # the verifier compares the snapshot's values (methods/contract.py)


def _code_expr(exact):
    """SQL of the code id of element e: hashtext (mapped back in numpy) or, when two labels
    of the dictionary share a hash, its exact position in the dictionary ($1)."""
    return "coalesce(array_position($1::text[], e), 0) - 1" if exact else "hashtext(e)"


def read_chunks(db, table, key_columns, dictionary, int_array=None):
    """The rows of a stored table with a text[] column `codes`: the key columns (int4), the
    number of codes per row and the codes as ids into `dictionary` (-1: not in it); with
    `int_array`, also that int[] column's lengths and elements, row after row."""
    # one scan; every aggregate consumes the rows in the same order, so the columns line up
    # (no ORDER BY: it would sort the rows once per aggregate). The codes come as array_send
    # images, parsed and matched to the dictionary's own image here (unnesting them in SQL
    # took several times as long). Codes within a row are sorted afterwards (_grouped).
    # OFFSET 0 keeps the subquery whole: pulled up, its array_send would be computed once
    # per reference (twice: the image and its length), the read's largest cost.
    keys = ", ".join(f"string_agg(int4send(t.{c}), ''::bytea) AS {c}" for c in key_columns)
    row = db.query(
        f"SELECT {keys}, string_agg(int4send(octet_length(t.a)), ''::bytea) AS n,"
        " string_agg(t.a, ''::bytea) AS c, array_send($1::text[]) AS d"
        + (f", string_agg(int4send(cardinality(t.{int_array})), ''::bytea) AS an,"
           f" string_agg(array_send(t.{int_array}), ''::bytea) AS av" if int_array else "")
        + f" FROM (SELECT *, array_send(codes) AS a FROM {qualified(STORE_SCHEMA, table)}"
        " OFFSET 0) t",
        [list(dictionary)], ["text[]"])[0]
    keys = [_ints(row[c]) for c in key_columns]
    size = _ints(row["n"])
    # a NULL array or key adds nothing to its aggregate: the columns do not line up
    extra = [_ints(row["an"])] if int_array else []
    if len({len(x) for x in keys + [size] + extra}) > 1:
        _fail(f"{table} holds a NULL")
    counts, elements = _text_elements(row["c"] or b"", size, table)
    ids = _match(row["c"] or b"", elements, row["d"],
                 _text_elements(row["d"], None, "the dictionary")[1])
    # the int[] column as array_send images (unnesting each row's array took most of the
    # read): one-dimensional, no NULL element, else DE002
    return [keys, counts, ids] + (extra + [unpack_arrays(row["av"], extra[0], 4)]
                                  if int_array else [])


def _i4(buf, at):
    """The big-endian int4 at each byte offset `at` of `buf`."""
    return np.ndarray((max(len(buf) - 3, 0),), ">i4", buffer=buf, strides=(1,))[at].astype(
        np.int64)


def _text_elements(buf, size, what):
    """array_send images of one-dimensional text[] arrays without NULLs, back to back (each
    `size` bytes; None: one image): (elements per array, (start, length) of each element's
    bytes). Fails (DE002) on any other shape."""
    size = np.array([len(buf)], np.int64) if size is None else size
    if int(size.sum()) != len(buf) or np.any(size < 12):
        _fail(f"{what} holds an array of an unexpected shape")
    start = np.cumsum(size) - size
    ndim, flags, oid = _i4(buf, start), _i4(buf, start + 4), _i4(buf, start + 8)
    if np.any(flags != 0):
        _fail(f"{what} holds a NULL")
    one = ndim == 1
    if np.any((ndim != 0) & ~one) or np.any(oid != 25) or np.any(size[~one] != 12) or \
            np.any(size[one] < 20) or np.any(_i4(buf, start[one] + 16) != 1):
        _fail(f"{what} holds an array of an unexpected shape")
    counts = np.zeros(size.size, np.int64)
    counts[one] = _i4(buf, start[one] + 12)
    if np.any(counts[one] < 1):
        _fail(f"{what} holds an array of an unexpected shape")
    first = np.cumsum(counts) - counts
    elem_start, elem_len = np.zeros(int(counts.sum()), np.int64), np.zeros(int(counts.sum()),
                                                                           np.int64)
    by_count = np.argsort(-counts, kind="stable")          # the arrays still holding an element
    pos = start[by_count] + 20
    active = np.searchsorted(-counts[by_count], -np.arange(1, int(counts.max(initial=0)) + 1),
                             side="right")                 # arrays with more than j elements
    for j, m in enumerate(active.tolist()):
        rows, at = by_count[:m], pos[:m]
        length = _i4(buf, at)
        if length.size and (length.min() < 0 or int((at + 4 + length).max()) > len(buf)):
            _fail(f"{what} holds a NULL or a malformed element")
        elem_start[first[rows] + j], elem_len[first[rows] + j] = at + 4, length
        pos[:m] = at + 4 + length
    if not np.array_equal(np.where(counts[by_count] > 0, pos, start[by_count] + 12),
                          (start + size)[by_count]):
        _fail(f"{what} holds an array of an unexpected shape")
    return counts, (elem_start, elem_len)


def _match(buf, elements, dict_buf, dict_elements):
    """The dictionary index of each element (bytes equal to the dictionary entry's), -1 when
    none: one sorted lookup per element length (text holds no NUL byte, so the fixed-width
    byte strings compare as the bytes do)."""
    (start, length), (d_start, d_len) = elements, dict_elements
    ids = np.full(start.size, -1, np.int64)
    raw, d_raw = np.frombuffer(buf, np.uint8), np.frombuffer(dict_buf, np.uint8)
    for width in np.unique(length).tolist():
        at = np.flatnonzero(length == width)
        entries = np.flatnonzero(d_len == width)
        if entries.size == 0 or width == 0:
            ids[at] = entries[0] if entries.size and width == 0 else -1
            continue
        step = np.arange(width, dtype=np.int64)
        if width <= 8:               # as one integer: searchsorted on numbers, not bytes
            ids[at] = _match_short(raw, start[at], d_raw, d_start[entries], entries, width)
            continue
        d_key = d_raw[d_start[entries, None] + step].view(f"S{width}").ravel()
        order = np.argsort(d_key)
        d_key, entries = d_key[order], entries[order]
        for lo in range(0, at.size, _MATCH_BLOCK):       # a block's byte index at a time
            part = at[lo:lo + _MATCH_BLOCK]
            key = raw[start[part, None] + step].view(f"S{width}").ravel()
            pos = np.minimum(np.searchsorted(d_key, key), entries.size - 1)
            ids[part] = np.where(d_key[pos] == key, entries[pos], -1)
    return ids


_MATCH_BLOCK = 1 << 20


def _as_u8(raw, start, width):
    """The `width` (<= 8) bytes at each of `start` as one unsigned integer each (zero-padded,
    big-endian: two keys are equal exactly when their bytes are)."""
    out = np.zeros((start.size, 8), np.uint8)
    out[:, :width] = raw[start[:, None] + np.arange(width, dtype=np.int64)]
    return out.view(">u8").ravel()


def _match_short(raw, start, d_raw, d_start, entries, width):
    """_match for elements of one length <= 8 bytes: the entry of each, -1 when none."""
    d_key = _as_u8(d_raw, d_start, width)
    order = np.argsort(d_key)
    d_key, entries = d_key[order], entries[order]
    out = np.empty(start.size, np.int64)
    for lo in range(0, start.size, _MATCH_BLOCK):        # a block's byte index at a time
        key = _as_u8(raw, start[lo:lo + _MATCH_BLOCK], width)
        pos = np.minimum(np.searchsorted(d_key, key), entries.size - 1)
        out[lo:lo + _MATCH_BLOCK] = np.where(d_key[pos] == key, entries[pos], -1)
    return out


def _known(ids):
    if np.any(ids < 0):
        _fail("the release holds a code that the source does not")
    return ids


def _to_ids(raw, hashes, exact):
    """Stored code keys -> ids into the snapshot's dictionary; a code not in it fails."""
    if exact:
        ids = raw
    elif len(hashes) == 0:
        ids = np.full(len(raw), -1)
    else:
        order = np.argsort(hashes, kind="stable")
        known = hashes[order]
        pos = np.minimum(np.searchsorted(known, raw), len(known) - 1)
        ids = np.where(known[pos] == raw, order[pos], -1)
    if np.any(ids < 0):
        _fail("the release holds a code that the source does not")
    return ids


def _grouped(keys, lengths, codes):
    """Rows sorted by `keys` (lexicographic, stable): (group index per row, group keys,
    rows' offsets and codes in that order, each row's codes sorted)."""
    n = len(lengths)
    order = np.lexsort(tuple(reversed(keys))) if n else np.zeros(0, np.int64)
    starts = np.r_[0, np.cumsum(lengths)][:-1]
    lengths = lengths[order]
    take = (np.repeat(starts[order], lengths) + np.arange(int(lengths.sum()))
            - np.repeat(np.cumsum(lengths) - lengths, lengths)).astype(np.int64)
    row = np.repeat(np.arange(n), lengths)
    codes = codes[take]
    width = int(codes.max()) + 1 if codes.size else 1
    if float(max(n, 1)) * width < 2.0 ** 62:     # row by row, each row's codes ascending:
        key = row * width + codes                # a stable sort of the nearly sorted keys
        key.sort(kind="stable")
        codes = key % width
    else:
        codes = codes[np.lexsort((codes, row))]
    sk = np.stack([k[order] for k in keys], axis=1) if n else np.zeros((0, len(keys)), np.int64)
    new = np.r_[True, np.any(sk[1:] != sk[:-1], axis=1)] if n else np.zeros(0, bool)
    group = np.cumsum(new) - 1
    return group, sk[new], np.r_[0, np.cumsum(lengths)].astype(np.int64), codes, order


def _same_per_group(group, order, lengths, values):
    """The int[] of each group's rows (rows in `order`), which must be the same list in every
    row of the group: (length per group, values of each group's list, group after group)."""
    starts = _offsets(lengths)[:-1][order]
    lengths = lengths[order]
    first = np.r_[True, group[1:] != group[:-1]] if len(group) else np.zeros(0, bool)
    head = np.flatnonzero(first)[group]               # each row's group's first row
    if not np.array_equal(lengths, lengths[head]):
        _fail("a shared chunk's rows disagree on its clusters")
    take = np.repeat(starts, lengths) + np.arange(int(lengths.sum())) - \
        np.repeat(np.cumsum(lengths) - lengths, lengths)
    ref = np.repeat(starts[head], lengths) + np.arange(int(lengths.sum())) - \
        np.repeat(np.cumsum(lengths) - lengths, lengths)
    if not np.array_equal(values[take], values[ref]):
        _fail("a shared chunk's rows disagree on its clusters")
    rows = np.flatnonzero(first)
    sel = np.repeat(starts[rows], lengths[rows]) + np.arange(int(lengths[rows].sum())) - \
        np.repeat(np.cumsum(lengths[rows]) - lengths[rows], lengths[rows])
    return lengths[rows], values[sel]


def _domains(group, n_groups, offsets, codes, width):
    row = np.repeat(group, np.diff(offsets))
    key = np.unique(row * width + codes)
    return (np.r_[0, np.cumsum(np.bincount(key // width, minlength=n_groups))].astype(np.int64),
            key % width)


def release_tables(tables):
    """{kind: stored table} of a disassociation release's tables (003 Figs. 4, 10)."""
    return {kind: next(t for t in tables if t.endswith("_" + kind))
            for kind in ("cluster", "record_chunk", "item_chunk", "shared_chunk")}


def read_release(db, tables, dictionary):
    """The stored release as the flat arrays of verify.km (codes as ids into `dictionary`)."""
    t = release_tables(tables)
    hashes, exact = dictionary_keys(db, dictionary)
    width = max(len(dictionary), 1)
    row = db.query(f"SELECT string_agg(int4send(cluster_id), ''::bytea) AS c,"
                   f" string_agg(int4send(size), ''::bytea) AS s"
                   f" FROM {qualified(STORE_SCHEMA, t['cluster'])}")[0]
    cid, size = _ints(row["c"]), _ints(row["s"])
    order = np.argsort(cid, kind="stable")
    cid, size = cid[order], size[order]
    if not np.array_equal(cid, np.arange(1, len(cid) + 1)):
        _fail("the stored clusters are not numbered 1, 2, ...")
    n_clusters = len(cid)

    (rc_cluster, rc_chunk), rc_len, rc_ids = read_chunks(
        db, t["record_chunk"], ["cluster_id", "chunk_id"], dictionary)
    g, gkeys, sub_offsets, sub_codes, _ = _grouped([rc_cluster, rc_chunk], rc_len,
                                                _known(rc_ids))
    chunk_cluster = gkeys[:, 0] - 1
    if len(chunk_cluster) and (chunk_cluster.min() < 0 or chunk_cluster.max() >= n_clusters):
        _fail("a record chunk belongs to no stored cluster")
    dom_off, dom_codes = _domains(g, len(gkeys), sub_offsets, sub_codes, width)

    (sh_id,), sh_len, sh_ids, id_len, ids = read_chunks(
        db, t["shared_chunk"], ["shared_id"], dictionary, int_array="cluster_ids")
    sg, skeys, ssub_offsets, ssub_codes, order = _grouped([sh_id], sh_len, _known(sh_ids))
    joint_len, joint_ids = _same_per_group(sg, order, id_len, ids)
    sdom_off, sdom_codes = _domains(sg, len(skeys), ssub_offsets, ssub_codes, width)

    item_key = _code_expr(exact).replace("(e)", "(code)").replace(", e)", ", code)")
    items = db.query(f"SELECT string_agg(int4send(cluster_id), ''::bytea) AS c,"
                     f" string_agg(int4send({item_key}), ''::bytea) AS h,"
                     " count(*) FILTER (WHERE code IS NULL) AS nulls"
                     f" FROM {qualified(STORE_SCHEMA, t['item_chunk'])}", [list(dictionary)],
                     ["text[]"])[0]
    if items["nulls"]:
        _fail("an item chunk holds a NULL code")
    it_cluster = _ints(items["c"]) - 1
    it_codes = _to_ids(_ints(items["h"]), hashes, exact)
    if len(it_cluster) and (it_cluster.min() < 0 or it_cluster.max() >= n_clusters):
        _fail("an item chunk belongs to no stored cluster")
    key = np.unique(it_cluster * width + it_codes)
    if len(key) != len(it_cluster):
        _fail("an item chunk holds a code twice")
    return {
        "cluster_size": size, "chunk_cluster": chunk_cluster,
        "chunk_domain_offsets": dom_off, "chunk_domain_codes": dom_codes,
        "chunk_subrecords": _offsets(np.bincount(g, minlength=len(gkeys))),
        "subrecord_offsets": sub_offsets, "subrecord_codes": sub_codes,
        "item_offsets": _offsets(np.bincount(key // width, minlength=n_clusters)),
        "item_codes": key % width,
        "shared_cluster_offsets": _offsets(joint_len),
        "shared_cluster_ids": joint_ids - 1,
        "shared_domain_offsets": sdom_off, "shared_domain_codes": sdom_codes,
        "shared_subrecords": _offsets(np.bincount(sg, minlength=len(skeys))),
        "shared_subrecord_offsets": ssub_offsets, "shared_subrecord_codes": ssub_codes}


def _offsets(counts):
    return np.r_[0, np.cumsum(np.asarray(counts, np.int64))].astype(np.int64)


def verify(db, req, frame, tables):
    """Independent checks on the stored release and membership, before commit."""
    if req.options.get("model") == "generalization":     # AA (Terrovitis et al. 2008)
        from .shared.km_generalization import verify as verify_generalized
        return verify_generalized(db, req, frame, tables)
    member = db.query("SELECT string_agg(array_send(m.rids), ''::bytea) AS r,"
                      " string_agg(int4send(cardinality(m.rids)), ''::bytea) AS n,"
                      " string_agg(int4send(m.cluster_id), ''::bytea) AS c"
                      " FROM deid.cluster_member m WHERE m.release_id = $1",
                      [req.release_id], ["bigint"])[0]
    counts = _ints(member["n"])
    records = unpack_arrays(member["r"], counts, 8)
    clusters = np.repeat(_ints(member["c"]), counts)
    order = np.argsort(records, kind="stable")
    if not np.array_equal(records[order], np.asarray(frame.rid, np.int64)):
        _fail("the stored membership does not hold every record of the snapshot once")
    if getattr(frame, "stored_only", False):      # deid.verify_release: no source records
        return verify_stored_km(read_release(db, tables, stored_dictionary(db, tables)), req.k,
                                req.options.get("m", 2), clusters[order] - 1)
    release = read_release(db, tables, frame.dictionary)
    return verify_km(release, frame.offsets, frame.codes, req.k, req.options.get("m", 2),
                     cluster_of_record=clusters[order] - 1)


def stored_dictionary(db, tables):
    """Every code the stored release holds, sorted (the snapshot's dictionary is gone)."""
    t = {k: qualified(STORE_SCHEMA, v) for k, v in release_tables(tables).items()}
    return [r["v"] for r in db.query(
        f"SELECT DISTINCT v FROM (SELECT unnest(codes) AS v FROM {t['record_chunk']}"
        f" UNION ALL SELECT unnest(codes) FROM {t['shared_chunk']}"
        f" UNION ALL SELECT code FROM {t['item_chunk']}) s ORDER BY v")]
