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
                               (deid._dist_eligibility_begin, SECURITY DEFINER: pipeline.begin
                               with the method's narrowed read: the sensitive attributes and
                               the row id only; a policy's grantor reads them) -- then the read
                               as the caller where it holds SELECT, then
                               deid._dist_eligibility_check (SECURITY DEFINER: pipeline.check):
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
from ..errors import DeidError, FEATURE_NOT_SUPPORTED
from .. import pipeline
from . import protocol
from .node import source_relid


def _anatomy():
    from ..methods.anatomy import plugin
    return plugin.eligibility_read, plugin.check_eligibility


CHECKS = {"anatomy": _anatomy}


def precheck(db, run, method, k, l, columns, selection, options):
    """Coordinator, as the caller: every node's pre-check (RUN ON ALL); a refusal is the node's."""
    if method not in CHECKS:
        return
    protocol.call(db, "SELECT deid._dist_eligible($1, $2, $3, $4, $5, $6, $7, $8, $9) AS r",
                  [run["cluster"], run["source_name"], method, k, l, columns, selection,
                   options, run["name"]],
                  ["text", "text", "text", "int", "int", "text[]", "text", "text", "text"])


def node_check(db, source, method, k, l, columns, selection, options, name):
    """Node, as the caller: begin (SECURITY DEFINER), read as the caller with SELECT, check
    (SECURITY DEFINER). 'eligible', or the request's own refusal."""
    relid = source_relid(db, source)
    token = pipeline._begin_and_read(db, relid, method, k, l, columns, selection, options, name,
                                     begin_function="deid._dist_eligibility_begin")
    try:
        return db.value("SELECT deid._dist_eligibility_check($1, current_user)", [token])
    finally:
        pipeline._PENDING.pop(token, None)


def begin(db, relid, method, k, l, columns, selection, options, name, caller):
    """SECURITY DEFINER: pipeline.begin with the method's narrowed read."""
    narrow = _hooks(method)[0]
    return pipeline.begin(db, relid, method, k, l, columns, selection, options, name, caller,
                          narrow=narrow)


def check(db, token, caller):
    """SECURITY DEFINER: pipeline.check with the method's check."""
    p = pipeline._PENDING.get(token)
    method = p.req.method if p is not None else None
    return pipeline.check(db, token, caller, _hooks(method)[1] if method in CHECKS else _none)


def _none(frame, req):
    raise AssertionError("unreachable: pipeline.check refuses a token of no check")


def _hooks(method):
    if method not in CHECKS:
        raise DeidError(FEATURE_NOT_SUPPORTED, f"method {method or 'NULL'} has no pre-check over shards",
                        hint="Call deid.anonymize_request(...) on the coordinator.")
    return CHECKS[method]()
