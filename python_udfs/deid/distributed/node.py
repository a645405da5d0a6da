"""The node side of a distributed release (deid._dist_node_*; called through PL/Proxy, which
connects as the coordinator's caller: session_user and current_user are the caller here).

store     SECURITY INVOKER, as the caller: the single-node request itself (deid._anonymize_request:
          this node's grants, column privileges, RLS, policies and code checks, its method,
          writer, verifier and log), then hold()
hold      SECURITY DEFINER: the part stays pending -- its views readable by no one (revoked
          from deid_reader and the requester) -- under the coordinator's run
check     SECURITY DEFINER: the part's stored tables and catalog rows digested again, for the
          coordinator to compare with the digests store reported (taken once the verifier
          passed, in store's transaction)
abort     SECURITY DEFINER: a pending part removed (its tables and views, its selection) and
          its release row marked dropped; only its requester or a deid_admin
pending   SECURITY DEFINER: the pending parts the caller may remove (its own; an admin: all)
The rows of a part are read by deid._dist_node_rows (sql/40_distributed.sql), with the run's
proof: a keyed hash of the run under the warehouse's key (deid._dist_keyed), which only the
coordinator gives out, and only for a run it logged.
"""
import dataclasses
import json

from ..errors import DeidError, INSUFFICIENT_PRIVILEGE, NULL_VALUE_NOT_ALLOWED, UNDEFINED_TABLE
from ..request import access, release
from ..request.args import RequestArgs
from ..verify.shared import table_digest
from . import read_cache


def source_relid(db, source):
    """The OID of the distributed source named SOURCE on this node."""
    if source is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "relation must not be NULL",
                        hint="The coordinator names the distributed source; call deid.anonymize_request(...) there.")
    relid = db.value("SELECT pg_catalog.to_regclass($1)::oid", [source])
    if relid is None:
        raise DeidError(UNDEFINED_TABLE, f'relation "{source}" does not exist on a node',
                        hint="Every node holds the distributed source under the coordinator's name.")
    return relid


def store(db, run, coord_release, source, request):
    """As the caller: release this node's rows of the request's arguments (the coordinator's
    jsonb, request/args.py; the source is this node's relation of that name); return the
    part's report (JSON text)."""
    args = on_node(db, source, request)
    row = db.query("SELECT release_id FROM deid._anonymize_request($1)", [args.to_json()],
                   ["jsonb"])[0]
    return db.value("SELECT deid._dist_hold($1, $2, $3, current_user)",
                    [row["release_id"], run, coord_release], ["bigint", "text", "bigint"])


def on_node(db, source, request):
    """The request's arguments (jsonb text) for this node's relation named ``source``."""
    return dataclasses.replace(RequestArgs.of_json(request), relid=source_relid(db, source))


def hold(db, release_id, run, coord_release, caller):
    access.caller_role(db, caller)
    rows = db.query("SELECT name, relations, metrics::text AS metrics, parameters::text AS"
                    " parameters, requested_by::text AS requested_by FROM deid.release"
                    " WHERE release_id = $1 AND status = 'committed'", [release_id], ["bigint"])
    if not rows or rows[0]["requested_by"] != caller or db.value(
            "SELECT 1 FROM deid.distributed_part WHERE release_id = $1", [release_id], ["bigint"]):
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no release of this caller waits to be held",
                        hint="Call deid.anonymize_request(...) on the coordinator.")
    r = rows[0]
    metrics, params = json.loads(r["metrics"]), json.loads(r["parameters"])
    # an anatomy part's estimate view (log/estimate_view.py) is withheld like its relations
    for view in r["relations"] + ([metrics["estimate_view"]] if metrics.get("estimate_view") else []):
        schema, _, table = view.partition(".")
        db.execute(f"REVOKE ALL ON {db.quote_ident(schema)}.{db.quote_ident(table)}"
                   f" FROM deid_reader, {db.quote_ident(caller)}")
    db.execute("INSERT INTO deid.distributed_part (run, coordinator_release, release_id,"
               " requested_by, status) VALUES ($1, $2, $3, $4, 'pending')",
               [run, coord_release, release_id, caller], ["text", "bigint", "bigint", "name"])
    return json.dumps({
        "node": _node(db), "release_id": release_id, "relations": r["relations"],
        "rows": metrics.get("rows"), "groups": metrics.get("groups"),
        "discernibility": metrics.get("discernibility"),
        "via": (params.get("authorized_via") or {}).get("via"),
        "digests": metrics.get("digests"), "columns": _columns(db, r["relations"])})


