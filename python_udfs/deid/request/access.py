"""Who may do what, and as whom deid reads (README, "Security model").

deid's SECURITY DEFINER implementations run as deid_owner (NOLOGIN, not a superuser) and never
read a caller's relation: measurements run as the caller end to end; a request's snapshot is
read as the caller (who holds SELECT) or, for a policy-based request, as the policy's grantor
through the grantor's reader (deid._grantor_reader). So PostgreSQL's privileges, column
privileges, row-level security and security_invoker views apply as defined. Whatever code a
view, cast, operator, domain or row-security policy holds runs with the reader's rights, so
before any read code_trust refuses code the reader does not own. Only an owner of a relation
grants a policy on it (and still is one at every request); only deid writes deid.policy.

The public wrappers pass ``current_user`` to the definers, which accept it only if the session
may act as that role (pg_has_role(session_user, caller, 'MEMBER')): passing another name gains
nothing SET ROLE would not.
"""
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence

from ..errors import DeidError, INSUFFICIENT_PRIVILEGE

if TYPE_CHECKING:          # the types only: nothing of these is imported when deid runs
    from ..catalog.relations import Relation
    from ..pg import Database


def caller_role(db: "Database", caller: Optional[str]) -> str:
    if caller is None or not db.value(
            "SELECT pg_catalog.pg_has_role(session_user, $1, 'MEMBER')", [caller], ["name"]):
        raise DeidError(INSUFFICIENT_PRIVILEGE, "session may not act as the role it named",
                        hint="Call the public deid functions; they pass current_user.")
    return caller


def current_user(db: "Database") -> str:
    return str(db.value("SELECT current_user::text"))


def can_select(db: "Database", role: str, rel: "Relation", columns: Sequence[str]) -> bool:
    """True when `role` may SELECT every one of `columns` of `rel` (table or column privilege)."""
    if db.value("SELECT pg_catalog.has_table_privilege($1, $2, 'SELECT')",
                [role, rel.oid], ["name", "oid"]):
        return True
    return bool(db.value(
        "SELECT bool_and(pg_catalog.has_column_privilege($1, $2, c, 'SELECT'))"
        "  FROM unnest($3::text[]) AS c", [role, rel.oid, list(columns)], ["name", "oid", "text[]"]))


def is_admin(db: "Database", role: str) -> bool:
    return bool(db.value("SELECT pg_catalog.pg_has_role($1, 'deid_admin', 'MEMBER')", [role], ["name"]))


def require_admin(db: "Database", caller: Optional[str]) -> None:
    caller = caller_role(db, caller)
    if not is_admin(db, caller):
        raise DeidError(INSUFFICIENT_PRIVILEGE, "only a deid administrator may do this",
                        hint=f'A superuser or deid_admin runs: GRANT deid_admin TO "{caller}";')


def authorize_request(db: "Database", caller: str, rel: "Relation", columns: Sequence[str], k: int,
                      l: Optional[int] = None, has_l: bool = True) -> Dict[str, Any]:  # noqa: E741
    """Release requests: SELECT on every column read (then the caller reads the snapshot), or
    a deid.policy row for a role the caller belongs to (002: researchers without raw access
    receive only k-anonymous data; the policy's grantor reads). A policy's min_l applies to a
    method that has an l (`has_l`: the plug-in's HAS_L); a method without one is judged by its
    own parameters, k. Returns the grant used."""
    caller_role(db, caller)
    if can_select(db, caller, rel, columns):
        return {"via": "select", "reader": caller}
    rows = db.query(
        "SELECT p.grantee::text AS grantee, p.min_k, p.min_l, p.granted_by::text AS granted_by,"
        "       p.per_source_k"
        "  FROM deid.policy p"
        " WHERE p.relation = $2 AND pg_catalog.pg_has_role($1, p.grantee, 'MEMBER')"
        " ORDER BY p.min_k, p.min_l NULLS FIRST", [caller, rel.oid], ["name", "oid"])
    if not rows:
        raise DeidError(INSUFFICIENT_PRIVILEGE, f"permission denied for {rel.display}",
                        hint=f"Role \"{caller}\" needs SELECT on the columns it releases, or a policy:"
                             f" SELECT deid.allow_requests('{caller}', '{rel.display}', min_k => ...);")
    def min_l(r: Dict[str, Any]) -> Optional[int]:
        return r["min_l"] if has_l else None
    def meets(r: Dict[str, Any]) -> bool:
        need = min_l(r)
        return bool(k >= r["min_k"] and (need is None or (l or 0) >= need))
    ok = [r for r in rows if meets(r)]
    if not ok:
        p = rows[0]
        need = f"k >= {p['min_k']}" + (f" and l >= {min_l(p)}" if min_l(p) else "")
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"request is below the policy minimum for {rel.display}",
                        detail=f"asked k = {k}, l = {l}; the policy of {p['grantee']} requires {need}",
                        hint=f"Ask for {need}.")
    grant = ok[0]
    reader = grantor_reader(db, grant["granted_by"], rel, columns)
    return {"via": "policy", "grantee": grant["grantee"], "min_k": grant["min_k"],
            "min_l": grant["min_l"], "per_source_k": bool(grant["per_source_k"]),
            "reader": grant["granted_by"], "reader_function": reader}


