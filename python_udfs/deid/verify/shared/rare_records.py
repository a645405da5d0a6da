"""Independent check that a condensation release shows no rare source record (a copied
rare record re-identifies its patient).

Written from the requirement, not from the method (nothing from ``deid.methods``):

1. every released value of a categorical column is held by at least k source rows -- the
   source rows whose value the release maps to it (the column's generalization as the method
   hands it over: a hierarchy level or one merged label; the mapping's consistency with the
   release is the per-cluster count check of verify.cluster_moments), and a released label
   that is the text of a source value is held by at least k source rows with exactly that
   value (a rare value cannot hide behind a mapping that adds other rows to it);
2. no released row equals, on all released columns together, a source row whose combination
   of those columns has fewer than k source rows.  Source and released rows are compared in
   the release's representation (categories as released codes, numbers on their grain): the
   rows of both get one exact id per combination (columns factorized together) and every id
   counts its source rows.

:func:`stored_category_counts` is what ``deid.verify_release`` can check without the source:
in the stored release table every value of a categorical column occurs in >= k rows (each
cluster keeps its category counts, so a released value's count is its source support).
Failures raise DE002; messages name a column, never a value or a count below k.
"""
import numpy as np

from ...errors import DeidError, VERIFICATION_FAILED
from ...sqltext import qualified, quote_ident
from .cluster_moments import _positions, _unique

HINT = ("The release was rolled back; nothing was written.  The condensation output failed "
        "the rare-record check, which points to a bug in the method: please report it.")
STORED_HINT = ("The stored release differs from what was verified when it committed: drop it "
               "and release again.")


def _fail(message, hint=HINT):
    raise DeidError(VERIFICATION_FAILED, message, hint=hint)


def value_texts(col):
    """(text of every distinct source value, None for NULL; index of every row's value)."""
    if col.kind == "category":
        return list(col.dictionary) + [None], np.asarray(col.values, np.int64)
    values = np.asarray(col.values)
    distinct, index = np.unique(values, return_inverse=True)
    if col.kind == "date":
        texts = [str(np.datetime64(int(v), "D")) for v in distinct]
    elif col.kind == "int":
        texts = [str(int(v)) for v in distinct]
    else:
        texts = [repr(float(v)) for v in distinct]
    index = index.reshape(-1).astype(np.int64)
    null = np.asarray(col.null, bool)
    if null.any():
        index[null] = len(texts)
    return texts + [None], index


def mapped_codes(name, col, generalized, k):
    """Released code of every source row of a generalized column; checks the literal rule
    (module docstring, 1)."""
    texts, index = value_texts(col)
    mapping = generalized["map"]
    table = np.array([mapping.get(t, -1) for t in texts], dtype=np.int64)
    codes = table[index]
    if codes.size and codes.min() < 0:
        _fail(f'a source value of column "{name}" has no released label')
    counts = np.bincount(index, minlength=len(texts))
    literal = {t: int(c) for t, c in zip(texts, counts) if t is not None}
    for label in generalized["labels"]:
        if 0 < literal.get(label, 0) < k:
            _fail(f'column "{name}" releases a source value held by fewer than k source rows')
    return codes


def check_supports(source, released, k, columns, names):
    """Every released code of every categorical column has >= k source rows (rule 1)."""
    for j in columns:
        src = source[:, j].astype(np.int64)
        rel = released[:, j].astype(np.int64)
        if rel.size == 0:
            continue
        if rel.min() < 0 or (src.size and src.min() < 0):
            _fail(f'column "{names[j]}" holds a code outside its labels')
        support = np.bincount(src, minlength=int(rel.max()) + 1)
        if support[np.unique(rel)].min() < k:
            _fail(f'column "{names[j]}" releases a value held by fewer than k source rows')


def row_ids(rows):
    """Exact id of every row's combination of values, 0..g-1: each column factorized, the
    codes combined in mixed radix (re-factorized before the radix would overflow)."""
    ids = np.zeros(rows.shape[0], np.int64)
    size = 1
    for j in range(rows.shape[1]):
        values, code = _unique(rows[:, j])
        if size * values.size >= 1 << 62:
            _, ids = np.unique(ids, return_inverse=True)
            size = int(ids.max()) + 1
        ids = ids * values.size + code.reshape(-1)
        size *= values.size
    return _unique(ids)[1].reshape(-1)


