"""The pending-snapshot store: a request begun, its snapshot read, and taken by the step that
uses it, all in this backend's memory, keyed by a random token.

    begin_request(db, args, caller,       SECURITY DEFINER (deid_owner): validate, authorize,
                  narrow=None)            plan the read (``narrow``: a pre-check's narrower
                                          read, held for purpose "check"); for a policy, have
                                          the grantor's reader read it
    read(db, token, kept=None)            as the role begin chose (the caller, or the grantor
                                          inside its reader): the snapshot (``kept``: one this
                                          backend read before for exactly this read)
    begin_and_read(db, args)              SECURITY INVOKER: begin through SQL, then read as the
                                          caller where it holds SELECT
    take(token, caller, purpose)          the read snapshot, removed from the store, for the
                                          step that releases it (pipeline.finish, purpose
                                          "release") or checks it (distributed/eligibility.py,
                                          purpose "check")

Only deid's own Python puts rows here, so no SQL caller can hand deid rows of its own making,
and deid_owner never reads a caller's relation. The single-node pipeline (pipeline.py) and the
distributed path (distributed/) both use it; neither reaches into the other's state.
"""
import random
import secrets
import time
from dataclasses import dataclass
from typing import NamedTuple

from .catalog import relations as catalog
from .log import audience, source_identity
from .errors import DeidError, INSUFFICIENT_PRIVILEGE, INVALID_TEXT_REPRESENTATION
from .methods import registry
from .read import snapshot
from .read.frame import Frame
from .redaction import redacted
from . import locks
from .request import access, code_trust, release
from .request.args import RequestArgs

_PENDING = {}

@dataclass
class Pending:
    req: release.Request
    method: registry.Method
    spec: object            # plan.ReadSpec: what to read
    reader: str             # the role that must read it: the caller, or the policy's grantor
    old: dict = None        # the release this one replaces
    frame: Frame = None
    read_seconds: float = 0.0
    read_sql_seconds: float = 0.0
    purpose: str = "release"   # "check": a pre-check's narrowed read, never released


def begin_and_read(db, args, read_rows=True, begin_function="deid._request_begin"):
    """SECURITY INVOKER: ``begin_function`` (SECURITY DEFINER, begin below) of the request's
    ``args`` as the caller, then the read as the caller where it holds SELECT (a policy's
    grantor read inside begin). The token; nothing stays pending after an error."""
    token = db.value(f"SELECT {begin_function}($1, current_user)", [args.to_json()], ["jsonb"])
    try:
        pending = _PENDING.get(token)
        if read_rows and pending is not None and pending.frame is None:
            read(db, token)          # the caller holds SELECT: it reads, as itself
    except BaseException:
        _PENDING.pop(token, None)
        raise
    return token


def read(db, token, kept=None):
    """Read a planned request's snapshot as the role now current, which must be the role
    begin() chose: the caller, or (inside the grantor's reader) the policy's grantor; the
    number of rows. ``kept(spec)``: the snapshot this backend read before for exactly this
    read by this role, or None (distributed/read_cache.py: a class step's read reused by the
    store step of its run)."""
    p = _PENDING.get(token)
    if p is None or p.frame is not None or access.current_user(db) != p.reader:
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no request of this session waits for this read",
                        hint="Call deid.anonymize_request(...).")
    frame = kept(p.spec) if kept is not None else None
    if frame is not None:
        p.frame = frame
        return frame.n
    t, sql0 = time.perf_counter(), db.sql_seconds
    with redacted(p.req, reading=True):
        p.frame = snapshot.read_spec(db, p.spec)
    p.read_seconds, p.read_sql_seconds = time.perf_counter() - t, db.sql_seconds - sql0
    return p.frame.n


def get(token):
    """The pending request of ``token`` (left in the store), or None."""
    return _PENDING.get(token)


def discard(token):
    """The pending request of ``token`` removed from the store (None if there was none)."""
    return _PENDING.pop(token, None)