def grantor_reader(db: "Database", grantor: str, rel: "Relation", columns: Sequence[str]) -> str:
    """The grantor's reader, re-checked at request time: it still exists exactly as deid made
    it, the grantor is still an owner of the relation, and may still read every column the
    request reads."""
    fn = db.value("SELECT deid._grantor_reader($1)::text", [grantor], ["name"])
    if fn is None:
        raise DeidError(INSUFFICIENT_PRIVILEGE, f"the policy on {rel.display} has no valid reader",
                        detail=f'the reader function of role "{grantor}" is missing or was changed',
                        hint="The role that granted the policy runs deid.allow_requests(...) again.")
    if not owns(db, grantor, rel):
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"the role that granted the policy on {rel.display} is not an owner of it",
                        hint="Only an owner of the relation lends its rights to a policy: an "
                             "owner runs deid.allow_requests(...) again.")
    if not can_select(db, grantor, rel, columns):
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"the role that granted the policy on {rel.display} may no longer read it",
                        hint="A policy lets deid read the source as its grantor; the grantor needs "
                             "SELECT on every column the request reads.")
    return str(fn)


def owns(db: "Database", role: str, rel: "Relation") -> bool:
    """`role` is an owner of `rel`: a member of its owning role (a superuser is one of every)."""
    return bool(db.value("SELECT pg_catalog.pg_has_role($1, c.relowner, 'MEMBER')"
                         " FROM pg_catalog.pg_class c WHERE c.oid = $2", [role, rel.oid],
                         ["name", "oid"]))


def may_grant_policy(db: "Database", caller: str, rel: "Relation", columns: Sequence[str]) -> None:
    """allow_requests: only an owner of the relation (a member of its owning role), who may
    read every column. Being a deid_admin is not enough: a policy reads the source with its
    grantor's rights, so only a role that answers for the relation lends them."""
    if not owns(db, caller, rel) or not can_select(db, caller, rel, columns):
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"only an owner of {rel.display} who may read all of it can allow "
                        "requests on it",
                        hint="A policy reads the source with its grantor's rights: the relation's "
                             "owner (or a member of the owning role) runs deid.allow_requests.")


def translate_read_error(e: BaseException, rel: "Relation", role: str,
                         requester: bool = False) -> BaseException:
    """An error PostgreSQL raised while `role` read `rel` (privilege, RLS, a cast) as a
    DeidError with a hint; anything else unchanged. For a policy-based `requester` the message
    names nothing inside the grantor's source (PostgreSQL's names the relation it refused)."""
    state = getattr(e, "sqlstate", None)
    if state == INSUFFICIENT_PRIVILEGE:
        if requester:
            return DeidError(INSUFFICIENT_PRIVILEGE,
                             f"permission denied while reading {rel.display} as the policy's grantor",
                             hint="Ask the role that granted the policy: it needs SELECT on the "
                                  "columns read, and on whatever the relation reads.")
        return DeidError(INSUFFICIENT_PRIVILEGE, f"permission denied while reading {rel.display}",
                         hint=f'deid reads as role "{role}": it needs SELECT on the columns read '
                              "(and on whatever the relation reads, for a view).")
    return e
