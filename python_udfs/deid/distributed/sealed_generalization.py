"""Generalization over shards for a requester without SELECT on the source (a policy's
requester): the sealed path (docs/sharding.md, "the policy requester").

The nodes' class tables hold counts below k, and every reply of a node passes through the
caller's PL/Proxy session. So on this path every reply that holds a node's own figures is
sealed (seal.py) by a node's definer and opened only by the coordinator's, and the
coordinator's choice is sealed for the nodes' definers: the caller carries bytes it can
neither read nor forge, and learns only the release (or the uniform refusal).

    node  classes (invoker)          the request begun as on one node (a policy's grantor reads)
          seal_classes (definer)     its class table (002 step 1), sealed "classes"
    coord choose (definer)           the nodes' tables opened (each node once), merged and
                                     searched (002 step 3) under the request's redaction; the
                                     choice kept in this backend and sealed "choice" for the nodes
    node  store (invoker)            the request begun again (its rights, policies, code checks
                                     as of now; the grantor reads again)
          finish (definer)           the choice opened, the part stored at its levels, verified
                                     but for k, held pending; its report sealed "part"
          stored (definer)           the part's stored classes, sealed "stored"
    coord accept (definer)           the reports and stored classes opened; the digests
                                     compared; k checked over every part's stored classes; the
                                     parts handed to finish (coordinator.py) -- never to the caller

Every sealed purpose carries a digest of the request (method, k, l, columns, selection,
options): a table or a choice made for another request opens for none but its own. A bad tag
is DE002; a refusal that depends on the rows is the uniform DE001.
"""
import base64
import hashlib
import json

from .. import pending, pipeline
from ..errors import (DeidError, INSUFFICIENT_PRIVILEGE, SERIALIZATION_FAILURE,
                      VERIFICATION_FAILED, uniform_refusal)
from ..log import overlap
from ..redaction import redacted
from ..request import access
from . import generalization as dg, generalization_sql as gs, node, protocol, seal

COORDINATOR = "coordinator"
REFUSED_HINT = "Call deid.anonymize_request(...) on the coordinator."


