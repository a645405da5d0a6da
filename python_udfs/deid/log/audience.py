"""Who may read a release, and which releases are therefore read together.

A release is readable by its audience -- deid_reader by default, or the role of
options.audience -- and by its requester. The composition rule (log/composition.py) compares
a release only with the earlier releases of its source that some role could read together
with it: releases whose audiences *meet*, i.e. some role is a member (directly or through
other roles, pg_has_role MEMBER) of an audience role of each. PUBLIC meets every role.
Superusers read everything and are left out (they need no release). The memberships are
those of the moment of the check: a later GRANT of one audience role to a member of another
joins the two audiences without deid seeing it (docs/security.md).

An audience only grows. deid.grant_release adds a role (re-checked against the releases of
the source that the new role's members read: refused uniformly if it breaks the rule);
deid.revoke_release takes the privilege away, but the role stays in the release's audience
for the rule -- what a reader read before the revoke is beyond recall. Both are deid_admin's
(deid.release_audience is written by nothing else); the log is that table.
"""
from typing import FrozenSet, Iterable

from ..errors import DeidError, INSUFFICIENT_PRIVILEGE
from ..sqltext import quote_ident

DEFAULT = "deid_reader"
PUBLIC = "public"

_MEMBERS = (
    "SELECT r.rolname::text AS role FROM pg_catalog.pg_roles r WHERE NOT r.rolsuper AND ("
    " $1 OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.rolname = ANY($2)"
    " AND pg_catalog.pg_has_role(r.oid, a.oid, 'MEMBER')))")


def initial(req) -> str:
    """The role a new release is granted to besides its requester."""
    role = req.options.get("audience") or DEFAULT
    return PUBLIC if role.lower() == PUBLIC else role


def initial_grantee(db, req) -> str:
    """initial(req) as a GRANT's grantee, once the requester may address it: deid_reader, a
    role the requester is a member of, or (a deid_admin's request) any role or PUBLIC. A
    requester can hand its release to a role it acts as anyway; not to others."""
    role = initial(req)
    admin = bool(db.value("SELECT pg_catalog.pg_has_role($1, 'deid_admin', 'MEMBER')",
                          [req.caller], ["name"]))
    if role == PUBLIC and admin:
        return "PUBLIC"
    if role != DEFAULT and not db.value(
            "SELECT $3 OR pg_catalog.pg_has_role($1, r.oid, 'MEMBER')"
            " FROM pg_catalog.pg_roles r WHERE r.rolname = $2", [req.caller, role, admin],
            ["name", "name", "bool"]):
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        "options.audience must be deid_reader or a role you are a member of",
                        hint="Name a role you belong to; a deid_admin widens the audience later "
                             "with deid.grant_release(release, role).", data_dependent=False)
    return quote_ident(role)


def of_request(req) -> FrozenSet[str]:
    """The audience of a release being requested (or being widened: `req.audience`)."""
    given = getattr(req, "audience", None)
    if given is not None:
        return frozenset(given)
    return frozenset((initial(req), req.caller))


def of_stored(db, release_ids: Iterable[int]) -> dict:
    """release id -> its audience (every role ever granted, and the requester); a release
    logged before audiences were is deid_reader's."""
    ids = [int(i) for i in release_ids]
    out = {i: set() for i in ids}
    for r in db.query(
            "SELECT r.release_id, r.requested_by::text AS requester, a.audience::text AS audience"
            " FROM deid.release r LEFT JOIN deid.release_audience a USING (release_id)"
            " WHERE r.release_id = ANY($1)", [ids], ["bigint[]"]):
        out[r["release_id"]].add(r["requester"])
        out[r["release_id"]].add(r["audience"] or DEFAULT)
    return {i: frozenset(a) for i, a in out.items()}


def members(db, audience: FrozenSet[str], cache: dict) -> FrozenSet[str]:
    """Every role (not a superuser) that is, or is a member of, a role of `audience`."""
    if audience not in cache:
        rows = db.query(_MEMBERS, [PUBLIC in audience, sorted(audience)], ["bool", "name[]"])
        cache[audience] = frozenset(r["role"] for r in rows)
    return cache[audience]


def meeting(db, req, earlier: list) -> list:
    """The releases of `earlier` (rows with release_id) whose audiences meet the request's."""
    if not earlier:
        return earlier
    cache = {}
    mine = members(db, of_request(req), cache)
    theirs = of_stored(db, [e["release_id"] for e in earlier])
    return [e for e in earlier if mine & members(db, theirs[e["release_id"]], cache)]


def record(db, release_id: int, role: str, by: str):
    """`role` reads the release from now on (granted again after a revoke: no longer revoked)."""
    db.execute("INSERT INTO deid.release_audience AS a (release_id, audience, granted_by)"
               " VALUES ($1, $2, $3) ON CONFLICT (release_id, audience) DO UPDATE SET"
               " granted_by = $3, granted_at = now(), revoked_by = NULL, revoked_at = NULL",
               [release_id, role, by], ["bigint", "name", "name"])


def record_apart(db, release_id: int, apart: list):
    """The earlier releases of its source that release `release_id` was not compared with
    (their audiences shared no role). Its views read only in a session none of whose roles
    reads one of them (deid._release_readable): a role membership granted later, outside
    deid, would otherwise join the two unchecked."""
    if apart:
        db.execute("INSERT INTO deid.release_apart (release_id, apart_from)"
                   " SELECT $1, a FROM pg_catalog.unnest($2::bigint[]) a ON CONFLICT DO NOTHING",
                   [release_id, apart], ["bigint", "bigint[]"])


def clear_apart(db, release_id: int, checked: list):
    """`release_id` was just checked together with the releases `checked` (a grant's
    re-check): no longer apart from them, either way."""
    if checked:
        db.execute("DELETE FROM deid.release_apart WHERE (release_id = $1 AND apart_from ="
                   " ANY($2)) OR (apart_from = $1 AND release_id = ANY($2))",
                   [release_id, checked], ["bigint", "bigint[]"])
