"""deid.anonymize_request across the privilege boundary (README, "Security model").

    _anonymize_request   SECURITY INVOKER, as the caller
      -> begin           SECURITY DEFINER (deid_owner): validate, authorize, plan the read
           policy-based: -> deid._reader_<grantor>(token) -> read_pending, as the grantor
      -> read_pending    with SELECT: as the caller, in the caller's own function
      -> finish          SECURITY DEFINER (deid_owner): method -> write -> verify -> log

That is the path of every request, and the package's folders: request/ (access, options,
selection) -> read/ -> methods/<method>/ -> plan.py -> write/ -> verify/ -> log/. A method is a
plug-in of the registry (methods/registry.py, its members declared in methods/contract.py): it
plans the read and turns the snapshot into a ReleasePlan (plan.py) without SQL; write/writer.py
writes the plan's tables, log/release_log.py its artefacts, the views and the log row; the
method's verifier (verify/<method>.py) checks what was stored.
Each phase reports itself as a NOTICE (when client_min_messages lets it through) with its
seconds and no count, and its seconds go into the log; for a caller without SELECT the notices
wait until the release is verified and logged (which phase a refusal came in tells nothing).

The snapshot passes from the reading part to deid_owner's part in this backend's memory
(``_PENDING``), keyed by a random token: only deid's own Python puts rows there, so no SQL
caller can hand deid rows of its own making, and deid_owner never reads a caller's relation.
A failed request leaves nothing: the whole call is one transaction.

For a caller without SELECT (a policy-based request), errors carry no raw value and no count
below k: messages and hints never hold data, and the detail (which may) is dropped; and every
refusal that may depend on the data is one and the same error (errors.uniform_refusal), so
neither its reason nor the order of a method's checks tells the data apart.
"""
import contextlib
import random
import secrets
import time
from dataclasses import dataclass

from .request import access, code_trust, options as opts_schema, release
from .catalog import relations as catalog
from .log import release_log as catalog_log, overlap
from .read import snapshot
from .write import writer
from . import heap, locks
from .methods import registry
from .errors import (DeidError, DUPLICATE_TABLE, INSUFFICIENT_PRIVILEGE,
                     INVALID_TEXT_REPRESENTATION, for_policy, uniform_refusal)
from .read.frame import Frame
from .plan import Table

_PENDING = {}


@dataclass
class Pending:
    req: release.Request
    method: registry.Method
    spec: object            # plan.ReadSpec: what to read
    reader: str             # the role that must read it: the caller, or the policy's grantor
    old: dict = None        # the release this one replaces
    frame: object = None
    read_seconds: float = 0.0
    read_sql_seconds: float = 0.0
    purpose: str = "release"   # "check": a pre-check's narrowed read, never released (check())


def anonymize_request(db, relid, method, k, l, columns, selection, options, name):
    """SECURITY INVOKER: the caller's part. A source registered as distributed runs on every
    node of its PL/Proxy cluster instead (distributed/coordinator.py), as this caller."""
    if relid is not None and db.value("SELECT 1 FROM deid.distributed_source WHERE source = $1",
                                      [relid], ["oid"]):
        from .distributed import coordinator
        return coordinator.anonymize_request(db, relid, method, k, l, columns, selection,
                                             options, name)
    token = _begin_and_read(db, relid, method, k, l, columns, selection, options, name)
    try:
        return db.query("SELECT * FROM deid._request_finish($1, current_user)", [token])
    finally:
        _PENDING.pop(token, None)


def _begin_and_read(db, relid, method, k, l, columns, selection, options, name, read=True,
                    begin_function="deid._request_begin"):
    token = db.value(f"SELECT {begin_function}($1, $2, $3, $4, $5, $6, $7, $8, current_user)",
                     [relid, method, k, l, columns, selection, options, name],
                     ["oid", "text", "int", "int", "text[]", "text", "text", "text"])
    try:
        pending = _PENDING.get(token)
        if read and pending is not None and pending.frame is None:
            read_pending(db, token)          # the caller holds SELECT: it reads, as itself
    except BaseException:
        _PENDING.pop(token, None)
        raise
    return token


