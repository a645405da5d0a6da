"""An anatomy release's stored tables against its RID sets (001 Def. 3, Theorem 3), before commit
and in deid.verify_release (a QIT row moved to another group, or a count table with a value renamed and its count raised,
must not verify).

The RID sets (in memory during a request, proven equal to deid.rid_set's rows; deid.rid_set read
back by deid.verify_release) determine the tables:
  * the QIT (or the one generalized table) holds, per group, exactly as many rows as the group's
    RID sets of a sensitive attribute hold RIDs (001 Def. 3: the QIT has one row per source
    row, in its group) -- a row moved to another group changes two groups' sizes;
  * the count table of sensitive attribute s holds one row (group, value, count) per entry of
    s's RID sets: its group, its value and the size of its RID set (001 Def. 3's ST) -- and the
    generalized table, grouped by group and s, the same triples.
A value is compared as the RID sets store it (text, the label the writer cast to the column's
type): the table's value and each stored label cast to the column's type are compared as text,
in the same statement (so the session's settings apply to both), and identified as read_rid_sets
identifies labels (hashtext; NULL as -2^31).
"""
import numpy as np

from ...sqltext import qualified, quote_ident
from . import table_digest
from .failures import _fail

STORE_SCHEMA = "deid_release"
NULL_KEY = -2 ** 31
HINT = ("The stored release differs from its RID sets: restore it (its tables and deid's "
        "catalog) from a backup taken after it was made, or drop it and request it again.")


def check_tables(db, req, tables, sas, entries, group_ids, sizes, known=None, labels=None):
    """The QIT's (or the generalized table's) groups -- `group_ids` with their `sizes`, from
    group_sizes -- and every count table against the RID sets: `entries` maps each sensitive
    attribute to its entries' (groups, value keys, RID counts) (value keys: label_keys).
    ``known``: as group_sizes'. ``labels``: None, or each attribute's labels (used_labels of
    RID sets proven stored). Returns a small report."""
    generalized = req.options.get("output") == "generalized"
    groups, _, counts = entries[sas[0]]
    ids, inverse = np.unique(groups, return_inverse=True)
    want = _pairs(ids, np.bincount(inverse, weights=counts, minlength=ids.size).astype(np.int64))
    if not np.array_equal(_pairs(group_ids, sizes), want):
        _fail(f"{tables[0]} does not hold its groups' rows: a row was moved, added or removed",
              detail=f"{len(group_ids)} groups stored, {len(ids)} in the RID sets", hint=HINT)
    for s in sas:
        table = tables[0] if generalized else f"{req.name}_{s}"
        if table not in tables:
            _fail(f"the release has no count table of attribute {s!r}", hint=HINT)
        check_triples(db, req.release_id, table, s, not generalized, entries[s], known,
                      None if labels is None else labels[s])
    return {"groups": "as their RID sets", "count_tables": len(sas)}


def group_sizes(db, table, known=None):
    """(group ids, rows per group) of a stored table with a group_id column (one GROUP BY).
    With ``known`` (a dict: RunState.digests), the same pass takes the table's digest for
    the release's log row (table_digest.PARTIAL_SUMS) into known[table]."""
    rel = qualified(STORE_SCHEMA, table)
    if known is None:
        row = db.query(f"SELECT string_agg(int4send(group_id), ''::bytea) AS g,"
                       f" string_agg(int8send(n), ''::bytea) AS n FROM (SELECT group_id,"
                       f" count(*) AS n FROM {rel} GROUP BY group_id) s")[0]
        return _ints(row["g"], ">i4"), _ints(row["n"], ">i8")
    with table_digest.pinned(db):
        row = db.query(
            "SELECT string_agg(int4send(group_id), ''::bytea) AS g,"
            " string_agg(int8send(n), ''::bytea) AS n, coalesce(sum(n), 0) AS digest_n,"
            " sum(s1)::text AS digest_1, sum(s2)::text AS digest_2"
            " FROM (SELECT group_id, count(*) AS n, sum(h) AS s1,"
            " sum(hashint8extended(h, 1)) AS s2 FROM (SELECT c.group_id, "
            + table_digest.row_hash(table_digest.ROW_TEXT)
            + f" AS h FROM {rel} c {table_digest.ONCE}) r GROUP BY group_id) s")[0]
    known[table] = table_digest.combine([row])
    return _ints(row["g"], ">i4"), _ints(row["n"], ">i8")


def label_keys(db, dictionary, codes):
    """The value key (as read_rid_sets keys the stored labels: hashtext, NULL -2^31) of each
    code into `dictionary` (a code past its end, or a None label, is NULL)."""
    keys = np.asarray([r["h"] for r in db.query(
        f"SELECT coalesce(hashtext(v), {NULL_KEY}) AS h FROM unnest($1::text[]) WITH ORDINALITY"
        " d(v, o) ORDER BY o", [list(dictionary)], ["text[]"])] + [NULL_KEY], np.int64)
    return keys[np.minimum(np.asarray(codes, np.int64), len(dictionary))]


