"""deid.reconstruct on the coordinator (003 Fig. 5): a reconstruction of a distributed
disassociation release is every node's reconstruction of its own part (records are whole on
one node, so a D' of the union is the union of the nodes' D's), read through one view on the
coordinator, each record with its node (record ids are per node, as group ids are).

    reconstruct   SECURITY INVOKER, as the caller (PL/Proxy reaches every node as the caller):
                  the arguments' refusals; deid._dist_reconstruct_of; a name that is no
                  distributed release goes to the single-node deid._reconstruct unchanged.
                  Then every node is pinged (a node down: 08006, nothing drawn), every node
                  checks (step "check": its own refusals, the caller's right there), every
                  node draws ("draw"), and the coordinator's view and log row are made
                  (deid._dist_reconstruct_finish). A failure after a node drew removes what
                  the nodes drew ("undo", node by node), so nothing is left half-made.
    reconstruct_of  SECURITY DEFINER: the logged distributed release of a name, checked for
                  the caller as on one node (its requester or a deid_admin, else 42501) and
                  the target free here; its cluster, run and proof (which its requester and a
                  deid_admin may have anyway: deid._dist_proof hands it to a release's readers)
    finish        SECURITY DEFINER: the view release.<target> over deid._dist_read and the
                  coordinator's deid.reconstruction row; dropped with the release
    node_step     SECURITY DEFINER on a node (through PL/Proxy, as the caller): only for a
                  part with the run's proof (a part the coordinator never logged has none: no
                  release), and only as deid.reconstruct on this node allows (its requester or
                  a deid_admin of this node). The part is confirmed (the proof shows it is
                  logged), reconstructed by releases/reconstruct.py, and its view withheld on
                  the node as the part's own are: read through the coordinator
"""
import hmac
import json

from ..errors import DeidError, INSUFFICIENT_PRIVILEGE, INVALID_PARAMETER_VALUE
from ..releases import reconstruct as single
from ..request import access, release
from ..sqltext import qualified, quote_ident
from . import catalog, node, protocol

COLUMNS = "record_id bigint, codes text[], node text"
STEPS = ("check", "draw", "undo")


# -- the coordinator, as the caller -----------------------------------------------------------

def reconstruct(db, name, target, seed, colocate, caller):
    access.caller_role(db, caller)
    single.check_arguments(name, target, seed, colocate)
    text = db.value("SELECT deid._dist_reconstruct_of($1, $2, $3)", [name, target, caller],
                    ["text", "text", "name"])
    if text is None:
        return db.value("SELECT deid._reconstruct($1, $2, $3, $4, $5)",
                        [name, target, seed, colocate, caller],
                        ["text", "text", "int", "float8", "name"])
    d = json.loads(text)
    protocol.ping_or_refuse(db, d["cluster"], d["partitions"],
                            "Start the node and reconstruct again; nothing was drawn.")
    _on_all(db, d, target, seed, colocate, "check")
    try:
        with db.subtransaction():
            drawn = [json.loads(t) for t in _on_all(db, d, target, seed, colocate, "draw")]
            db.value("SELECT deid._dist_reconstruct_finish($1, $2, $3, $4, $5)",
                     [name, target, seed, colocate, caller],
                     ["text", "text", "int", "float8", "name"])
    except Exception:
        _undo(db, d, target)
        raise
    return sum(int(x["rows"]) for x in drawn)


def _on_all(db, d, target, seed, colocate, step):
    return protocol.call(db, "SELECT deid._dist_reconstruct($1, $2, $3, $4, $5, $6, $7) AS r",
                         [d["cluster"], d["run"], d["proof"], target, seed, colocate, step],
                         ["text", "text", "text", "text", "int", "float8", "text"])


def _undo(db, d, target):
    """Every node that answers removes what it drew of this reconstruction."""
    for part in range(d["partitions"]):
        try:
            with db.subtransaction():
                protocol.call(db, "SELECT deid._dist_reconstruct_on($1, $2, $3, $4, $5) AS r",
                              [d["cluster"], part, d["run"], d["proof"], target],
                              ["text", "int", "text", "text", "text"])
        except Exception:          # an unreachable node keeps its table, read by no view
            db.notice(f"node {part} did not remove its part of reconstruction {target};"
                      " no view reads it (drop it on that node)")


# -- SECURITY DEFINER on the coordinator ------------------------------------------------------

