"""The front door: deid.anonymize_request(...).

One transaction per request (the SQL call): validate, authorize, read the
snapshot, run the method, write the release relations, verify them
independently, log the release. Any error rolls everything back, so a failed
request leaves no table, no view, no RID set and no log row.

Storage: the tables of a release live in schema ``deid_release`` (no grants);
analysts read views of the same names in schema ``release`` (SELECT granted
to deid_reader and to the requester).
"""
import json
import random
import re
from dataclasses import dataclass, field

from . import access, catalog
from .errors import (DeidError, DUPLICATE_TABLE, INVALID_PARAMETER_VALUE,
                     NULL_VALUE_NOT_ALLOWED, UNDEFINED_OBJECT)
from .sqltext import qualified, quote_ident

STORE_SCHEMA = "deid_release"
VIEW_SCHEMA = "release"
METHODS = {"anatomy": "anatomy_release", "generalization": "generalization_release"}
NAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,39}")


@dataclass
class Request:
    """A validated request, handed to a method adapter."""
    rel: catalog.Relation
    method: str
    k: int
    l: int
    columns: list              # the projection
    selection_text: str
    selection: object          # request.Selection or None
    options: dict
    name: str
    release_id: int
    seed: int
    caller: str
    grant: dict


@dataclass
class Outcome:
    """What a method adapter returns."""
    tables: list                      # unqualified names created in STORE_SCHEMA
    rows: int
    groups: int
    discernibility: float
    verification: dict
    metrics: dict = field(default_factory=dict)


def parse_options(options):
    if options is None:
        return {}
    try:
        out = json.loads(options) if isinstance(options, str) else dict(options)
    except ValueError as e:
        raise DeidError(INVALID_PARAMETER_VALUE, f"options is not valid JSON: {e}")
    if not isinstance(out, dict):
        raise DeidError(INVALID_PARAMETER_VALUE, "options must be a JSON object",
                        hint='e.g. \'{"seed": 7}\'')
    return out


def check_options(options, allowed, method):
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"unknown option {unknown[0]!r} for method {method}",
                        hint="Options of " + method + ": " + ", ".join(sorted(allowed)) + ".")


def projection(rel, columns):
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
        if name not in out:
            out.append(name)
    return out


def parse_selection(db, rel, text, caller):
    if text is None:
        return None
    from .request import parse_selection as parse
    if access.can_select(db, caller, rel, list(rel.columns)):
        allowed = rel.columns
    else:   # a policy-allowed requester may filter on classified, non-identifying columns
        allowed = {n: c for n, c in rel.columns.items() if c.role and c.role != "identifier"}
    return parse(text, {n: c.type for n, c in allowed.items()})


def release_name(db, rel, given, release_id):
    name = given if given is not None else f"{rel.name.lower()[:24]}_{release_id}"
    name = re.sub(r"[^a-z0-9_]", "_", name) if given is None else name
    if not NAME_RE.fullmatch(name):
        raise DeidError(INVALID_PARAMETER_VALUE, f"invalid release name {name!r}",
                        hint="Use 1-40 lower-case letters, digits and underscores, "
                             "starting with a letter or underscore.")
    return name


def existing_release(db, name):
    rows = db.query("SELECT release_id, relations FROM deid.release"
                    " WHERE name = $1 AND status = 'committed'", [name])
    return rows[0] if rows else None


def drop_relations(db, relations):
    for qualified_name in relations or []:
        schema, _, table = qualified_name.partition(".")
        for s, kind in ((VIEW_SCHEMA, "VIEW"), (STORE_SCHEMA, "TABLE")):
            db.execute(f"DROP {kind} IF EXISTS {qualified(s, table.strip(chr(34)))} CASCADE")


