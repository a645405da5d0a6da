"""Where the composition rule keeps its cells between two releases of a source:
deid.composition_state, one row per source identity and kind of layer (the selections, or one
method's groupings), written in the transaction of the release that folded itself in, under
the source's lock (overlap.control). A row is read only when it covers exactly the releases
the rule must read (log/cellstate.py): anything else -- a history cleared, a release dropped
from the log, an audience that no longer meets, a release whose rule was overridden -- is
read as no row, and the rule folds the releases themselves again."""
import json

from . import cellstate


def identity_key(names, oids) -> str:
    """One text per source identity (log/source_identity.py: the base tables' names, the
    live oids): deterministic, so two requests of one source find one row."""
    return json.dumps([sorted(str(n) for n in names), sorted(int(o) for o in oids)])


def load_body(db, identity: str, kind: str, covers):
    """The stored body of exactly the releases `covers`, or None."""
    covers = sorted({int(c) for c in covers})
    rows = db.query(
        "SELECT CASE WHEN covers = $3 THEN body END AS body FROM deid.composition_state"
        " WHERE identity = $1 AND kind = $2", [identity, kind, covers],
        ["text", "text", "bigint[]"])
    return bytes(rows[0]["body"]) if rows and rows[0]["body"] is not None else None


def load(db, identity: str, kind: str, covers):
    """The stored cells of exactly the releases `covers`, or None."""
    body = load_body(db, identity, kind, covers)
    return None if body is None else cellstate.decode(covers, body)


def save(db, identity: str, kind: str, covers, body: bytes):
    db.execute(
        "INSERT INTO deid.composition_state (identity, kind, covers, body)"
        " VALUES ($1, $2, $3, $4) ON CONFLICT (identity, kind)"
        " DO UPDATE SET covers = EXCLUDED.covers, body = EXCLUDED.body",
        [identity, kind, sorted({int(c) for c in covers}), body],
        ["text", "text", "bigint[]", "bytea"])


class Found(list):
    """The earlier releases the rule reads. complete: every earlier release of the source
    identity is among them (every audience meets), so a state of all of them applies;
    pending: per kind, (the releases folded in, their encoder) with the new release, stored
    once it passes."""
    def __init__(self, db, rows, complete: bool, identity: str):
        super().__init__(rows)
        self.db, self.complete, self.identity, self.pending = db, complete, identity, {}


def crossing(req, found: Found, kind: str, releases, ids, groups, layer_of):
    """The new release crossed with the cells of `releases`: stored, or folded again from the
    releases themselves (layer_of: a release's (release_id, ids, groups, k)) when no stored
    state covers exactly them."""
    state = load(found.db, found.identity, kind, [e["release_id"] for e in releases])
    if state is None:
        state = cellstate.fold_all(layer_of(e) for e in releases)
    c = cellstate.cross(state, ids, groups, req.k, req.release_id)
    found.pending[kind] = (c.after.covers, lambda: cellstate.encode(c.after))
    return c


def remember(db, found):
    """Store the cells with the new release folded in (its transaction, under the source's
    lock); nothing when the rule was overridden (no Found)."""
    for kind, (covers, body) in getattr(found, "pending", {}).items():
        save(db, found.identity, kind, covers, body())


def fetch_rids(db, earlier):
    """Every earlier release's stored ids at once (the full crossing reads them all)."""
    rows = db.query("SELECT release_id, rids FROM deid.release_selection"
                    " WHERE release_id = ANY($1)", [[int(e["release_id"]) for e in earlier]],
                    ["bigint[]"])
    rids = {int(r["release_id"]): r["rids"] for r in rows}
    for e in earlier:
        e["rids"] = rids[int(e["release_id"])]
