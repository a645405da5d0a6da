"""The SQL entry points of generalization over shards (distributed/generalization.py).

On one database, as the caller (SECURITY INVOKER; step below: the caller authorized and
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
pending at once: finish_part below), check_parts (every node's STORED classes merged, k per
source checked over all of them: verify/shared/merged_classes.py), then the coordinator's
usual check of the parts' digests and its log.
"""
import json

from .. import pending, pipeline
from ..errors import (DeidError, INSUFFICIENT_PRIVILEGE, NULL_VALUE_NOT_ALLOWED,
                      SERIALIZATION_FAILURE, UNDEFINED_TABLE, VERIFICATION_FAILED)
from ..redaction import redacted
from ..methods.generalization import plugin as generalization
from ..request.args import RequestArgs
from . import generalization as dg, node, protocol, read_cache

METHOD = generalization.NAME      # the method these steps serve
GLOBAL_MERGE = "global_merge"      # the distribution (methods/contract.py) these steps serve


def step_args(relid, k, columns, selection, options, name=None):
    """The arguments of a request of this method's steps (no l: generalization has none)."""
    return RequestArgs.of_call(relid, METHOD, k, None, columns, selection, options, name)


def step(db, args, run, read=True, keep=None):
    """SECURITY INVOKER: a step of a distributed method in place of the pipeline's finish: the
    request begun and read as a single-node request is (the caller authorized, reading as
    itself), then ``run(pending.req, pending.frame)`` (frame None without ``read``), whose
    errors are redacted as finish's are. Only for a caller with SELECT on the source: such a
    step may return what it computed from the rows to the caller. ``keep(spec, frame)``, once
    run succeeded: the read kept for a later step (read_cache.py)."""
    token = begin_select(db, args, read)
    p = pending.discard(token)
    if p is None or p.req.grant["via"] != "select":
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no request of this session waits for this step",
                        hint="Call deid.anonymize_request(...).")
    with redacted(p.req, after_read=True):
        out = run(p.req, p.frame)
    if keep is not None and p.frame is not None:
        keep(p.spec, p.frame)
    return out


def begin_select(db, args, read=True):
    """SECURITY INVOKER: begin and read a request of a caller with SELECT on the source (the
    steps that return, or store before the global check, what they computed from the rows);
    the token of the pending request."""
    if not db.value("SELECT pg_catalog.has_table_privilege(current_user, $1, 'SELECT')",
                    [args.relid], ["oid"]):
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"method {args.method} over shards needs SELECT on the source",
                        hint="Request it as a role with SELECT on the source; a policy's "
                             "requester calls deid.anonymize_request on the coordinator, whose "
                             "steps seal what the nodes send.")
    return pending.begin_and_read(db, args, read_rows=read)


def finish_part(db, token, caller, run, coord_release, chosen):
    """SECURITY DEFINER (deid._dist_part_finish): a node's part of a distributed request of a
    global-merge method: the snapshot read for ``token`` stored at the coordinator's chosen
    levels by the pipeline's finish, verified but for k (which only the parts together hold:
    the coordinator checks it over every part's stored classes), logged with its part, and
    held pending in the same call (node.py), so that no one reads it before the coordinator's
    check and log."""
    p = pending.get(token)
    if p is None or p.frame is None or p.req.caller != caller \
            or p.method.plugin.DISTRIBUTION != GLOBAL_MERGE or p.req.grant["via"] != "select":
        pending.discard(token)
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no snapshot was read for this part",
                        hint="Call deid.anonymize_request(...) on the coordinator.")
    choice = dg.Choice.from_json(chosen)
    p.req.run.part = {"run": run, "coordinator_release": coord_release, "levels": choice.levels}
    row = pipeline.finish(db, token, caller,
                          plan=lambda frame, req: dg.node_plan(frame, req, choice))
    return node.hold(db, row[0][0], run, coord_release, caller)


def classes(db, relid, k, columns, selection, options):
    """deid.generalization_classes."""
    return _classes(db, step_args(relid, k, columns, selection, options))


def _classes(db, args, keep=None):
    return step(db, args, lambda req, frame: dg.node_classes(frame, req), keep=keep)


def levels(db, relid, k, columns, selection, options, parts):
    """deid.generalization_levels."""
    return _levels(db, step_args(relid, k, columns, selection, options), parts)


def _levels(db, args, parts):
    if parts is None or any(p is None for p in parts):
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "parts must hold one class table per node",
                        hint="Pass the results of deid.generalization_classes on every node.")
    return step(db, args, lambda req, frame: dg.choose(req, parts).to_json(), read=False)


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
    return _classes(db, step_args(_relid(db, source), k, columns, selection, options),
                    keep=lambda spec, frame: read_cache.keep(read_cache.key(run, spec, roles),
                                                             frame))


def store_part(db, run, coord_release, source, k, columns, selection, options, name, chosen):
    """deid._dist_node_store_part, as the caller: the request begun again (SELECT required,
    the caller's rights and code checks as of now), its rows those the class step of this run
    read in this backend as this role (read_cache.py) or, if none, read again; then
    deid._dist_part_finish stores them at the chosen levels and holds the part pending."""
    args = step_args(_relid(db, source), k, columns, selection, options, name)
    token = begin_select(db, args, read=False)
    roles = _roles(db)
    pending.read(db, token, kept=lambda spec: read_cache.take(read_cache.key(run, spec, roles)))
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

def choose_on_nodes(db, run, args):
    """Every node's class table (deid._dist_gen_classes, RUN ON ALL, as the caller), merged and
    searched here (deid.generalization_levels on the coordinator's definition of the source:
    its roles and hierarchies), for the request's ``args``. The Choice, as JSON text."""
    tables = protocol.call(db, "SELECT deid._dist_gen_classes($1, $2, $3, $4, $5, $6, $7) AS r",
                           [run["cluster"], run["run"], run["source_name"], args.k,
                            args.column_list, args.selection, args.options],
                           ["text", "text", "text", "int", "text[]", "text", "text"])
    return _levels(db, step_args(args.relid, args.k, args.column_list, args.selection,
                                 args.options), tables)


def store_parts(db, run, args, chosen):
    """Every node stores its rows at the chosen levels and holds its part pending
    (deid._dist_store_part, RUN ON ALL, as the caller): the parts' reports."""
    return [json.loads(t) for t in protocol.call(
        db, "SELECT deid._dist_store_part($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS r",
        [run["cluster"], run["run"], run["release_id"], run["source_name"], args.k,
         args.column_list, args.selection, args.options, run["name"], chosen],
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
            METHOD: choice.metrics, "verification": report}
