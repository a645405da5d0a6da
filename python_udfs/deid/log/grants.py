"""deid_admin's changes to who reads a release and to a source's history.

- ``grant_release(release, role)``: the release's views become readable by `role` (a real
  GRANT SELECT), and `role` joins its audience (deid.release_audience, log/audience.py). The
  release is first checked again by the composition rule against every release of its source
  that the widened audience reads (log/composition.py): a grant that would let some role read
  releases that single out fewer than k rows together is refused uniformly, and nothing
  changes;
- ``revoke_release(release, role)``: REVOKE SELECT; the role stays in the audience for the
  rule (it may have kept what it read), marked revoked (who, when);
- ``clear_source_history(source)``: releases of `source` up to now no longer bear on later
  ones (a re-created table that holds other patients); logged in deid.composition_reset.

Only a deid_admin (or a superuser) may: who reads patient releases is the data steward's
decision, not the requester's. Each runs inside a SECURITY DEFINER function, after
access.caller_role.
"""
import json
from dataclasses import dataclass, field
from types import SimpleNamespace

from .. import locks
from ..errors import (DeidError, INSUFFICIENT_PRIVILEGE, INVALID_PARAMETER_VALUE,
                      PRIVACY_MODEL_UNSATISFIABLE, UNDEFINED_OBJECT)
from ..request import access
from ..request.release import committed
from ..sqltext import quote_ident
from . import audience, composition, overlap, source_identity

GRANT_REFUSAL = ("the release, read together with the releases of its source that this role "
                 "reads, would single out too few rows")
GRANT_HINT = ("Grant it to a role whose members read no other release of the same source, or "
              "to the audience of those releases' requests; deid does not say which release.")


@dataclass
class _Stored:
    """A committed release, as the composition rule reads a request."""
    release_id: int
    rel: object
    method: str
    k: int
    l: int            # noqa: E741
    options: dict
    audience: frozenset
    grant: dict = field(default_factory=dict)      # no detail in a refusal


def grant_release(db, name, role, caller):
    _require(db, caller)
    r = committed(db, name)
    role = _role(db, role)
    stored = _stored(db, r, role)
    for ident in source_identity.of_release(db, stored):
        locks.lock_source_identity(db, ident.relation)
    _recheck(db, stored)
    _privilege(db, r, "GRANT SELECT ON {} TO {}", role)
    audience.record(db, r["release_id"], role, caller)
    return f"release {name} granted to {role}"


def revoke_release(db, name, role, caller):
    _require(db, caller)
    r = committed(db, name)
    role = _role(db, role)
    done = db.query("UPDATE deid.release_audience SET revoked_by = $3, revoked_at = now()"
                    " WHERE release_id = $1 AND audience = $2 AND revoked_at IS NULL"
                    " RETURNING 1", [r["release_id"], role, caller], ["bigint", "name", "name"])
    if not done and not (role == audience.DEFAULT and not _has_rows(db, r["release_id"])):
        raise DeidError(UNDEFINED_OBJECT, f'release "{name}" is not granted to {role}',
                        hint="SELECT audience, revoked_at FROM deid.release_audience"
                             " WHERE release_id = ...; lists its audience (the requester"
                             " always keeps it).")
    if not done:                      # a release logged before audiences: deid_reader's
        audience.record(db, r["release_id"], role, caller)
        db.execute("UPDATE deid.release_audience SET revoked_by = $3, revoked_at = now()"
                   " WHERE release_id = $1 AND audience = $2", [r["release_id"], role, caller],
                   ["bigint", "name", "name"])
    _privilege(db, r, "REVOKE SELECT ON {} FROM {}", role)
    return f"release {name} revoked from {role} (it stays in the audience the rule compares)"


