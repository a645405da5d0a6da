"""Which source a release is a release of: the base table its row ids come from, by name.

The composition rule compares a release with every earlier release of the same source. A
source is not its relation's oid: a view over a table releases that table's rows (its row ids
are the table's), and a table dropped and re-created under the same name is, to a reader who
kept the old releases, the same patients. So a release counts as a release of its *identity*:

- the base table (or foreign table) that its row-id column comes from, followed through
  views, materialized views (their rows were copied by their stored query) and subqueries in
  FROM, each a plain column reference (``SELECT id AS pid FROM t WHERE ...``), its row-id
  column being that table's column; a partition or an inheriting child counts as its topmost
  ancestor (a read of the ancestor includes its rows);
- named by schema and table (``format('%I.%I')``), so a re-created table inherits the history
  of its name until a deid_admin clears it (``deid.clear_source_history``, logged in
  deid.composition_reset).

A view or materialized view whose row ids cannot be followed is refused before anything is read: a computed row id,
a join or a set-returning function (a row may appear twice), an aggregate or GROUP BY, a set
operation (UNION ...), a CTE or a function in FROM. The walk reads the view's stored rule
(pg_rewrite.ev_action, log/node_tree.py): no code of the view's owner runs.

The identity of a release is stored in deid.release_identity with its selection
(log/overlap.py); the request serializes on a lock of its identity's name (locks.py), so a view
and its table wait for each other.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..errors import DeidError, FEATURE_NOT_SUPPORTED
from . import node_tree

MAX_DEPTH = 32          # views over views: deeper is refused, not followed forever
_BASE_KINDS = ("r", "p", "f")
_QUERY_KINDS = ("v", "m")      # a materialized view's rows were copied by its stored query
_REMEMBERED: Dict[int, "Identity"] = {}     # release id -> its identity, for this request

REFUSAL = "the row ids of this view cannot be traced to one table's row-id column"
HINT = ("Request the release of the table itself, or of a view whose row-id column is a plain "
        "column of a single table (no join, UNION, GROUP BY, aggregate, set-returning function "
        "or computed row id), so that deid can compare it with that table's earlier releases.")


@dataclass(frozen=True)
class Identity:
    relation: str            # the base table, format('%I.%I')
    oid: Optional[int]       # while it exists
    row_id: str              # its row-id column


class Unmapped(Exception):
    """The view's row ids cannot be followed (why: for a requester with SELECT)."""


# ------------------------------------------------------------------ pure: one query tree
def follow(query: dict, attno: int) -> Tuple[str, object]:
    """Where the output column `attno` of a stored query comes from: ("relation", (relid,
    attno)) for a plain column of its one relation in FROM, ("subquery", (query, attno)) for
    one of its one subquery in FROM; raises Unmapped otherwise."""
    _plain(query)
    entry = _output(query, attno)
    expr = entry.get("expr") or {}
    if expr.get("_") != "VAR" or str(expr.get("varlevelsup")) != "0":
        raise Unmapped("the row-id column is computed")
    rte = _single_from(query)
    if int(expr["varno"]) != rte[0] or int(expr["varattno"]) <= 0:
        raise Unmapped("the row-id column is not a column of the view's relation")
    kind = str(rte[1].get("rtekind"))
    if kind == "0":
        return "relation", (int(rte[1]["relid"]), int(expr["varattno"]))
    if kind == "1":
        return "subquery", (rte[1]["subquery"], int(expr["varattno"]))
    raise Unmapped("the view reads a function, CTE or VALUES list")


def _plain(query):
    if query.get("_") != "QUERY" or str(query.get("commandType")) != "1":
        raise Unmapped("the view's rule is not a plain SELECT")
    for flag, why in (("hasAggs", "aggregates"), ("hasTargetSRFs", "set-returning functions"),
                      ("hasRecursive", "a recursive CTE")):
        if query.get(flag) == "true":
            raise Unmapped(f"the view uses {why}")
    for field, why in (("groupClause", "GROUP BY"), ("groupingSets", "grouping sets"),
                       ("setOperations", "a set operation"), ("havingQual", "HAVING"),
                       ("cteList", "a CTE")):
        if query.get(field):
            raise Unmapped(f"the view uses {why}")


def _output(query, attno):
    for entry in query.get("targetList") or []:
        if str(entry.get("resno")) == str(attno) and entry.get("resjunk") != "true":
            return entry
    raise Unmapped("the row-id column is not in the view's output")