def take(token, caller, purpose, what="request", hint="Call deid.anonymize_request(...)."):
    """The pending request of ``token``, removed from the store, if its snapshot was read, for
    ``caller`` and for ``purpose``; otherwise (nothing of this session waits) refused."""
    p = _PENDING.pop(token, None)
    if p is None or p.frame is None or p.req.caller != caller or p.purpose != purpose:
        raise DeidError(INSUFFICIENT_PRIVILEGE, f"no snapshot was read for this {what}", hint=hint)
    return p


def begin(db, request, caller):
    """SECURITY DEFINER (deid._request_begin): begin_request of the request's arguments, the
    jsonb its wrapper built (request/args.py)."""
    return begin_request(db, RequestArgs.of_json(request), caller)


def begin_request(db, args, caller, narrow=None):
    """SECURITY DEFINER: validate, authorize, plan; for a policy, have the grantor read. A
    refusal before the grant is known (an option, k, the selection) keeps its detail only for
    a caller with SELECT on the relation: a requester without it learns no detail at all.
    ``narrow(req, spec)``: a pre-check's read in place of the plug-in's (distributed/
    eligibility.py); its snapshot is held for purpose "check", never released."""
    try:
        return _begin(db, args, caller, narrow)
    except DeidError as e:
        if e.detail is not None and not _may_select(db, caller, args.relid):
            e.detail = None
        raise


def _may_select(db, caller, relid):
    try:
        with db.subtransaction():
            return bool(db.value("SELECT pg_catalog.has_table_privilege($1, $2, 'SELECT')",
                                 [caller, relid], ["name", "oid"]))
    except Exception:          # an aborted statement, a role or relation gone: no detail
        return False


class _Read(NamedTuple):
    """A request's validated read: the relation, the method's entry, the options, the parsed
    selection, the columns and the record id."""
    rel: catalog.Relation
    entry: registry.Method
    opts: dict
    sel: object
    cols: list
    rid: str

    @property
    def columns(self):
        """Every column the read touches: the released ones, the record id, the selection's."""
        return self.cols + [self.rid] + sorted(self.sel.columns if self.sel else [])


def _begin(db, args, caller, narrow=None):
    access.caller_role(db, caller)
    r = _validated_read(db, args)
    grant = _authorize(db, args, caller, r)
    name, release_id, old = _claim_name(db, r.rel, args.name, caller, r.opts)
    req = _request(db, args, caller, grant, r, (name, release_id))
    with redacted(req):
        spec = r.entry.plugin.plan_read(req, r.rid)
        if narrow is not None:
            spec = narrow(req, spec)
    # before anything is read: a view whose row ids lead to no table's, an audience the
    # requester may not address (log/source_identity.py, log/audience.py)
    source_identity.of_request(db, req, getattr(spec, "record", None) or spec.rid)
    audience.initial_grantee(db, req)
    token = secrets.token_hex(16)
    _PENDING[token] = Pending(req, r.entry, spec, grant["reader"], old,
                              purpose="release" if narrow is None else "check")
    if grant["via"] == "policy":
        _grantor_reads(db, req, r.columns, token)
    return token


def _validated_read(db, args):
    """The request's method, k, l, options and selection checked, and what it reads."""
    rel = catalog.relation(db, args.relid)
    entry, opts = registry.validate_request(args.method, args.k, args.l, args.options)
    sel = parse_selection(db, rel, args.selection)
    cols, rid = read_columns(db, entry.plugin, rel, args.column_list, opts)
    return _Read(rel, entry, opts, sel, cols, rid)


def _authorize(db, args, caller, r):
    """Who reads ``r`` (access.authorize_request: the caller with SELECT, or a policy's
    grantor), once the code that read runs is trusted; a policy requester selects only on the
    quasi-identifiers it releases."""
    rel, cols, sel, read = r.rel, r.cols, r.sel, r.columns
    grant = access.authorize_request(db, caller, rel, read, args.k, args.l,
                                     has_l=r.entry.plugin.HAS_L)
    # the code this read runs runs as the reader: refuse before reading what it does not own
    code_trust.check_read(db, grant["reader"], rel, read, requester=grant["via"] == "policy")
    if grant["via"] == "policy" and sel is not None:
        released = {c for c in cols if rel.columns[c].role == "quasi_identifier"}
        outside = sorted(set(sel.columns) - released)
        if outside:
            raise DeidError(INSUFFICIENT_PRIVILEGE,
                            f'a policy-based request may not select on column "{outside[0]}"',
                            hint="Without SELECT on the source, a selection may use only the "
                                 "quasi-identifiers this request releases: "
                                 + (", ".join(sorted(released)) or "none") + ".")
    return grant


