"""The selection's own tree (a whitelisted predicate, immutable) and its SQL: identifiers through
quote_ident, every literal a bound parameter ``$n::<column type>``. selection.py builds it from
sqlglot's parse; rendering never goes back to sqlglot.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import AbstractSet, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from sqlglot import exp

from ..errors import DeidError, FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE


def quote_ident(name: str) -> str:
    """Quote an identifier for PostgreSQL: wrap in double quotes, double embedded quotes."""
    if not isinstance(name, str) or name == "" or "\x00" in name:
        raise DeidError(INVALID_PARAMETER_VALUE, f"invalid identifier: {name!r}")
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------------------------
# Our own AST (immutable; rendering never goes back to sqlglot)


@dataclass(frozen=True)
class _Cmp:
    op: str  # '=', '<>', '<', '>', '<=', '>='
    column: str
    value: str


@dataclass(frozen=True)
class _InList:
    column: str
    values: Tuple[str, ...]
    negated: bool


@dataclass(frozen=True)
class _Between:
    column: str
    low: str
    high: str
    negated: bool


@dataclass(frozen=True)
class _IsNull:
    column: str
    negated: bool


@dataclass(frozen=True)
class _BoolColumn:
    column: str


@dataclass(frozen=True)
class _And:
    items: Tuple[Node, ...]


@dataclass(frozen=True)
class _Or:
    items: Tuple[Node, ...]


@dataclass(frozen=True)
class _Not:
    item: Node


# a node of the predicate's tree
Node = Union[_Cmp, _InList, _Between, _IsNull, _BoolColumn, _And, _Or, _Not]
# expand(column, value) -> the values it stands for, or None (render)
Expand = Callable[[str, str], Optional[Sequence[Any]]]

_FLIP = {"=": "=", "<>": "<>", "<": ">", ">": "<", "<=": ">=", ">=": "<="}
_CMP_NODES = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.GT: ">", exp.LTE: "<=", exp.GTE: ">="}
_NUMBER_RE = re.compile(r"^(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


class Selection:
    """A validated selection predicate (002 sec. 4.4: sigma_(alpha_i op cri)*)."""

    __slots__ = ("_root", "_types", "_as_text", "columns", "text")

    def __init__(self, root: Node, types: Dict[str, str], text: str,
                 as_text: AbstractSet[str] = frozenset()) -> None:
        self._root, self._as_text = root, as_text     # as_text: compared as their text
        self._types = types  # referenced column -> cast type (typmod removed)
        self.columns = frozenset(types)
        self.text = text

    def __repr__(self) -> str:
        return f"Selection({self.text!r})"

    # -- rendering -------------------------------------------------------------------------
    def render(self, expand: Optional[Expand] = None,
               start: int = 1) -> Tuple[str, List[Optional[str]]]:
        """SQL boolean expression + parameter values (str, or None for SQL NULL).

        Identifiers are :func:`quote_ident`-ed; each literal is ``$n::<column type>`` with n
        counting from ``start``.  ``expand(column, value) -> list[str] | None`` rewrites
        ``col = v`` to ``col IN (expand(v))`` and ``col <> v`` to ``col NOT IN (...)`` (and each
        IN-list item likewise): 002 sec. 5.2 step 1, "PT = 1 matches 1a, 1b, 1c, 1mic".
        An empty expansion renders ``FALSE`` (for = / IN) or ``col IS NOT NULL`` (for <> / NOT IN).
        Ordering comparisons and BETWEEN are never expanded.
        """
        params: List[Optional[str]] = []

        def bind(column: str, value: Optional[str]) -> str:
            params.append(value)
            return f"${start + len(params) - 1}::{self._types[column]}"

        def ref(column: str, ordered: bool = False) -> str:
            if column not in self._as_text:
                return quote_ident(column)
            if ordered:
                raise DeidError(FEATURE_NOT_SUPPORTED, f"column {column!r} is compared as text: "
                                "it has no order in a selection", hint="Use =, <>, IN or IS NULL.")
            return f"({quote_ident(column)})::text"

        def expanded(column: str, values: Sequence[str]) -> List[str]:
            if expand is None:
                return list(values)
            out: List[str] = []
            seen: set[str] = set()
            for v in values:
                repl = expand(column, v)
                for item in ([v] if repl is None else repl):
                    if item is None:
                        raise DeidError(INVALID_PARAMETER_VALUE,
                                        f"expand() returned NULL for column {column!r}")
                    item = str(item)
                    if item not in seen:
                        seen.add(item)
                        out.append(item)
            return out

        def in_list(column: str, values: Sequence[str], negated: bool) -> str:
            col = ref(column)
            if not values:
                return f"({col} IS NOT NULL)" if negated else "FALSE"
            if len(values) == 1:
                return f"{col} {'<>' if negated else '='} {bind(column, values[0])}"
            items = ", ".join(bind(column, v) for v in values)
            return f"{col} {'NOT IN' if negated else 'IN'} ({items})"

        def walk(node: Node) -> str:
            if isinstance(node, _Cmp):
                if node.op in ("=", "<>") and expand is not None:
                    return in_list(node.column, expanded(node.column, [node.value]), node.op == "<>")
                return (f"{ref(node.column, node.op not in ('=', '<>'))} {node.op} "
                        f"{bind(node.column, node.value)}")
            if isinstance(node, _InList):
                return in_list(node.column, expanded(node.column, node.values), node.negated)
            if isinstance(node, _Between):
                kw = "NOT BETWEEN" if node.negated else "BETWEEN"
                return (f"{ref(node.column, True)} {kw} {bind(node.column, node.low)} "
                        f"AND {bind(node.column, node.high)}")
            if isinstance(node, _IsNull):
                return f"{ref(node.column)} IS {'NOT NULL' if node.negated else 'NULL'}"
            if isinstance(node, _BoolColumn):
                return quote_ident(node.column)
            if isinstance(node, _And):
                return "(" + " AND ".join(walk(i) for i in node.items) + ")"
            if isinstance(node, _Or):
                return "(" + " OR ".join(walk(i) for i in node.items) + ")"
            if isinstance(node, _Not):
                return f"(NOT {walk(node.item)})"
            raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

        return walk(self._root), params

    # -- selection limits ------------------------------------------------------------------
    def equalities(self) -> dict[str, set[str]]:
        """Columns pinned by the top-level AND-conjunction of ``col = lit`` / ``col IN (lits)``.

        Used for 002 sec. 4.5 step 2 (selection-derived generalization limits).  Conjuncts under
        OR or NOT never pin.  Several pins of one column intersect (``a = 1 AND a IN (1, 2)`` ->
        ``{'1'}``); an empty set means the conjunction can match no row.
        """
        out: dict[str, set[str]] = {}

        def conjuncts(node: Node) -> Iterator[Node]:
            if isinstance(node, _And):
                for i in node.items:
                    yield from conjuncts(i)
            else:
                yield node

        for node in conjuncts(self._root):
            if isinstance(node, _Cmp) and node.op == "=":
                vals = {node.value}
            elif isinstance(node, _InList) and not node.negated:
                vals = set(node.values)
            else:
                continue
            out[node.column] = out[node.column] & vals if node.column in out else vals
        return out

    def literals(self) -> List[Tuple[str, str]]:
        """Every (column, literal text) the selection compares, in order (each becomes a bound
        parameter cast to the column's type)."""
        def walk(node: Node) -> Iterator[Tuple[str, str]]:
            if isinstance(node, _Cmp):
                yield node.column, node.value
            elif isinstance(node, _InList):
                for v in node.values:
                    yield node.column, v
            elif isinstance(node, _Between):
                yield node.column, node.low
                yield node.column, node.high
            elif isinstance(node, (_And, _Or)):
                for i in node.items:
                    yield from walk(i)
            elif isinstance(node, _Not):
                yield from walk(node.item)
        return list(walk(self._root))


# --------------------------------------------------------------------------------------------
# Parsing

_TYPE_TOKEN_RE = re.compile(
    r'\s*(?:(?P<word>[A-Za-z_][A-Za-z0-9_$]*)|(?P<quoted>"(?:[^"]|"")+")|(?P<dot>\.)'
    r"|(?P<array>\[\d*\])|(?P<typmod>\(\s*\d+\s*(?:,\s*-?\d+\s*)?\)))"
)


def cast_type(column: str, pg_type: Any) -> str:
    """The type to cast a bound literal to: ``pg_type`` (format_type output) without typmods."""
    if not isinstance(pg_type, str) or not pg_type.strip():
        raise DeidError(FEATURE_NOT_SUPPORTED, f"column {column!r} has no usable type: {pg_type!r}")
    parts: List[Tuple[str, str]] = []
    pos, s = 0, pg_type.strip()
    while pos < len(s):
        m = _TYPE_TOKEN_RE.match(s, pos)
        if m is None or m.end() == pos:
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"column {column!r} has a type deid cannot bind values to: {pg_type!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        if kind == "typmod":
            continue
        parts.append((kind, m.group(kind)))
    typ, prev = "", ""
    for kind, text in parts:
        if kind in ("dot", "array") or prev == "dot":
            typ += text
        else:
            typ += (" " if typ else "") + text
        prev = kind
    # An explicit cast to bare "character"/"bit" means length 1: use the unlimited forms.
    typ = re.sub(r"^character(?=$|\[)", "bpchar", typ)
    typ = re.sub(r"^bit(?=$|\[)", "bit varying", typ)
    return typ


