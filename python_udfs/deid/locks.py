"""What serializes concurrent requests: row locks on deid's own table, deid.request_lock.

Two requests of one source must not decide at once (the overlap control compares a release's
selection with every earlier release of its source, log/overlap.py), nor two requests of one
release name (one of them gets a clean 42P07). An advisory lock would do, but its keys are a
namespace every login shares: any role could take a source's key in an idle session and stall
every release of that source. So a request locks a row of deid.request_lock instead, which no
role but deid_owner may read, update or lock (no privilege is granted on it).

The API (call it inside a SECURITY DEFINER function, after the caller is authorized: a role
that may not request must not be able to hold a lock):

- ``lock_source(db, oid)``: the request's source; held until the transaction ends;
- ``lock_source_identity(db, relation)``: the base table a release counts as a release of
  (a view's requests and its table's take the same row);
- ``lock_release_name(db, name)``: a release name; held until the transaction ends.

Both are reentrant within a transaction and never released early. The order that cannot
deadlock, kept by every request: the release name's lock first (pipeline.run), then its
source's (log/overlap.control); several sources in ascending oid order.

The wait for a row another request holds is bounded by the setting ``deid.lock_wait`` (a
duration, default 30s; 0 waits without bound; the caller's smaller ``lock_timeout`` wins), then
fails with 55P03 and a hint. Under REPEATABLE READ or SERIALIZABLE, a caller whose snapshot is
older than the commit of the request that held the row last (it may not see that release)
gets 40001 and a hint: it must retry in a new transaction rather than decide on stale data.
"""
from .errors import DeidError, INVALID_PARAMETER_VALUE, SERIALIZATION_FAILURE

LOCK_NOT_AVAILABLE = "55P03"
SETTING = "deid.lock_wait"
DEFAULT_WAIT = "30s"

# the row's lock: an UPDATE (not FOR UPDATE), so that a snapshot older than the last holder's
# commit fails (40001) under REPEATABLE READ instead of deciding on what it cannot see
_TAKE = ("INSERT INTO deid.request_lock AS l (kind, key) VALUES ($1, $2)"
         " ON CONFLICT (kind, key) DO UPDATE SET taken = l.taken + 1")


def lock_source(db, oid):
    """Serialize with every other request of the source `oid` until this transaction ends."""
    _lock(db, "source", str(int(oid)), "this source")


def lock_source_identity(db, relation):
    """Serialize with every other request of the source identity `relation` (a base table's
    qualified name, log/source_identity.py: its views' requests take the same row)."""
    _lock(db, "source", "identity:" + str(relation), "this source")


def lock_release_name(db, name):
    """Serialize with every other request of release `name` until this transaction ends."""
    _lock(db, "release_name", str(name), f'release "{name}"')


def _lock(db, kind, key, what):
    try:
        with db.subtransaction():       # the bounded lock_timeout ends with the statement
            wait = _bound_wait(db)
            db.execute(_TAKE, [kind, key], ["text", "text"])
            db.execute("SELECT pg_catalog.set_config('lock_timeout', $1, true)", [wait[0]])
    except DeidError:
        raise
    except Exception as e:
        state = getattr(e, "sqlstate", None)
        if state == LOCK_NOT_AVAILABLE:
            raise DeidError(LOCK_NOT_AVAILABLE,
                            f"another request of {what} holds its lock", data_dependent=False,
                            hint=f"Another deid request of {what} is still running or sits in an "
                                 "open transaction; try again once it has ended, or wait longer "
                                 f"with SET {SETTING} = '2min' (now {wait[1]}).") from None
        if state == SERIALIZATION_FAILURE:
            raise DeidError(SERIALIZATION_FAILURE,
                            f"a concurrent request of {what} committed after this transaction's"
                            " snapshot", data_dependent=False,
                            hint="Run the request again in a new transaction: under REPEATABLE "
                                 "READ or SERIALIZABLE deid will not decide on a snapshot that "
                                 "misses a release.") from None
        raise


def _bound_wait(db):
    """Set lock_timeout to deid.lock_wait for this subtransaction (the caller's own smaller
    lock_timeout stays); (the caller's lock_timeout, the wait in effect)."""
    before = db.value("SELECT pg_catalog.current_setting('lock_timeout')")
    before_ms = int(db.value("SELECT setting FROM pg_catalog.pg_settings WHERE name = 'lock_timeout'"))
    wanted = db.value("SELECT pg_catalog.current_setting($1, true)", [SETTING]) or DEFAULT_WAIT
    try:
        with db.subtransaction():
            db.execute("SELECT pg_catalog.set_config('lock_timeout', $1, true)", [wanted])
    except Exception:
        raise DeidError(INVALID_PARAMETER_VALUE, f"{SETTING} must be a duration, not {wanted!r}",
                        hint=f"SET {SETTING} = '30s'; (0 waits without bound).",
                        data_dependent=False) from None
    now_ms = int(db.value("SELECT setting FROM pg_catalog.pg_settings WHERE name = 'lock_timeout'"))
    if before_ms and (now_ms == 0 or before_ms < now_ms):
        db.execute("SELECT pg_catalog.set_config('lock_timeout', $1, true)", [before])
        return before, before
    return before, wanted