def count_rare_copies(source, released, k):
    """Released rows equal to a source row whose combination has fewer than k source rows.

    The source rows' combinations get exact ids (each column factorized over the source's
    values, the codes combined in mixed radix, re-factorized before the radix would
    overflow); a released row takes the ids of its values among the source's, and a row with
    a value no source row has equals no source row (it is left out).  Only the source's
    values are sorted, not those of both sides together; and only the released rows whose
    every value occurs in the source, and the combinations they have, are counted (a
    synthetic number rarely equals a source value, so they are usually few or none: the
    source's ids are then looked up among them, not sorted, or not made at all)."""
    n = source.shape[0]
    if n == 0 or released.shape[0] == 0:
        return 0
    released = released[_rows_of_source_values(source, released)]
    if released.shape[0] == 0:
        return 0
    src_ids = np.zeros(n, np.int64)
    rel_ids = np.zeros(released.shape[0], np.int64)
    found = np.ones(released.shape[0], dtype=bool)   # every value so far occurs in the source
    size = 1
    for j in range(source.shape[1]):
        values, code = _unique(source[:, j])
        pos = _positions(values, released[:, j])
        found &= values[pos] == released[:, j]
        if size * values.size >= 1 << 62:
            src_ids, rel_ids, found, size = _compacted(src_ids, rel_ids, found)
        src_ids = src_ids * values.size + code.reshape(-1)
        rel_ids = rel_ids * values.size + pos
        size *= values.size
    return _rare_among(src_ids, rel_ids[found], k)


def _rows_of_source_values(source, released):
    """The released rows whose every value occurs in its source column (only they can equal
    a source row); columns are tested on the rows still left, and a column whose released
    values no source row has (a synthetic number) usually leaves none."""
    alive = np.arange(released.shape[0])
    for j in range(source.shape[1]):
        values = _distinct(source[:, j])
        x = released[alive, j]
        alive = alive[values[_positions(values, x)] == x]
        if alive.size == 0:
            break
    return alive


def _distinct(column):
    """The sorted distinct values of a column; through a presence table for whole numbers of
    a short range."""
    if column.size and np.array_equal(column, np.rint(column)):
        lo, hi = column.min(), column.max()
        if hi - lo < max(2 * column.size, 1024):
            present = np.bincount((column - lo).astype(np.int64)) > 0
            return lo + np.flatnonzero(present).astype(column.dtype)
    return np.unique(column)


def _rare_among(src_ids, candidates, k):
    """How many of ``candidates`` (released rows' ids) are ids of 1..k-1 source rows."""
    if candidates.size == 0:
        return 0
    wanted = np.unique(candidates)
    at = np.minimum(np.searchsorted(wanted, src_ids), wanted.size - 1)
    hit = wanted[at] == src_ids
    sources = np.bincount(at[hit], minlength=wanted.size)
    held = sources[np.searchsorted(wanted, candidates)]
    return int(((held > 0) & (held < k)).sum())


def _compacted(src_ids, rel_ids, found):
    """The ids renumbered 0..g-1 by the source's distinct ids; a released id no source row
    has is left out (``found`` False)."""
    ids = np.unique(src_ids)
    src_ids = np.searchsorted(ids, src_ids)
    at = np.minimum(np.searchsorted(ids, rel_ids), ids.size - 1)
    found = found & (ids[at] == rel_ids)
    return src_ids, np.where(found, at, 0), found, ids.size


def check_rare_records(source, released, k, category_columns, names):
    """Rules 1 and 2 on rows in the release's representation; returns the report."""
    check_supports(source, released, k, category_columns, names)
    if count_rare_copies(source, released, k):
        _fail("a released row equals a source row that fewer than k source rows share")
    return {"category_columns": [names[j] for j in category_columns], "rare_copies": 0}


def stored_category_counts(db, table, columns, k):
    """deid.verify_release: in the stored table, every value of every categorical column
    occurs in >= k rows (one aggregate pass per column)."""
    for c in columns:
        q = quote_ident(c)
        rare = db.value(f"SELECT count(*) FROM (SELECT 1 FROM {qualified('deid_release', table)}"
                        f" GROUP BY {q} HAVING count(*) < $1) r", [k], ["bigint"])
        if int(rare):
            _fail(f'column "{c}" of the stored release holds a value of fewer than k rows',
                  STORED_HINT)
    return {"category_columns": list(columns), "stored_counts": "each value >= k rows"}
