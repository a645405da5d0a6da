"""deid.drop_release and deid.verify_release on the coordinator, for a distributed release
too (docs/sharding.md). Their public wrappers call drop() and verify() here (SECURITY
INVOKER, as the caller: PL/Proxy reaches every node as the caller); a name that is not a
distributed release goes to the single-node definers unchanged.

    lookup        SECURITY DEFINER (deid._dist_release_of): the distributed release of a name
                  and the caller's right, checked as on one node (drop: its requester or a
                  deid_admin, else the single-node refusal; verify: a deid_admin, checked
                  before the name, as on one node); no row: not a distributed release
    drop          ping every node (a node down: 08006 before anything goes), then every
                  node drops its part (deid._dist_drop, RUN ON ALL, as the caller:
                  node_drop, its requester or a deid_admin there), then the coordinator's views
                  and log row (deid._dist_drop_finish, SECURITY DEFINER). A node's drop commits
                  on the node: if a later node or the coordinator fails, the release stays
                  logged with fewer parts (its views then fail) and drop_release again
                  finishes it (a node without the part answers "none")
    verify        every node's verifier on its stored part (deid._dist_verify, RUN ON ALL:
                  node_verify, a deid_admin there; releases/reverify.py), its digests compared
                  with those the coordinator logged, and for generalization k over every
                  node's stored classes (verify/shared/merged_classes.py); one report
"""
import json

from ..errors import DeidError, INSUFFICIENT_PRIVILEGE, UNDEFINED_OBJECT, VERIFICATION_FAILED
from ..methods import registry
from ..request import access, release
from ..releases import reverify
from ..verify.shared import table_digest
from . import catalog, node, protocol


# -- the coordinator, as the caller -----------------------------------------------------------

def drop(db, name, caller):
    d = _lookup(db, name, caller, "drop")
    if d is None:
        return db.value("SELECT deid._drop_release($1, $2)", [name, caller], ["text", "name"])
    # a node down: nothing dropped; the hint names a deid_admin's force (forced_drop.py)
    protocol.ping_or_refuse(db, d["cluster"], d["partitions"], protocol.LOST_HINT)
    protocol.call(db, "SELECT deid._dist_drop($1, $2) AS r", [d["cluster"], d["run"]])
    return db.value("SELECT deid._dist_drop_finish($1, $2)", [name, caller], ["text", "name"])


def verify(db, name, caller):
    d = _lookup(db, name, caller, "verify")
    if d is None:
        return db.value("SELECT deid._verify_release($1, $2)::text", [name, caller],
                        ["text", "name"])
    _ping(db, d)
    parts = [json.loads(t) for t in protocol.call(
        db, "SELECT deid._dist_verify($1, $2) AS r", [d["cluster"], d["run"]])]
    logged = {(p["node"], p["release_id"]): p for p in d["parts"]}
    if len(parts) != len(logged) or any(
            logged.get((p["node"], p["release_id"]), {}).get("digests") != p["digests"]
            for p in parts):
        raise DeidError(VERIFICATION_FAILED,
                        f'a part of distributed release "{name}" differs from what was logged',
                        hint="A node's stored part changed (or a node was replaced) since the "
                             "coordinator logged the release; run deid.verify_release on the "
                             "nodes, then drop the release and request it again.")
    out = {"release": name, "method": d["method"], "verified": True,
           "parts": [{"node": p["node"], "release_id": p["release_id"], "report": p["report"]}
                     for p in sorted(parts, key=lambda p: p["node"])]}
    if _merged(d["method"]):
        from ..verify.shared.merged_classes import check_merged
        stored = [p["stored"] for p in parts]
        if any(s["sources"] != stored[0]["sources"] for s in stored):
            raise DeidError(VERIFICATION_FAILED, "the nodes' parts are not over the same sources",
                            hint="Every node must hold the source with the same column roles.")
        out["merged"] = check_merged([s["classes"] for s in stored], stored[0]["sources"],
                                     d["k"], n_rows=sum(int(p["rows"]) for p in parts))
    return json.dumps(out, sort_keys=True)


def _ping(db, d):
    for part in range(d["partitions"]):      # a node down: refused before anything is done
        protocol.call(db, "SELECT deid._dist_ping_on($1, $2) AS r", [d["cluster"], part],
                      ["text", "int"])


def _lookup(db, name, caller, action):
    text = db.value("SELECT deid._dist_release_of($1, $2, $3)", [name, caller, action],
                    ["text", "name", "text"])
    return json.loads(text) if text else None


