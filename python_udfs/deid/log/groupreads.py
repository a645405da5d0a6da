"""What the composition rule reads of a release's groups: anatomy's RID sets (deid.rid_set:
a group and a value per entry, the entry's row ids) and the clusters' members
(deid.cluster_member), decoded by numpy (log/composition.py, log/cellstore.py)."""
import numpy as np

from ..methods import registry


def _grouping(method):
    plugin = registry.plugin_of(method)
    return plugin.COMPOSITION if plugin is not None else "none"


def groups(db, method, release_id):
    """(sorted ids, group per id) of a release of a grouped method."""
    if _grouping(method) == "groups_values":
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
        ids, labels = members(db, release_id)
    ids, labels = ids.astype(np.int64), np.asarray(labels, np.int64)
    if ids.size and int(ids.max()) - int(ids.min()) + 1 == ids.size:
        order = np.empty(ids.size, np.int64)      # every id of a span once: placed, not sorted
        order[ids - int(ids.min())] = np.arange(ids.size)
        if np.array_equal(ids[order], np.arange(int(ids.min()), int(ids.min()) + ids.size)):
            return ids[order], labels[order]
    order = np.argsort(ids, kind="stable")
    return ids[order], labels[order]


def members(db, release_id):
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
    return array_values(bytes(row["r"]), counts), np.repeat(clusters, counts)


def array_values(data, counts):
    """The int8 values of back-to-back binary 1-D arrays (array_send: a header of 12 bytes,
    8 more per dimension, then per element a 4-byte length and the 8-byte value; no NULLs)."""
    header = np.where(counts > 0, 20, 12)
    starts = np.concatenate([[0], np.cumsum(header + 12 * counts)[:-1]]) + header
    at = np.repeat(starts - 12 * np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    at = at + 12 * np.arange(int(counts.sum())) + 4
    raw = np.frombuffer(data, np.uint8)
    return raw[at[:, None] + np.arange(8)].copy().view(">i8").ravel().astype(np.int64)


def attributes(db, release_id):
    return [r["attribute"] for r in db.query(
        "SELECT DISTINCT attribute FROM deid.rid_set WHERE release_id = $1", [release_id],
        ["bigint"])]


def values(db, attribute, releases, codes=None):
    """(row ids, value codes) of `attribute` over the releases' RID sets (a row's value is the
    source's, the same in every release that holds it: _values_hold refuses a change);
    `codes`: value -> code, to share a code space between calls."""
    rows = db.query(
        "SELECT value_list, rid_counts, rids FROM deid.rid_set WHERE attribute = $1"
        " AND release_id = ANY($2)", [attribute, releases], ["text", "bigint[]"])
    codes = {} if codes is None else codes
    rid, val = [], []
    for r in rows:
        per_entry = [codes.setdefault(v, len(codes)) for v in r["value_list"]]
        val.append(np.repeat(np.asarray(per_entry, np.int64),
                             np.frombuffer(bytes(r["rid_counts"]), ">i4")))
        rid.append(np.frombuffer(bytes(r["rids"]), ">i8").astype(np.int64))
    if not rid:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(rid), np.concatenate(val)


def entries(db, attribute, release_id):
    """(row ids, value per entry, rows per entry) of one release's `attribute`: the values
    stay per entry (a few per group), never a Python string per row."""
    rows = db.query(
        "SELECT value_list, rid_counts, rids FROM deid.rid_set WHERE attribute = $1"
        " AND release_id = $2 ORDER BY chunk", [attribute, release_id], ["text", "bigint"])
    rid = [np.frombuffer(bytes(r["rids"]), ">i8").astype(np.int64) for r in rows]
    counts = [np.frombuffer(bytes(r["rid_counts"]), ">i4").astype(np.int64) for r in rows]
    values = [v for r in rows for v in r["value_list"]]
    if not rid:
        return np.zeros(0, np.int64), [], np.zeros(0, np.int64)
    return np.concatenate(rid), values, np.concatenate(counts)
