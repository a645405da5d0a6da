"""The independent check of a k^m generalization release (options.model 'generalization' of
method disassociation: Terrovitis et al.'s AA, VLDB 2008), from what was STORED, before commit.

Reads back <release>_generalized (codes text[]), the record -> group membership stored in
deid.cluster_member (records grouped by their released set) and the hierarchy named by
options.hierarchy from the catalog (deid.hierarchy_member), and checks against the snapshot
the request read (the source records, not the method's output):
  (1) ONE global cut: the released codes are labels of the hierarchy whose sets of leaves are
      pairwise disjoint (no used node is an ancestor of another used node, so every leaf maps
      to at most one used node, the same in every record), every source code is covered by a
      used node, and the released rows are, as sets, the source records mapped through that
      cut: within every stored group all records map to the same set, distinct groups to
      distinct sets, and the stored rows are that multiset, group by group;
  (2) k^m-anonymity: every itemset of <= m released codes that occurs in a row occurs in >= k
      rows (enumerated here, independently of the method).
Nothing from deid.methods is imported.
"""
import itertools

import numpy as np

from ...sqltext import qualified
from .stored_release import STORE_SCHEMA, _fail, _ints, dictionary_keys


def hierarchy_leafsets(db, name):
    """(labels, leaves, pairs): every label of the hierarchy (leaves first), the leaves, and the
    (label id, leaf id) pairs of the leaves each label stands for (a label at several levels
    stands for the union)."""
    rows = db.query("SELECT level, value, parent FROM deid.hierarchy_member WHERE hierarchy = $1",
                    [name])
    if not rows:
        _fail("the release's hierarchy is gone from the catalog")
    return leafsets(rows)


def leafsets(rows):
    """hierarchy_leafsets from rows of (level, value, parent)."""
    parent = {}
    for r in rows:
        parent[(r["level"], r["value"])] = r["parent"]
    leaves = sorted(v for (lv, v) in parent if lv == 0)
    labels = list(leaves)
    ids = {v: i for i, v in enumerate(leaves)}
    pairs = []
    for i, leaf in enumerate(leaves):
        lv, v = 0, leaf
        while v is not None:
            if v not in ids:
                ids[v] = len(labels)
                labels.append(v)
            pairs.append((ids[v], i))
            v, lv = parent.get((lv, v)), lv + 1
    pairs = np.unique(np.asarray(pairs, np.int64).reshape(-1, 2), axis=0)
    return labels, leaves, pairs


def read_rows(db, table, labels):
    """The stored rows as (offsets, label ids); a NULL or a label not in `labels` fails."""
    hashes, exact = dictionary_keys(db, labels)
    expr = "coalesce(array_position($1::text[], e), 0) - 1" if exact else "hashtext(e)"
    row = db.query(f"SELECT count(*) AS n, string_agg(int4send(cardinality(t.codes)), ''::bytea) AS l,"
                   f" string_agg((SELECT string_agg(int4send({expr}), ''::bytea)"
                   "             FROM unnest(t.codes) e), ''::bytea) AS c,"
                   " count(*) FILTER (WHERE array_position(t.codes, NULL) IS NOT NULL) AS nulls"
                   f" FROM {qualified(STORE_SCHEMA, table)} t", [list(labels)], ["text[]"])[0]
    if row["nulls"]:
        _fail(f"{table} holds a NULL")
    lengths, raw = _ints(row["l"]), _ints(row["c"])
    if exact:
        ids = raw
    else:
        order = np.argsort(hashes, kind="stable")
        known = hashes[order]
        pos = np.minimum(np.searchsorted(known, raw), max(len(known) - 1, 0))
        ids = np.where(known[pos] == raw, order[pos], -1) if len(known) else np.full(len(raw), -1)
    if np.any(ids < 0):
        _fail("the release holds a code that is not in its hierarchy")
    return np.r_[0, np.cumsum(lengths)].astype(np.int64), ids


def _canonical(offsets, ids):
    """Each row's codes sorted; a row holding a code twice fails."""
    n = len(offsets) - 1
    row = np.repeat(np.arange(n), np.diff(offsets))
    o = np.lexsort((ids, row))
    ids = ids[o]
    if np.any((row[1:] == row[:-1]) & (ids[1:] == ids[:-1])):
        _fail("a released row holds a code twice")
    return ids


def _matrix(offsets, ids):
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    width = int(lengths.max()) if n else 0
    mat = np.full((n, width + 1), -1, np.int64)
    mat[:, 0] = lengths
    row = np.repeat(np.arange(n), lengths)
    mat[row, 1 + np.arange(ids.size) - np.repeat(offsets[:-1], lengths)] = ids
    return mat


