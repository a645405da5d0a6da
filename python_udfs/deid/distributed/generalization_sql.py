"""The SQL entry points of generalization over shards (distributed/generalization.py).

On one database, as the caller (SECURITY INVOKER; pipeline.step: the caller authorized and
reading with its own rights, SELECT on the source required):

    deid.generalization_classes(source, k, columns, selection, options) -> bytea
        a node's class table (002 sec. 4.5 step 1), packed (class_merge.pack)
    deid.generalization_levels(source, k, columns, selection, options, parts bytea[]) -> jsonb
        the nodes' tables merged and searched (step 3): the chosen level of every
        quasi-identifier and the release's metrics (distributed.generalization.Choice)

What they return the caller could compute with a GROUP BY of its own (it holds SELECT).

Through the front door of a distributed source (coordinator.py, strategy "global_merge"):
choose_on_nodes (every node's class table, RUN ON ALL, merged and searched here), store_parts
(every node reads its rows again as the caller and stores them at the chosen levels, held
pending at once: pipeline.finish_part), check_parts (every node's STORED classes merged, k per
source checked over all of them: verify/shared/merged_classes.py), then the coordinator's
usual check of the parts' digests and its log.
"""
import json

from .. import pipeline
from ..errors import (DeidError, INSUFFICIENT_PRIVILEGE, NULL_VALUE_NOT_ALLOWED,
                      SERIALIZATION_FAILURE, VERIFICATION_FAILED)
from . import generalization as dg, node, protocol, read_cache

METHOD = "generalization"


def classes(db, relid, k, columns, selection, options, keep=None):
    return pipeline.step(db, relid, METHOD, k, None, columns, selection, options,
                         lambda req, frame: dg.node_classes(frame, req), keep=keep)


def levels(db, relid, k, columns, selection, options, parts):
    if parts is None or any(p is None for p in parts):
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "parts must hold one class table per node",
                        hint="Pass the results of deid.generalization_classes on every node.")
    return pipeline.step(db, relid, METHOD, k, None, columns, selection, options,
                         lambda req, frame: dg.choose(req, parts).to_json(), read=False)


# -- the node's side of a distributed request (distributed/coordinator.py, "global_merge") ----

def _relid(db, source):
    return node.source_relid(db, source)


def _roles(db):
    return [db.value("SELECT current_user::text"), db.value("SELECT session_user::text")]


def node_classes(db, run, source, k, columns, selection, options):
    """deid._dist_node_gen_classes: this node's class table, as the caller; its read kept in
    this backend for the store step of the same run (read_cache.py)."""
    roles = _roles(db)
    read_cache.drop()
    return classes(db, _relid(db, source), k, columns, selection, options,
                   keep=lambda spec, frame: read_cache.keep(read_cache.key(run, spec, roles),
                                                            frame))


def store_part(db, run, coord_release, source, k, columns, selection, options, name, chosen):
    """deid._dist_node_store_part, as the caller: the request begun again (SELECT required,
    the caller's rights and code checks as of now), its rows those the class step of this run
    read in this backend as this role (read_cache.py) or, if none, read again; then
    deid._dist_part_finish stores them at the chosen levels and holds the part pending."""
    relid = _relid(db, source)
    token = pipeline.begin_select(db, relid, METHOD, k, columns, selection, options, name,
                                  read=False)
    roles = _roles(db)
    pipeline.read_or_reuse(db, token,
                           lambda spec: read_cache.take(read_cache.key(run, spec, roles)))
    return db.value("SELECT deid._dist_part_finish($1, current_user, $2, $3, $4)",
                    [token, run, coord_release, chosen], ["text", "text", "bigint", "text"])


def stored(db, run, caller):
    """deid._dist_node_gen_stored (SECURITY DEFINER): the classes of what this node's pending
    generalization part of ``run`` stored, per source (verify.generalization.stored_part), for
    its requester, who holds SELECT on the source (store_part required it)."""
    from ..releases import reverify
    from ..verify import generalization as vg
    p = node._part(db, run, caller)
    if p is None or p["status"] != "pending" or p["requested_by"] != caller:
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no pending part of this run is on a node",
                        hint="Call deid.anonymize_request(...) on the coordinator.")
    req = reverify.request_of(db, p["name"])
    if req.method != METHOD or not getattr(req, "part", None):
        raise DeidError(INSUFFICIENT_PRIVILEGE, "this part is not a generalization part",
                        hint="Call deid.anonymize_request(...) on the coordinator.")
    table = p["relations"][0].split(".", 1)[1].strip('"')
    return json.dumps({"sources": vg.sources(req), "classes": vg.stored_part(db, req, table)})


# -- the coordinator's side (distributed/coordinator.py, strategy "global_merge") -------------

def choose_on_nodes(db, relid, run, k, columns, selection, options):
    """Every node's class table (deid._dist_gen_classes, RUN ON ALL, as the caller), merged and
    searched here (deid.generalization_levels on the coordinator's definition of the source:
    its roles and hierarchies). The Choice, as JSON text."""
    tables = protocol.call(db, "SELECT deid._dist_gen_classes($1, $2, $3, $4, $5, $6, $7) AS r",
                           [run["cluster"], run["run"], run["source_name"], k, columns,
                            selection, options],
                           ["text", "text", "text", "int", "text[]", "text", "text"])
    return levels(db, relid, k, columns, selection, options, tables)


def store_parts(db, run, k, columns, selection, options, chosen):
    """Every node stores its rows at the chosen levels and holds its part pending
    (deid._dist_store_part, RUN ON ALL, as the caller): the parts' reports."""
    return [json.loads(t) for t in protocol.call(
        db, "SELECT deid._dist_store_part($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS r",
        [run["cluster"], run["run"], run["release_id"], run["source_name"], k, columns,
         selection, options, run["name"], chosen],
        ["text", "text", "bigint", "text", "int", "text[]", "text", "text", "text", "text"])]


def check_parts(db, run, k, parts, chosen):
    """k per source over every part (002 sec. 2): each node's stored classes
    (deid._dist_gen_stored) merged and checked (verify/shared/merged_classes.py); the parts
    hold the rows the search counted. The release's metrics for the log."""
    from ..verify.shared.merged_classes import check_merged
    choice = dg.Choice.from_json(chosen)
    stored = [json.loads(t) for t in protocol.call(
        db, "SELECT deid._dist_gen_stored($1, $2) AS r", [run["cluster"], run["run"]])]
    rows = sum(int(p.get("rows") or 0) for p in parts)
    if len(stored) != len(parts) or any(s["sources"] != stored[0]["sources"] for s in stored):
        raise DeidError(VERIFICATION_FAILED, "the nodes' parts are not over the same sources",
                        hint="Every node must hold the source with the same column roles.")
    if rows != choice.rows:
        raise DeidError(SERIALIZATION_FAILURE, "the source changed on a node during the request",
                        hint="Run the request again.")
    report = check_merged([s["classes"] for s in stored], stored[0]["sources"], k, n_rows=rows)
    return {"rows": rows, "groups": choice.groups, "discernibility": choice.discernibility,
            "generalization": choice.metrics, "verification": report}