def step(db, relid, method, k, l, columns, selection, options, run, read=True, keep=None):
    """SECURITY INVOKER: a step of a distributed method (distributed/) in place of finish: the
    request begun and read as anonymize_request does (the caller authorized, reading as
    itself), then ``run(pending.req, pending.frame)`` (frame None without ``read``), whose
    errors are redacted as finish's are. Only for a caller with SELECT on the source: such a
    step may return what it computed from the rows to the caller. ``keep(spec, frame)``, once
    run succeeded: the read kept for a later step (distributed/read_cache.py)."""
    token = begin_select(db, relid, method, k, columns, selection, options, None, read)
    p = _PENDING.pop(token, None)
    if p is None or p.req.grant["via"] != "select":
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no request of this session waits for this step",
                        hint="Call deid.anonymize_request(...).")
    with _redacted(p.req, after_read=True):
        out = run(p.req, p.frame)
    if keep is not None and p.frame is not None:
        keep(p.spec, p.frame)
    return out


def begin_select(db, relid, method, k, columns, selection, options, name, read=True):
    """SECURITY INVOKER: begin and read a request of a caller with SELECT on the source (the
    steps of a distributed method that returns, or stores before its global check, what it
    computed from the rows); the token of the pending request."""
    if not db.value("SELECT pg_catalog.has_table_privilege(current_user, $1, 'SELECT')",
                    [relid], ["oid"]):
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"method {method} over shards needs SELECT on the source",
                        hint="Request it as a role with SELECT on the source; a policy-based "
                             "request over shards is not supported for this method yet.")
    return _begin_and_read(db, relid, method, k, None, columns, selection, options, name, read)


def finish_part(db, token, caller, run, coord_release, chosen):
    """SECURITY DEFINER: a node's part of a distributed generalization (distributed/
    generalization.py): the snapshot read for ``token`` stored at the coordinator's chosen
    levels, verified but for k (which only the parts together hold: the coordinator checks it
    over every part's stored classes), logged with its part, and held pending in the same call
    (distributed/node.py), so that no one reads it before the coordinator's check and log."""
    from .distributed import generalization as dg, node
    p = _PENDING.get(token)
    if p is None or p.frame is None or p.req.caller != caller or p.req.method != "generalization" \
            or p.req.grant["via"] != "select":
        _PENDING.pop(token, None)
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no snapshot was read for this part",
                        hint="Call deid.anonymize_request(...) on the coordinator.")
    choice = dg.Choice.from_json(chosen)
    p.req.part = {"run": run, "coordinator_release": coord_release, "levels": choice.levels}
    row = finish(db, token, caller, plan=lambda frame, req: dg.node_plan(frame, req, choice))
    return node.hold(db, row[0][0], run, coord_release, caller)


def read_or_reuse(db, token, kept):
    """read_pending, unless ``kept(spec)`` gives the snapshot this backend read before for
    exactly this read by this role (distributed/read_cache.py: a class step's read reused by
    the store step of its run); the number of rows."""
    p = _PENDING.get(token)
    if p is None or p.frame is not None or access.current_user(db) != p.reader:
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no request of this session waits for this read",
                        hint="Call deid.anonymize_request(...).")
    frame = kept(p.spec)
    if frame is None:
        return read_pending(db, token)
    p.frame = frame
    return frame.n


def read_pending(db, token):
    """Read a planned request's snapshot as the role now current, which must be the role
    begin() chose: the caller, or (inside the grantor's reader) the policy's grantor."""
    p = _PENDING.get(token)
    if p is None or p.frame is not None or access.current_user(db) != p.reader:
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no request of this session waits for this read",
                        hint="Call deid.anonymize_request(...).")
    t, sql0 = time.perf_counter(), db.sql_seconds
    with _redacted(p.req, reading=True):
        p.frame = snapshot.read_spec(db, p.spec)
    p.read_seconds, p.read_sql_seconds = time.perf_counter() - t, db.sql_seconds - sql0
    return p.frame.n


def begin(db, relid, method, k, l, columns, selection, options, name, caller, narrow=None):
    """SECURITY DEFINER: validate, authorize, plan; for a policy, have the grantor read. A
    refusal before the grant is known (an option, k, the selection) keeps its detail only for
    a caller with SELECT on the relation: a requester without it learns no detail at all.
    ``narrow(req, spec)``: a pre-check's read in place of the plug-in's (check() below)."""
    try:
        return _begin(db, relid, method, k, l, columns, selection, options, name, caller, narrow)
    except DeidError as e:
        if e.detail is not None and not _may_select(db, caller, relid):
            e.detail = None
        raise


def _may_select(db, caller, relid):
    try:
        with db.subtransaction():
            return bool(db.value("SELECT pg_catalog.has_table_privilege($1, $2, 'SELECT')",
                                 [caller, relid], ["name", "oid"]))
    except Exception:          # an aborted statement, a role or relation gone: no detail
        return False


