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
- while a run lasts its coordinator's transaction holds the lock of a row of deid.run_slot (a
  pool of rows no role but deid_owner may lock), and the run's token names that slot
  (new_token); cleanup() removes every node part whose run is neither logged nor of a slot
  still locked: the coordinator crashed, a node died mid-run, the request failed and a node was
  unreachable. No role outside deid can lock a slot: none can make a dead run look alive or
  stall a live one (an advisory lock on the run's key, used before, any login could take). A
  slot's lock dies with its transaction, crash included; a transaction id would not do (after
  a crash an id never written to disk is handed out again).

remote_error() turns an error PL/Proxy brought back from a node into the node's own error
(SQLSTATE, message, detail and hint, without PL/Proxy's prefix, which names the node's
connection), so that a distributed request fails as it would on one node.
"""
import json
import re
import secrets

from ..errors import DeidError, INSUFFICIENT_PRIVILEGE, PLPY_PREFIX, UNDEFINED_OBJECT
from ..request import access

UNREACHABLE = "08006"
CONFIGURATION_LIMIT_EXCEEDED = "53400"
TOKEN = re.compile(r"slot([0-9]{1,9})-[0-9a-f]{32}")


class _Probed(Exception):
    """Rolls back the probe's subtransaction, and with it the lock it took."""


def new_token(db):
    """A run's token: the slot its coordinator's transaction locks until it ends (a free one,
    or one this transaction holds already), and 128 random bits."""
    slot = db.value("SELECT slot FROM deid.run_slot ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED")
    if slot is None:
        n = db.value("SELECT count(*) FROM deid.run_slot")
        raise DeidError(CONFIGURATION_LIMIT_EXCEEDED,
                        f"{n} distributed requests run at once, as many as this coordinator allows",
                        hint="Run the request again once one of them has ended (a superuser adds "
                             "slots: INSERT INTO deid.run_slot SELECT max(slot) + 1 FROM deid.run_slot;).",
                        data_dependent=False)
    return f"slot{slot}-{secrets.token_hex(16)}"


def running(db, run):
    """Whether the slot named by the token `run` is locked by another transaction (a token of
    another form, or of a slot that does not exist: no). Leaves no lock behind."""
    m = TOKEN.fullmatch(run or "")
    if m is None:
        return False
    free = False
    try:
        with db.subtransaction():
            free = bool(db.query("SELECT slot FROM deid.run_slot WHERE slot = $1"
                                 " FOR UPDATE SKIP LOCKED", [int(m.group(1))], ["int"]))
            raise _Probed()
    except _Probed:
        pass
    exists = db.value("SELECT 1 FROM deid.run_slot WHERE slot = $1", [int(m.group(1))], ["int"])
    return bool(exists) and not free


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


def runs(db, run_ids, caller):
    """SECURITY DEFINER: for each run: whether it is logged and whether its coordinator still
    runs (its slot is locked). Keeps no lock: a lock kept in the caller's transaction would
    make a dead run look alive and stall the next coordinator of that slot."""
    access.caller_role(db, caller)
    out = []
    for run in run_ids or []:
        committed = bool(db.value("SELECT 1 FROM deid.distributed_release WHERE run = $1", [run]))
        out.append((run, committed, not committed and running(db, run)))
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
        pending = set()
        for text in call(db, "SELECT deid._dist_pending($1) AS r", [cluster]):
            pending.update(p["run"] for p in json.loads(text))
        if not pending:
            continue
        states = db.query("SELECT * FROM deid._dist_runs($1, $2)", [sorted(pending), caller],
                          ["text[]", "name"])
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


LOST_HINT = ("Start the node and drop the release again. If the node is lost for good, a "
             "deid_admin drops the parts on the other nodes with deid.drop_release(name, "
             "force => true); the lost parts are logged in deid.distributed_forced_drop.")


def reached(db, cluster, n):
    """{partition: whether its node answers a ping}."""
    out = {}
    for part in range(n):
        try:
            with db.subtransaction():
                call(db, "SELECT deid._dist_ping_on($1, $2) AS r", [cluster, part], ["text", "int"])
            out[part] = True
        except DeidError as e:
            if e.sqlstate != UNREACHABLE:
                raise
            out[part] = False
    return out


def ping_or_refuse(db, cluster, n, hint):
    """Every node answers, or the request is refused (08006) with ``hint`` before anything."""
    if not all(reached(db, cluster, n).values()):
        raise DeidError(UNREACHABLE, "a node of the cluster cannot be reached", hint=hint)


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
