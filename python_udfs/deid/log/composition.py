"""The composition rule: a release, read together with every earlier release of its source,
singles out no fewer rows than its k and its earlier releases' k -- checked before commit.

Every release is readable by every deid_reader. Read together, releases of one source
publish counts (selection totals, per-group counts, per-cluster moments) over the cells of
the partition their selections and groupings induce on the source's rows; a reader adds
and subtracts them (a tracker: R1 + R3 - R2) or intersects what each release allows a
patient it knows (Ganta, Kasiviswanathan, Smith, KDD 2008). So, over every earlier release
of the same source (deid.release.source; committed, replaced or dropped alike, each was
readable while it lived):

(a) selections: every cell of the partition all selections induce (rows selected by exactly
    the same releases) that this release creates holds at least k rows, k the largest of
    the releases holding the cell. Two releases make today's pairwise rule; an identical
    selection creates no cell.
(b) groupings, by the same method: anatomy's groups (deid.rid_set) and condensation's
    clusters (deid.cluster_member) crossed with the earlier releases' of that method: every
    cell created or held holds at least k rows, and for anatomy at least l distinct values of
    each sensitive attribute (l: the largest of the releases holding the cell). Disassociation's clusters (003) are not crowds of k (k^m bounds
    the supports of itemsets): records already released keep their clusters, or the
    release is refused. Keeping the earlier groups (or unions of
    them) creates no cell; new rows in groups of their own create cells of those groups.
    Generalization logs no class per row: a later generalization release that shares
    rows with an earlier one must publish the very same classes over the very same rows.

A superuser may reset a source's history (a row in deid.composition_reset, who and when):
releases up to its after_release no longer bear on later ones. The cells are
log/partition.py's. A requester with SELECT may override with
options.allow_overlap (logged with the options and as a warning in the release's metrics);
a policy requester may not, and is refused uniformly (no count, no release named).
"""
import json

import numpy as np

from ..errors import DeidError, PRIVACY_MODEL_UNSATISFIABLE
from . import partition, rowids, runs

REFUSAL = ("the release, read together with the earlier releases of the same source, would "
           "single out too few rows")
REFUSAL_HINT = ("Select and group the rows as the earlier releases of this source did (the "
                "same rows, or rows that differ from every combination of them by at least k "
                "rows; the same method, columns and parameters), and use the same row id "
                "column. A requester with SELECT on the source may override this with "
                "options => '{\"allow_overlap\": true}'.")
WARNING = ("composition rule overridden (options.allow_overlap): read together with earlier "
           "releases of the source, this release may single out fewer than k rows")
GROUPED = ("anatomy", "condensation", "disassociation")


def check_selections(db, req, row_id, ids):
    """Rule (a), and the row-id column every earlier release must share; returns the earlier
    releases (release_id, method, k, ids)."""
    earlier = _earlier(db, req)
    if any(e["row_id"] != row_id for e in earlier):
        raise refusal(req, "an earlier release used another row id column")
    layers, seen = [], {}
    for e in earlier:
        key = bytes(e["rids"])
        if key in seen:                      # an identical selection creates no cell
            seen[key][1] = max(seen[key][1], int(e["k"] or 0))
            continue
        seen[key] = [runs.of_stored(key), int(e["k"] or 0)]
        layers.append(seen[key])
    if layers and _selections_too_small(layers, ids, req.k):
        raise refusal(req, "a cell of the selections' partition would hold fewer than k rows")
    return [_Earlier(e) for e in earlier]


RUNS_LIMIT = 1 << 21       # beyond this many runs in all, or one run per 4 rows, the per-row
                           # partition is the cheaper


def _selections_too_small(layers, ids, k):
    """Rule (a) over runs of ids (log/runs.py: ranges, all rows but a few -- a few runs each);
    selections scattered into many short runs are crossed row by row (partition.py)."""
    new = runs.of_ids(ids)
    count = new.shape[0] + sum(r.shape[0] for r, _ in layers)
    rows = ids.size + sum(int((r[:, 1] - r[:, 0]).sum()) for r, _ in layers)
    if count <= RUNS_LIMIT and 4 * count <= rows:
        return runs.too_small(layers, new, k)
    return partition.too_small(partition.cells(
        [partition.Layer(runs.ids_of(r), None, kk) for r, kk in layers],
        partition.Layer(ids, None, k)))


class _Earlier(dict):
    """An earlier release's row as read, its ids listed only when a rule asks for them (the
    selections' check works on runs)."""
    def __missing__(self, key):
        if key != "ids":
            raise KeyError(key)
        self["ids"] = _unpack(bytes(self["rids"]))
        return self["ids"]


