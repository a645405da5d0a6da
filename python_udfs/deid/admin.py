"""Administration: column roles, hierarchies and request policies."""
import re

from .request import access, code_trust
from .catalog import relations as catalog, hierarchies, standard
from .errors import (DeidError, DEPENDENT_OBJECTS_STILL_EXIST, DUPLICATE_OBJECT,
                      INSUFFICIENT_PRIVILEGE, INVALID_PARAMETER_VALUE, UNDEFINED_OBJECT)
from .sqltext import quote_ident, quote_literal


def set_role(db, relid, column, role, hierarchy, source):
    """SECURITY INVOKER: binding a hierarchy reads the column's values as the caller (a
    deid_admin), so the caller's privileges apply and a view's code runs with its rights only;
    deid._store_role (deid_owner) then writes the catalog."""
    caller = access.current_user(db)
    access.require_admin(db, caller)
    rel = catalog.relation(db, relid, roles=catalog.ROLES_FROM_HELPER)
    col = _checked_role(rel, column, role)
    if hierarchy is not None:
        check_binding(db, rel, col, catalog.hierarchy(db, hierarchy))
    return db.value("SELECT deid._store_role($1, $2, $3, $4, $5, current_user)",
                    [relid, column, role, hierarchy, source], ["oid", "name", "text", "text", "text"])


def _checked_role(rel, column, role):
    col = rel.column(column)
    catalog.require(role, "role", "One of: " + ", ".join(catalog.ROLES) + ".")
    if role not in catalog.ROLES:
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown role {role!r}",
                        hint="One of: " + ", ".join(catalog.ROLES) + ".")
    return col


def store_role(db, relid, column, role, hierarchy, source, caller):
    access.require_admin(db, caller)
    rel = catalog.relation(db, relid)
    _checked_role(rel, column, role)
    if hierarchy is not None:
        catalog.hierarchy(db, hierarchy)
    db.execute(
        "INSERT INTO deid.column_role (relation, column_name, role, hierarchy, source, set_by)"
        " VALUES ($1, $2, $3, $4, $5, $6)"
        " ON CONFLICT (relation, column_name) DO UPDATE SET role = EXCLUDED.role,"
        "   hierarchy = EXCLUDED.hierarchy, source = EXCLUDED.source,"
        "   set_by = EXCLUDED.set_by, set_at = now()",
        [rel.oid, column, role, hierarchy, source, caller],
        ["oid", "name", "text", "text", "text", "name"])
    return f"{rel.display}.{column}: {role}" + (f" (hierarchy {hierarchy})" if hierarchy else "") \
        + (f" [source {source}]" if source else "")


def unset_role(db, relid, column, caller):
    """Remove one column's role (the column may no longer exist: its row goes all the same)."""
    access.require_admin(db, caller)
    rel = catalog.relation(db, relid)
    catalog.require(column, "column", "Name a classified column: SELECT * FROM deid.roles;")
    if not db.execute("DELETE FROM deid.column_role WHERE relation = $1 AND column_name = $2",
                      [rel.oid, column], ["oid", "name"]):
        raise DeidError(UNDEFINED_OBJECT, f'column "{column}" of {rel.display} has no role',
                        hint=f"SELECT column_name, role FROM deid.roles WHERE relation = "
                             f"'{rel.display}'::regclass; lists the classified columns.")
    return f"{rel.display}.{column}: unclassified"


def clear_roles(db, relid, caller):
    """Remove every column role of a relation (none is not an error)."""
    access.require_admin(db, caller)
    rel = catalog.relation(db, relid)
    n = db.execute("DELETE FROM deid.column_role WHERE relation = $1", [rel.oid], ["oid"])
    return f"{rel.display}: {n} column role{'' if n == 1 else 's'} removed"


def check_binding(db, rel, col, h):
    """Every value of the column must be in the hierarchy it is bound to. Read as the role now
    current (the caller): refused first if that read would run code the caller does not own."""
    code_trust.check_read(db, access.current_user(db), rel, [col.name])
    q = quote_ident(col.name)
    if h.kind == "member":
        leaves = h.leaves
        bad = db.query(f"SELECT v, count(*) OVER () AS n FROM (SELECT DISTINCT ({q})::text AS v"
                       f" FROM {rel.qualified} WHERE {q} IS NOT NULL"
                       f" AND NOT (({q})::text = ANY ($1::text[]))) d ORDER BY 1 LIMIT $2",
                       [leaves, hierarchies.UNKNOWN_SHOWN], ["text[]", "int"])
        if bad:
            raise hierarchies.unknown_values(h.name, f"{rel.display}.{col.name}",
                                             [r["v"] for r in bad], int(bad[0]["n"]))
    else:
        from .read.snapshot import column_kind
        if column_kind(col.base_type) not in ("int", "float"):
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f'interval hierarchy "{h.name}" needs a numeric column, '
                            f"{col.name} is {col.type}",
                            hint="Bind a member hierarchy (deid.load_hierarchy) to a text column.")
        bad = db.query(f"SELECT {q}::text AS v FROM {rel.qualified} WHERE {q} < $1::numeric"
                       f" OR {q} >= $2::numeric LIMIT 5", [str(h.low), str(h.high)])
        if bad:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f'value {bad[0]["v"]} of {rel.display}.{col.name} is outside '
                            f'[{h.low}, {h.high}) of hierarchy "{h.name}"',
                            hint="Widen low/high of the interval hierarchy.")