# -- SECURITY DEFINER on the coordinator ------------------------------------------------------

def release_of(db, name, caller, action):
    """deid._dist_release_of: the distributed release `name` for `caller`'s drop or verify
    (JSON text), None where `name` is no distributed release (the single-node path decides)."""
    access.caller_role(db, caller)
    if action == "verify":
        access.require_admin(db, caller)          # first, as deid.verify_release on one node
    rows = db.query("SELECT release_id, method, cluster::text AS cluster, run, parts::text AS"
                    " parts, parameters::text AS parameters, requested_by::text AS requested_by"
                    " FROM deid.distributed_release WHERE name = $1", [name])
    if not rows:
        return None
    r = rows[0]
    if action == "drop":
        _may_drop(db, r, name, caller)
    return json.dumps({"release_id": r["release_id"], "method": r["method"],
                       "cluster": r["cluster"], "run": r["run"], "parts": json.loads(r["parts"]),
                       "k": json.loads(r["parameters"]).get("k"),
                       "partitions": catalog.partitions(db, r["cluster"])})


def _may_drop(db, r, name, caller):
    if r["requested_by"] != caller and not access.is_admin(db, caller):
        raise DeidError(INSUFFICIENT_PRIVILEGE, f'release "{name}" belongs to another role',
                        hint="Only the role that requested a release, or a deid_admin, may drop it.")


def drop_finish(db, name, caller):
    """deid._dist_drop_finish: the coordinator's views and log row of `name`, once every node
    dropped its part."""
    access.caller_role(db, caller)
    rows = db.query("SELECT release_id, relations, requested_by::text AS requested_by, run,"
                    " cluster::text AS cluster FROM deid.distributed_release WHERE name = $1",
                    [name])
    if not rows:
        raise DeidError(UNDEFINED_OBJECT, f'release "{name[:60]}" does not exist',
                        hint="SELECT name FROM deid.distributed_release; lists them (deid_admin).")
    r = rows[0]
    _may_drop(db, r, name, caller)
    release.drop_release_relations(db, r)       # its views and the reconstructions drawn from it
    db.execute("DELETE FROM deid.distributed_release WHERE release_id = $1", [r["release_id"]],
               ["bigint"])
    return f"release {name} dropped"


# -- SECURITY DEFINER on a node (through PL/Proxy, as the caller) ------------------------------

def node_drop(db, run, caller):
    """deid._dist_node_drop: this node's part of `run` dropped (its tables and views; its log
    row marked dropped, its selection kept: it was readable), for its requester or a
    deid_admin. 'dropped', or 'none' where no part of the run is here."""
    p = node._part(db, run, caller)          # another role's part: refused
    if p is None:
        return "none"
    release.drop_release_relations(db, p)
    db.execute("UPDATE deid.release SET status = 'dropped' WHERE release_id = $1"
               " AND status = 'committed'", [p["release_id"]], ["bigint"])
    db.execute("DELETE FROM deid.distributed_part WHERE run = $1", [run])
    return "dropped"


def node_verify(db, run, caller):
    """deid._dist_node_verify: the verifier's report on this node's part of `run` (what
    deid.verify_release says on this node), its digests now and, for generalization, its
    stored classes; for a deid_admin."""
    access.require_admin(db, caller)
    p = node._part(db, run, caller)
    if p is None:
        raise DeidError(UNDEFINED_OBJECT, "a node holds no part of this release",
                        hint="The part was dropped or never stored there; drop the release and "
                             "request it again.")
    report = json.loads(reverify.verify_committed(db, p["name"]))
    tables = [t.partition(".")[2] for t in p["relations"]]
    out = {"node": node._node(db), "release_id": p["release_id"], "report": report,
           "digests": table_digest.digests(db, p["release_id"], tables),
           "rows": db.value("SELECT (metrics->>'rows')::bigint FROM deid.release"
                            " WHERE release_id = $1", [p["release_id"]], ["bigint"])}
    req = reverify.request_of(db, p["name"])
    if _merged(req.method):
        from ..verify import generalization as vg
        table = p["relations"][0].split(".", 1)[1].strip('"')
        out["stored"] = {"sources": vg.sources(req), "classes": vg.stored_part(db, req, table)}
    return json.dumps(out, sort_keys=True)


def _merged(method):
    """A method whose parts were released at levels chosen over the nodes' merged class
    tables (its DISTRIBUTION "global_merge"): k holds over all parts, checked on the classes
    every part stored."""
    plugin = registry.plugin_of(method)
    return plugin is not None and plugin.DISTRIBUTION == "global_merge"
