"""003's utility policies U (Sec. 3.1: disjoint sets of codes; Sec. 6.1: hierarchy-based
policies) as the JSON list of code lists that options.utility of a disassociation request takes.

deid.utility_policy(hierarchy, level) -- SECURITY DEFINER, deid_admin only (hierarchies are
    deid_admin's catalog and their leaves may be data values): one constraint per node at
    ``level`` of a member hierarchy (1 .. levels - 2; the top '*' is excluded, as 003 excludes
    the root), holding the leaves below it -- 003's "level 1/2/3" for ICD-9's code -> 3-digit
    category -> section -> chapter.
deid.utility_from(relation, constraint_column, code_column) -- SECURITY INVOKER: reads a
    relation of (constraint, code) rows as the caller (SELECT on both columns needed); NULLs
    and overlapping constraints are refused with a hint; duplicate rows are harmless.
Identifiers reach SQL only through quote_ident and a regclass; values only as parameters.
"""
import json

from ..request import access, code_trust
from ..catalog import relations as catalog
from ..errors import (DeidError, INSUFFICIENT_PRIVILEGE, INVALID_PARAMETER_VALUE,
                      NULL_VALUE_NOT_ALLOWED, UNDEFINED_COLUMN)
from ..methods.disassociation.plugin import DISJOINT_HINT
from ..sqltext import quote_ident


def utility_policy(db, hierarchy, level, caller):
    access.require_admin(db, caller)
    if hierarchy is None or level is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "hierarchy and level must not be NULL",
                        hint="e.g. SELECT deid.utility_policy(hierarchy => 'icd9', level => 1);")
    h = catalog.hierarchy(db, hierarchy)
    if h.kind != "member":
        raise DeidError(INVALID_PARAMETER_VALUE, f'hierarchy "{h.name}" is not a member hierarchy',
                        hint="A utility policy groups codes: load their hierarchy with "
                             "deid.load_hierarchy(name, rows).")
    top = h.levels - 2
    if not 1 <= level <= top:
        raise DeidError(INVALID_PARAMETER_VALUE, f"level must be between 1 and {top}",
                        hint=f'Hierarchy "{h.name}" has levels 1..{top} below its top "*" '
                             "(003: level 1 = 3-digit category, 2 = section, 3 = chapter).")
    groups = {}
    for leaf in h.leaves:
        groups.setdefault(h.ancestors(leaf)[level - 1], []).append(leaf)
    return json.dumps([groups[g] for g in sorted(groups)])


def utility_from(db, relid, constraint_column, code_column):
    if relid is None or constraint_column is None or code_column is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "relation and column names must not be NULL",
                        hint="e.g. SELECT deid.utility_from('ehr.study_constraints', "
                             "'constraint_id', 'code');")
    for col in (constraint_column, code_column):
        if not db.value("SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = $1"
                        " AND attname = $2 AND attnum > 0 AND NOT attisdropped",
                        [relid, col], ["oid", "text"]):
            raise DeidError(UNDEFINED_COLUMN, f"column {quote_ident(col)} does not exist",
                            hint="Name the relation's constraint and code columns: "
                                 "deid.utility_from(relation, constraint_column, code_column).")
        if not db.value("SELECT pg_catalog.has_column_privilege($1, $2, 'SELECT')",
                        [relid, col], ["oid", "text"]):
            raise DeidError(INSUFFICIENT_PRIVILEGE, "permission denied to read the utility "
                            "policy's relation", hint="utility_from reads as you: you need "
                            "SELECT on its constraint and code columns.")
    # read as the caller: refused first if that read would run code the caller does not own
    code_trust.check_read(db, access.current_user(db), catalog.relation(
        db, relid, roles=catalog.ROLES_FROM_HELPER), [constraint_column, code_column])
    rel = db.value("SELECT $1::pg_catalog.regclass::text", [relid], ["oid"])
    c, v = quote_ident(constraint_column), quote_ident(code_column)
    rows = db.query(f"SELECT DISTINCT {c}::text AS c, {v}::text AS v FROM {rel}"
                    " ORDER BY 1, 2")
    groups, owner = {}, {}
    for r in rows:
        if r["c"] is None or r["v"] is None:
            raise DeidError(NULL_VALUE_NOT_ALLOWED, "a utility constraint or code is NULL",
                            hint="Every row names one constraint and one code; filter NULLs "
                                 "out (e.g. through a view).")
        if owner.setdefault(r["v"], r["c"]) != r["c"]:
            raise DeidError(INVALID_PARAMETER_VALUE, "utility constraints overlap",
                            detail=f"code {r['v']} is in constraints {owner[r['v']]} and {r['c']}",
                            hint=DISJOINT_HINT)
        groups.setdefault(r["c"], []).append(r["v"])
    return json.dumps([groups[g] for g in sorted(groups)])
