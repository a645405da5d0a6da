"""The commit protocol of a distributed release, without a distributed transaction.

PL/Proxy runs each call on a node as a statement of its own: a node's part commits on the node
before the coordinator decides. So a part is stored *pending* and becomes readable only with
the run's proof:

- the coordinator draws a run token (coordinator.begin); the nodes keep their part under it;
- the proof of a run is a keyed hash of its token under the warehouse's secret key
  (deid._dist_keyed; deid.distributed_key, the same on every member, read by deid_owner only);
  proof() computes it only for a run in the coordinator's committed log
  (deid.distributed_release) and only for a role that may read the release; the coordinator's
  views pass it to the nodes, which check it (deid._dist_node_rows). A caller who drives the
  PL/Proxy functions by hand can store parts, never read one the coordinator did not log;
- while a run lasts its coordinator holds a transaction advisory lock on the release id
  (lock_run); cleanup() removes every node part whose run is neither logged nor locked: the
  coordinator crashed, a node died mid-run, the request failed and a node was unreachable.

remote_error() turns an error PL/Proxy brought back from a node into the node's own error
(SQLSTATE, message, detail and hint, without PL/Proxy's prefix, which names the node's
connection), so that a distributed request fails as it would on one node.
"""
import json

from ..errors import DeidError, INSUFFICIENT_PRIVILEGE, PLPY_PREFIX, UNDEFINED_OBJECT
from ..request import access

LOCK_CLASS = "hashtext('deid.distributed')"
UNREACHABLE = "08006"


def lock_run(db, release_id):
    """Hold the run's lock until the coordinator's transaction ends (commit or crash)."""
    db.execute(f"SELECT pg_catalog.pg_advisory_xact_lock({LOCK_CLASS}, $1::int)", [release_id],
               ["bigint"])


def proof(db, release_id, caller):
    """SECURITY DEFINER: (cluster, run, proof) of a committed distributed release, for a role
    that may read it: deid_reader, deid_admin or its requester (as the views' grants)."""
    access.caller_role(db, caller)
    rows = db.query("SELECT cluster::text AS cluster, run, deid._dist_keyed(run) AS proof,"
                    " requested_by::text AS requested_by FROM deid.distributed_release"
                    " WHERE release_id = $1", [release_id], ["bigint"])
    if not rows:
        raise DeidError(UNDEFINED_OBJECT, f"distributed release #{release_id} does not exist",
                        hint="SELECT name FROM deid.distributed_release; lists them (deid_admin).")
    r = rows[0]
    if not (r["requested_by"] == caller or access.is_admin(db, caller) or db.value(
            "SELECT pg_catalog.pg_has_role($1, 'deid_reader', 'MEMBER')", [caller], ["name"])):
        raise DeidError(INSUFFICIENT_PRIVILEGE, f"permission denied for distributed release #{release_id}",
                        hint="A release is readable by deid_reader and by the role that requested it.")
    if r["proof"] is None:
        raise no_key()
    return [(r["cluster"], r["run"], r["proof"])]


def no_key():
    return DeidError(UNDEFINED_OBJECT, "this member of the warehouse has no distributed key",
                     hint="A superuser runs SELECT deid.set_distributed_key('<the same secret of"
                          " at least 32 characters>'); on the coordinator and on every node.")


def runs(db, run_ids, release_ids):
    """SECURITY DEFINER: for each (run, coordinator release id): whether it is logged and
    whether its coordinator still runs (its lock is held by another session)."""
    out = []
    for run, rid in zip(run_ids or [], release_ids or []):
        committed = bool(db.value("SELECT 1 FROM deid.distributed_release WHERE run = $1", [run]))
        # a session lock taken and given back at once: the caller's transaction keeps no lock
        # (it would stall the coordinator that gets this release id, and keep a dead run alive)
        running = not committed and not db.value(
            f"SELECT CASE WHEN pg_catalog.pg_try_advisory_lock({LOCK_CLASS}, $1::int)"
            f" THEN pg_catalog.pg_advisory_unlock({LOCK_CLASS}, $1::int) ELSE false END",
            [rid], ["bigint"])
        out.append((run, committed, running))
    return out


