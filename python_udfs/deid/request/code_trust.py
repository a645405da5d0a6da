"""Whose code a read runs (README, "Security model"): checked before deid reads as a role.

deid reads a relation as some role R -- the caller, a policy's grantor, or a deid_admin
checking a hierarchy. Whatever code that read executes runs with R's rights: the functions
and operators of a view (and of the views it reads), the row-security policies of every table
it reaches, the domain checks an expression casts to, and the casts deid itself applies to the
columns it reads (``::text`` of a category, snapshot._value_expr / column_kind; to_jsonb in
deid.equivalence_classes). Before reading, :func:`check_read` walks all of it in the catalog
(pg_rewrite -> pg_depend, pg_policy -> pg_depend, pg_operator, pg_aggregate, pg_constraint,
pg_cast, pg_type) and refuses unless every function that would run as R belongs to a trusted
owner: R itself, a role that may SET ROLE R anyway (MEMBER of R), a superuser, or deid_owner.
A SECURITY DEFINER function reached through a view or a policy runs as its owner, not as R,
and is accepted; a cast or output function deid applies is not (it is handed R's values).

A view or policy written by a role R does not trust may still call built-ins -- but not the
ones that would lend it R's rights: one its owner may not EXECUTE itself (pg_read_file, ...),
or one that runs SQL text or reads tables by name (query_to_xml and its family, ts_stat,
set_config, dblink): :data:`BORROWING`.

A materialized view's query does not run when it is read (only its stored rows are), so only
its casts count. Nothing here reads a row: it is catalog SQL, run before the read.
"""
from typing import TYPE_CHECKING, Sequence

from ..errors import DeidError, INSUFFICIENT_PRIVILEGE

if TYPE_CHECKING:          # the types only: nothing of these is imported when deid runs
    from ..catalog.relations import Relation
    from ..pg import Database

# Built-ins that would run SQL text, or read a relation named by their argument, as the reader.
BORROWING = ("query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema",
             "cursor_to_xml", "cursor_to_xmlschema", "table_to_xml", "table_to_xmlschema",
             "table_to_xml_and_xmlschema", "schema_to_xml", "schema_to_xmlschema",
             "schema_to_xml_and_xmlschema", "database_to_xml", "database_to_xmlschema",
             "database_to_xml_and_xmlschema", "ts_stat", "ts_rewrite", "set_config")

