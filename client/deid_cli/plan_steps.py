"""The steps of a release plan (deid apply): each one a (kind, what, fn) whose fn(conn) does
its work only when the catalog does not already say so, and returns what it did. Reading the
catalog (deid.hierarchy, deid.column_role, deid.policy, deid.release) needs deid_admin."""
import os

from .release_cmd import request

KINDS = {"hierarchy": ("name",), "role": ("relation", "columns"),
         "policy": ("role", "relation", "min_k"), "request": ("name", "source", "method", "k")}


def load(path):
    """The plan file, parsed (TOML)."""
    try:
        import tomllib
    except ImportError:                           # Python < 3.11
        import tomli as tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)


class Refused(Exception):
    """A refusal of the plan itself, shaped like a server error (e.diag) for __main__._error."""

    def __init__(self, sqlstate, message, hint):
        super().__init__(message)
        self.diag = type("Diag", (), dict(sqlstate=sqlstate, message_primary=message,
                                          message_detail=None, message_hint=hint))


def _member_or_interval(h, conn, as_name):
    if "rows" in h:
        conn.execute("SELECT deid.load_hierarchy(%s, %s, %s::float8[])",
                     [as_name, h["rows"], h.get("info_loss")])
    else:
        conn.execute("SELECT deid.interval_hierarchy(%s, %s::numeric, %s::numeric, %s::int[],"
                     " %s::float8[])", [as_name, h["low"], h["high"], h["widths"],
                                        h.get("info_loss")])


def _diff(cols, table, x, y):
    return (f"NOT EXISTS (SELECT {cols} FROM deid.{table} WHERE hierarchy = %({x})s"
            f" EXCEPT SELECT {cols} FROM deid.{table} WHERE hierarchy = %({y})s)")


_HEAD = "(SELECT row(kind, levels, low, high, widths) FROM deid.hierarchy WHERE name = %({})s)"
SAME_HIERARCHY = "SELECT " + " AND ".join(
    [_HEAD.format("a") + " IS NOT DISTINCT FROM " + _HEAD.format("b")]
    + [_diff(cols, table, x, y) for cols, table in (("level, info_loss", "hierarchy_level"),
                                                     ("level, value, parent", "hierarchy_member"))
       for x, y in (("a", "b"), ("b", "a"))])


def hierarchy(h):
    def fn(conn):
        if not conn.execute("SELECT 1 FROM deid.hierarchy WHERE name = %s", [h["name"]]).fetchone():
            _member_or_interval(h, conn, h["name"])
            return "created"
        probe = f"deid_apply_probe_{os.getpid()}"
        with conn.transaction(force_rollback=True):     # load it again under another name, compare
            _member_or_interval(h, conn, probe)
            same = conn.execute(SAME_HIERARCHY, {"a": h["name"], "b": probe}).fetchone()[0]
        if not same:
            raise Refused("42710", f'hierarchy "{h["name"]}" exists with other content',
                          "A plan does not overwrite a hierarchy: drop it (deid.drop_hierarchy)"
                          " or give the plan's hierarchy another name.")
        return "unchanged"
    return "hierarchy", h["name"], fn


def role(relation, column, spec):
    spec = {"role": spec} if isinstance(spec, str) else spec
    want = (spec["role"], spec.get("hierarchy"), spec.get("source"))

    def fn(conn):
        have = conn.execute("SELECT role, hierarchy, source FROM deid.column_role"
                            " WHERE relation = %s::regclass AND column_name = %s",
                            [relation, column]).fetchone()
        if have == want:
            return "unchanged"
        conn.execute("SELECT deid.set_role(%s::regclass, %s, %s, %s, %s)", [relation, column, *want])
        return "set"
    return "role", f"{relation}.{column} = {spec['role']}", fn


def policy(p):
    want = (p["min_k"], p.get("min_l"), bool(p.get("per_source_k", False)))

    def fn(conn):
        have = conn.execute("SELECT min_k, min_l, per_source_k FROM deid.policy"
                            " WHERE grantee = %s::regrole AND relation = %s::regclass",
                            [p["role"], p["relation"]]).fetchone()
        if have == want:
            return "unchanged"
        conn.execute("SELECT deid.allow_requests(%s, %s::regclass, %s, %s, %s)",
                     [p["role"], p["relation"], *want])
        return "allowed"
    return "policy", f"{p['role']} on {p['relation']} (k >= {p['min_k']})", fn


def _same_request(r, method, same_source, params):
    options = params.get("options") or {}
    return (method == r["method"] and same_source and params.get("k") == r["k"]
            and params.get("l") == r.get("l")
            and ("columns" not in r or params.get("columns") == r["columns"])
            and ("selection" not in r or params.get("selection") == r["selection"])
            and all(options.get(k) == v for k, v in (r.get("options") or {}).items()
                    if k != "replace"))


def release(r):
    def fn(conn):
        old = conn.execute("SELECT method, source = %s::regclass, parameters FROM deid.release"
                           " WHERE name = %s AND status = 'committed'",
                           [r["source"], r["name"]]).fetchone()
        replace = bool(r.get("replace", False))
        if old and not replace and _same_request(r, *old):
            return "skipped (committed, same parameters)"
        options = dict(r.get("options") or {}, **({"replace": True} if replace and old else {}))
        row = request(conn, r["source"], r["method"], r["k"], r.get("l"), r.get("columns"),
                      r.get("selection"), options, r["name"])
        return (f"{'replaced' if old else 'released'}: {row['rows']} rows,"
                f" {'verified' if row['verified'] else 'NOT verified'}")
    return "request", f"{r['name']} ({r['method']}, k={r['k']})", fn


def steps(plan):
    """The plan's steps in order: hierarchies, roles, policies, requests. A plan that misses a
    required key or has an unknown section raises ValueError."""
    unknown = set(plan) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown section(s) {sorted(unknown)}; a plan has "
                         + ", ".join(f"[[{k}]]" for k in KINDS))
    for kind, required in KINDS.items():
        for i, entry in enumerate(plan.get(kind, []), 1):
            missing = [k for k in required if k not in entry]
            if missing:
                raise ValueError(f"[[{kind}]] #{i} lacks {', '.join(missing)}")
    out = [hierarchy(h) for h in plan.get("hierarchy", [])]
    out += [role(r["relation"], col, spec) for r in plan.get("role", [])
            for col, spec in r["columns"].items()]
    out += [policy(p) for p in plan.get("policy", [])]
    out += [release(r) for r in plan.get("request", [])]
    return out

