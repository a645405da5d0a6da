"""A node's read of its rows kept from a distributed generalization's class step for the store
step of the same run (distributed/generalization_sql.py), so that each node reads its source
once per request, not twice, and both steps see one snapshot.

PL/Proxy reuses one connection per node within a coordinator session, so both steps of a run
normally reach the same node backend; where they do not (a new connection), the store step
reads the source again, as it always did (the coordinator's check then compares the rows with
those the classes counted).

What may reuse a kept read: the store step of the SAME run, by the SAME role (current_user and
session_user as when it was read), for the SAME read (the relation, the columns and their
types, the row id, the rendered selection). Anything else finds nothing and reads again. One
read is kept per backend at most: the next class step replaces it, the store step takes it
(taken once), and an abort of a run drops it. The store step still begins the request (the
caller's rights, policies and code checks, as of now); only the read is skipped. Only deid's
own Python (the steps above) puts rows here, as in pending.py's store.
"""

_KEPT = {}         # at most one: "read" -> (key, frame)


def key(run, spec, roles):
    """What a kept read is good for: the run, the reading roles, and the read itself."""
    rel = spec.rel
    return (run, tuple(roles), rel.oid, tuple(spec.names), spec.rid, repr(spec.selection),
            bool(getattr(spec, "by_rid", True)),
            tuple((n, repr(getattr(rel.columns.get(n), "type", None))) for n in spec.names))


def keep(k, frame):
    _KEPT.clear()
    _KEPT["read"] = (k, frame)


def take(k):
    """The frame kept under exactly `k`, or None; whatever was kept is gone afterwards."""
    kept = _KEPT.pop("read", None)
    _KEPT.clear()
    return kept[1] if kept is not None and kept[0] == k else None


def drop():
    _KEPT.clear()
