"""The independent check of a generalization release (002), from what was STORED, before
commit: every source system is k-anonymous on its own projected quasi-identifiers (002 sec. 2:
k data twins in every source separately), checked by verify.k_per_source on the cardinalities
of the stored release grouped by each source's quasi-identifiers. The sources come from the
catalog's column roles, not from the method.

Where the cardinalities come from:
  * at request time, from deid.equivalence_class: the catalog writer derived those rows, in
    this transaction, set-based from the stored release table (one GROUP BY per source;
    catalog_log.write_source_classes). The verifier checks that the catalog holds exactly its
    own sources, each grouped by exactly its own quasi-identifiers, and that every source's
    cardinalities add up to the snapshot's rows -- so the grouping saw every stored row;
  * for deid.verify_release (frame.stored_only: afterwards, from what is stored now), from a
    GROUP BY of the stored release table itself, per source; where the catalog holds per-source
    classes (releases since deid 1.1.0) they must equal those (older releases hold their
    classes over all quasi-identifiers jointly, source NULL, and are checked on the release
    alone).

k per source is not k: a record k-anonymous in every source separately can be
unique over all the release's quasi-identifiers together. When the request required k jointly
-- a requester without SELECT (authorized via a policy) whose policy does not allow per-source k
-- every class of the stored release grouped by ALL its quasi-identifiers must hold the policy's
minimum (verify.k_per_source.check_joint_k). The verifier reads that requirement from the
request's grant itself (joint_requirement; deid.verify_release rebuilds the grant from the
log), not from the method, and counts the joint classes with its own GROUP BY of the stored
table (with one source, its per-source classes are the joint ones).
"""
import json

import numpy as np

from ..sqltext import qualified, quote_ident
from . import check_k_per_source
from .shared.failures import _fail
from .shared.k_per_source import check_joint_k
from .shared.merged_classes import JOINT

READS_SNAPSHOT_VALUES = True     # the verifier compares the snapshot's values (methods/contract.py)

STORE_SCHEMA = "deid_release"
STORED_HINT = ("The stored release was changed after it was written, or it predates deid 1.1.0 "
               "(since then a policy release holds the policy's minimum over all its "
               "quasi-identifiers jointly): drop it (deid.drop_release) and request it again.")


def sources(req):
    """{source: its projected quasi-identifiers}, from the column roles."""
    by_source = {}
    for q in req.columns:
        meta = req.rel.columns[q]
        if meta.role == "quasi_identifier":
            by_source.setdefault(meta.source or req.rel.display, []).append(q)
    return by_source


def verify(db, req, frame, tables):
    by_source = sources(req)
    if getattr(req, "part", None) and frame.n == 0:      # a node that holds none of the rows
        return {"sources": {}, "min_size": None, "k": {"required": req.k, "checked":
                                                        "over all parts by the coordinator"}}
    catalog = catalog_counts(db, req.release_id)
    if getattr(frame, "stored_only", False):
        counts = {s: stored_counts(db, tables[0], cols) for s, cols in by_source.items()}
        if catalog:
            check_catalog(catalog, by_source, counts)
    else:
        check_catalog(catalog, by_source)
        counts = {s: catalog[s][1] for s in by_source}
    part = getattr(req, "part", None)
    # a node's part of a distributed release: k holds over all the parts, checked by the
    # coordinator on every node's stored classes (shared/merged_classes.py); here the rest
    out = check_k_per_source(counts, 1 if part else req.k, n_rows=frame.n)
    if part:
        out["k"] = {"required": req.k, "checked": "over all parts by the coordinator"}
        return _json(out)
    required = joint_requirement(req)
    if required is not None:
        joint = (next(iter(counts.values())) if len(by_source) == 1 else
                 stored_counts(db, tables[0], [q for cols in by_source.values() for q in cols]))
        out["joint"] = check_joint_k(joint, required, n_rows=frame.n,
                                     hint=STORED_HINT if getattr(frame, "stored_only", False) else None)
    return _json(out)


def _json(out):
    return json.loads(json.dumps(out, default=lambda x: x.item() if hasattr(x, "item") else str(x)))


