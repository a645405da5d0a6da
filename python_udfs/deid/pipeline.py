"""deid.anonymize_request across the privilege boundary (README, "Security model").

    _anonymize_request   SECURITY INVOKER, as the caller (dispatch.py: a distributed source
                         goes to distributed/coordinator.py instead)
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

The snapshot passes from the reading part to deid_owner's part in this backend's memory, keyed
by a random token (the pending-snapshot store, pending.py, whose begin and read the SQL
functions above call): only deid's own Python puts rows there, so no SQL caller
can hand deid rows of its own making, and deid_owner never reads a caller's relation. A failed
request leaves nothing: the whole call is one transaction. A source registered as distributed
never reaches this module: dispatch.py hands it to distributed/coordinator.py, whose nodes use
the same store and, for a part, this finish; the pipeline imports nothing of distributed/.

For a caller without SELECT (a policy-based request), errors carry no raw value and no count
below k: messages and hints never hold data, and the detail (which may) is dropped; and every
refusal that may depend on the data is one and the same error (errors.uniform_refusal), so
neither its reason nor the order of a method's checks tells the data apart.
"""
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from .request import access, release
from .log import release_log as catalog_log, overlap, composition
from .write import writer
from . import heap, pending
from .errors import DeidError, DUPLICATE_TABLE, PRIVACY_MODEL_UNSATISFIABLE
from .read.frame import Frame
from .plan import Table
from .redaction import redacted

if TYPE_CHECKING:          # the types only: nothing of these is imported when deid runs
    from .pg import Database
    from .plan import ReleasePlan
    from .request.args import RequestArgs
    from .request.release import Request

Row = Dict[str, Any]
Progress = Callable[[float], None]


def anonymize_request(db: "Database", args: "RequestArgs") -> List[Row]:
    """SECURITY INVOKER: the caller's part of a single-node request (dispatch.py), of its
    arguments ``args`` (request/args.py)."""
    token = pending.begin_and_read(db, args)
    try:
        rows: List[Row] = db.query("SELECT * FROM deid._request_finish($1, current_user)",
                                   [token])
        return rows
    finally:
        pending.discard(token)


def read_pending(db: "Database", token: str) -> int:
    """The read of a policy's grantor (pending.read): every grantor's reader function calls
    this name, and readers installed by an earlier version keep calling it after an update
    (sql/06_privileged.sql, deid._reader_source), so it stays here."""
    n: int = pending.read(db, token)
    return n


def finish(db: "Database", token: str, caller: str,
           plan: Optional[Callable[[Frame, "Request"], "ReleasePlan"]] = None) -> List[Tuple[Any, ...]]:
    """SECURITY DEFINER: method -> write -> verify -> publish -> digest -> log, on the snapshot
    read for `token`
    (``plan``: what makes the plan instead of the method's run: a distributed node's part,
    distributed/generalization_sql.py)."""
    access.caller_role(db, caller)
    p = pending.take(token, caller, "release")
    req, clock = p.req, _Clock(db, p)
    with redacted(req, after_read=True):
        clock.phase("read")
        req.run.progress = clock.fraction("method")
        if p.method.plugin.KEEPS_GROUPS and plan is None:
            made = _run_keeping(db, p, req)
        else:
            made = (plan or p.method.plugin.run)(p.frame, req)
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
        tables = _write(db, req, made, trim, clock.fraction("write"))
        clock.phase("write")
        req.run.evidence = made.evidence
        made.drop_written()      # verify's arrays do not stack on the written ones
        trim()
        verification = p.method.verifier.verify(db, req, p.frame, tables)
        clock.phase("verify")
        relations = catalog_log.publish(db, req, tables, made.estimate)
        overlap.control(db, req, p.spec, p.frame.rid)     # refuse a near-duplicate selection
        clock.phase("publish")
        digests = catalog_log.digests(db, req, tables)    # of everything stored, as logged
        clock.phase("digest")
        catalog_log.log(db, req, relations, made, verification, clock.seconds(), digests)
        clock.flush()
    return [(req.release_id, relations, made.rows, made.groups, made.discernibility, True)]


def _run_keeping(db: "Database", p: Any, req: "Request") -> "ReleasePlan":
    """The method, keeping the groups of the latest earlier release of the source by the same
    method and columns (methods/kept_groups.py). When the rows left to group cannot meet
    the model by themselves, the method groups every row afresh instead: the composition
    rule then judges that grouping (a requester with SELECT may override it)."""
    req.run.kept = composition.kept_groups(db, req, overlap.row_id_of(p.spec))
    run: Callable[[Frame, "Request"], "ReleasePlan"] = p.method.plugin.run
    if req.run.kept is None:
        return run(p.frame, req)
    try:
        return run(p.frame, req)
    except DeidError as e:
        # a kept group that would publish a change (disassociation/kept.py): a fresh grouping
        # could rebuild the same groups and publish it, so none is tried
        if e.sqlstate != PRIVACY_MODEL_UNSATISFIABLE or getattr(e, "no_fresh_grouping", False):
            raise
    req.run.kept = None
    return run(p.frame, req)


def _no_trim() -> bool:
    return False


def _write(db: "Database", req: "Request", plan: "ReleasePlan", trim: Callable[[], Any] = _no_trim,
           progress: Optional[Progress] = None) -> List[str]:
    """The plan's tables (each kept as its name only once written: what it held may go),
    then its catalog artefacts. `trim` (heap.release for a plug-in with RELEASE_HEAP) runs
    after each table; `progress(fraction)` after each table, the share of the rows written."""
    tables: List[str] = []
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
    plan.digests = req.run.digests
    catalog_log.write_artefacts(db, req.release_id, plan)
    return tables


class _Clock:
    """Phase timings of a request (the log keeps them) and its progress NOTICEs: seconds, no
    count (a count before the release is verified may be one below k); for a caller without
    SELECT held back until flush(), once the release is verified and logged."""

    def __init__(self, db: "Database", pending: Any) -> None:
        self.db, self.t = db, time.perf_counter()
        self.sql0 = db.sql_seconds
        self.times = {"read": pending.read_seconds}
        self.read_sql = pending.read_sql_seconds
        self.held: Optional[List[str]] = [] if pending.req.grant["via"] != "select" else None

    def fraction(self, name: str) -> Progress:
        """A callable progress(fraction) for the long phase `name`: a NOTICE `deid: <name>
        <p> %` each time the fraction done passes a 10 % step (below 100: the phase's own
        notice says it is done). Only for a caller with SELECT on the source, in real time; a
        policy requester's notices are held until the release is logged, when a fraction
        tells nothing, so it gets none."""
        last = [0]

        def progress(fraction: float) -> None:
            step = int(fraction * 10) * 10
            if self.held is None and last[0] < step < 100:
                last[0] = step
                self.db.notice(f"deid: {name} {step} %")
        return progress

    def phase(self, name: str) -> None:
        now = time.perf_counter()
        if name != "read":
            self.times[name], self.t = now - self.t, now
        message = f"deid: {name} done in {self.times[name]:.2f} s"
        if self.held is None:
            self.db.notice(message)
        else:
            self.held.append(message)

    def flush(self) -> None:
        for message in self.held or ():
            self.db.notice(message)
        self.held = None

    def seconds(self) -> Dict[str, float]:
        return dict(self.times, in_sql=self.db.sql_seconds - self.sql0 + self.read_sql)
