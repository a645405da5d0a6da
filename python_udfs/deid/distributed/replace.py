"""options.replace on the coordinator: a distributed release re-released under its name, all or
nothing (docs/sharding.md).

A node commits its part as soon as it stores it, before the coordinator decides, so the nodes
cannot replace their old parts in place (a replacement refused on one node would leave the old
release without a part elsewhere). Instead:

    old_of(db, name, caller, replace)   begin (SECURITY DEFINER): the logged release of that
                                        name, which only options.replace and its requester or a
                                        deid_admin may replace (release.check_replace: the
                                        single-node refusals); None for a new name
    part_name(name, release_id)         the name the new parts are stored under on the nodes
                                        (a name of their own: the old parts keep theirs)
    switch(db, old)                     finish (SECURITY DEFINER, the coordinator's
                                        transaction): the old release's views and log row go,
                                        so that the new ones take the name
    shown(table, r)                     a node's relation name -> the coordinator's view name
    drop_old_parts(db, old)             after finish, as the caller (PL/Proxy): every node drops
                                        its old part (releases.node_drop: marked dropped, its
                                        selection kept). A node that fails here keeps its old
                                        part, which no coordinator view reads any more: its
                                        run is no longer logged (deid.cleanup_distributed
                                        removes it where it is still pending)
"""
import json

from ..request import release
from . import protocol

MAX_NAME = 40          # request/release.py NAME_RE


def old_of(db, name, caller, replace):
    rows = db.query("SELECT release_id, run, cluster::text AS cluster, relations,"
                    " requested_by::text AS requested_by FROM deid.distributed_release"
                    " WHERE name = $1", [name])
    if not rows:
        return None
    old = rows[0]
    release.check_replace(db, old, name, caller, replace)
    return {"release_id": old["release_id"], "run": old["run"], "cluster": old["cluster"],
            "relations": list(old["relations"])}


def part_name(name, release_id):
    suffix = f"_r{int(release_id)}"
    return name[:MAX_NAME - len(suffix)] + suffix


def shown(table, r):
    """The coordinator's name of a node's relation `table` of the run `r`."""
    part = r.get("part_name") or r["name"]
    return r["name"] + table[len(part):] if table.startswith(part) else table


def switch(db, old):
    if old is None:
        return
    release.drop_release_relations(db, old)     # its views and the reconstructions drawn from it
    db.execute("DELETE FROM deid.distributed_release WHERE release_id = $1", [old["release_id"]],
               ["bigint"])


def drop_old_parts(db, old):
    """Best effort, as the caller: a failure here leaves the new release committed."""
    if not old:
        return
    try:
        with db.subtransaction():
            protocol.call(db, "SELECT deid._dist_drop($1, $2) AS r", [old["cluster"], old["run"]])
    except Exception:       # an unreachable node: its old part stays, read by no view
        pass


def dumps(old):
    return json.dumps(old) if old else None