def joint_requirement(req):
    """The k that must hold over all quasi-identifiers jointly, or None: the policy's minimum
    for a request authorized via a policy (no SELECT) unless that policy allows per-source k;
    nothing for a SELECT holder (002's per-source k, as asked) or a grant not logged."""
    grant = getattr(req, "grant", None) or {}
    if grant.get("via") == "policy" and grant.get("per_source_k") is not True:
        return int(grant["min_k"])
    return None


def stored_counts(db, table, cols):
    """Cardinalities of the stored release grouped by `cols` (one GROUP BY)."""
    keys = ", ".join(quote_ident(c) for c in cols)
    buf = db.query(f"SELECT string_agg(int8send(n), ''::bytea) AS c FROM (SELECT count(*) AS n"
                   f" FROM {qualified(STORE_SCHEMA, table)} GROUP BY {keys}) s")[0]["c"]
    return np.frombuffer(buf or b"", ">i8").astype(np.int64)


def catalog_counts(db, release_id):
    """{source: (sorted attribute names, cardinalities)} of the release's per-source classes
    in deid.equivalence_class (source NOT NULL); every class of a source must name the same
    attributes."""
    out = {}
    for r in db.query(
            "SELECT source, string_agg(int8send(cardinality), ''::bytea) AS c,"
            " count(DISTINCT keys) AS layouts, min(keys) AS keys FROM (SELECT source, cardinality,"
            " ARRAY(SELECT jsonb_object_keys(generalized) ORDER BY 1) AS keys"
            " FROM deid.equivalence_class WHERE release_id = $1 AND source IS NOT NULL) e"
            " GROUP BY source", [release_id], ["bigint"]):
        if r["layouts"] != 1:
            _fail(f"the stored classes of source {r['source']!r} name different attributes",
                  detail="deid.equivalence_class rows of one source must share their attributes")
        out[r["source"]] = (sorted(r["keys"]), np.frombuffer(r["c"] or b"", ">i8").astype(np.int64))
    return out


def check_catalog(catalog, by_source, stored=None):
    """The catalog's per-source classes are over exactly the verifier's sources and their
    quasi-identifiers (and, with `stored`, have the cardinalities of the stored release)."""
    if set(catalog) != set(by_source):
        _fail("the stored classes are not those of the release's source systems",
              detail=f"catalog sources {sorted(catalog)}, release sources {sorted(by_source)}")
    for s, cols in by_source.items():
        keys, counts = catalog[s]
        if keys != sorted(cols):
            _fail(f"the stored classes of source {s!r} are not grouped by its quasi-identifiers",
                  detail=f"grouped by {keys}, its quasi-identifiers are {sorted(cols)}")
        if stored is not None and not np.array_equal(np.sort(counts), np.sort(stored[s])):
            _fail(f"the stored classes of source {s!r} differ from the stored release",
                  detail=f"{len(counts)} classes in the catalog, {len(stored[s])} in the release")


def stored_part(db, req, table):
    """What one node stored of a release over several nodes, for the coordinator's check
    (verify.shared.merged_classes.check_merged): its part grouped by each source's
    quasi-identifiers, and by all of them where joint k is required; labels as stored."""
    by_source = sources(req)
    out = {s: stored_classes(db, table, cols) for s, cols in by_source.items()}
    if joint_requirement(req) is not None:
        out[JOINT] = stored_classes(db, table, [q for cols in by_source.values() for q in cols])
    return out


def stored_classes(db, table, cols):
    """The stored table's classes over ``cols`` (one GROUP BY): the label of each column and
    the rows of each class, as merged_classes.merge_labelled takes them."""
    keys = ", ".join(quote_ident(c) for c in cols)
    # the aggregates of one query level read the rows in one order: the arrays align
    aggs = "".join(f", array_agg({quote_ident(c)}::text) AS c{i}" for i, c in enumerate(cols))
    r = db.query(f"SELECT array_agg(n) AS n{aggs} FROM (SELECT count(*) AS n, {keys}"
                 f" FROM {qualified(STORE_SCHEMA, table)} GROUP BY {keys}) s")[0]
    return {"columns": list(cols), "counts": list(r["n"] or []),
            "labels": [list(r[f"c{i}"] or []) for i in range(len(cols))]}