def check_triples(db, release_id, table, attribute, stored_counts, want, known=None, labels=None):
    """(group, value, count) of the table -- its rows (a count table) or its rows grouped by
    group and `attribute` -- equal the RID-set entries `want` of the attribute. With
    ``known`` and a count table, the same pass takes its digest (as group_sizes does).
    ``labels``: the distinct labels the attribute's RID sets hold (in a request: those of the
    arrays that rid_set_digest proved stored); None: read from deid.rid_set."""
    rel = qualified(STORE_SCHEMA, table)
    col = quote_ident(attribute)
    coltype = db.value("SELECT format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute"
                       " WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped",
                       [rel, attribute], ["text", "text"])
    if coltype is None:
        _fail(f"{table} has no column {attribute!r}", hint=HINT)
    digest = stored_counts and known is not None
    if stored_counts and coltype in INTEGER_TYPES:
        got = _integer_triples(db, release_id, rel, col, attribute, coltype, digest, labels)
        if got is not None:
            triples, sums, unknown = got
            if digest:
                known[table] = table_digest.combine([sums])
            _unknown_values(table, attribute, unknown)
            _compare_triples(table, attribute, triples, want)
            return
    rows = (f"SELECT c.group_id AS g, c.{col}::text AS x, c.count AS n"
            + (f", {table_digest.row_hash(table_digest.ROW_TEXT)} AS h" if digest else "")
            + f" FROM {rel} c {table_digest.ONCE}" if stored_counts else
            f"SELECT group_id AS g, {col}::text AS x, count(*) AS n FROM {rel} GROUP BY 1, 2")
    with table_digest.pinned(db) if digest else _unpinned():
        row = _triples_row(db, release_id, attribute, coltype, rows, digest, labels)
        if digest and row["dup_keys"]:
            # two labels with one text in the column's type: the join repeats rows, so the
            # digest is taken of the table's own rows (its triples then differ from the RID sets)
            row.update(db.query(table_digest.partial_sums_sql(f"{rel} c", table_digest.ROW_TEXT))[0])
    if digest:
        known[table] = table_digest.combine([row])
    _unknown_values(table, attribute, row["unknown"] or row["nulls"])
    _compare_triples(table, attribute,
                     (_ints(row["g"], ">i4"), _ints(row["h"], ">i4"), _ints(row["n"], ">i8")), want)


def _unknown_values(table, attribute, rows):
    if rows:
        _fail(f"{table} holds a value of {attribute!r} that no RID set holds", hint=HINT,
              detail=f"{rows} row(s)")


def _compare_triples(table, attribute, got, want):
    if not same_triples(got, want):
        _fail(f"{table} is not the RID sets of {attribute!r}: a value, a count or a group differs",
              detail=f"{len(got[0])} (group, value, count) rows stored, {len(want[0])} RID sets",
              hint=HINT)


# Column types whose text is the canonical decimal of the value: two values have equal text
# exactly when they are equal, so a count table of such a column is keyed by its values (the
# labels cast to the column's type) in numpy, without a join of every row on its text.
INTEGER_TYPES = ("smallint", "integer")
_NULL_VALUE = -2 ** 63           # outside the range of both: a NULL value


def _integer_triples(db, release_id, rel, col, attribute, coltype, digest, labels):
    """check_triples' (groups, value keys, counts) of a count table of an INTEGER_TYPES
    column, the row of its digest's partial sums, and the number of its rows whose value no
    label casts to (or without a count), in one pass over the table; each value keyed as
    _triples_row keys it (the hashtext of the label whose cast to the column's type it
    equals; NULL as NULL_KEY). None when two labels cast to one value (the caller's
    statement then judges the table, as for any type)."""
    d, params, types = (_STORED_LABELS, [release_id, attribute], ["bigint", "text"]) \
        if labels is None else (_GIVEN_LABELS, [release_id, attribute, list(labels)],
                                ["bigint", "text", "text[]"])
    lab = db.query(f"SELECT string_agg(int8send((v::{coltype})::bigint), ''::bytea) AS v,"
                   f" string_agg(int4send(h), ''::bytea) AS h FROM ({d}) d WHERE v IS NOT NULL",
                   params, types)[0]        # string_agg skips NULLs: both lists skip the same
    values, keys = _ints(lab["v"], ">i8"), _ints(lab["h"], ">i4")
    if np.unique(values).size != values.size:
        return None
    # t: each row once (OFFSET 0: its hash computed once, as in _triples_row)
    t = (f"(SELECT c.group_id AS g, c.count AS n, c.{col} AS x"
         + (f", {table_digest.row_hash(table_digest.ROW_TEXT)} AS h" if digest else "")
         + f" FROM {rel} c {table_digest.ONCE}) t")
    with table_digest.pinned(db) if digest else _unpinned():
        row = db.query("SELECT string_agg(int4send(t.g), ''::bytea) AS g,"
                       " string_agg(int8send(t.n), ''::bytea) AS n,"
                       f" string_agg(int8send(coalesce(t.x::bigint, {_NULL_VALUE})), ''::bytea) AS x,"
                       " count(*) FILTER (WHERE t.n IS NULL) AS nulls"
                       + (f", {table_digest.PARTIAL_SUMS}" if digest else "") + f" FROM {t}")[0]
    x = _ints(row["x"], ">i8")
    order = np.argsort(values)
    values, keys = values[order], keys[order]
    at = np.minimum(np.searchsorted(values, x), max(values.size - 1, 0))
    found = values[at] == x if values.size else np.zeros(x.size, bool)
    unknown = int(np.count_nonzero(~found & (x != _NULL_VALUE))) or int(row["nulls"])
    key = np.where(found, keys[at] if values.size else 0, NULL_KEY)
    return (_ints(row["g"], ">i4"), key, _ints(row["n"], ">i8")), row, unknown