_WALK = """
WITH RECURSIVE
-- every object the read reaches, with the expression that reaches it (a view, a policy, a
-- domain constraint: via_class, via_obj) and that expression's owner
reached(classid, objid, via_class, via_obj, via_owner) AS (
    SELECT 'pg_class'::regclass::oid, c.oid, 'pg_class'::regclass::oid, c.oid, c.relowner
      FROM pg_catalog.pg_class c WHERE c.oid = $2
  UNION
    SELECT n.* FROM reached r CROSS JOIN LATERAL (
        -- a view's query (its SELECT rule); a materialized view's does not run on read
        SELECT 'pg_rewrite'::regclass::oid, w.oid, 'pg_class'::regclass::oid, c.oid, c.relowner
          FROM pg_catalog.pg_rewrite w JOIN pg_catalog.pg_class c ON c.oid = w.ev_class
         WHERE r.classid = 'pg_class'::regclass AND w.ev_class = r.objid AND w.ev_type = '1'
           AND c.relkind = 'v'
        UNION ALL
        -- a table's row-security policies for SELECT (written by the table's owner)
        SELECT 'pg_policy'::regclass::oid, p.oid, 'pg_policy'::regclass::oid, p.oid, c.relowner
          FROM pg_catalog.pg_policy p JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
         WHERE r.classid = 'pg_class'::regclass AND p.polrelid = r.objid AND c.relrowsecurity
           AND p.polcmd IN ('r', '*')
        UNION ALL
        -- what a view's query, a policy or a domain check references
        SELECT d.refclassid, d.refobjid, r.via_class, r.via_obj, r.via_owner
          FROM pg_catalog.pg_depend d
         WHERE r.classid IN ('pg_rewrite'::regclass, 'pg_policy'::regclass,
                             'pg_constraint'::regclass)
           AND d.classid = r.classid AND d.objid = r.objid
           AND d.refclassid IN ('pg_class'::regclass, 'pg_proc'::regclass,
                                'pg_operator'::regclass, 'pg_type'::regclass)
        UNION ALL
        -- the same expressions' functions and operators as stored: pg_depend does not list
        -- the pinned built-ins (a stored node tree prints a constant's bytes, never its text)
        SELECT CASE m[1] WHEN 'opno' THEN 'pg_operator'::regclass::oid
                         ELSE 'pg_proc'::regclass::oid END,
               m[2]::oid, r.via_class, r.via_obj, r.via_owner
          FROM (SELECT w.ev_action::text FROM pg_catalog.pg_rewrite w
                 WHERE r.classid = 'pg_rewrite'::regclass AND w.oid = r.objid
                UNION ALL
                SELECT p.polqual::text FROM pg_catalog.pg_policy p
                 WHERE r.classid = 'pg_policy'::regclass AND p.oid = r.objid
                UNION ALL
                SELECT k.conbin::text FROM pg_catalog.pg_constraint k
                 WHERE r.classid = 'pg_constraint'::regclass AND k.oid = r.objid) AS e(tree),
               regexp_matches(e.tree, ':(funcid|aggfnoid|winfnoid|opfuncid|opno) ([0-9]+)', 'g')
                 AS m
         WHERE m[2] <> '0'
        UNION ALL
        -- an operator runs its function (and its planner estimators)
        SELECT 'pg_proc'::regclass::oid, f, r.via_class, r.via_obj, r.via_owner
          FROM pg_catalog.pg_operator o,
               unnest(ARRAY[o.oprcode, o.oprrest, o.oprjoin]::oid[]) AS f
         WHERE r.classid = 'pg_operator'::regclass AND o.oid = r.objid AND f <> 0
        UNION ALL
        -- an aggregate runs its support functions
        SELECT 'pg_proc'::regclass::oid, f, r.via_class, r.via_obj, r.via_owner
          FROM pg_catalog.pg_aggregate a,
               unnest(ARRAY[a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggserialfn,
                            a.aggdeserialfn, a.aggmtransfn, a.aggminvtransfn,
                            a.aggmfinalfn]::oid[]) AS f
         WHERE r.classid = 'pg_proc'::regclass AND a.aggfnoid = r.objid AND f <> 0
        UNION ALL
        -- a cast to a domain runs its checks (written by the domain's owner)
        SELECT 'pg_constraint'::regclass::oid, k.oid, 'pg_constraint'::regclass::oid, k.oid,
               t.typowner
          FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_type t ON t.oid = k.contypid
         WHERE r.classid = 'pg_type'::regclass AND k.contypid = r.objid
    ) AS n
),
-- the types of the columns read, and the types inside them (domain bases, array elements,
-- range subtypes, composite fields): their casts to text and json and their output run
types(typ) AS (
    SELECT a.atttypid FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = $2 AND a.attname = ANY ($3::name[]) AND NOT a.attisdropped
  UNION
    SELECT n.typ FROM types s JOIN pg_catalog.pg_type t ON t.oid = s.typ CROSS JOIN LATERAL (
        SELECT t.typbasetype WHERE t.typbasetype <> 0
        UNION ALL SELECT t.typelem WHERE t.typelem <> 0
        UNION ALL SELECT g.rngsubtype FROM pg_catalog.pg_range g WHERE g.rngtypid = t.oid
        UNION ALL SELECT g.rngtypid FROM pg_catalog.pg_range g WHERE g.rngmultitypid = t.oid
        UNION ALL SELECT a.atttypid FROM pg_catalog.pg_attribute a
                   WHERE t.typrelid <> 0 AND a.attrelid = t.typrelid AND a.attnum > 0
                     AND NOT a.attisdropped
    ) AS n(typ)
),
applied(fn) AS (
    SELECT c.castfunc FROM types s JOIN pg_catalog.pg_cast c ON c.castsource = s.typ
     WHERE c.castmethod = 'f' AND c.casttarget IN ('pg_catalog.text'::regtype,
                                                    'pg_catalog.json'::regtype,
                                                    'pg_catalog.jsonb'::regtype)
    UNION
    SELECT t.typoutput FROM types s JOIN pg_catalog.pg_type t ON t.oid = s.typ
),
trusted(role) AS (
    SELECT r.oid FROM pg_catalog.pg_roles r
     WHERE r.rolsuper OR r.rolname = 'deid_owner' OR pg_catalog.pg_has_role(r.oid, $1, 'MEMBER')
),
found(rank, what, owner, via, via_owner) AS (
    -- a function that would run as the reader, of an owner it does not trust
    SELECT 1, pg_catalog.pg_describe_object('pg_proc'::regclass, p.oid, 0), p.proowner,
           pg_catalog.pg_describe_object(r.via_class, r.via_obj, 0), r.via_owner
      FROM reached r JOIN pg_catalog.pg_proc p ON p.oid = r.objid
     WHERE r.classid = 'pg_proc'::regclass AND NOT p.prosecdef
       AND p.proowner NOT IN (SELECT role FROM trusted)
    UNION ALL
    SELECT 1, pg_catalog.pg_describe_object('pg_proc'::regclass, p.oid, 0), p.proowner,
           'the casts deid applies to the columns it reads', NULL
      FROM applied a JOIN pg_catalog.pg_proc p ON p.oid = a.fn
     WHERE p.proowner NOT IN (SELECT role FROM trusted)
    UNION ALL
    -- a view or policy of an untrusted owner calling a built-in that lends it the reader's rights
    SELECT 2, pg_catalog.pg_describe_object('pg_proc'::regclass, p.oid, 0), r.via_owner,
           pg_catalog.pg_describe_object(r.via_class, r.via_obj, 0), r.via_owner
      FROM reached r JOIN pg_catalog.pg_proc p ON p.oid = r.objid
     WHERE r.classid = 'pg_proc'::regclass AND NOT p.prosecdef
       AND r.via_owner NOT IN (SELECT role FROM trusted)
       AND (NOT pg_catalog.has_function_privilege(r.via_owner, p.oid, 'EXECUTE')
            OR (p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = ANY ($4::name[]))
            OR p.proname ~ '^dblink')
)
SELECT f.rank, f.what, pg_catalog.pg_get_userbyid(f.owner)::text AS owner, f.via,
       pg_catalog.pg_get_userbyid(f.via_owner)::text AS via_owner
  FROM found f ORDER BY f.rank, f.what, f.via LIMIT 1
"""