def _single_from(query):
    """(rtindex, range table entry) of the one relation in FROM; a join is refused."""
    tree = query.get("jointree") or {}
    items = tree.get("fromlist") or []
    if len(items) != 1 or items[0].get("_") != "RANGETBLREF":
        raise Unmapped("the view joins relations")
    index = int(items[0]["rtindex"])
    return index, query["rtable"][index - 1]


# ------------------------------------------------------------------ the catalog walk
def resolve(db, oid: int, kind: str, column: str) -> Identity:
    """The identity of a release of relation `oid` (relkind `kind`) by its row-id column."""
    attno = _attnum(db, oid, column)
    for _ in range(MAX_DEPTH):
        if kind in _BASE_KINDS:
            return _identity(db, *_topmost(db, oid, attno))
        if kind not in _QUERY_KINDS:
            break
        where, what = _follow_view(db, oid, attno)
        while where == "subquery":
            where, what = follow(*what)
        oid, attno = what
        kind = db.value("SELECT relkind::text FROM pg_catalog.pg_class WHERE oid = $1",
                        [oid], ["oid"])
    raise Unmapped("the view's row ids pass through too many views")


def _topmost(db, oid, attno):
    """(oid, attno) of the topmost ancestor of a table -- a partition's partitioned table, an
    inheriting child's parent -- whose reads include the table's rows, the row-id column
    found there by its name (a partition tree's and an inheritance tree's columns share their
    names)."""
    for _ in range(MAX_DEPTH):
        parents = db.query("SELECT inhparent FROM pg_catalog.pg_inherits WHERE inhrelid = $1",
                           [oid], ["oid"])
        if not parents:
            return oid, attno
        if len(parents) > 1:
            raise Unmapped("the table inherits from more than one parent")
        name = db.value("SELECT attname::text FROM pg_catalog.pg_attribute WHERE attrelid = $1"
                        " AND attnum = $2", [oid, attno], ["oid", "int2"])
        oid = int(parents[0]["inhparent"])
        attno = _attnum(db, oid, name)
    raise Unmapped("the table's ancestors are too many")


def _follow_view(db, oid, attno):
    text = db.value("SELECT ev_action::text FROM pg_catalog.pg_rewrite"
                    " WHERE ev_class = $1 AND ev_type = '1' AND rulename = '_RETURN'",
                    [oid], ["oid"])
    if not text:
        raise Unmapped("the view has no stored query")
    queries = node_tree.parse(text)
    if not isinstance(queries, list) or len(queries) != 1:
        raise Unmapped("the view's rule is not one query")
    return follow(queries[0], attno)


def _attnum(db, oid, column):
    return int(db.value("SELECT attnum FROM pg_catalog.pg_attribute WHERE attrelid = $1"
                        " AND attname = $2 AND NOT attisdropped", [oid, column], ["oid", "name"]))


def _identity(db, oid, attno):
    r = db.query("SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) AS relation,"
                 " a.attname::text AS column"
                 " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
                 " ON n.oid = c.relnamespace JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid"
                 " WHERE c.oid = $1 AND a.attnum = $2", [oid, attno], ["oid", "int2"])[0]
    return Identity(r["relation"], int(oid), r["column"])


# ------------------------------------------------------------------ per request
def of_request(db, req, column: str) -> Identity:
    """The request's identity (remembered for the rest of the request), or the refusal."""
    if req.release_id in _REMEMBERED:
        return _REMEMBERED[req.release_id]
    try:
        ident = resolve(db, req.rel.oid, req.rel.kind, column)
    except Unmapped as why:
        e = DeidError(FEATURE_NOT_SUPPORTED, REFUSAL, hint=HINT, data_dependent=False)
        if req.grant.get("via") == "select":
            e.detail = str(why)
        raise e from None
    if len(_REMEMBERED) > 64:        # one request at a time per session: keep it small
        _REMEMBERED.clear()
    _REMEMBERED[req.release_id] = ident
    return ident


def of_release(db, req) -> List[Identity]:
    """The identities a release (being requested, or stored) counts as; the request's own
    relation by oid when nothing is known (a release logged before identities were)."""
    if req.release_id in _REMEMBERED:
        return [_REMEMBERED[req.release_id]]
    rows = db.query("SELECT relation, row_id FROM deid.release_identity WHERE release_id = $1",
                    [req.release_id], ["bigint"])
    oid = getattr(getattr(req, "rel", None), "oid", None)
    return [Identity(r["relation"], oid, r["row_id"]) for r in rows]


def store(db, release_id: int, ident: Identity):
    db.execute("INSERT INTO deid.release_identity (release_id, relation, row_id)"
               " VALUES ($1, $2, $3)", [release_id, ident.relation, ident.row_id],
               ["bigint", "text", "name"])