def clear_source_history(db, source, caller):
    _require(db, caller)
    name, oid = _source_name(db, source)
    db.execute("INSERT INTO deid.composition_reset (source, after_release, relation)"
               " SELECT $1, coalesce(max(release_id), 0), $2 FROM deid.release",
               [oid, name], ["oid", "text"])
    return f"history of {name} cleared: its earlier releases no longer bear on later ones"


# ------------------------------------------------------------------ helpers
def _require(db, caller):
    access.caller_role(db, caller)
    if not access.is_admin(db, caller):
        raise DeidError(INSUFFICIENT_PRIVILEGE, "only a deid administrator may change who reads "
                        "a release or clear a source's history",
                        hint="Ask a deid_admin; a requester chooses the audience of a new release "
                             "with options => '{\"audience\": \"role\"}'.")


def _role(db, role):
    if role is None or not str(role).strip():
        raise DeidError(INVALID_PARAMETER_VALUE, "role must be named",
                        hint="Name an existing role, or PUBLIC.")
    if str(role).lower() == audience.PUBLIC:
        return audience.PUBLIC
    if not db.value("SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = $1", [role],
                    ["name"]):
        raise DeidError(UNDEFINED_OBJECT, f'role "{role}" does not exist',
                        hint="Name an existing role, or PUBLIC.")
    return str(role)


def _stored(db, r, role):
    p = json.loads(r["parameters"])
    widened = audience.of_stored(db, [r["release_id"]])[r["release_id"]] | {role}
    return _Stored(r["release_id"], SimpleNamespace(oid=r["source"]), r["method"],
                   int(p.get("k") or 0), int(p.get("l") or 0), p.get("options") or {}, widened)


def _recheck(db, stored):
    row = db.query("SELECT s.row_id, s.rids FROM deid.release_selection s WHERE release_id = $1",
                   [stored.release_id], ["bigint"])
    if not row:                       # logged before selections were: nothing to compare
        return
    idents = source_identity.of_release(db, stored)
    row_id = idents[0].row_id if idents else row[0]["row_id"]
    ids = overlap.unpack(row[0]["rids"])
    try:
        earlier = composition.check_selections(db, stored, row_id, ids)
        composition.check_groupings(db, stored, ids, earlier)
    except DeidError as e:
        if e.sqlstate != PRIVACY_MODEL_UNSATISFIABLE:
            raise
        raise DeidError(e.sqlstate, GRANT_REFUSAL, hint=GRANT_HINT, data_dependent=True) from None
    audience.clear_apart(db, stored.release_id, [e["release_id"] for e in earlier])


def _has_rows(db, release_id):
    return bool(db.value("SELECT count(*) FROM deid.release_audience WHERE release_id = $1",
                         [release_id], ["bigint"]))


def _privilege(db, r, statement, role):
    grantee = "PUBLIC" if role == audience.PUBLIC else quote_ident(role)
    views = list(r["relations"] or [])
    extra = db.value("SELECT metrics->>'estimate_view' FROM deid.release WHERE release_id = $1",
                     [r["release_id"]], ["bigint"])
    for view in views + ([extra] if extra else []):
        schema, table = view.split(".", 1)
        db.execute(statement.format(f"{quote_ident(schema)}.{quote_ident(table)}", grantee))


def _source_name(db, source):
    """(format('%I.%I') name, live oid or None) of a source that may have been dropped."""
    parts = db.value("SELECT pg_catalog.parse_ident($1)", [source], ["text"]) if source else None
    oid = db.value("SELECT pg_catalog.to_regclass($1)::oid", [source], ["text"]) if source else None
    if oid is not None:
        return db.value("SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)"
                        " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
                        " ON n.oid = c.relnamespace WHERE c.oid = $1", [oid], ["oid"]), oid
    if not parts or len(parts) != 2:
        raise DeidError(INVALID_PARAMETER_VALUE, "name the source as schema.table",
                        hint="A dropped source is named with its schema, e.g. 'registry.patients'.")
    return db.value("SELECT pg_catalog.format('%I.%I', $1, $2)", parts, ["text", "text"]), None
