"""deid.verify_release(name): run a committed release's verifier again on what is stored now
(after a restore, an upgrade, or to audit), as deid_owner, for a deid_admin.

A request's verifier (registry.Method.verifier) checks the stored release against the request
and the snapshot it read. Afterwards the snapshot is gone, so the request is rebuilt from the
log row (k, l, columns, options, and the column roles the request used -- logged since the
catalog follows DDL; older rows fall back to the source's current roles) and the snapshot's
row ids from the stored RID sets of the first sensitive attribute (001 Theorem 3), checked
against the logged row count. First every table the release stored, and its rows in deid's
artefact catalogs, are compared with the digests its log row recorded when it committed
(verify/table_digest.py): a changed, moved, added or removed row or a changed column of any of
them is DE002. Then the verifier runs unchanged (for anatomy it re-derives the QIT's groups and
the count tables from the stored RID sets: verify/count_tables.py); a failure is its own DE002.
Nothing a caller controls is read: only deid's catalog and deid_release's own tables.
"""
import json
from dataclasses import dataclass, field

import numpy as np

from ..request import access, release
from ..methods import registry
from ..errors import DeidError, VERIFICATION_FAILED
from ..verify.shared import table_digest
from ..verify.anatomy import read_rid_sets


@dataclass
class _Column:
    role: str
    source: str = None


@dataclass
class _Relation:
    display: str
    columns: dict = field(default_factory=dict)


@dataclass
class _Request:
    rel: _Relation
    columns: list
    k: int
    l: int
    options: dict
    release_id: int
    name: str
    grant: dict = field(default_factory=dict)     # the logged authorized_via (how it was allowed)
    part: dict = None       # a distributed part checked over all parts (distributed/generalization.py)
    method: str = None


@dataclass
class _Frame:
    rid: np.ndarray
    stored_only: bool = True     # verifiers check only what is stored (no in-memory snapshot)

    @property
    def n(self):
        return len(self.rid)


def verify_release(db, name, caller):
    access.require_admin(db, caller)
    return verify_committed(db, name)


def verify_committed(db, name):
    """verify_release without the caller's check (a distributed part's check on its node,
    distributed/node.py, by its requester): the report as JSON text; DE002 on a fault."""
    r = release.committed(db, name)
    req = _request(db, r, name)
    tables = [t.split(".", 1)[1].strip('"') for t in r["relations"]]
    missing = [t for t in tables if not db.value(
        "SELECT 1 FROM pg_catalog.pg_class WHERE relnamespace = 'deid_release'::regnamespace"
        " AND relname = $1", [t], ["name"])]
    if missing:
        raise DeidError(VERIFICATION_FAILED, f'release "{name}" lacks its table {missing[0]}',
                        hint="Restore the whole database (pg_dump/pg_restore keep deid_release).")
    # first what was stored against its digests (a table changed in any way is named as
    # such, before a re-derivation reads it), then the re-derivation
    digests, warnings = _digests(db, r["release_id"], tables)
    frame = _Frame(_snapshot_rids(db, req, tables, r["n"]))
    report = registry.method(r["method"]).verifier.verify(db, req, frame, tables)
    return json.dumps({"release": name, "method": r["method"], "verified": True,
                       "report": report, "digests": digests, "warnings": warnings},
                      sort_keys=True)


def request_of(db, name):
    """The request of a committed release, rebuilt from its log row."""
    return _request(db, release.committed(db, name), name)


def _request(db, r, name):
    params = json.loads(r["parameters"])
    return _Request(_Relation(r["source_name"], _roles(db, params, r["source"])),
                    list(params.get("columns") or []), params["k"], params.get("l"),
                    params.get("options") or {}, r["release_id"], name,
                    params.get("authorized_via") or {}, params.get("part"), r["method"])


def _digests(db, release_id, tables):
    """Every stored table against the digest its log row recorded (verify/table_digest.py).

    A release logged before digests were recorded (deid 1.1.0) has none: it is re-verified on
    what the verifier re-derives from the stored tables alone, and the report says so in a
    warning rather than failing. A failure would condemn every such release for what it lacks,
    not for anything found wrong, and none could ever pass (the log is append-only, and adopting
    today's digests would bless whatever is stored now); the log row itself is append-only, so
    only a role that may rewrite deid's catalog (deid's owner, a superuser) can remove a
    release's digests -- and such a role could as well record new ones."""
    recorded = table_digest.recorded_digests(db, release_id)
    if recorded is None:
        return ({"recorded": False},
                ["no digest recorded: this release was logged before deid recorded digests of "
                 "its tables; only the checks re-derived from the stored tables were made"])
    return table_digest.check(db, release_id, tables, recorded), []


def _roles(db, params, source):
    logged = params.get("roles")
    if logged:
        return {c: _Column(v.get("role"), v.get("source")) for c, v in logged.items()}
    out = {}
    if source is not None:
        for row in db.query("SELECT column_name::text AS c, role, source FROM deid.column_role"
                            " WHERE relation = $1", [source], ["oid"]):
            out[row["c"]] = _Column(row["role"], row["source"])
    for c in params.get("columns") or []:
        if c not in out:
            raise DeidError(VERIFICATION_FAILED, f'the roles of the release\'s columns are unknown',
                            hint="This release predates logged roles and its source lost them; "
                                 "classify the source's columns again to verify it.")
    return out


def _snapshot_rids(db, req, tables, logged_rows):
    """The row ids of the snapshot: those the first sensitive attribute's RID sets cover (a
    partition of the snapshot, 001 Def. 1), or, without RID sets, one per stored row."""
    sas = [c for c in req.columns if req.rel.columns[c].role == "sensitive"]
    if sas and db.value("SELECT 1 FROM deid.rid_set WHERE release_id = $1 LIMIT 1",
                        [req.release_id], ["bigint"]):
        _, attrs, _, counts, flat = read_rid_sets(db, req.release_id)
        rids = np.unique(flat[np.repeat(attrs == sas[0], counts)])
    elif db.value("SELECT 1 FROM deid.cluster_member WHERE release_id = $1 LIMIT 1",
                  [req.release_id], ["bigint"]):
        # the membership: condensation's clusters' rows (004), disassociation's records (003)
        rids = np.unique(np.frombuffer(db.value(
            "SELECT string_agg(int8send(r), ''::bytea) FROM deid.cluster_member,"
            " unnest(rids) r WHERE release_id = $1", [req.release_id], ["bigint"]) or b"",
            ">i8").astype(np.int64))
    else:
        n = db.value(f"SELECT count(*) FROM deid_release.{_ident(db, tables[0])}")
        rids = np.arange(int(n), dtype=np.int64)
    if logged_rows is not None and len(rids) != int(logged_rows):
        raise DeidError(VERIFICATION_FAILED,
                        f'release "{req.name}" stores {len(rids)} rows, its log says {logged_rows}',
                        hint="The stored release differs from what was logged; restore it from a "
                             "backup or drop it.")
    return rids


def _ident(db, name):
    return db.quote_ident(name)