def _insert_hierarchy(db, name, kind, levels, info_loss, caller, low=None, high=None, widths=None):
    catalog.require(name, "hierarchy name")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise DeidError(INVALID_PARAMETER_VALUE, f"invalid hierarchy name {name!r}",
                        hint="Use letters, digits and underscores, starting with a letter.")
    if db.value("SELECT 1 FROM deid.hierarchy WHERE name = $1", [name]):
        raise DeidError(DUPLICATE_OBJECT, f'hierarchy "{name}" already exists',
                        hint=f"SELECT deid.drop_hierarchy('{name}'); first, or choose another name.")
    db.execute("INSERT INTO deid.hierarchy (name, kind, levels, low, high, widths, created_by)"
               " VALUES ($1, $2, $3, $4, $5, $6, $7)",
               [name, kind, levels, low, high, widths, caller],
               ["text", "text", "int", "numeric", "numeric", "numeric[]", "name"])
    db.execute("INSERT INTO deid.hierarchy_level (hierarchy, level, info_loss)"
               " SELECT $1, l - 1, phi FROM unnest($2::float8[]) WITH ORDINALITY AS u(phi, l)",
               [name, info_loss], ["text", "float8[]"])


def load_hierarchy(db, name, rows, info_loss, caller):
    access.require_admin(db, caller)
    members = hierarchies.parse_member_rows(rows)
    loss = hierarchies.check_info_loss(info_loss, len(members))
    _insert_hierarchy(db, name, "member", len(members), loss, caller)
    levels, values, parents = [], [], []
    for level, m in enumerate(members):
        for v, p in m.items():
            levels.append(level)
            values.append(v)
            parents.append(p)
    db.execute("INSERT INTO deid.hierarchy_member (hierarchy, level, value, parent)"
               " SELECT $1, l, v, p FROM unnest($2::int[], $3::text[], $4::text[]) AS u(l, v, p)",
               [name, levels, values, parents], ["text", "int[]", "text[]", "text[]"])
    return f"hierarchy {name}: {len(members[0])} values, {len(members)} levels"


def interval_hierarchy(db, name, low, high, widths, info_loss, caller):
    access.require_admin(db, caller)
    lo, hi, ws = hierarchies.check_interval(low, high, widths)
    levels = len(ws) + 2
    loss = hierarchies.check_info_loss(info_loss, levels)
    _insert_hierarchy(db, name, "interval", levels, loss, caller, str(lo), str(hi),
                      [str(w) for w in ws])
    return f"hierarchy {name}: [{lo}, {hi}) in bands of {', '.join(str(w) for w in ws)}, then *"


def load_standard_hierarchy(db, kind, name, dots, caller):
    """A hierarchy shipped with deid (catalog/standard: ICD-10-CM, ICD-9-CM) loaded as
    load_hierarchy loads rows: the same checks, even information loss per level."""
    access.require_admin(db, caller)
    catalog.require(kind, "standard hierarchy", "deid ships " + " and ".join(
        repr(k) for k in standard.KINDS) + ".")
    return load_hierarchy(db, name, standard.icd_rows(kind, dots is not False), None, caller)


def date_hierarchy(db, name, start, end, caller):
    """Every day from `start` to `end` -> month -> quarter -> year -> '*' (catalog/standard)."""
    access.require_admin(db, caller)
    return load_hierarchy(db, name, standard.date_rows(start, end), None, caller)


def age_hierarchy(db, name, max_age, caller):
    """Ages 0 .. max_age in bands of 1, 5, 10 and 20 years, then '*' (an interval hierarchy)."""
    access.require_admin(db, caller)
    low, high = standard.age_bounds(max_age)
    return interval_hierarchy(db, name, low, high, list(standard.AGE_WIDTHS), None, caller)


