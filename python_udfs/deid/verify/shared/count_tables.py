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


def check_tables(db, req, tables, sas, entries, group_ids, sizes, known=None):
    """The QIT's (or the generalized table's) groups -- `group_ids` with their `sizes`, from
    group_sizes -- and every count table against the RID sets: `entries` maps each sensitive
    attribute to its entries' (groups, value keys, RID counts) (value keys: label_keys).
    ``known``: as group_sizes'. Returns a small report."""
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
        check_triples(db, req.release_id, table, s, not generalized, entries[s], known)
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


def check_triples(db, release_id, table, attribute, stored_counts, want, known=None):
    """(group, value, count) of the table -- its rows (a count table) or its rows grouped by
    group and `attribute` -- equal the RID-set entries `want` of the attribute. With
    ``known`` and a count table, the same pass takes its digest (as group_sizes does)."""
    rel = qualified(STORE_SCHEMA, table)
    col = quote_ident(attribute)
    coltype = db.value("SELECT format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute"
                       " WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped",
                       [rel, attribute], ["text", "text"])
    if coltype is None:
        _fail(f"{table} has no column {attribute!r}", hint=HINT)
    digest = stored_counts and known is not None
    # with the digest: its rows' hashes beside them (t is read twice: materialized, one scan)
    rows = (f"SELECT c.group_id AS g, c.{col}::text AS x, c.count AS n"
            + (f", {table_digest.row_hash(table_digest.ROW_TEXT)} AS h" if digest else "")
            + f" FROM {rel} c" if stored_counts else
            f"SELECT group_id AS g, {col}::text AS x, count(*) AS n FROM {rel} GROUP BY 1, 2")
    sums = (", (SELECT ARRAY[count(*)::text, sum(h)::text, sum(hashint8extended(h, 1))::text]"
            " FROM t) AS digest" if digest else "")
    with table_digest.pinned(db) if digest else _unpinned():
        row = _triples_row(db, release_id, attribute, coltype, rows, sums)
    if digest:
        n, s1, s2 = row["digest"]
        known[table] = table_digest.combine([{"digest_n": n, "digest_1": s1, "digest_2": s2}])
    if row["unknown"] or row["nulls"]:
        _fail(f"{table} holds a value of {attribute!r} that no RID set holds", hint=HINT,
              detail=f"{row['unknown'] or row['nulls']} row(s)")
    got = _triples(_ints(row["g"], ">i4"), _ints(row["h"], ">i4"), _ints(row["n"], ">i8"))
    if not np.array_equal(got, _triples(*want)):
        _fail(f"{table} is not the RID sets of {attribute!r}: a value, a count or a group differs",
              detail=f"{len(got)} (group, value, count) rows stored, {len(want[0])} RID sets",
              hint=HINT)


class _unpinned:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _triples_row(db, release_id, attribute, coltype, rows, sums):
    """The statement of check_triples: the table's triples `rows` (t) keyed as the RID sets
    key their labels, and `sums` (its digest, or nothing)."""
    return db.query(
        "WITH d AS (SELECT v, hashtext(v) AS h FROM (SELECT DISTINCT v FROM deid.rid_set r,"
        "           unnest(r.value_list) v WHERE r.release_id = $1 AND r.attribute = $2"
        "           AND v IS NOT NULL) u),"      # each distinct label hashed once
        f" k AS (SELECT (v::{coltype})::text AS key, h FROM d), t AS ({rows})"
        " SELECT string_agg(int4send(t.g), ''::bytea) AS g, string_agg(int8send(t.n), ''::bytea) AS n,"
        f" string_agg(int4send(CASE WHEN t.x IS NULL THEN {NULL_KEY} ELSE coalesce(k.h, 0) END),"
        " ''::bytea) AS h, count(*) FILTER (WHERE t.x IS NOT NULL AND k.h IS NULL) AS unknown,"
        " count(*) FILTER (WHERE t.n IS NULL) AS nulls" + sums +
        ' FROM t LEFT JOIN k ON k.key COLLATE "C" = t.x COLLATE "C"',
        [release_id, attribute], ["bigint", "text"])[0]


def _ints(buf, dtype):
    return np.frombuffer(buf or b"", dtype).astype(np.int64)


def _pairs(a, b):
    out = np.stack([np.asarray(a, np.int64), np.asarray(b, np.int64)], axis=1)
    return out[np.lexsort((out[:, 1], out[:, 0]))]


def _triples(g, v, n):
    out = np.stack([np.asarray(x, np.int64) for x in (g, v, n)], axis=1)
    return out[np.lexsort((out[:, 2], out[:, 1], out[:, 0]))]