def check_groupings(db, req, ids, earlier):
    """Rule (b) for the release `req` (its groups already written in this transaction)."""
    same = [e for e in earlier if e["method"] == req.method]
    if not same:
        return
    if req.method == "generalization":
        _same_classes_or_disjoint(db, req, ids, same)
    elif req.method in GROUPED:
        _refined_groups_hold(db, req, same)


def _earlier(db, req):
    return db.query(
        "SELECT s.release_id, r.method, (r.parameters->>'k')::int AS k,"
        " (r.parameters->>'l')::int AS l, r.parameters->'options'->'column_l' AS column_l,"
        " s.row_id, s.rids"
        " FROM deid.release_selection s JOIN deid.release r ON r.release_id = s.release_id"
        " WHERE r.source = $1 AND s.release_id <> $2 AND s.release_id > coalesce(("
        "   SELECT max(after_release) FROM deid.composition_reset"
        "    WHERE source IS NULL OR source = $1), 0) ORDER BY s.release_id",
        [req.rel.oid, req.release_id], ["oid", "bigint"])


def _unpack(data):
    return rowids.unpack(data)


# ------------------------------------------------------------------ generalization
def _same_classes_or_disjoint(db, req, ids, same):
    for e in same:
        if not _shares_rows(ids, e["ids"]):
            continue
        if e["ids"].size != ids.size or not np.array_equal(e["ids"], ids) or \
                not _same_classes(db, req.release_id, e["release_id"]):
            raise refusal(req, "an earlier generalization release grouped these rows otherwise")


def _shares_rows(a, b):
    if a.size == 0 or b.size == 0:
        return False
    at = np.minimum(np.searchsorted(b, a), b.size - 1)
    return bool(np.any(b[at] == a))


def _same_classes(db, a, b):
    return bool(db.value(
        "SELECT NOT EXISTS ((SELECT generalized, cardinality, source FROM deid.equivalence_class"
        " WHERE release_id = $1 EXCEPT ALL SELECT generalized, cardinality, source"
        " FROM deid.equivalence_class WHERE release_id = $2) UNION ALL"
        " (SELECT generalized, cardinality, source FROM deid.equivalence_class"
        " WHERE release_id = $2 EXCEPT ALL SELECT generalized, cardinality, source"
        " FROM deid.equivalence_class WHERE release_id = $1))", [a, b], ["bigint", "bigint"]))


# ------------------------------------------------------------------ grouped methods
def _refined_groups_hold(db, req, same):
    pairs = [(e, partition.Layer(*_groups(db, req.method, e["release_id"]), int(e["k"] or 0)))
             for e in same]
    pairs = [(e, x) for e, x in pairs if x.ids.size]
    new = partition.Layer(*_groups(db, req.method, req.release_id), req.k)
    if not pairs:
        return
    layers = [x for _, x in pairs]
    c = partition.cells(layers, new)
    if req.method == "disassociation":
        # a cluster is not a crowd of k (k^m bounds itemsets' supports): no regrouping at all
        if partition.regroups(c):
            raise refusal(req, "an earlier disassociation release clustered these records otherwise")
        return
    if partition.too_small(c):
        raise refusal(req, "a cell of the groupings' common refinement would hold fewer than k rows")
    if req.method == "anatomy":
        _values_hold(db, req, pairs, new, c)


def _values_hold(db, req, pairs, new, c):
    """Every cell the new release creates or holds keeps, per sensitive attribute, at least
    l distinct values -- l the largest of the releases holding the cell (Def. 6: deleting
    every value of one attribute deletes every row, so an attribute holds at least L values;
    with column_l, that attribute's own limit)."""
    layers = [x for _, x in pairs] + [new]
    _, pos = partition.positions(layers)
    for attribute in _attributes(db, req.release_id):
        bar = np.zeros(c.sizes.size, np.int64)
        for (e, _), p in zip(pairs, pos):
            np.maximum.at(bar, c.rows[p], _l_of(e["l"], e["column_l"], attribute))
        bar[c.rows[pos[-1]]] = np.maximum(bar[c.rows[pos[-1]]], _l_of(
            req.l, req.options.get("column_l"), attribute))
        if not bar.any():
            continue
        rid, values = _values(db, attribute, [e["release_id"] for e, _ in pairs] + [req.release_id])
        at = _position(layers, pos, rid)
        if partition.too_few_values(c, values[at >= 0], at[at >= 0], bar):
            raise refusal(req, "a cell of the groupings' common refinement would hold "
                               "fewer than l sensitive values")


def _l_of(l, column_l, attribute):
    """A release's l for one sensitive attribute (column_l: jsonb as text from the log)."""
    l = int(l or 0)
    if isinstance(column_l, str):
        column_l = json.loads(column_l)
    limit = column_l.get(attribute) if isinstance(column_l, dict) else None
    return min(l, int(limit)) if limit is not None else l