class _unpinned:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# the distinct labels of the attribute's RID sets, each hashed once: from the stored catalog,
# or ($3) the labels of the arrays proven stored
_STORED_LABELS = ("SELECT v, hashtext(v) AS h FROM (SELECT DISTINCT v FROM deid.rid_set r,"
                  " unnest(r.value_list) v WHERE r.release_id = $1 AND r.attribute = $2"
                  " AND v IS NOT NULL) u")
_GIVEN_LABELS = "SELECT v, hashtext(v) AS h FROM unnest($3::text[]) v"


def _triples_row(db, release_id, attribute, coltype, rows, digest, labels=None):
    """The statement of check_triples: the table's triples `rows` (t, read once) keyed as the
    RID sets key their labels, and with `digest` the table's PARTIAL_SUMS over the same rows
    (each row once: the join repeats none unless two labels share a key, ``dup_keys``)."""
    d, params, types = (_STORED_LABELS, [release_id, attribute], ["bigint", "text"]) \
        if labels is None else (_GIVEN_LABELS, [release_id, attribute, list(labels)],
                                ["bigint", "text", "text[]"])
    sums = (", count(*) AS digest_n, sum(t.h)::text AS digest_1,"
            " sum(hashint8extended(t.h, 1))::text AS digest_2" if digest else "")
    return db.query(
        f"WITH d AS ({d}), k AS MATERIALIZED (SELECT (v::{coltype})::text AS key, h FROM d)"
        " SELECT string_agg(int4send(t.g), ''::bytea) AS g, string_agg(int8send(t.n), ''::bytea) AS n,"
        f" string_agg(int4send(CASE WHEN t.x IS NULL THEN {NULL_KEY} ELSE coalesce(k.h, 0) END),"
        " ''::bytea) AS h, count(*) FILTER (WHERE t.x IS NOT NULL AND k.h IS NULL) AS unknown,"
        " count(*) FILTER (WHERE t.n IS NULL) AS nulls,"
        ' (SELECT count(*) - count(DISTINCT key COLLATE "C") FROM k) AS dup_keys' + sums +
        f' FROM ({rows}) t LEFT JOIN k ON k.key COLLATE "C" = t.x COLLATE "C"', params, types)[0]


def used_labels(dictionary, codes):
    """The distinct non-NULL labels of `dictionary` that the `codes` use (a code past its
    end is NULL)."""
    used = np.unique(np.asarray(codes, np.int64))
    used = used[(used >= 0) & (used < len(dictionary))]
    return sorted({dictionary[i] for i in used.tolist() if dictionary[i] is not None})


def _ints(buf, dtype):
    return np.frombuffer(buf or b"", dtype).astype(np.int64)


def _pairs(a, b):
    out = np.stack([np.asarray(a, np.int64), np.asarray(b, np.int64)], axis=1)
    return out[np.lexsort((out[:, 1], out[:, 0]))]


def same_triples(got, want):
    """Whether two lists of (group, value key, count) triples, each given as three int64
    arrays, are equal as multisets. Groups and value keys of int4 range are packed into one
    sortable key (a single sort instead of a three-key one); a key that repeats, or a number
    out of int4 range, falls back to sorting all three."""
    if len(got[0]) != len(want[0]):
        return False
    keys = []
    for g, v, n in (got, want):
        g, v = np.asarray(g, np.int64), np.asarray(v, np.int64)
        if g.size and (min(int(g.min()), int(v.min())) < -2 ** 31 or max(int(g.max()), int(v.max())) >= 2 ** 31):
            return np.array_equal(_triples(*got), _triples(*want))
        key = ((g + 2 ** 31) << 32) | (v + 2 ** 31)
        order = np.argsort(key, kind="stable")
        key = key[order]
        if key.size > 1 and not np.all(key[1:] != key[:-1]):
            return np.array_equal(_triples(*got), _triples(*want))
        keys.append((key, np.asarray(n, np.int64)[order]))
    return np.array_equal(keys[0][0], keys[1][0]) and np.array_equal(keys[0][1], keys[1][1])


def _triples(g, v, n):
    out = np.stack([np.asarray(x, np.int64) for x in (g, v, n)], axis=1)
    return out[np.lexsort((out[:, 2], out[:, 1], out[:, 0]))]