def request_digest(req):
    """What a sealed table or choice is for: the request's own arguments."""
    text = json.dumps([req.method, req.k, req.l, list(req.columns), req.selection_text,
                       req.options], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _key(db):
    key = db.value("SELECT key FROM deid.distributed_key")
    if key is None:
        raise protocol.no_key()
    return key.encode()


def _refused(message="no request of this session waits for this step"):
    return DeidError(INSUFFICIENT_PRIVILEGE, message, hint=REFUSED_HINT)


def _taken(token, caller):
    """The pending request of ``token`` (read), removed from the store, for ``caller``'s
    step of a global-merge method."""
    p = pending.discard(token)
    if p is None or p.frame is None or p.req.caller != caller or p.purpose != "release" \
            or p.method.plugin.DISTRIBUTION != gs.GLOBAL_MERGE:
        raise _refused()
    return p


def _text(sealed):
    return base64.b64encode(sealed).decode()


def _bytes(text):
    try:
        return base64.b64decode(text or "", validate=True)
    except ValueError:
        return b""


# -- a node ------------------------------------------------------------------------------------

def classes(db, run, source, k, columns, selection, options):
    """deid._dist_node_gen_sealed_classes (SECURITY INVOKER, as the caller)."""
    args = gs.step_args(node.source_relid(db, source), k, columns, selection, options)
    token = pending.begin_and_read(db, args)
    return db.value("SELECT deid._dist_seal_classes($1, current_user, $2)", [token, run],
                    ["text", "text"])


def seal_classes(db, token, caller, run):
    """deid._dist_seal_classes (SECURITY DEFINER): the node's class table, sealed."""
    access.caller_role(db, caller)
    p = _taken(token, caller)
    with redacted(p.req, after_read=True):
        # what the single-node request would refuse first: a selection a few rows off an
        # earlier release's (the overlap control), so that the sealed step, called by hand
        # and storing nothing, is no oracle for near-duplicate selections either
        overlap.check(db, p.req, p.spec, p.frame.rid)
        table = dg.node_classes(p.frame, p.req)
    return seal.seal(_key(db), run, "classes:" + request_digest(p.req), node._node(db), table)


def store(db, run, coord_release, source, k, columns, selection, options, name, chosen):
    """deid._dist_node_store_part_sealed (SECURITY INVOKER, as the caller)."""
    args = gs.step_args(node.source_relid(db, source), k, columns, selection, options, name)
    token = pending.begin_and_read(db, args)
    return db.value("SELECT deid._dist_part_finish_sealed($1, current_user, $2, $3, $4)",
                    [token, run, coord_release, chosen], ["text", "text", "bigint", "text"])


def finish(db, token, caller, run, coord_release, chosen):
    """deid._dist_part_finish_sealed (SECURITY DEFINER): the part at the coordinator's sealed
    choice, held pending; its report sealed."""
    access.caller_role(db, caller)
    p = pending.get(token)
    if p is None or p.frame is None or p.req.caller != caller or p.purpose != "release" \
            or p.method.plugin.DISTRIBUTION != gs.GLOBAL_MERGE:
        pending.discard(token)
        raise _refused("no snapshot was read for this part")
    key = _key(db)
    try:
        who, payload = seal.open_one(key, run, "choice:" + request_digest(p.req), _bytes(chosen))
        if who != COORDINATOR:
            raise seal.refused()
    except DeidError:
        pending.discard(token)
        raise
    choice = dg.Choice.from_json(payload.decode())
    p.req.run.part = {"run": run, "coordinator_release": coord_release, "levels": choice.levels}
    row = pipeline.finish(db, token, caller,
                          plan=lambda frame, req: dg.node_plan(frame, req, choice))
    report = node.hold(db, row[0][0], run, coord_release, caller)
    return _text(seal.seal(key, run, "part", node._node(db), report.encode()))


def stored(db, run, caller):
    """deid._dist_node_gen_stored_sealed (SECURITY DEFINER): what gs.stored gives, sealed."""
    text = gs.stored(db, run, caller)
    return _text(seal.seal(_key(db), run, "stored", node._node(db), text.encode()))


# -- the coordinator ---------------------------------------------------------------------------

def applies(db, relid):
    """The sealed path serves a caller without SELECT on the coordinator's source."""
    return not db.value("SELECT pg_catalog.has_table_privilege(current_user, $1, 'SELECT')",
                        [relid], ["oid"])


def run_parts(db, run, args, clock):
    """SECURITY INVOKER, as the caller: classes, choice, store, check and accept; the parts
    stay in the coordinator's definers."""
    cluster, token = run["cluster"], run["run"]
    # the coordinator's own begin first: refused here (no policy, a bad option) before any node reads
    step = pending.begin_and_read(db, gs.step_args(args.relid, args.k, args.column_list,
                                                   args.selection, args.options))
    try:
        tables = protocol.call(
            db, "SELECT deid._dist_gen_classes_sealed($1, $2, $3, $4, $5, $6, $7) AS r",
            [cluster, token, run["source_name"], args.k, args.column_list, args.selection,
             args.options], ["text", "text", "text", "int", "text[]", "text", "text"])
        chosen = db.value("SELECT deid._dist_gen_choose($1, current_user, $2, $3)",
                          [step, token, tables], ["text", "text", "bytea[]"])
    finally:
        pending.discard(step)
    clock.phase("classes")
    parts = protocol.call(
        db, "SELECT deid._dist_store_part_sealed($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS r",
        [cluster, token, run["release_id"], run["source_name"], args.k, args.column_list,
         args.selection, args.options, run["name"], chosen],
        ["text", "text", "bigint", "text", "int", "text[]", "text", "text", "text", "text"])
    clock.phase("store")
    checks = protocol.call(db, "SELECT deid._dist_check($1, $2) AS r", [cluster, token])
    stored_classes = protocol.call(db, "SELECT deid._dist_gen_stored_sealed($1, $2) AS r",
                                   [cluster, token])
    db.value("SELECT deid._dist_gen_accept($1, current_user, $2, $3, $4)",
             [token, parts, stored_classes, checks], ["text", "text[]", "text[]", "text[]"])


def choose(db, token, caller, run, tables, r):
    """deid._dist_gen_choose (SECURITY DEFINER, coordinator.sealed_choose): the nodes' sealed
    tables opened, merged and searched for the run ``r``'s request (the coordinator's begin);
    the choice sealed for the nodes."""
    p = _taken(token, caller)
    if (p.req.method, p.req.k, p.req.selection_text, p.req.options, p.req.rel.oid) != \
            (r["method"], r["k"], r["selection"], r["options"], r["relid"]) or \
            (r["columns"] is not None and list(r["columns"]) != list(p.req.columns)):
        raise _refused()
    key, digest = _key(db), request_digest(p.req)
    opened = seal.open_all(key, run, "classes:" + digest, [bytes(t) for t in tables or []],
                           r["partitions"])
    with redacted(p.req, after_read=True):
        choice = dg.choose(p.req, [opened[n] for n in sorted(opened)])
    r["sealed_choice"] = choice
    return _text(seal.seal(key, run, "choice:" + digest, COORDINATOR, choice.to_json().encode()))


def accept(db, run, r, parts, stored_classes, checks, compare_digests):
    """deid._dist_gen_accept (SECURITY DEFINER, coordinator.sealed_accept): the parts' reports
    and stored classes opened, their digests compared with the nodes' check, k checked over
    every part; the parts, for deid._dist_finish only."""
    from ..verify.shared.merged_classes import check_merged
    choice = r.get("sealed_choice")
    if choice is None:
        raise _refused()
    key, n = _key(db), r["partitions"]
    reports = seal.open_all(key, run, "part", [_bytes(t) for t in parts or []], n)
    stored = seal.open_all(key, run, "stored", [_bytes(t) for t in stored_classes or []], n)
    if set(reports) != set(stored):
        raise seal.refused()
    out = [json.loads(reports[m]) for m in sorted(reports)]
    compare_digests(out, [json.loads(t) for t in checks or []])
    tables = [json.loads(stored[m]) for m in sorted(stored)]
    if any(t["sources"] != tables[0]["sources"] for t in tables):
        raise uniform_refusal()
    rows = sum(int(p.get("rows") or 0) for p in out)
    if rows != choice.rows:
        raise DeidError(SERIALIZATION_FAILURE, "the source changed on a node during the request",
                        hint="Run the request again.")
    try:
        report = check_merged([t["classes"] for t in tables], tables[0]["sources"], r["k"],
                              n_rows=rows)
    except DeidError as e:
        if e.sqlstate == VERIFICATION_FAILED:
            raise uniform_refusal() from None
        raise
    out[0]["global"] = {"rows": rows, "groups": choice.groups,
                        "discernibility": choice.discernibility, gs.METHOD: choice.metrics,
                        "verification": report}
    return out
