"""Read and write the deid catalog (relations, column roles, hierarchies,
policies, releases). Talks to the database only through a ``db`` handle
(:class:`deid.pg.Database`)."""
from dataclasses import dataclass, field

from .hierarchies import Hierarchy
from ..sqltext import qualified
from ..errors import (DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED, UNDEFINED_COLUMN,
                      UNDEFINED_TABLE, UNDEFINED_OBJECT)

ROLES = ("identifier", "quasi_identifier", "sensitive", "insensitive")


@dataclass
class Column:
    """A column as deid reads and releases it. ``type``/``base_type`` are the type a release
    stores: the column's own type if it is built in (pg_catalog), the built-in base type of a
    domain (a domain's CHECK is the caller's code and never runs in deid's part), and text for
    any other type (read as text by the reader; its casts and I/O never run in deid's part)."""
    name: str
    type: str          # release type, format_type() text, e.g. 'integer', 'character varying(10)'
    base_type: str     # its name without modifiers, e.g. 'varchar'
    not_null: bool
    role: str = None
    hierarchy: str = None
    source: str = None
    declared_type: str = None   # the column's own type as declared (may be a domain or user type)
    as_text: bool = False       # of a type not built in: read, selected on and released as text


@dataclass
class Relation:
    oid: int
    schema: str
    name: str
    kind: str
    row_security: bool
    columns: dict = field(default_factory=dict)   # name -> Column, in attnum order

    @property
    def qualified(self):
        return qualified(self.schema, self.name)

    @property
    def display(self):
        return f"{self.schema}.{self.name}"

    def column(self, name, purpose="column"):
        if name is None or name == "":
            raise DeidError(NULL_VALUE_NOT_ALLOWED, f"{purpose} name must not be NULL or empty",
                            hint="Name an existing column of " + self.display + ".")
        if not isinstance(name, str):      # an element of a multi-dimensional array: a list
            raise DeidError(INVALID_PARAMETER_VALUE, f"a {purpose} name must be text",
                            hint="Pass a one-dimensional array of column names, e.g. "
                                 "'{age,sex}'.")
        col = self.columns.get(name)
        if col is None:
            raise DeidError(UNDEFINED_COLUMN,
                            f'column "{name}" of relation {self.display} does not exist',
                            hint="Columns are: " + ", ".join(self.columns) + ".")
        return col

    def with_role(self, role):
        return [c.name for c in self.columns.values() if c.role == role]


def require(value, what, hint=None):
    if value is None or (hasattr(value, "__len__") and len(value) == 0):
        raise DeidError(NULL_VALUE_NOT_ALLOWED, f"{what} must not be NULL or empty",
                        hint=hint or "See SELECT deid.usage();")
    return value


_COLUMNS = """
WITH RECURSIVE chain(attnum, typ, mod, depth) AS (
    SELECT a.attnum, a.atttypid, a.atttypmod, 0 FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
    SELECT c.attnum, t.typbasetype, t.typtypmod, c.depth + 1
      FROM chain c JOIN pg_catalog.pg_type t ON t.oid = c.typ
     WHERE t.typtype = 'd' AND c.depth < 64)
SELECT a.attname, a.attnotnull, format_type(a.atttypid, a.atttypmod) AS declared,
       t.typnamespace = 'pg_catalog'::regnamespace AS builtin,
       format_type(b.typ, b.mod) AS base, t.typname AS base_name
  FROM pg_catalog.pg_attribute a
  JOIN (SELECT DISTINCT ON (attnum) attnum, typ, mod FROM chain ORDER BY attnum, depth DESC) b
    ON b.attnum = a.attnum
  JOIN pg_catalog.pg_type t ON t.oid = b.typ
 WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum"""

ROLES_FROM_TABLE = ("SELECT column_name, role, hierarchy, source FROM deid.column_role"
                    " WHERE relation = $1")
# SECURITY INVOKER code (run as the caller) cannot read deid.column_role itself.
ROLES_FROM_HELPER = "SELECT column_name, role, hierarchy, source FROM deid._column_roles($1, current_user)"