def drop_hierarchy(db, name, caller):
    access.require_admin(db, caller)
    used = db.query("SELECT coalesce((SELECT format('%I.%I', n.nspname, c.relname)"
                    "   FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
                    "     ON n.oid = c.relnamespace WHERE c.oid = r.relation), 'a dropped relation')"
                    " AS r, column_name AS c FROM deid.column_role r"
                    " WHERE hierarchy = $1 ORDER BY 1, 2 LIMIT 1", [name])
    if used:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f'hierarchy "{name}" is bound to {used[0]["r"]}.{used[0]["c"]}',
                        hint=f"Unbind it first: SELECT deid.unset_role('{used[0]['r']}', "
                             f"'{used[0]['c']}'); or deid.set_role(...) without the hierarchy.")
    catalog.require(name, "hierarchy name", "Name a hierarchy: SELECT name FROM deid.hierarchies;")
    # a k^m generalization release (options.hierarchy) is re-verified against its hierarchy
    # (deid.verify_release): keep it while such a release is live
    live = db.query("SELECT name FROM deid.release WHERE status = 'committed'"
                    " AND parameters -> 'options' ->> 'hierarchy' = $1 ORDER BY release_id LIMIT 1",
                    [name])
    if live:
        raise DeidError(DEPENDENT_OBJECTS_STILL_EXIST,
                        f'hierarchy "{name}" is the hierarchy of release "{live[0]["name"]}"',
                        detail="The release's verifier reads the hierarchy again "
                               "(deid.verify_release).",
                        hint=f"Drop the release first: SELECT deid.drop_release("
                             f"{quote_literal(live[0]['name'])});")
    if not db.execute("DELETE FROM deid.hierarchy WHERE name = $1", [name]):
        raise DeidError(UNDEFINED_OBJECT, f'hierarchy "{name}" does not exist',
                        hint="SELECT name FROM deid.hierarchies; lists them.")
    return f"hierarchy {name} dropped"


def allow_requests(db, grantee, relid, min_k, min_l, per_source_k, caller):
    """A policy: `grantee` may request releases of the relation without SELECT on it. The
    caller -- an owner of the relation -- becomes the policy's grantor: requests under it read
    the source as the caller, through a reader function deid installs for (and owned by) the
    caller; so the source may run no code the caller does not own (code_trust; checked again
    at every request). `per_source_k`: a generalization release may hold k per source system
    (002) rather than over all released quasi-identifiers jointly."""
    access.caller_role(db, caller)
    catalog.require(grantee, "role", "Name the role that may request releases.")
    rel = catalog.relation(db, relid)
    if min_k is None or min_k < 1:
        raise DeidError(INVALID_PARAMETER_VALUE, f"min_k must be at least 1, got {min_k}",
                        hint="k is the smallest equivalence-class size a release may have.")
    if min_l is not None and min_l < 1:
        raise DeidError(INVALID_PARAMETER_VALUE, f"min_l must be at least 1, got {min_l}",
                        hint="l is the smallest diversity a release may have; leave it NULL for none.")
    if not db.value("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1", [grantee], ["name"]):
        raise DeidError(UNDEFINED_OBJECT, f'role "{grantee}" does not exist',
                        hint="CREATE ROLE it first, or name an existing role.")
    access.may_grant_policy(db, caller, rel, list(rel.columns))
    code_trust.check_read(db, caller, rel, list(rel.columns))
    per_source_k = bool(per_source_k)
    db.execute("SELECT deid._install_reader($1)", [caller], ["name"])
    db.execute("INSERT INTO deid.policy (grantee, relation, min_k, min_l, granted_by, per_source_k)"
               " VALUES ($1::regrole, $2, $3, $4, $5, $6) ON CONFLICT (grantee, relation) DO UPDATE"
               " SET min_k = EXCLUDED.min_k, min_l = EXCLUDED.min_l,"
               "     granted_by = EXCLUDED.granted_by, granted_at = now(),"
               "     per_source_k = EXCLUDED.per_source_k",
               [quote_ident(grantee), rel.oid, min_k, min_l, caller, per_source_k],
               ["text", "oid", "int", "int", "name", "boolean"])
    return f"{grantee} may request releases of {rel.display} with k >= {min_k}" + \
        (f", l >= {min_l}" if min_l else "") + (", k per source" if per_source_k else "")


def revoke_requests(db, grantee, relid, caller):
    """Remove a policy: its grantor, an owner of the relation or a deid_admin may (a policy
    only lends rights; taking it away lends none)."""
    access.caller_role(db, caller)
    catalog.require(grantee, "role", "Name the role whose policy goes.")
    rel = catalog.relation(db, relid)
    grantor = db.value("SELECT p.granted_by::text FROM deid.policy p JOIN pg_catalog.pg_roles r"
                       " ON r.oid = p.grantee WHERE p.relation = $1 AND r.rolname = $2",
                       [rel.oid, grantee], ["oid", "name"])
    if grantor is None:
        raise DeidError(UNDEFINED_OBJECT, f'role "{grantee}" has no policy on {rel.display}',
                        hint=f"SELECT grantee, min_k, granted_by FROM deid.policy WHERE relation = "
                             f"{quote_literal(rel.display)}::regclass; lists them.")
    if grantor != caller and not access.owns(db, caller, rel) and not access.is_admin(db, caller):
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"only the grantor, an owner of {rel.display} or a deid_admin may revoke "
                        "its policies",
                        hint=f'Ask role "{grantor}" (the grantor) or the owner of {rel.display}.')
    db.execute("DELETE FROM deid.policy p USING pg_catalog.pg_roles r WHERE r.oid = p.grantee"
               " AND p.relation = $1 AND r.rolname = $2", [rel.oid, grantee], ["oid", "name"])
    return f"{grantee} may no longer request releases of {rel.display}"