def _node(db):
    """This node's name in the coordinator's reports: its database and port."""
    return db.value("SELECT pg_catalog.current_database() || ':' ||"
                    " pg_catalog.current_setting('port')")


def _columns(db, relations):
    """{view: its column definition list}: the coordinator's views declare it."""
    out = {}
    for view in relations:
        table = view.partition(".")[2]
        out[view] = db.value(
            "SELECT string_agg(pg_catalog.quote_ident(attname) || ' ' ||"
            " pg_catalog.format_type(atttypid, atttypmod), ', ' ORDER BY attnum)"
            " FROM pg_catalog.pg_attribute WHERE attrelid = ('deid_release.' ||"
            " pg_catalog.quote_ident($1))::regclass AND attnum > 0 AND NOT attisdropped",
            [table])
    return out


def _part(db, run, caller):
    access.caller_role(db, caller)
    rows = db.query("SELECT p.release_id, p.status, p.requested_by::text AS requested_by,"
                    " r.name, r.relations FROM deid.distributed_part p JOIN deid.release r"
                    " USING (release_id) WHERE p.run = $1", [run])
    if rows and rows[0]["requested_by"] != caller and not access.is_admin(db, caller):
        raise DeidError(INSUFFICIENT_PRIVILEGE, "this part belongs to another role",
                        hint="Only the role that requested a release, or a deid_admin, may do this.")
    return rows[0] if rows else None


def check(db, run, caller):
    """The part's digests now (JSON text), for the coordinator to compare with those store
    reported. Those were taken in store's own transaction, after the verifier passed on what
    was stored: equal digests show the part is still what its verifier passed (they cover its
    tables and its rows in deid's artefact catalogs, everything the verifier reads of a stored
    release), so the verifier is not run again here."""
    p = _part(db, run, caller)
    if p is None or p["status"] != "pending":
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no pending part of this run is on a node",
                        hint="Call deid.anonymize_request(...) on the coordinator.")
    tables = [t.partition(".")[2] for t in p["relations"]]
    digests = table_digest.digests(db, p["release_id"], tables)
    return json.dumps({"node": _node(db), "release_id": p["release_id"], "digests": digests},
                      sort_keys=True)


def abort(db, run, caller):
    """Remove a pending part: 'removed', or 'none' where this node has no pending part of the run.
    A read kept for a store step (read_cache.py) goes too."""
    read_cache.drop()
    p = _part(db, run, caller)
    if p is None or p["status"] != "pending":
        return "none"
    release.drop_release_relations(db, p)
    db.execute("UPDATE deid.release SET status = 'dropped' WHERE release_id = $1",
               [p["release_id"]], ["bigint"])
    # never readable: its rows constrain no later release (log/overlap.py)
    db.execute("DELETE FROM deid.release_selection WHERE release_id = $1", [p["release_id"]],
               ["bigint"])
    db.execute("DELETE FROM deid.release_identity WHERE release_id = $1", [p["release_id"]],
               ["bigint"])
    db.execute("DELETE FROM deid.distributed_part WHERE run = $1", [run])
    return "removed"


def pending(db, caller):
    access.caller_role(db, caller)
    rows = db.query("SELECT run, coordinator_release FROM deid.distributed_part"
                    " WHERE status = 'pending' AND (requested_by = $1 OR $2)",
                    [caller, access.is_admin(db, caller)], ["name", "bool"])
    return [json.dumps([{"run": r["run"], "coordinator_release": r["coordinator_release"]}
                        for r in rows])]