def check_read(db: "Database", reader: str, rel: "Relation", columns: Sequence[str],
               requester: bool = False) -> None:
    """Refuse, before anything is read, when reading `columns` of `rel` as role `reader`
    would run code `reader` does not trust. `requester`: the caller is a policy-based
    requester, who learns nothing of what is inside the grantor's source (the grantor is told
    the details when it grants, deid.allow_requests)."""
    rows = db.query(_WALK, [reader, rel.oid, sorted(set(columns)), list(BORROWING)],
                    ["name", "oid", "text[]", "text[]"])
    if not rows:
        return
    f = rows[0]
    if requester:
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"reading {rel.display} for this policy would run code that its grantor "
                        "does not own",
                        hint="Ask the role that granted the policy to grant it again "
                             "(deid.allow_requests names what would run) or to fix the source.")
    if f["rank"] == 1:
        message = (f'{f["what"]} owned by role "{f["owner"]}" would run as role "{reader}"'
                   f" when deid reads {rel.display}")
    else:
        message = (f'{f["via"]} of role "{f["via_owner"]}" calls {f["what"]}, which would run'
                   f' with the rights of role "{reader}" when deid reads {rel.display}')
    raise DeidError(
        INSUFFICIENT_PRIVILEGE, message, detail=f'reached through {f["via"]}',
        hint=f'deid reads as role "{reader}": every function that read runs (a view\'s functions '
             "and operators, row-security policies, the casts of the columns read) must belong "
             f'to "{reader}", to a role that may act as it, or to a superuser; a view or policy '
             "of another role may not call built-ins that lend it the reader's rights. Read a "
             "view of your own that calls only such code, or have the owner run it.")
