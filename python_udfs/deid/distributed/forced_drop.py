"""Dropping a distributed release whose part lies on a node lost for good (docs/sharding.md).

deid.drop_release(name) pings every node first and refuses, dropping nothing, when one is
down (08006): a part dropped on some nodes only would leave a release that reads fewer rows
than were logged. When a node will never come back, a deid_admin passes force:

    drop(db, name, force, caller)   SECURITY INVOKER, as the caller (PL/Proxy reaches every
                                    node as the caller): without force, the plain drop
                                    (releases.drop). With force: a deid_admin only (42501
                                    before anything is looked up); a name that is no
                                    distributed release, or every node up: the plain drop.
                                    Else every node that answers drops its part
                                    (deid._dist_drop_on, RUN ON one node, as the caller:
                                    releases.node_drop), then deid._dist_drop_forced
    forced_finish(db, name, caller, SECURITY DEFINER: the coordinator's views and log row, and
                  lost)             a row of deid.distributed_forced_drop naming the parts of
                                    the log row on the nodes that did not answer (who, when);
                                    for a deid_admin only

A lost node that comes back holds its part under a run the coordinator no longer logs:
deid.cleanup_distributed() removes it there if it was still pending (never read).
"""
import json

from ..errors import DeidError, INSUFFICIENT_PRIVILEGE, UNDEFINED_OBJECT
from ..request import access, release
from . import protocol, releases

ADMIN_HINT = ("Only a deid_admin may force a drop; without force, the requester or a deid_admin "
              "drops a release once every node is up.")


def drop(db, name, force, caller):
    if not force:
        return releases.drop(db, name, caller)
    access.caller_role(db, caller)
    if not access.is_admin(db, caller):
        raise DeidError(INSUFFICIENT_PRIVILEGE, "permission denied to force a drop",
                        hint=ADMIN_HINT)
    d = releases._lookup(db, name, caller, "drop")
    up = protocol.reached(db, d["cluster"], d["partitions"]) if d is not None else None
    if d is None or all(up.values()):
        return releases.drop(db, name, caller)
    names = set()
    for part, ok in up.items():
        if ok:
            for text in protocol.call(db, "SELECT deid._dist_drop_on($1, $2, $3) AS r",
                                      [d["cluster"], part, d["run"]], ["text", "int", "text"]):
                names.add(text.split(" ", 1)[0])
    lost = sorted({p["node"] for p in d["parts"]} - names)
    return db.value("SELECT deid._dist_drop_forced($1, $2, $3)", [name, caller, json.dumps(lost)],
                    ["text", "name", "text"])


# -- SECURITY DEFINER on the coordinator ------------------------------------------------------

def forced_finish(db, name, caller, lost):
    """deid._dist_drop_forced: the views and the log row of `name`, and the log of its parts on
    the nodes `lost` (JSON list of node names; only the log row's own parts are recorded)."""
    access.caller_role(db, caller)
    if not access.is_admin(db, caller):
        raise DeidError(INSUFFICIENT_PRIVILEGE, "permission denied to force a drop",
                        hint=ADMIN_HINT)
    rows = db.query("SELECT release_id, run, cluster::text AS cluster, relations,"
                    " requested_by::text AS requested_by, parts::text AS parts"
                    " FROM deid.distributed_release WHERE name = $1", [name])
    if not rows:
        raise DeidError(UNDEFINED_OBJECT, f'release "{name[:60]}" does not exist',
                        hint="SELECT name FROM deid.distributed_release; lists them (deid_admin).")
    r = rows[0]
    named = set(json.loads(lost or "[]"))
    parts = [p for p in json.loads(r["parts"]) if p.get("node") in named]
    release.drop_release_relations(db, r)       # its views and the reconstructions drawn from it
    db.execute("DELETE FROM deid.distributed_release WHERE release_id = $1", [r["release_id"]],
               ["bigint"])
    db.execute("INSERT INTO deid.distributed_forced_drop (release_id, name, run, cluster,"
               " requested_by, lost, dropped_by) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7)",
               [r["release_id"], name, r["run"], r["cluster"], r["requested_by"],
                json.dumps([{"node": p["node"], "release_id": p.get("release_id")}
                            for p in parts]), caller],
               ["bigint", "text", "text", "name", "name", "text", "name"])
    return (f"release {name} dropped; {len(parts)} part(s) on unreachable nodes logged in"
            " deid.distributed_forced_drop")