def anonymize_request(db, relid, method, k, l, columns, selection, options, release, caller):
    import importlib
    rel = catalog.relation(db, relid)
    catalog.require(method, "method", "One of: " + ", ".join(METHODS) + ".")
    if method not in METHODS:
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown method {method!r}",
                        hint="One of: " + ", ".join(METHODS) + ".")
    if k is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "k must not be NULL",
                        hint="k is the smallest group size of the release, e.g. k => 10.")
    opts = parse_options(options)
    adapter = importlib.import_module("deid." + METHODS[method])
    check_options(opts, adapter.OPTIONS | {"replace", "seed", "row_id"}, method)
    adapter.validate(k, l, opts)
    cols = projection(rel, columns)
    sel = parse_selection(db, rel, selection, caller)
    grant = access.authorize_request(db, caller, rel, cols + sorted(sel.columns if sel else []), k, l)
    release_id = db.value("SELECT nextval(pg_catalog.pg_get_serial_sequence('deid.release',"
                          " 'release_id'))")
    name = release_name(db, rel, release, release_id)
    old = existing_release(db, name)
    if old and not opts.get("replace"):
        raise DeidError(DUPLICATE_TABLE, f'release "{name}" already exists',
                        hint='Choose another name, or pass options => \'{"replace": true}\'.')
    seed = opts.get("seed")
    if seed is None:
        seed = random.SystemRandom().randrange(2 ** 31)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise DeidError(INVALID_PARAMETER_VALUE, "options.seed must be an integer")
    if old:
        drop_relations(db, old["relations"])
        db.execute("UPDATE deid.release SET status = 'replaced' WHERE release_id = $1",
                   [old["release_id"]], ["bigint"])
    started = db.value("SELECT clock_timestamp()")
    req = Request(rel, method, k, l, cols, selection, sel, opts, name, release_id, seed,
                  caller, grant)
    out = adapter.run(db, req)
    relations = publish(db, req, out.tables)
    metrics = dict(out.metrics, rows=out.rows, groups=out.groups,
                   discernibility=out.discernibility, verification=out.verification)
    params = {"k": k, "l": l, "columns": cols, "selection": selection, "options": opts,
              "authorized_via": grant}
    db.execute(
        "INSERT INTO deid.release (release_id, name, method, source, source_name, parameters,"
        " seed, requested_by, started_at, finished_at, status, relations, metrics)"
        " OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9::timestamptz,"
        " clock_timestamp(), 'committed', $10, $11::jsonb)",
        [release_id, name, method, rel.oid, rel.display, json.dumps(params, default=str), seed,
         caller, started, relations, json.dumps(metrics, default=float)],
        ["bigint", "text", "text", "oid", "text", "text", "bigint", "name", "text", "text[]",
         "text"])
    return [(release_id, relations, out.rows, out.groups, out.discernibility, True)]


def publish(db, req, tables):
    """Views in schema release over the stored tables, readable by deid_reader
    and by the requester."""
    relations = []
    for t in tables:
        view = qualified(VIEW_SCHEMA, t)
        db.execute(f"CREATE VIEW {view} AS SELECT * FROM {qualified(STORE_SCHEMA, t)}")
        db.execute(f"GRANT SELECT ON {view} TO deid_reader, {quote_ident(req.caller)}")
        db.execute(f"COMMENT ON VIEW {view} IS " + db.quote_literal(
            f"deid release {req.name} (#{req.release_id}, {req.method}, k={req.k}"
            + (f", l={req.l}" if req.l else "") + f") of {req.rel.display}"))
        relations.append(f"{VIEW_SCHEMA}.{t}")
    return relations


def drop_release(db, name, caller):
    access.caller_role(db, caller)
    rows = db.query("SELECT release_id, relations, requested_by FROM deid.release"
                    " WHERE name = $1 AND status = 'committed'", [name])
    if not rows:
        raise DeidError(UNDEFINED_OBJECT, f'release "{name}" does not exist')
    r = rows[0]
    if r["requested_by"] != caller and not db.value(
            "SELECT pg_catalog.pg_has_role($1, 'deid_admin', 'MEMBER')", [caller], ["name"]):
        raise DeidError("42501", f'only deid_admin or {r["requested_by"]} may drop release "{name}"')
    drop_relations(db, r["relations"])
    db.execute("UPDATE deid.release SET status = 'dropped' WHERE release_id = $1",
               [r["release_id"]], ["bigint"])
    return f"release {name} dropped"
