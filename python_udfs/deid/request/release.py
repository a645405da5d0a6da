"""Releases: the request record, names and owners, and deid.drop_release. The sequence of a
request lives in pipeline.py; what it logs, in log/release_log.py.

Storage: the tables of a release live in schema ``deid_release`` (owned by deid_owner, no
grants); analysts read views of the same names in schema ``release`` (SELECT granted to
deid_reader and to the requester).
"""
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

from . import access
from ..catalog import relations as catalog
from ..errors import (DeidError, DUPLICATE_TABLE, INSUFFICIENT_PRIVILEGE, INVALID_PARAMETER_VALUE,
                      NULL_VALUE_NOT_ALLOWED, UNDEFINED_OBJECT)
from ..sqltext import qualified

if TYPE_CHECKING:          # the types only: nothing of these is imported when deid runs
    from ..pg import Database

Row = Dict[str, Any]

STORE_SCHEMA = "deid_release"
VIEW_SCHEMA = "release"
NAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,39}")


@dataclass
class RunState:
    """What a run adds to its request as it goes, apart from the request itself."""
    progress: Optional[Callable[[float], None]] = None   # of the method phase (pipeline._Clock)
    evidence: Any = None         # the plan's evidence for its verifier (verify.<method>.Evidence)
    part: Optional[Row] = None   # a node's part of a distributed generalization
    #                              (distributed/generalization_sql.finish_part)
    kept: Any = None             # methods.kept_groups.KeptGroups: the earlier release's groups a
    #                              re-release keeps (a plug-in with KEEPS_GROUPS; None: none)
    warnings: List[str] = field(default_factory=list)   # logged in the release's metrics (e.g. the
    #                              composition rule overridden by a requester with SELECT)
    digests: Dict[str, Any] = field(default_factory=dict)   # {table or catalog: {"rows", "sums"}}
    #                              a verifier took in its own passes over what was stored
    #                              (table_digest.digests does not take them again)


@dataclass(frozen=True)
class Request:
    """A validated, authorized request, handed to a method adapter. Frozen: what a run adds
    (its progress, the plan's evidence, a node's part) is its ``run`` state, read through the
    properties below."""
    rel: catalog.Relation
    method: str
    k: int
    l: Optional[int]           # noqa: E741  (the papers' name)
    columns: List[str]         # the projection
    selection_text: Optional[str]
    selection: Any             # request.Selection or None
    options: Dict[str, Any]
    name: str
    release_id: int
    seed: int
    caller: str
    grant: Dict[str, Any]      # access.authorize_request: via select | policy, and the reader
    started: Optional[str] = None   # clock_timestamp() at the start, as text
    hierarchies: Dict[str, Any] = field(default_factory=dict)   # column -> catalog.Hierarchy (its role's)
    option_hierarchy: Any = None   # options.hierarchy, loaded (a set-valued method's)
    run: RunState = field(default_factory=RunState, compare=False)

    @property
    def evidence(self) -> Any:
        return self.run.evidence

    @property
    def progress(self) -> Optional[Callable[[float], None]]:
        return self.run.progress

    @property
    def part(self) -> Optional[Row]:
        return self.run.part

    @property
    def warnings(self) -> List[str]:
        return self.run.warnings


def projection(rel: catalog.Relation, columns: Optional[Sequence[str]]) -> List[str]:
    if columns is None:
        cols = [c.name for c in rel.columns.values() if c.role and c.role != "identifier"]
        if not cols:
            raise DeidError(INVALID_PARAMETER_VALUE, f"{rel.display} has no classified columns",
                            hint="Classify columns with deid.set_role() or pass columns.")
        return cols
    catalog.require(columns, "columns", "Pass the columns to release, or NULL for every "
                                        "classified column.")
    out = []
    for name in columns:
        col = rel.column(name)
        if col.role is None:
            raise DeidError(INVALID_PARAMETER_VALUE, f'column "{name}" has no role',
                            hint=f"SELECT deid.set_role('{rel.display}', '{name}', "
                                 "'quasi_identifier' | 'sensitive' | 'insensitive');")
        if col.role == "identifier":
            raise DeidError(INVALID_PARAMETER_VALUE, f'column "{name}" is an identifier',
                            hint="Identifiers are never released; leave it out of columns.")
        if name in out:
            raise DeidError(INVALID_PARAMETER_VALUE, f'column "{name}" is listed twice in columns',
                            hint="Name each column once.")
        out.append(name)
    return out