def cleanup(db, caller, clusters=None, partitions=None):
    """deid.cleanup_distributed (as the caller, who reaches every node as itself): remove every
    pending part the caller may remove (its own; a deid_admin: all) whose run neither committed
    nor still runs. Returns how many parts went. `clusters`: {cluster: partitions}, default
    every cluster a source is registered over."""
    access.caller_role(db, caller)
    if clusters is None:
        from . import catalog
        clusters = {c["cluster"]: catalog.partitions(db, c["cluster"]) for c in db.query(
            "SELECT DISTINCT cluster::text AS cluster FROM deid.distributed_source")}
    removed = 0
    for cluster, n in clusters.items():
        pending = {}
        for text in call(db, "SELECT deid._dist_pending($1) AS r", [cluster]):
            for p in json.loads(text):
                pending[p["run"]] = p["coordinator_release"]
        if not pending:
            continue
        names = sorted(pending)
        states = db.query("SELECT * FROM deid._dist_runs($1, $2)",
                          [names, [pending[r] for r in names]], ["text[]", "bigint[]"])
        for s in states:
            if not s["committed"] and not s["running"]:
                removed += abort(db, cluster, n, s["run"])
    return removed


def abort(db, cluster, n, run):
    """Remove the run's part from every node that answers; the count removed. A node that does
    not answer keeps its part pending until cleanup() reaches it."""
    removed = 0
    for part in range(n):
        try:
            with db.subtransaction():
                removed += sum(1 for r in db.query("SELECT deid._dist_abort_on($1, $2, $3) AS r",
                                                   [cluster, part, run], ["text", "int", "text"])
                               if r["r"] == "removed")
        except Exception:          # an unreachable node: cleanup() later
            pass
    return removed


def call(db, sql, params, types=None):
    """Rows (column "r") of a PL/Proxy call, a node's error raised as the node's own."""
    try:
        return [r["r"] for r in db.query(sql, params, types)]
    except DeidError as e:       # a privilege error, already deid's (pg.Database): the node's own
        if "REMOTE ERROR: " in e.message:
            e.message = PLPY_PREFIX.sub("", e.message.split("REMOTE ERROR: ", 1)[1].strip())
            e.args = (e.message,)
            e.hint = _remote(e.hint, "Remote hint: ")
        raise
    except Exception as e:
        raise remote_error(e) from None


def sqlstate(e):
    """An error's SQLSTATE: PL/Python names PostgreSQL's own, and gives deid's (DE001, DE002)
    only as the number in its spidata (PostgreSQL's MAKE_SQLSTATE: 6 bits a character)."""
    state = getattr(e, "sqlstate", None)
    data = getattr(e, "spidata", None) or ()
    if state is None and data and isinstance(data[0], int) and data[0]:
        state = "".join(chr(((data[0] >> (6 * i)) & 0x3F) + ord("0")) for i in range(5))
    return state


def _remote(text, label):
    """PL/Proxy's "Remote hint: " (or detail) prefix dropped."""
    return text.split(label, 1)[1] if text and text.startswith(label) else text


def remote_error(e):
    """A node's error as its own (or, for a connection that failed, a clear one)."""
    state = sqlstate(e)
    message = str(e.args[0] if getattr(e, "args", None) else e)
    data = getattr(e, "spidata", None) or ()
    detail = _remote(data[1] if len(data) > 1 else None, "Remote detail: ")
    hint = _remote(data[2] if len(data) > 2 else None, "Remote hint: ")
    if "REMOTE ERROR: " in message:
        return DeidError(state, PLPY_PREFIX.sub("", message.split("REMOTE ERROR: ", 1)[1].strip()),
                         detail=detail,
                         hint=hint or "The node refused the request; see the message.")
    if state is None or state.startswith("08") or state == "XX000":
        return DeidError(UNREACHABLE, "a node of the cluster cannot be reached",
                         hint="Start the node (or fix the PL/Proxy cluster's options) and run the "
                              "request again; SELECT deid.cleanup_distributed(); removes what a "
                              "failed request left pending.")
    return DeidError(state, message.split("): ", 1)[-1], detail=detail,
                     hint=hint or "The node refused the request; see the message.")