def _begin(db, relid, method, k, l, columns, selection, options, name, caller, narrow=None):
    access.caller_role(db, caller)
    rel = catalog.relation(db, relid)
    entry, opts = opts_schema.validate_request(method, k, l, options)
    plugin = entry.plugin
    sel = parse_selection(db, rel, selection)
    cols, rid = read_columns(db, plugin, rel, columns, opts)
    read = cols + [rid] + sorted(sel.columns if sel else [])
    grant = access.authorize_request(db, caller, rel, read, k, l, has_l=plugin.HAS_L)
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
    release_id = db.value("SELECT nextval(pg_catalog.pg_get_serial_sequence('deid.release',"
                          " 'release_id'))")
    name = release.release_name(rel, name, release_id)
    locks.lock_release_name(db, name)
    old = release.existing_release(db, name)
    if old:
        release.check_replace(db, old, name, caller, opts.get("replace", False))
    seed = opts.get("seed")
    if seed is None:
        seed = random.SystemRandom().randrange(2 ** 31)
    started = db.value("SELECT clock_timestamp()::text")
    req = release.Request(rel, method, k, l, cols, selection, sel, opts, name, release_id, seed,
                          caller, grant, started)
    named = {c: rel.columns[c].hierarchy for c in cols if rel.columns[c].hierarchy}
    optional = [opts["hierarchy"]] if opts.get("hierarchy") is not None else []   # set-valued
    loaded = catalog.hierarchies(db, [*named.values(), *optional])   # one load for all of them
    req.hierarchies = {c: loaded[h] for c, h in named.items()}
    if optional:
        req.option_hierarchy = loaded[optional[0]]
    with _redacted(req):
        spec = plugin.plan_read(req, rid)
        if narrow is not None:
            spec = narrow(req, spec)
    token = secrets.token_hex(16)
    _PENDING[token] = Pending(req, entry, spec, grant["reader"], old,
                              purpose="release" if narrow is None else "check")
    if grant["via"] == "policy":
        with _redacted(req, reading=True):
            try:
                db.execute(f"SELECT {grant['reader_function'].split('(')[0]}($1)", [token])
            except DeidError as e:      # PostgreSQL's refusal names a relation inside the source
                raise access.translate_read_error(e, rel, grant["reader"], requester=True) from None
        # the requester chooses when the grantor reads: code swapped in between the check and
        # the read fails the request, and the transaction takes back whatever it did
        code_trust.check_read(db, grant["reader"], rel, read, requester=True)
    return token


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


def finish(db, token, caller, plan=None):
    """SECURITY DEFINER: method -> write -> verify -> log, on the snapshot read for `token`
    (``plan``: what makes the plan instead of the method's run; finish_part's)."""
    access.caller_role(db, caller)
    p = _PENDING.pop(token, None)
    if p is None or p.frame is None or p.req.caller != caller or p.purpose != "release":
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no snapshot was read for this request",
                        hint="Call deid.anonymize_request(...).")
    req, clock = p.req, _Clock(db, p)
    with _redacted(req, after_read=True):
        clock.phase("read")
        req.progress = clock.fraction("method")
        plan = (plan or p.method.plugin.run)(p.frame, req)
        clock.phase("method")
        if not p.method.verifier.READS_SNAPSHOT_VALUES:
            # the verifier reads only the row ids: each column's values now live only as
            # long as the plan's tables that write them
            p.frame = Frame(p.frame.n, p.frame.rid, {})
        trim = heap.release if p.method.plugin.RELEASE_HEAP else _no_trim
        trim()                   # the method's temporaries: not resident while the write runs
        if p.old:
            release.drop_release_relations(db, p.old)
            db.execute("UPDATE deid.release SET status = 'replaced' WHERE release_id = $1",
                       [p.old["release_id"]], ["bigint"])
        tables = _write(db, req, plan, trim, clock.fraction("write"))
        clock.phase("write")
        req.evidence = plan.evidence
        plan.drop_written()      # verify's arrays do not stack on the written ones
        trim()
        verification = p.method.verifier.verify(db, req, p.frame, tables)
        clock.phase("verify")
        relations = catalog_log.publish(db, req, tables, plan.estimate)
        overlap.control(db, req, p.spec, p.frame.rid)     # refuse a near-duplicate selection
        catalog_log.log(db, req, relations, plan, verification, clock.seconds())
        clock.flush()
    return [(req.release_id, relations, plan.rows, plan.groups, plan.discernibility, True)]