def least_support(offsets, ids, m):
    """The least support of an itemset of <= m codes occurring in a row (None: none occurs);
    rows sorted, without repeats."""
    lengths = np.diff(offsets)
    least = None
    for i in range(1, m + 1):
        parts = []
        for L in np.unique(lengths[lengths >= i]):
            rows = np.flatnonzero(lengths == L)
            mat = ids[offsets[rows][:, None] + np.arange(L)]
            idx = np.asarray(list(itertools.combinations(range(int(L)), i)), np.int64)
            parts.append(mat[:, idx].reshape(-1, i))
        if not parts:
            break
        _, count = np.unique(np.concatenate(parts), axis=0, return_counts=True)
        least = int(count.min()) if least is None else min(least, int(count.min()))
    return least


def verify(db, req, frame, tables):
    """(1) one global cut, record for record through the membership; (2) k^m."""
    table = next(t for t in tables if t.endswith("_generalized"))
    labels, leaves, pairs = hierarchy_leafsets(db, req.options["hierarchy"])
    offsets, ids = read_rows(db, table, labels)
    member = db.query("SELECT string_agg(int8send(r), ''::bytea) AS r,"
                      " string_agg(int4send(m.cluster_id), ''::bytea) AS c"
                      " FROM deid.cluster_member m, unnest(m.rids) r WHERE m.release_id = $1",
                      [req.release_id], ["bigint"])[0]
    source = None if getattr(frame, "stored_only", False) else \
        (frame.rid, frame.dictionary, frame.offsets, frame.codes)
    return check(labels, leaves, pairs, offsets, ids, _ints(member["r"], 8),
                 _ints(member["c"]), source, req.k, req.options.get("m", 2))


def check(labels, leaves, pairs, offsets, ids, records, groups, source, k, m):
    """The checks on plain arrays: the stored rows (offsets, label ids), the membership
    (record ids, group ids) and the source (record ids ascending, dictionary, CSR offsets and
    codes into the dictionary) or None (stored only)."""
    offsets, ids = np.asarray(offsets, np.int64), np.asarray(ids, np.int64)
    ids = _canonical(offsets, ids)
    order = np.argsort(records, kind="stable")
    records, groups = np.asarray(records, np.int64)[order], np.asarray(groups, np.int64)[order]
    if len(records) != len(offsets) - 1 or np.any(records[1:] == records[:-1]):
        _fail("the stored membership does not hold every released record once")
    # (1) the used labels are an antichain: their leaf sets are disjoint
    used = np.unique(ids)
    mine = pairs[np.isin(pairs[:, 0], used)]
    if np.any(np.bincount(mine[:, 1], minlength=len(leaves)) > 1):
        _fail("the release uses a code and one of its generalizations: no single global cut")
    report = {"n_records": int(len(records)), "k": k, "m": m, "released_codes": int(used.size)}
    if source is not None:
        rid, dictionary, src_offsets, src_codes = source
        src_offsets = np.asarray(src_offsets, np.int64)
        if not np.array_equal(records, np.asarray(rid, np.int64)):
            _fail("the stored membership does not hold every record of the snapshot once")
        cover = np.full(len(leaves), -1, np.int64)
        cover[mine[:, 1]] = mine[:, 0]
        leaf_id = {v: i for i, v in enumerate(leaves)}
        code_leaf = np.asarray([leaf_id.get(v, -1) for v in dictionary] + [-1], np.int64)
        src = code_leaf[np.asarray(src_codes, np.int64)]
        if np.any(src < 0) or np.any(cover[src] < 0):
            _fail("a source code is covered by no released code")
        n = len(src_offsets) - 1
        W = max(len(labels), 1)
        row = np.repeat(np.arange(n), np.diff(src_offsets))
        key = np.unique(row * W + cover[src])
        img_off = np.r_[0, np.cumsum(np.bincount(key // W, minlength=n))].astype(np.int64)
        img = _matrix(img_off, key % W)
        # within a group one image; distinct groups, distinct images
        gu, first = np.unique(groups, return_index=True)
        if not np.array_equal(img, img[first][np.searchsorted(gu, groups)]):
            _fail("records of one stored group are released differently")
        if len(np.unique(img[first], axis=0)) != len(gu):
            _fail("two stored groups hold the same released set")
        stored = _matrix(offsets, ids)
        a = np.unique(stored, axis=0, return_counts=True)
        b = np.unique(img, axis=0, return_counts=True)
        if stored.shape != img.shape or len(a[0]) != len(b[0]) or \
                not (np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])):
            _fail("the released rows are not the source records mapped through the cut")
    else:
        report["mode"] = "stored only (the rows against the source were checked before commit)"
    least = least_support(offsets, ids, m)
    if least is not None and least < k:
        _fail("an itemset of at most m released codes occurs in fewer than k rows")
    report["min_itemset_support"] = least
    return report