def _claim_name(db, rel, given, caller, opts):
    """(name, release id, the release it replaces or None): the id drawn, the name's lock
    held until commit, a replacement allowed only to its owner (release.check_replace)."""
    release_id = db.value("SELECT nextval(pg_catalog.pg_get_serial_sequence('deid.release',"
                          " 'release_id'))")
    name = release.release_name(rel, given, release_id)
    locks.lock_release_name(db, name)
    old = release.existing_release(db, name)
    if old:
        release.check_replace(db, old, name, caller, opts.get("replace", False))
    return name, release_id, old


def _request(db, args, caller, grant, r, claimed):
    """The validated, authorized request under its claimed (name, release id): its seed
    (drawn if the options give none), start time and hierarchies (its columns' and a
    set-valued method's options.hierarchy, loaded at once)."""
    rel, cols, opts = r.rel, r.cols, r.opts
    name, release_id = claimed
    seed = opts.get("seed")
    if seed is None:
        seed = random.SystemRandom().randrange(2 ** 31)
    started = db.value("SELECT clock_timestamp()::text")
    named = {c: rel.columns[c].hierarchy for c in cols if rel.columns[c].hierarchy}
    optional = [opts["hierarchy"]] if opts.get("hierarchy") is not None else []   # set-valued
    loaded = catalog.hierarchies(db, [*named.values(), *optional])   # one load for all of them
    return release.Request(rel, args.method, args.k, args.l, cols, args.selection, r.sel, opts,
                           name, release_id, seed, caller, grant, started,
                           hierarchies={c: loaded[h] for c, h in named.items()},
                           option_hierarchy=loaded[optional[0]] if optional else None)


def _grantor_reads(db, req, read, token):
    """A policy request's read, by the grantor's reader function, as the grantor."""
    grant, rel = req.grant, req.rel
    with redacted(req, reading=True):
        try:
            db.execute(f"SELECT {grant['reader_function'].split('(')[0]}($1)", [token])
        except DeidError as e:      # PostgreSQL's refusal names a relation inside the source
            raise access.translate_read_error(e, rel, grant["reader"], requester=True) from None
    # the requester chooses when the grantor reads: code swapped in between the check and
    # the read fails the request, and the transaction takes back whatever it did
    code_trust.check_read(db, grant["reader"], rel, read, requester=True)


def read_columns(db, plugin, rel, columns, opts):
    """The columns a request reads (authorized below, exactly these plus the selection's) and
    its record id: what the plug-in's read_columns names (a set-valued read, 003: the item
    column, and the record column of a long table) or, where it declares None, the projection
    and the row id."""
    if plugin.read_columns is not None:
        cols, rid = plugin.read_columns(rel, columns, opts)
    else:
        cols, rid = release.projection(rel, columns), None
    return cols, rid or catalog.row_id_column(db, rel, opts.get("row_id"))


def parse_selection(db, rel, text):
    """The selection, parsed against every column (its columns are then authorized like the
    projection), with every literal checked against its column's type."""
    if text is None:
        return None
    from .request.selection import cast_type, parse_selection as parse
    sel = parse(text, {n: c.type for n, c in rel.columns.items()},
                {n for n, c in rel.columns.items() if c.as_text})
    for column, value in sel.literals():
        target = cast_type(column, rel.columns[column].type)
        try:
            with db.subtransaction():
                db.value(f"SELECT $1::{target} IS NULL", [value])
        except Exception as e:
            if getattr(e, "sqlstate", None) is None:
                raise
            raise DeidError(INVALID_TEXT_REPRESENTATION,
                            f'selection value {value!r} is not a valid {target} for column "{column}"',
                            hint=f'Compare "{column}" with a literal of its type, e.g. '
                                 + ("'2020-01-31'" if "date" in target else "42" if target in
                                    ("integer", "bigint", "smallint", "numeric") else "'text'")
                                 + ".") from None
    return sel