def check(db, token, caller, run):
    """SECURITY DEFINER: a pre-check (distributed/eligibility.py) on the narrowed snapshot
    read for ``token`` (begin with ``narrow``): the overlap control's refusal and
    ``run(frame, req)``, the method's own refusal of rows it cannot release, each redacted as
    finish's are (a policy requester: the uniform refusal). Stores nothing; returns nothing of
    the rows."""
    access.caller_role(db, caller)
    p = _PENDING.pop(token, None)
    if p is None or p.frame is None or p.req.caller != caller or p.purpose != "check":
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no snapshot was read for this check",
                        hint="Call deid.anonymize_request(...) on the coordinator.")
    with _redacted(p.req, after_read=True):
        run(p.frame, p.req)
        overlap.check(db, p.req, p.spec, p.frame.rid)
    return "eligible"


def _no_trim():
    return False


def _write(db, req, plan, trim=_no_trim, progress=None):
    """The plan's tables (each kept as its name only once written: what it held may go),
    then its catalog artefacts. `trim` (heap.release for a plug-in with RELEASE_HEAP) runs
    after each table; `progress(fraction)` after each table, the share of the rows written."""
    tables = []
    sizes = [t.rows for t in plan.tables]
    total, done = max(sum(sizes), 1), 0
    try:
        for i in range(len(plan.tables)):
            tables.append(writer.write_table(db, release.STORE_SCHEMA, plan.tables[i]))
            plan.tables[i] = Table(tables[-1], [])
            trim()               # its COPY image's pages: not resident under the next table's
            done += sizes[i]
            if progress is not None:
                progress(done / total)
    except Exception as e:
        if getattr(e, "sqlstate", None) == DUPLICATE_TABLE:
            raise DeidError(DUPLICATE_TABLE,
                            f'a table of release "{req.name}" has the name of an existing relation',
                            hint="Choose another release name: a release's tables are named "
                                 "<release>_<suffix>.") from None
        raise
    catalog_log.write_artefacts(db, req.release_id, plan)
    return tables


class _Clock:
    """Phase timings of a request (the log keeps them) and its progress NOTICEs: seconds, no
    count (a count before the release is verified may be one below k); for a caller without
    SELECT held back until flush(), once the release is verified and logged."""

    def __init__(self, db, pending):
        self.db, self.t = db, time.perf_counter()
        self.sql0 = db.sql_seconds
        self.times = {"read": pending.read_seconds}
        self.read_sql = pending.read_sql_seconds
        self.held = [] if pending.req.grant["via"] != "select" else None

    def fraction(self, name):
        """A callable progress(fraction) for the long phase `name`: a NOTICE `deid: <name>
        <p> %` each time the fraction done passes a 10 % step (below 100: the phase's own
        notice says it is done). Only for a caller with SELECT on the source, in real time; a
        policy requester's notices are held until the release is logged, when a fraction
        tells nothing, so it gets none."""
        last = [0]

        def progress(fraction):
            step = int(fraction * 10) * 10
            if self.held is None and last[0] < step < 100:
                last[0] = step
                self.db.notice(f"deid: {name} {step} %")
        return progress

    def phase(self, name):
        now = time.perf_counter()
        if name != "read":
            self.times[name], self.t = now - self.t, now
        message = f"deid: {name} done in {self.times[name]:.2f} s"
        if self.held is None:
            self.db.notice(message)
        else:
            self.held.append(message)

    def flush(self):
        for message in self.held or ():
            self.db.notice(message)
        self.held = None

    def seconds(self):
        return dict(self.times, in_sql=self.db.sql_seconds - self.sql0 + self.read_sql)


@contextlib.contextmanager
def _redacted(req, reading=False, after_read=None):
    """For a caller without SELECT: an error that may depend on the data (errors.for_policy:
    marked so, or raised once the read began and not a condition of the system) becomes the
    one uniform refusal; any other keeps its SQLSTATE, message and hint (which never hold
    data) and loses its detail (which may); and an error PostgreSQL raised while reading
    becomes a message of deid's own. `after_read` defaults to `reading`."""
    if req.grant["via"] == "select":
        yield
        return
    try:
        yield
    except Exception as e:
        state = getattr(e, "sqlstate", None)
        if for_policy(state, getattr(e, "data_dependent", None),
                      reading if after_read is None else after_read):
            raise uniform_refusal() from None
        if isinstance(e, DeidError):
            e.detail = None
            raise
        if reading and state is not None:
            raise DeidError(state, f"reading {req.rel.display} as the policy's grantor failed",
                            hint="Ask the role that granted the policy to check the source "
                                 "(its rights, its views) and the request.") from None
        raise


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