def _groups(db, method, release_id):
    """(sorted ids, group per id) of a release of a grouped method."""
    if method == "anatomy":
        rows = db.query(
            "SELECT group_ids, rid_counts, rids FROM deid.rid_set WHERE release_id = $1"
            " AND attribute = (SELECT min(attribute) FROM deid.rid_set WHERE release_id = $1)"
            " ORDER BY chunk", [release_id], ["bigint"])
        groups = [np.frombuffer(bytes(r["group_ids"]), ">i4") for r in rows]
        counts = [np.frombuffer(bytes(r["rid_counts"]), ">i4") for r in rows]
        rids = [np.frombuffer(bytes(r["rids"]), ">i8") for r in rows]
        labels = np.repeat(np.concatenate(groups or [np.zeros(0, ">i4")]),
                           np.concatenate(counts or [np.zeros(0, ">i4")]))
        ids = np.concatenate(rids or [np.zeros(0, ">i8")])
    else:
        ids, labels = _members(db, release_id)
    ids, labels = ids.astype(np.int64), np.asarray(labels, np.int64)
    order = np.argsort(ids, kind="stable")
    return ids[order], labels[order]


def _members(db, release_id):
    """(ids, cluster per id) of deid.cluster_member, read as one packed row: each cluster's
    int8[] in PostgreSQL's binary array form (array_send), decoded by numpy, never as a Python
    list of a million ints."""
    row = db.query(
        "SELECT coalesce(string_agg(int4send(cluster_id), ''::bytea ORDER BY cluster_id),"
        " ''::bytea) AS c, coalesce(string_agg(int4send(coalesce(cardinality(rids), 0)),"
        " ''::bytea ORDER BY cluster_id), ''::bytea) AS n,"
        " coalesce(string_agg(array_send(rids), ''::bytea ORDER BY cluster_id), ''::bytea) AS r"
        " FROM deid.cluster_member WHERE release_id = $1", [release_id], ["bigint"])[0]
    clusters = np.frombuffer(bytes(row["c"]), ">i4").astype(np.int64)
    counts = np.frombuffer(bytes(row["n"]), ">i4").astype(np.int64)
    return _array_values(bytes(row["r"]), counts), np.repeat(clusters, counts)


def _array_values(data, counts):
    """The int8 values of back-to-back binary 1-D arrays (array_send: a header of 12 bytes,
    8 more per dimension, then per element a 4-byte length and the 8-byte value; no NULLs)."""
    header = np.where(counts > 0, 20, 12)
    starts = np.concatenate([[0], np.cumsum(header + 12 * counts)[:-1]]) + header
    at = np.repeat(starts - 12 * np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    at = at + 12 * np.arange(int(counts.sum())) + 4
    raw = np.frombuffer(data, np.uint8)
    return raw[at[:, None] + np.arange(8)].copy().view(">i8").ravel().astype(np.int64)


def _attributes(db, release_id):
    return [r["attribute"] for r in db.query(
        "SELECT DISTINCT attribute FROM deid.rid_set WHERE release_id = $1", [release_id],
        ["bigint"])]


def _values(db, attribute, releases):
    """(row ids, value codes) of `attribute` over the releases' RID sets (a row's value is the
    source's, the same in every release that holds it)."""
    rows = db.query(
        "SELECT value_list, rid_counts, rids FROM deid.rid_set WHERE attribute = $1"
        " AND release_id = ANY($2)", [attribute, releases], ["text", "bigint[]"])
    codes = {}
    rid, val = [], []
    for r in rows:
        per_entry = [codes.setdefault(v, len(codes)) for v in r["value_list"]]
        val.append(np.repeat(np.asarray(per_entry, np.int64),
                             np.frombuffer(bytes(r["rid_counts"]), ">i4")))
        rid.append(np.frombuffer(bytes(r["rids"]), ">i8").astype(np.int64))
    if not rid:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(rid), np.concatenate(val)


def _position(layers, pos, rid):
    """Positions (as partition.positions gave them) of the row ids `rid`; -1 where none."""
    ids = np.concatenate([l.ids for l in layers])
    at = np.concatenate(pos)
    order = np.argsort(ids, kind="stable")
    ids, at = ids[order], at[order]
    if ids.size == 0:
        return np.full(rid.size, -1, np.int64)
    i = np.minimum(np.searchsorted(ids, rid), ids.size - 1)
    return np.where(ids[i] == rid, at[i], -1)


def refusal(req, why):
    """One refusal for every case; a requester with SELECT is told why (the detail, which a
    policy requester never sees: for_policy turns it into the uniform refusal)."""
    e = DeidError(PRIVACY_MODEL_UNSATISFIABLE, REFUSAL, hint=REFUSAL_HINT)
    if req.grant.get("via") == "select":
        e.detail = why
    e.data_dependent = True
    return e
