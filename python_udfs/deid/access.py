"""Who may do what: deid never becomes a way around PostgreSQL's privileges.

The SQL wrappers run as the caller and pass ``current_user`` in; the
SECURITY DEFINER implementation checks that the session may act as that role
(pg_has_role(session_user, caller, 'MEMBER')), so passing another role name
gains nothing that SET ROLE would not.
"""
from .errors import DeidError, INSUFFICIENT_PRIVILEGE, FEATURE_NOT_SUPPORTED


def caller_role(db, caller):
    if caller is None or not db.value(
            "SELECT pg_catalog.pg_has_role(session_user, $1, 'MEMBER')", [caller], ["name"]):
        raise DeidError(INSUFFICIENT_PRIVILEGE, f'session may not act as role "{caller}"',
                        hint="Call the public deid functions; they pass current_user.")
    return caller


def can_select(db, caller, rel, columns):
    """True when `caller` may SELECT every one of `columns` of `rel` (table or column privilege)."""
    if db.value("SELECT pg_catalog.has_table_privilege($1, $2, 'SELECT')",
                [caller, rel.oid], ["name", "oid"]):
        return True
    return all(db.value("SELECT pg_catalog.has_column_privilege($1, $2, $3, 'SELECT')",
                        [caller, rel.oid, c], ["name", "oid", "text"]) for c in columns)


def _row_security_ok(db, caller, rel):
    if not rel.row_security:
        return True
    return bool(db.value(
        "SELECT pg_catalog.pg_has_role($1, c.relowner, 'USAGE') OR r.rolbypassrls"
        "  FROM pg_catalog.pg_class c, pg_catalog.pg_roles r"
        " WHERE c.oid = $2 AND r.rolname = $1", [caller, rel.oid], ["name", "oid"]))


def require_select(db, caller, rel, columns):
    """Measurement functions reveal facts about raw rows: the caller must be
    able to read them itself."""
    caller_role(db, caller)
    if not can_select(db, caller, rel, columns):
        raise DeidError(INSUFFICIENT_PRIVILEGE, f"permission denied for table {rel.name}",
                        hint=f'Role "{caller}" needs SELECT on {rel.display} to measure it; '
                             "analysts read releases instead.")
    if not _row_security_ok(db, caller, rel):
        raise DeidError(FEATURE_NOT_SUPPORTED,
                        f"{rel.display} has row-level security enabled",
                        hint="Only its owner or a BYPASSRLS role may use deid on it.")


def authorize_request(db, caller, rel, columns, k, l=None):
    """Release requests: SELECT on the source, or a deid.policy row for a role
    the caller belongs to (002: researchers without raw access receive only
    k-anonymous data). Returns a description of the grant used."""
    caller_role(db, caller)
    if can_select(db, caller, rel, columns) and _row_security_ok(db, caller, rel):
        return {"via": "select"}
    rows = db.query(
        "SELECT p.grantee::text AS grantee, p.min_k, p.min_l FROM deid.policy p"
        " WHERE p.relation = $2 AND pg_catalog.pg_has_role($1, p.grantee, 'MEMBER')"
        " ORDER BY p.min_k, p.min_l NULLS FIRST", [caller, rel.oid], ["name", "oid"])
    if not rows:
        raise DeidError(INSUFFICIENT_PRIVILEGE, f"permission denied for table {rel.name}",
                        hint=f'Role "{caller}" needs SELECT on {rel.display}, or a policy: '
                             f"SELECT deid.allow_requests('{caller}', '{rel.display}', min_k => ...);")
    ok = [r for r in rows if k >= r["min_k"] and (r["min_l"] is None or (l or 0) >= r["min_l"])]
    if not ok:
        p = rows[0]
        need = f"k >= {p['min_k']}" + (f" and l >= {p['min_l']}" if p["min_l"] else "")
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"request is below the policy minimum for {rel.display}",
                        detail=f"asked k = {k}, l = {l}; policy for {p['grantee']} requires {need}",
                        hint=f"Ask for {need}.")
    return {"via": "policy", "grantee": ok[0]["grantee"], "min_k": ok[0]["min_k"],
            "min_l": ok[0]["min_l"]}


def require_admin(db, caller):
    caller_role(db, caller)
    if not db.value("SELECT pg_catalog.pg_has_role($1, 'deid_admin', 'MEMBER')", [caller], ["name"]):
        raise DeidError(INSUFFICIENT_PRIVILEGE, f'role "{caller}" is not a deid administrator',
                        hint="GRANT deid_admin TO " + caller + ";")
