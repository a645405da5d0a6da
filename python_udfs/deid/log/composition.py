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
    rows with an earlier one must publish the very same classes over the very same rows,
    or (a re-release of a grown source) publish every earlier record again, each class
    grown by none or at least k rows. Anatomy: a row's sensitive value is the same in every
    release that holds it (a change would be its group's counts' difference).
    A re-release keeps the earlier groups by itself (kept_groups below,
    methods/kept_groups.py), which these rules then accept.
(c) groupings of different methods are not crossed: a release by a method that publishes
    exact per-group statistics of a column (methods/contract.py EXACT_PER_GROUP: anatomy's
    count tables, generalization's raw values per class) is refused when an earlier release
    by another such method published the same column, sensitive in either, outside the
    quasi-identifiers over rows this one also selects (an anatomy group minus a
    generalization class inside it can be two patients, their values the counts'
    difference). The groupings' common refinement is not computed: refused outright.

A superuser may reset a source's history (a row in deid.composition_reset, who and when):
releases up to its after_release no longer bear on later ones. The cells are
log/partition.py's. A requester with SELECT may override with
options.allow_overlap (logged with the options and as a warning in the release's metrics);
a policy requester may not, and is refused uniformly (no count, no release named).
"""
import json

import numpy as np

from ..errors import DeidError, PRIVACY_MODEL_UNSATISFIABLE
from ..methods import registry
from ..methods.contract import EXACT_PER_GROUP
from ..methods.kept_groups import KeptGroups
from ..request.release import STORE_SCHEMA
from ..sqltext import qualified
from . import (audience, cellstate, cellstore, cellvalues, groupreads, partition, rowids, runs,
               source_identity)

REFUSAL = ("the release, read together with the earlier releases of the same source, would "
           "single out too few rows")
REFUSAL_HINT = ("Select and group the rows as the earlier releases of this source did (the "
                "same rows, or rows that differ from every combination of them by at least k "
                "rows; the same method, columns and parameters), and use the same row id "
                "column. A requester with SELECT on the source may override this with "
                "options => '{\"allow_overlap\": true}'.")
WARNING = ("composition rule overridden (options.allow_overlap): read together with earlier "
           "releases of the source, this release may single out fewer than k rows")
# the groupings (methods/contract.py COMPOSITIONS) whose rows are logged per group
GROUPED = ("groups_values", "clusters", "whole_clusters")
# the readers of groups and values (log/groupreads.py), by their names here
_groups, _array_values = groupreads.groups, groupreads.array_values
_attributes, _values = groupreads.attributes, groupreads.values


def grouping(method):
    """The grouping a method logs (its plug-in's COMPOSITION); "none" for a method this
    server does not have."""
    plugin = registry.plugin_of(method)
    return plugin.COMPOSITION if plugin is not None else "none"


def check_selections(db, req, row_id, ids):
    """Rule (a), and the row-id column every earlier release must share; returns the earlier
    releases (release_id, method, k, ids), with the cells to store once the release passes
    (log/cellstore.py remember)."""
    earlier = _earlier(db, req)
    if any(e["row_id"] != row_id for e in earlier):
        raise refusal(req, "an earlier release used another row id column")
    if earlier.complete:
        c = cellstore.crossing(req, earlier, "selections", earlier, ids, None,
                               lambda e: (e["release_id"], e["ids"], None, int(e["k"] or 0)))
        if len(earlier) and cellstate.too_small(c):
            raise refusal(req, "a cell of the selections' partition would hold fewer than k rows")
        return earlier
    cellstore.fetch_rids(db, earlier)
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
    return earlier


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
    """An earlier release's row as read, its ids read and listed only when a rule asks for
    them (the stored cells need none; the selections' full check works on runs)."""
    def __init__(self, row, db):
        super().__init__(row)
        self.db = db

    def __missing__(self, key):
        if key == "rids":
            self["rids"] = self.db.value("SELECT rids FROM deid.release_selection"
                                         " WHERE release_id = $1", [self["release_id"]],
                                         ["bigint"])
            return self["rids"]
        if key != "ids":
            raise KeyError(key)
        self["ids"] = _unpack(bytes(self["rids"]))
        return self["ids"]


def check_groupings(db, req, ids, earlier):
    """Rules (b) and (c) for the release `req` (its groups already written in this
    transaction)."""
    _one_method_per_column(db, req, ids, earlier)
    same = [e for e in earlier if e["method"] == req.method]
    if not same:
        return
    if grouping(req.method) == "classes":
        _same_classes_or_disjoint(db, req, ids, same)
    elif grouping(req.method) in GROUPED:
        _refined_groups_hold(db, req, same, earlier)


def kept_groups(db, req, row_id):
    """The groups a re-release keeps (methods/kept_groups.py): those of the latest earlier
    release of the source by the same method, k and l, over the same columns and row id
    column (any status: each was readable while it lived; another k or l is another study,
    whose groups would not meet this one's model); None when there is none or the request
    asks for a fresh grouping (options.regroup: rule (b) then judges it)."""
    if req.options.get("regroup"):
        return None
    latest = db.value(
        "SELECT max(r.release_id) FROM deid.release r JOIN deid.release_selection s"
        " ON s.release_id = r.release_id WHERE r.source = $1 AND r.method = $2"
        " AND r.parameters->'columns' = $3::jsonb AND s.row_id = $4"
        " AND (r.parameters->>'k')::int = $5"
        " AND (r.parameters->>'l')::int IS NOT DISTINCT FROM $6 AND r.release_id > " +
        _AFTER_RESET, [req.rel.oid, req.method, json.dumps(req.columns), row_id, req.k, req.l],
        ["oid", "text", "text", "name", "int4", "int4"])
    if latest is None:
        return None
    if grouping(req.method) == "classes":
        return _kept_levels(db, req.method, latest)
    ids, labels = _groups(db, req.method, latest)
    # what it logged for a re-release to check (methods/kept_groups.py, digests)
    logged = db.value("SELECT metrics->>'kept' FROM deid.release WHERE release_id = $1",
                      [latest], ["bigint"])
    return KeptGroups(int(latest), ids, labels, logged=json.loads(logged) if logged else None)


def _kept_levels(db, method, release_id):
    """A generalization release's levels per row: its batches of rows (deid.cluster_member)
    and each batch's levels (metrics 'level_batches'); a release of one batch stores no
    members: its selection, at its levels."""
    row = db.query("SELECT s.rids, r.metrics->'levels' AS levels, r.metrics->'level_batches'"
                   " AS batches FROM deid.release r JOIN deid.release_selection s"
                   " ON s.release_id = r.release_id WHERE r.release_id = $1",
                   [release_id], ["bigint"])[0]
    load = (lambda v: json.loads(v) if isinstance(v, str) else v)
    if row["batches"] is None:
        ids = _unpack(bytes(row["rids"]))
        return KeptGroups(int(release_id), ids, np.zeros(ids.size, np.int64),
                          {0: load(row["levels"]) or {}})
    ids, labels = _groups(db, method, release_id)
    return KeptGroups(int(release_id), ids, labels,
                      {int(b): lv for b, lv in load(row["batches"]).items()})


# a superuser's reset of every source (no source, no relation named) or of this one; a
# deid_admin's clearing of a dropped table's name (relation only) bears on that name alone
_AFTER_RESET = ("coalesce((SELECT max(after_release) FROM deid.composition_reset"
                " WHERE (source IS NULL AND relation IS NULL) OR source = $1), 0)")


def _earlier(db, req):
    """The other releases of the request's source identity (log/source_identity.py: a view's
    base table, a re-created table's name) that some role reads together with it
    (log/audience.py); row_id is the identity's row-id column."""
    rows, key = _same_source(db, req, _EARLIER_COLUMNS)
    meeting = audience.meeting(db, req, rows)
    return cellstore.Found(db, [_Earlier(e, db) for e in meeting], len(meeting) == len(rows),
                           key)


def apart(db, req):
    """The earlier releases of the request's source identity that the rule does not compare
    with it, their audiences sharing no role now (log/audience.py record_apart: a membership
    granted later must not let one role read both unchecked)."""
    rows = [r for r in _same_source(db, req, "s.release_id")[0]
            if r["release_id"] < req.release_id]
    met = {r["release_id"] for r in audience.meeting(db, req, rows)}
    return [r["release_id"] for r in rows if r["release_id"] not in met]


_EARLIER_COLUMNS = (
    "s.release_id, r.method, (r.parameters->>'k')::int AS k, (r.parameters->>'l')::int AS l,"
    " r.parameters->'columns' AS columns, r.parameters->'roles' AS roles,"
    " r.parameters->'options'->'column_l' AS column_l,"
    " coalesce(i.row_id, s.row_id) AS row_id")


def _same_source(db, req, columns):
    """`columns` of every other release of the request's source identity since the source's
    history was last cleared, whoever reads it; and the identity's key (log/cellstore.py)."""
    idents = source_identity.of_release(db, req)
    names = [i.relation for i in idents]
    oids = [i.oid for i in idents if i.oid is not None] or [req.rel.oid]
    rows = db.query(
        "SELECT DISTINCT ON (s.release_id) " + columns +
        " FROM deid.release_selection s JOIN deid.release r ON r.release_id = s.release_id"
        " LEFT JOIN deid.release_identity i ON i.release_id = s.release_id"
        "  AND i.relation = ANY($2)"
        " WHERE (r.source = ANY($3) OR i.relation IS NOT NULL) AND s.release_id <> $1"
        " AND s.release_id > coalesce((SELECT max(after_release) FROM deid.composition_reset"
        "    WHERE (source IS NULL AND relation IS NULL) OR source = ANY($3)"
        "       OR relation = ANY($2)), 0) ORDER BY s.release_id",
        [req.release_id, names, oids], ["bigint", "text[]", "oid[]"])
    return rows, cellstore.identity_key(names, oids)


def _unpack(data):
    return rowids.unpack(data)


# ------------------------------------------------------------------ across methods
def _one_method_per_column(db, req, ids, earlier):
    """Rule (c): a column published with exact per-group statistics by two methods over
    shared rows is refused (the two groupings would be crossed by subtraction)."""
    if grouping(req.method) not in EXACT_PER_GROUP:
        return
    others = [e for e in earlier if e["method"] != req.method
              and grouping(e["method"]) in EXACT_PER_GROUP]
    if not others:
        return
    mine = _request_columns(db, req)
    for e in others:
        if _columns_meet(mine, _logged_columns(e["columns"], e["roles"])) and \
                _shares_rows(ids, e["ids"]):
            raise refusal(req, "an earlier release by another method published a sensitive "
                               "column of this one for the same rows")


def _columns_meet(a, b):
    """Whether two releases' (columns outside the quasi-identifiers, sensitive ones) share a
    column that either counts as sensitive; None (not known): they may."""
    if a is None or b is None:
        return True
    common = a[0] & b[0]
    return bool(common & (a[1] | b[1]))


def _request_columns(db, req):
    """(columns outside the quasi-identifiers, sensitive columns) of the release `req`: its
    log row's (a release re-checked for a grant) or, before it is logged, the request's."""
    row = db.query("SELECT parameters->'columns' AS columns, parameters->'roles' AS roles"
                   " FROM deid.release WHERE release_id = $1", [req.release_id], ["bigint"])
    if row:
        return _logged_columns(row[0]["columns"], row[0]["roles"])
    columns = getattr(req, "columns", None)
    if columns is None:
        return None
    roles = {c: req.rel.columns[c].role for c in columns}
    return ({c for c in columns if roles[c] != "quasi_identifier"},
            {c for c in columns if roles[c] == "sensitive"})


def _logged_columns(columns, roles):
    """The same pair from a release log row's parameters (jsonb as text); a release logged
    without its columns' roles counts each of its columns as sensitive; without its columns,
    None (any column)."""
    load = (lambda v: json.loads(v) if isinstance(v, str) else v)
    columns, roles = load(columns), load(roles)
    if not isinstance(columns, list):
        return None
    if not isinstance(roles, dict):
        return set(columns), set(columns)
    role = {c: (roles.get(c) or {}).get("role") for c in columns}
    return ({c for c in columns if role[c] != "quasi_identifier"},
            {c for c in columns if role[c] not in ("quasi_identifier", "insensitive")})


# ------------------------------------------------------------------ generalization
def _same_classes_or_disjoint(db, req, ids, same):
    for e in same:
        if not _shares_rows(ids, e["ids"]):
            continue
        if e["ids"].size == ids.size and np.array_equal(e["ids"], ids) and \
                _same_classes(db, req.release_id, e["release_id"]):
            continue
        if not (_contains(ids, e["ids"]) and _grown_by_k(db, req, e["release_id"]) and
                _records_kept(db, req, e["release_id"])):
            raise refusal(req, "an earlier generalization release grouped these rows otherwise")


def _contains(a, b):
    """Whether the sorted ids `a` hold every id of `b`."""
    if b.size == 0:
        return True
    if a.size == 0:
        return False
    return bool(np.all(a[np.minimum(np.searchsorted(a, b), a.size - 1)] == b))


def _grown_by_k(db, req, earlier):
    """A re-release of a grown source: every class of the earlier release holds, in this one,
    as many rows as it did or at least k more (the difference of the two class counts is the
    new rows in the class: none, or a crowd of k); no class shrank."""
    return not db.value(
        "SELECT EXISTS (SELECT FROM (SELECT generalized, source, sum(cardinality) AS n"
        " FROM deid.equivalence_class WHERE release_id = $1 GROUP BY 1, 2) a"
        " FULL JOIN (SELECT generalized, source, sum(cardinality) AS n"
        " FROM deid.equivalence_class WHERE release_id = $2 GROUP BY 1, 2) b"
        " ON a.generalized = b.generalized AND a.source IS NOT DISTINCT FROM b.source"
        " WHERE coalesce(a.n, 0) - coalesce(b.n, 0) NOT IN (0) AND"
        " coalesce(a.n, 0) - coalesce(b.n, 0) < $3)",
        [req.release_id, earlier, req.k], ["bigint", "bigint", "bigint"])


def _records_kept(db, req, earlier):
    """Every record the earlier release published is published again as it was (a row
    deleted or changed since would be the difference): checked on the stored tables while
    the earlier one's still exists (a dropped release's class counts alone)."""
    old = db.value("SELECT to_regclass(quote_ident($1) || '.' || quote_ident(name))::text"
                   " FROM deid.release WHERE release_id = $2", [STORE_SCHEMA, earlier],
                   ["text", "bigint"])
    if old is None:
        return True
    new = qualified(STORE_SCHEMA, req.name)
    if not db.value(_SAME_SHAPE, [old, new], ["text", "text"]):
        return False                   # other columns: other records, not the same kept
    return not db.value(f"SELECT EXISTS (SELECT * FROM {old} EXCEPT ALL SELECT * FROM {new})")


# two stored tables whose rows compare: the same column names and types, in order
_SAME_SHAPE = (
    "SELECT (SELECT array_agg(a.attname::text || ' ' || a.atttypid::regtype::text"
    " ORDER BY a.attnum) FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1::regclass"
    " AND a.attnum > 0 AND NOT a.attisdropped) IS NOT DISTINCT FROM"
    " (SELECT array_agg(a.attname::text || ' ' || a.atttypid::regtype::text"
    " ORDER BY a.attnum) FROM pg_catalog.pg_attribute a WHERE a.attrelid = $2::regclass"
    " AND a.attnum > 0 AND NOT a.attisdropped)")


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
def _refined_groups_hold(db, req, same, found):
    # disassociation crosses each earlier clustering apart (_grown_below_k, whole groups):
    # the kept cells hold their union only
    whole = grouping(req.method) == "whole_clusters"
    if not whole and getattr(found, "complete", False) and \
            _stored_groups_hold(db, req, same, found):
        return
    pairs = [(e, partition.Layer(*_groups(db, req.method, e["release_id"]), int(e["k"] or 0)))
             for e in same]
    pairs = [(e, x) for e, x in pairs if x.ids.size]
    new = partition.Layer(*_groups(db, req.method, req.release_id), req.k)
    if not pairs:
        return
    layers = [x for _, x in pairs]
    c = partition.cells(layers, new)
    if grouping(req.method) == "whole_clusters":
        # a cluster is not a crowd of k (k^m bounds itemsets' supports): no regrouping at all
        if partition.regroups(c):
            raise refusal(req, "an earlier disassociation release clustered these records otherwise")
        if partition.small_remainders(layers, new, req.k) or _grown_below_k(layers, new, req.k):
            raise refusal(req, "a cluster would join released records to fewer than k new ones")
        if partition.small_held_cells(c, layers, new):
            raise refusal(req, "a cluster would hold released records that earlier releases "
                               "single out in fewer than k")
        return
    if partition.too_small(c):
        raise refusal(req, "a cell of the groupings' common refinement would hold fewer than k rows")
    if grouping(req.method) == "groups_values":
        _values_hold(db, req, pairs, new, c)


def _grown_below_k(layers, new, k):
    """Whether a group of the new release holds rows of one earlier release and fewer than k
    rows that release did not hold: read with that release alone, the group's counts less its
    own are those few rows' (an intermediate release at a smaller k may have added them: that
    does not make this release's k hold). small_remainders against all earlier releases at
    once sees only rows no earlier release held."""
    return any(partition.small_remainders([x], new, k) for x in layers if x.ids.size)


def _stored_groups_hold(db, req, same, found):
    """Rule (b) over the kept cells of the method's earlier groupings (log/cellstate.py,
    log/cellvalues.py): the same decisions as the crossing below, in time of the rows; False
    when the kept values are conflicted (the crossing below decides)."""
    valued = grouping(req.method) == "groups_values"
    state, vals = _kept_cells(db, req, same, found, valued)
    if valued and vals.conflicted:
        return False
    ids, labels = _groups(db, req.method, req.release_id)
    c = cellstate.cross(state, ids, labels, req.k, req.release_id)
    found.pending["groups:" + req.method] = (c.after.covers, lambda: cellstate.encode(c.after))
    column_l = _load(req.options.get("column_l"))
    memo = {}                          # the new release's values: read once, only if asked

    def new():
        if "v" not in memo:
            memo["v"] = _new_values(db, req.release_id, vals)
        return memo["v"]
    if valued:
        found.pending["values:" + req.method] = (c.after.covers, lambda: cellvalues.encode(
            cellvalues.fold(vals, c, state.ids, new(), req.l, column_l)))
    if not c.released.any():
        return True                    # no earlier grouping holds a row: nothing to cross
    if grouping(req.method) == "whole_clusters":
        if cellstate.regroups(c):
            raise refusal(req, "an earlier disassociation release clustered these records otherwise")
        if cellstate.small_remainders(c, req.k):
            raise refusal(req, "a cluster would join released records to fewer than k new ones")
    elif cellstate.too_small(c):
        raise refusal(req, "a cell of the groupings' common refinement would hold fewer than k rows")
    why = cellvalues.check(vals, c, state.ids, new(), req.l, column_l) if valued else None
    if why:
        raise refusal(req, why)
    return True


def _kept_cells(db, req, same, found, valued):
    """The stored cells (and values) of exactly the releases `same`, or folded again from
    them when none are stored."""
    covers = [e["release_id"] for e in same]
    state = cellstore.load(db, found.identity, "groups:" + req.method, covers)
    body = cellstore.load_body(db, found.identity, "values:" + req.method, covers) \
        if valued else None
    if state is not None and (body is not None or not valued):
        return state, cellvalues.decode(body) if valued else None
    state, vals = cellstate.empty(), cellvalues.Values()
    for e in same:
        c = cellstate.cross(state, *_groups(db, req.method, e["release_id"]),
                            int(e["k"] or 0), e["release_id"])
        if valued:
            vals = cellvalues.fold(vals, c, state.ids, _new_values(db, e["release_id"], vals),
                                   e["l"], _load(e["column_l"]))
        state = c.after
    return state, vals if valued else None


def _new_values(db, release_id, vals):
    """{attribute: (row ids, codes)} of a release's RID sets, in the kept code space."""
    return {a: cellvalues.encode_new(vals, a, *groupreads.entries(db, a, release_id))
            for a in _attributes(db, release_id)}


def _load(value):
    return json.loads(value) if isinstance(value, str) else value


def _values_hold(db, req, pairs, new, c):
    """Every cell the new release creates or holds keeps, per sensitive attribute, at least
    l distinct values -- l the largest of the releases holding the cell (Def. 6: deleting
    every value of one attribute deletes every row, so an attribute holds at least L values;
    with column_l, that attribute's own limit)."""
    layers = [x for _, x in pairs] + [new]
    _, pos = partition.positions(layers)
    for attribute in _attributes(db, req.release_id):
        _unchanged_values(db, req, pairs, attribute)
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


def _unchanged_values(db, req, pairs, attribute):
    """A row's sensitive value is the same in every release holding it: a value updated since
    an earlier release changes its group's counts by that one row (its old and new value)."""
    codes = {}                      # one code space: codes compare across the releases
    rid, values = _values(db, attribute, [req.release_id], codes)
    for e, _ in pairs:
        if partition.changed_values(rid, values,
                                    *_values(db, attribute, [e["release_id"]], codes)):
            raise refusal(req, "a row's sensitive value changed since an earlier release")


def _l_of(l, column_l, attribute):
    """A release's l for one sensitive attribute (column_l: jsonb as text from the log)."""
    l = int(l or 0)
    if isinstance(column_l, str):
        column_l = json.loads(column_l)
    limit = column_l.get(attribute) if isinstance(column_l, dict) else None
    return min(l, int(limit)) if limit is not None else l


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