def _logged(db, name, target, caller):
    """The distributed release `name` the caller may reconstruct into `target`, or None."""
    access.caller_role(db, caller)
    rows = db.query("SELECT release_id, method, cluster::text AS cluster, run,"
                    " requested_by::text AS requested_by,"
                    " parameters->'options'->>'model' AS model, deid._dist_keyed(run) AS proof"
                    " FROM deid.distributed_release WHERE name = $1", [name])
    if not rows:
        return None
    r = rows[0]
    if not single.reconstructable(r["method"], r["model"]):
        raise single.no_release()
    single.check_owner(r["requested_by"], caller, access.is_admin(db, caller))
    single.check_target(db, target)
    if r["proof"] is None:
        raise protocol.no_key()
    return r


def reconstruct_of(db, name, target, caller):
    r = _logged(db, name, target, caller)
    if r is None:
        return None
    return json.dumps({"cluster": r["cluster"], "run": r["run"], "proof": r["proof"],
                       "partitions": catalog.partitions(db, r["cluster"])})


def finish(db, name, target, seed, colocate, caller):
    r = _logged(db, name, target, caller)
    if r is None:
        raise single.no_release()
    view = qualified(release.VIEW_SCHEMA, target)
    db.execute(f"CREATE VIEW {view} AS SELECT * FROM deid._dist_read({int(r['release_id'])},"
               f" {db.quote_literal(target)}, {db.quote_literal(COLUMNS)}) AS t({COLUMNS})")
    db.execute(f"GRANT SELECT ON {view} TO deid_reader, {quote_ident(caller)}")
    db.execute(f"COMMENT ON VIEW {view} IS " + db.quote_literal(
        f"deid reconstruction (003 Fig. 5, seed {int(seed)}, colocate {float(colocate)}) of "
        f"distributed release {name}, every node's part"))
    db.execute("INSERT INTO deid.reconstruction (release_id, relation, seed, requested_by,"
               " colocate) VALUES ($1, $2, $3, $4, $5)",
               [r["release_id"], f"{release.VIEW_SCHEMA}.{target}", int(seed), caller,
                float(colocate)], ["bigint", "text", "int", "name", "float8"])
    return "reconstructed"


# -- SECURITY DEFINER on a node (through PL/Proxy, as the caller) ------------------------------

def node_step(db, run, proof, target, seed, colocate, step, caller):
    access.caller_role(db, caller)
    if step not in STEPS:
        raise DeidError(INVALID_PARAMETER_VALUE, "unknown reconstruction step",
                        hint="Call deid.reconstruct(...) on the coordinator.")
    p = _proved_part(db, run, proof)
    single.check_owner(p["requested_by"], caller, access.is_admin(db, caller))
    if step == "undo":
        return _node_undo(db, p, target, caller)
    if p["status"] == "pending":       # the proof shows the coordinator logged it
        db.execute("UPDATE deid.distributed_part SET status = 'committed' WHERE run = $1", [run])
    if step == "check":
        single.checked(db, p["name"], target, seed, caller, colocate)
        return json.dumps({"node": node._node(db)})
    n = single.reconstruct(db, p["name"], target, seed, caller, colocate)
    db.execute(f"REVOKE ALL ON {qualified(release.VIEW_SCHEMA, target)}"
               f" FROM deid_reader, {quote_ident(caller)}")
    return json.dumps({"node": node._node(db), "rows": int(n)})


def _proved_part(db, run, proof):
    """This node's part of `run`, which the coordinator logged (the run's proof)."""
    rows = db.query("SELECT p.release_id, p.status, r.name, r.requested_by::text AS requested_by,"
                    " deid._dist_keyed(p.run) AS keyed"
                    " FROM deid.distributed_part p JOIN deid.release r USING (release_id)"
                    " WHERE p.run = $1 AND r.status = 'committed'", [run])
    if not rows or proof is None or rows[0]["keyed"] is None or \
            not hmac.compare_digest(str(rows[0]["keyed"]), str(proof)):
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no committed distributed release has this proof",
                        hint="Call deid.reconstruct(...) on the coordinator.")
    return rows[0]


def _node_undo(db, p, target, caller):
    """The reconstruction `target` of this part, if the caller drew it: dropped."""
    relation = f"{release.VIEW_SCHEMA}.{target}"
    rows = db.query("SELECT requested_by::text AS requested_by FROM deid.reconstruction"
                    " WHERE release_id = $1 AND relation = $2", [p["release_id"], relation],
                    ["bigint", "text"])
    if not rows:
        return "none"
    single.check_owner(rows[0]["requested_by"], caller, access.is_admin(db, caller))
    release.drop_relations(db, [relation])
    db.execute("DELETE FROM deid.reconstruction WHERE release_id = $1 AND relation = $2",
               [p["release_id"], relation], ["bigint", "text"])
    return "removed"
