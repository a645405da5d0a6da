"""Generalization's part of the fuzz checker (002 sec. 2, 4.5), from what was stored: the release
grouped by each source system's projected quasi-identifiers has classes of >= k rows, and every
released column is the selected source column mapped to one level of its hierarchy (Tables 6-7;
raw for the others); a policy release that is below the policy's min_k over its
quasi-identifiers jointly is reported. Imports nothing of deid."""
import re
from collections import Counter
from decimal import Decimal

from psycopg import sql

from ..stored import Finding, by_suffix, rel


def check(checker, name, src, params, relations, rids, out):
    k, cols, roles = params["k"], params["columns"], params.get("roles") or {}
    table = by_suffix(relations, name, "")
    if table is None:
        raise Finding("layout", f"{name}: no table {name} in {relations}")
    n = checker._count(table)
    if n != len(rids):
        out.append(("rows", f"{name}: {n} rows released, the selection picks {len(rids)}"))
    sources = {}
    for c in cols:
        r = roles.get(c) or {}
        if r.get("role") == "quasi_identifier":
            sources.setdefault(r.get("source") or "\0" + src, []).append(c)
    for s, qis in sources.items():
        small = [c for c in checker._groups(table, qis) if c < k]
        if small:
            out.append(("k_per_source", f"{name}: source {s!r} over {qis} has a class of {min(small)} < k={k}"))
    checker.stats["generalization_classes_checked"] += sum(len(checker._groups(table, q)) for q in sources.values())
    _generalization_truth(checker, name, src, params, table, rids, out)
    qis = [c for v in sources.values() for c in v]
    grant = params.get("authorized_via") or {}
    if len(sources) > 1 and grant.get("via") not in (None, "select") and not grant.get("per_source_k"):
        # the policy's minimum holds over all quasi-identifiers jointly (not the request's k)
        joint_k = grant.get("min_k") or k
        small = [c for c in checker._groups(table, qis) if c < joint_k]
        if small:
            out.append(("policy_joint_k", f"{name}: a policy release is {min(small)}-anonymous over {qis}"
                        f" jointly, the policy's min_k={joint_k}"))


def _generalization_truth(checker, name, src, params, table, rids, out):
    """Every released column is the source column over the selection, as a multiset: raw for
    columns that are not quasi-identifiers, mapped to one level of the column's hierarchy
    (002: whole columns are generalized) for quasi-identifiers."""
    roles = params.get("roles") or {}
    bound = dict(checker.conn.execute("SELECT column_name::text, hierarchy FROM deid.column_role"
                                   " WHERE relation = %s::regclass", [src]).fetchall())
    vals = checker._source_values(src, params, params["columns"], rids)
    for c in params["columns"]:
        released = Counter(_canon(r[0]) for r in checker.conn.execute(
            sql.SQL("SELECT {}::text FROM {}").format(sql.Identifier(c), rel(table))))
        source = Counter(_canon(v[c]) for v in vals.values())
        if (roles.get(c) or {}).get("role") != "quasi_identifier" or not bound.get(c):
            ok = released == source
        else:
            ok = any(released == image for image in _images(checker, bound[c], source))
        checker.stats["generalization_columns_checked"] += 1
        if not ok:
            out.append(("truth", f"{name}: column {c} is not the selected source column "
                        f"at any level of its hierarchy"))


def _images(checker, hierarchy, source):
    """The source multiset mapped to each level of the hierarchy (002 Tables 6-7), a NULL
    (options.nulls 'value') as SQL NULL or as the label 'NULL' below the top, '*' at it."""
    for image in _levels(checker, hierarchy, source):
        yield image
        yield _mapped(image, {v: "NULL" if v == NULL else v for v in image})


def _levels(checker, hierarchy, source):
    kind, levels, low, widths = checker.conn.execute(
        "SELECT kind, levels, low, widths FROM deid.hierarchy WHERE name = %s", [hierarchy]).fetchone()
    yield source
    if kind == "member":
        parent = {(lv, v): p for lv, v, p in checker.conn.execute(
            "SELECT level, value, parent FROM deid.hierarchy_member WHERE hierarchy = %s", [hierarchy])}
        cur = dict((v, v) for v in source)
        for lv in range(levels - 1):
            top = lv == levels - 2
            cur = {v: (parent.get((lv, a)) if a != NULL else ("*" if top else NULL)) for v, a in cur.items()}
            yield _mapped(source, cur)
        return
    for w in widths:
        yield _mapped(source, {v: NULL if v == NULL else _band(Decimal(v), low, w) for v in source})
    yield _mapped(source, {v: "*" for v in source})


NULL = "\0NULL"


def _canon(v):
    """A released or source value as compared: numbers by value (a numeric(6,2) 15.00 is
    released as 15.0), SQL NULL as the NULL token."""
    if v is None:
        return NULL
    try:
        return _num(Decimal(v)) if re.fullmatch(r"-?\d+(\.\d+)?", v) else v
    except ArithmeticError:
        return v


def _band(v, low, width):
    start = low + ((v - low) // width) * width
    return f"[{_num(start)},{_num(start + width)})"


# the composition attacker (tests/fuzz/sequences.py) places a patient in a class as this
# checker compares values
canon, band = _canon, _band


def _num(d):
    d = d.normalize()
    return format(d, "f") if d == d.to_integral() else str(d)


def _mapped(source, mapping):
    out = Counter()
    for v, n in source.items():
        out[mapping[v]] += n
    return out