def release_name(rel: catalog.Relation, given: Optional[str], release_id: int) -> str:
    name = given if given is not None else f"{rel.name.lower()[:24]}_{release_id}"
    name = re.sub(r"[^a-z0-9_]", "_", name) if given is None else name
    if not NAME_RE.fullmatch(name):
        raise DeidError(INVALID_PARAMETER_VALUE, f"invalid release name {name[:60]!r}",
                        hint="Use 1-40 lower-case letters, digits and underscores, "
                             "starting with a letter or underscore.")
    return name


def existing_release(db: "Database", name: str) -> Optional[Row]:
    rows = db.query("SELECT release_id, relations, requested_by::text AS requested_by"
                    " FROM deid.release WHERE name = $1 AND status = 'committed'", [name])
    return rows[0] if rows else None


def check_replace(db: "Database", old: Row, name: str, caller: str, replace: Any) -> None:
    """A release of this name exists: replacing it needs options.replace and its owner (the
    role that requested it) or a deid_admin."""
    if not replace:
        raise DeidError(DUPLICATE_TABLE, f'release "{name}" already exists',
                        hint='Choose another name, or pass options => \'{"replace": true}\' '
                             "to replace your own release.")
    if old["requested_by"] != caller and not access.is_admin(db, caller):
        raise DeidError(INSUFFICIENT_PRIVILEGE, f'release "{name}" belongs to another role',
                        hint="Only the role that requested a release, or a deid_admin, may replace "
                             "or drop it; choose another name.")


def drop_relations(db: "Database", relations: Optional[Sequence[str]]) -> None:
    for qualified_name in relations or []:
        schema, _, table = qualified_name.partition(".")
        for s, kind in ((VIEW_SCHEMA, "VIEW"), (STORE_SCHEMA, "TABLE")):
            db.execute(f"DROP {kind} IF EXISTS {qualified(s, table.strip(chr(34)))} CASCADE")


def drop_release_relations(db: "Database", r: Row) -> None:
    """Drop a release's relations and the reconstructions drawn from it (003 Fig. 5: a D' of
    a release that is dropped or replaced describes nothing that exists any more)."""
    drop_relations(db, r["relations"])
    drop_relations(db, [x["relation"] for x in db.query(
        "SELECT relation FROM deid.reconstruction WHERE release_id = $1", [r["release_id"]],
        ["bigint"])])


def committed(db: "Database", name: Optional[str]) -> Row:
    """The log row of the committed release `name` (a NULL or unknown name: a clean error)."""
    if name is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "release name must not be NULL",
                        hint="SELECT name FROM deid.release WHERE status = 'committed'; lists them.")
    rows = db.query("SELECT release_id, method, source::oid AS source, source_name,"
                    " parameters::text AS parameters, relations, requested_by::text AS requested_by,"
                    " metrics->>'rows' AS n FROM deid.release"
                    " WHERE name = $1 AND status = 'committed'", [name])
    if not rows:
        raise DeidError(UNDEFINED_OBJECT, f'release "{name[:60]}" does not exist',
                        hint="Name a committed release: SELECT name FROM deid.release"
                             " WHERE status = 'committed';")
    row: Row = rows[0]
    return row


def drop_release(db: "Database", name: Optional[str], caller: str) -> str:
    access.caller_role(db, caller)
    r = committed(db, name)
    if r["requested_by"] != caller and not access.is_admin(db, caller):
        raise DeidError(INSUFFICIENT_PRIVILEGE, f'release "{name}" belongs to another role',
                        hint="Only the role that requested a release, or a deid_admin, may drop it.")
    drop_release_relations(db, r)
    db.execute("UPDATE deid.release SET status = 'dropped' WHERE release_id = $1",
               [r["release_id"]], ["bigint"])
    return f"release {name} dropped"