def relation(db, oid, roles=ROLES_FROM_TABLE):
    """Load a relation's columns and their deid roles (`roles`: the query that reads them)."""
    require(oid, "relation", "Pass a table name, e.g. 'registry.patients'.")
    rows = db.query(
        "SELECT n.nspname, c.relname, c.relkind, c.relrowsecurity"
        "  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.oid = $1", [oid], ["oid"])
    if not rows:
        raise DeidError(UNDEFINED_TABLE, "relation does not exist",
                        hint="Pass an existing table or view, e.g. 'registry.patients'.")
    r = rows[0]
    if r["relkind"] not in ("r", "p", "v", "m", "f"):
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f'"{r["nspname"]}.{r["relname"]}" is not a table or view',
                        hint="deid reads tables, views, materialized views and foreign tables.")
    rel = Relation(oid, r["nspname"], r["relname"], r["relkind"], r["relrowsecurity"])
    for c in db.query(_COLUMNS, [oid], ["oid"]):
        typ, base = (c["base"], c["base_name"]) if c["builtin"] else ("text", "text")
        rel.columns[c["attname"]] = Column(c["attname"], typ, base, c["attnotnull"],
                                           declared_type=c["declared"], as_text=not c["builtin"])
    for r in db.query(roles, [oid], ["oid"]):
        col = rel.columns.get(r["column_name"])
        if col is not None:
            col.role, col.hierarchy, col.source = r["role"], r["hierarchy"], r["source"]
    return rel


def row_id_column(db, rel, option=None):
    """The column whose values are the RIDs: the option, else a single-column
    integer primary key (001 Theorem 3 needs stable row ids)."""
    if option:
        col = rel.column(option, "row id column")
        unique = db.value(
            "SELECT count(*) FROM pg_catalog.pg_index i"
            " JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
            " WHERE i.indrelid = $1 AND i.indisunique AND i.indnatts = 1 AND a.attname = $2",
            [rel.oid, option], ["oid", "name"])
        if not unique and rel.kind in ("r", "p"):
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f'row id column "{option}" of {rel.display} has no unique index',
                            hint=f"CREATE UNIQUE INDEX ON {rel.display} ({option});")
    else:
        rows = db.query(
            "SELECT a.attname FROM pg_catalog.pg_index i"
            " JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
            " WHERE i.indrelid = $1 AND i.indisprimary AND i.indnatts = 1", [rel.oid], ["oid"])
        if not rows:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"{rel.display} has no single-column primary key to use as row id",
                            hint='Pass options => \'{"row_id": "<unique integer column>"}\' '
                                 "or add a primary key.")
        col = rel.columns[rows[0]["attname"]]
    if col.base_type not in ("int2", "int4", "int8"):
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f'row id column "{col.name}" must be an integer, not {col.type}',
                        hint="Add a bigint identity column and name it in options.row_id.")
    return col.name


# ---------------------------------------------------------------- hierarchies
def hierarchy(db, name):
    return hierarchies(db, [name])[name]


def hierarchies(db, names):
    """{name: Hierarchy} for every name (one object per distinct name), in three statements
    whatever their number."""
    names = sorted(set(names))
    if not names:
        return {}
    rows = db.query("SELECT name, kind, levels, low::float8 AS low, high::float8 AS high,"
                    " widths::float8[] AS widths FROM deid.hierarchy WHERE name = ANY($1)",
                    [names], ["text[]"])
    found = {r["name"]: r for r in rows}
    missing = [n for n in names if n not in found]
    if missing:
        raise DeidError(UNDEFINED_OBJECT, f'hierarchy "{missing[0]}" does not exist',
                        hint="Load it with deid.load_hierarchy() or deid.interval_hierarchy().")
    loss = {n: [] for n in names}
    for r in db.query("SELECT hierarchy, info_loss FROM deid.hierarchy_level"
                      " WHERE hierarchy = ANY($1) ORDER BY hierarchy, level", [names], ["text[]"]):
        loss[r["hierarchy"]].append(r["info_loss"])
    out = {}
    for n in names:
        h = found[n]
        out[n] = Hierarchy(h["name"], h["kind"], h["levels"], loss[n], low=h["low"], high=h["high"],
                           widths=h["widths"])
        if h["kind"] == "member":
            out[n].members = [dict() for _ in range(h["levels"])]
    member = [n for n in names if found[n]["kind"] == "member"]
    if member:
        for r in db.query("SELECT hierarchy, level, value, parent FROM deid.hierarchy_member"
                          " WHERE hierarchy = ANY($1) ORDER BY hierarchy, level, value",
                          [member], ["text[]"]):
            out[r["hierarchy"]].members[r["level"]][r["value"]] = r["parent"]
    return out
