"""The pre-store phase of a sharded request: every node can satisfy the privacy model, or the
request is refused with one error before any node stores a part (docs/sharding.md).

For anatomy (001), a union of valid (K,L) groups is valid, so each node releases its own rows;
a node whose selected rows, as one group, cannot reach (K,L) (001 Fig. 5's root: fewer than K
rows, an L above a sensitive attribute's distinct values, or a whole-table Fig. 6 / Figs. 7-8
certificate below L) would refuse in its store, after the others stored theirs. So first:

    precheck(db, run, ...)     coordinator, SECURITY INVOKER: deid._dist_eligible, RUN ON ALL,
                               as the caller (PL/Proxy connects as current_user); the first
                               node's refusal is the request's, raised as that node's own
    node_check(db, source, ..) node, SECURITY INVOKER (deid._dist_node_eligible): the
                               single-node request's begin -- its access checks (grants,
                               column privileges, RLS, policies) and code checks, as the caller
                               (deid._dist_eligibility_begin, SECURITY DEFINER: pending.begin
                               with the method's narrowed read: the sensitive attributes and
                               the row id only; a policy's grantor reads them) -- then the read
                               as the caller where it holds SELECT, then
                               deid._dist_eligibility_check (SECURITY DEFINER: check below):
                               the method's own refusal (partition.check_eligible: the same
                               code and errors as the store's) and the overlap control's
                               refusal, without storing anything, redacted as the store's
                               (a policy requester: the uniform DE001)

A policy requester learns from a node's pre-check exactly what the single-node request tells it
(released or the uniform refusal), and no more: the overlap control's refusal is part of it, so
near-duplicate selections are not an oracle either. Nothing is written on any node; a release
id is drawn from the node's sequence (a gap, as a refused request leaves).

CHECKS names, per method, its narrowed read and its check (pure plug-in functions); methods
without one go straight to the store.
"""
import dataclasses

from ..errors import DeidError, FEATURE_NOT_SUPPORTED
from .. import pending
from ..log import overlap
from ..methods import registry
from ..redaction import redacted
from ..request import access
from ..request.args import RequestArgs
from . import protocol
from .node import on_node


def _precheck(method):
    """The method's declared pre-check over shards (its plug-in's SHARD_PRECHECK), or None."""
    plugin = registry.plugin_of(method)
    return plugin.SHARD_PRECHECK if plugin is not None else None


def precheck(db, run, args):
    """Coordinator, as the caller: every node's pre-check (RUN ON ALL); a refusal is the node's."""
    if _precheck(args.method) is None:
        return
    protocol.call(db, "SELECT deid._dist_eligible($1, $2, $3) AS r",
                  [run["cluster"], run["source_name"],
                   dataclasses.replace(args, name=run["name"]).to_json()],
                  ["text", "text", "jsonb"])


def node_check(db, source, request):
    """Node, as the caller (deid._dist_node_eligible): begin (SECURITY DEFINER), read as the
    caller with SELECT, check (SECURITY DEFINER), for the request's arguments (the
    coordinator's jsonb) on this node's relation named ``source``. 'eligible', or the
    request's own refusal."""
    args = on_node(db, source, request)
    token = pending.begin_and_read(db, args, begin_function="deid._dist_eligibility_begin")
    try:
        return db.value("SELECT deid._dist_eligibility_check($1, current_user)", [token])
    finally:
        pending.discard(token)


def begin(db, request, caller):
    """SECURITY DEFINER (deid._dist_eligibility_begin): pending.begin_request of the
    request's arguments (the jsonb its caller built, request/args.py) with the method's
    narrowed read."""
    args = RequestArgs.of_json(request)
    return pending.begin_request(db, args, caller, narrow=_hooks(args.method)[0])


def check(db, token, caller):
    """SECURITY DEFINER: the pre-check on the narrowed snapshot read for ``token`` (begin
    above): the overlap control's refusal and the method's own refusal of rows it cannot
    release, each redacted as the store's are (a policy requester: the uniform refusal).
    Stores nothing; returns nothing of the rows."""
    p = pending.get(token)
    method = p.req.method if p is not None else None
    run = _hooks(method)[1] if _precheck(method) is not None else _none
    access.caller_role(db, caller)
    p = pending.take(token, caller, "check", what="check",
                     hint="Call deid.anonymize_request(...) on the coordinator.")
    with redacted(p.req, after_read=True):
        run(p.frame, p.req)
        overlap.check(db, p.req, p.spec, p.frame.rid)
    return "eligible"


def _none(frame, req):
    raise AssertionError("unreachable: a token of no check is refused by pending.take")


def _hooks(method):
    if _precheck(method) is None:
        raise DeidError(FEATURE_NOT_SUPPORTED, f"method {method or 'NULL'} has no pre-check over shards",
                        hint="Call deid.anonymize_request(...) on the coordinator.")
    return _precheck(method)
