"""Request selections: parse a user predicate with a strict whitelist, re-render it as safe SQL.

Paper 002 sec. 4.4 defines a request as R(Pi_A, sigma_(alpha_i op cri)*): a projection plus
selections that compare an attribute with a value of its domain, op in {=, <>, <, >, <=, >=}.
This module implements the selection half for the database: the user's text is parsed with
sqlglot's postgres dialect, every node of the tree is checked against an explicit whitelist
(never a blacklist), and the accepted tree is copied into a tiny AST of our own.  SQL is then
rendered from *that* AST only: identifiers go through :func:`quote_ident`, every literal becomes a
bound parameter ``$n::<column type>``.  No byte of the user's text is ever pasted into SQL.

Accepted grammar (case-insensitive keywords)::

    pred   := pred OR pred | pred AND pred | NOT pred | ( pred )
            | col op lit | lit op col                -- op: = <> != < > <= >=
            | col [NOT] IN ( lit [, lit]* )
            | col [NOT] BETWEEN lit AND lit
            | col IS [NOT] NULL                       -- also ISNULL / NOTNULL
            | col                                     -- only a boolean column
    lit    := 'string' | number | -number | TRUE | FALSE     -- NULL only in IS [NOT] NULL
    col    := name | "quoted name"                   -- must be one of the allowed columns

Unquoted names fold to lower case like PostgreSQL (ASCII A-Z only); quoted names match exactly.

Decisions beyond the paper (documented deviations / choices):

* Refused (SQLSTATE 0A000 FEATURE_NOT_SUPPORTED): subqueries, function calls and special values
  such as CURRENT_DATE, casts (``::``, CAST, typed literals such as ``DATE '...'``), LIKE / ILIKE /
  SIMILAR TO / regex operators, arithmetic and other operators, column-vs-column and
  literal-vs-literal comparisons (002 sec. 4.4 compares an attribute with a value), qualified
  names (``t.a``), ``= NULL`` / ``<> NULL`` / NULL in IN lists (always unknown in SQL: use IS
  [NOT] NULL), IS TRUE / IS DISTINCT FROM, BETWEEN SYMMETRIC, row values, arrays, and string forms
  other than the plain ``'...'`` (E'', $$..$$, U&'', B'', X'', N'').  Write a date as ``'2020-01-31'``:
  every literal is converted to the compared column's type anyway.
* Refused as SQLSTATE 42601 SYNTAX_ERROR: anything sqlglot cannot parse, ``;`` (also a trailing
  one), several statements, comments (``--`` and ``/* */``), trailing garbage.
* Unknown columns: SQLSTATE 42703 UNDEFINED_COLUMN.  Empty / blank / over-long text: 22023.
* The cast target is the column type with its type modifier removed (``character varying(10)``
  -> ``character varying``, ``numeric(6,2)`` -> ``numeric``, ``character(3)`` -> ``bpchar``,
  ``bit(3)`` -> ``bit varying``), because an explicit cast to a length- or scale-limited type
  silently truncates or rounds the value and would change which rows match.
* A column of a type that is not built in (an enum, a composite) is read and released as its
  text, and compared as its text (``(col)::text = $n::text``); its text order is not the type's
  own, so <, >, <=, >= and BETWEEN on it are refused (0A000).
* 002 sec. 5.2 step 1: a selection on a generalized value (``PT = '1'``) matches its leaves.  That
  rewrite is the caller's ``expand`` hook in :meth:`Selection.render`.
"""

from __future__ import annotations

import re
from typing import AbstractSet, Any, Dict, List, NoReturn, Optional, Set, Tuple, Type

from sqlglot import errors as sg_errors
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType  # type: ignore[attr-defined]

from ..errors import (FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE, SYNTAX_ERROR,
                      UNDEFINED_COLUMN, DeidError)
from .selection_tree import (_And, _Between, _BoolColumn, _Cmp, _CMP_NODES, _FLIP, _InList,  # noqa: F401
                             _IsNull, _Not, _NUMBER_RE, _Or, Node, Selection, cast_type,
                             quote_ident)

__all__ = ["quote_ident", "parse_selection", "Selection", "MAX_SELECTION_LENGTH"]

MAX_SELECTION_LENGTH = 100_000
_MAX_DEPTH = 200

_GRAMMAR_HINT = (
    "A selection may only use the allowed columns, literals ('text', 42, -1.5, TRUE, FALSE), "
    "= <> != < > <= >=, IN (...), BETWEEN ... AND ..., IS [NOT] NULL, AND, OR, NOT and parentheses."
)


def _fold(name: str) -> str:
    """PostgreSQL's folding of an unquoted identifier (ASCII letters only)."""
    return name.translate(_FOLD)


_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _snippet(node: Any) -> str:
    try:
        text: str = node.sql(dialect="postgres")
    except Exception:  # pragma: no cover - best effort for messages
        text = type(node).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def _refuse(node: Any) -> NoReturn:
    """Raise the DeidError naming a node outside the whitelist."""
    s = _snippet(node)
    if isinstance(node, (exp.Query, exp.Exists, exp.Any, exp.All)):
        what, hint = f"subqueries are not allowed in a selection: {s}", None
    elif isinstance(node, (exp.Cast, exp.TryCast)):
        what = f"casts are not allowed in a selection: {s}"
        hint = "Write the value as a plain literal ('2020-01-31'); deid converts it to the column's type."
    elif isinstance(node, (exp.Like, exp.ILike, exp.SimilarTo, exp.RegexpLike, exp.RegexpILike)):
        what, hint = f"pattern matching is not supported in a selection: {s}", "Use = or IN (...)."
    elif isinstance(node, (exp.Parameter, exp.Placeholder)):
        what, hint = f"parameters are not allowed in a selection: {s}", None
    elif isinstance(node, exp.Alias):
        raise DeidError(SYNTAX_ERROR, f"unexpected text after the expression: {_snippet(node.args.get('alias'))!r} "
                        f"in {s}", hint=_GRAMMAR_HINT)
    elif isinstance(node, exp.Func):
        what, hint = f"function calls are not allowed in a selection: {s}", None
    elif isinstance(node, (exp.Binary, exp.Unary)):
        what = f"operator not allowed in a selection: {s}"
        hint = None
    else:
        what, hint = f"{type(node).__name__} is not allowed in a selection: {s}", None
    raise DeidError(FEATURE_NOT_SUPPORTED, what, hint=hint or _GRAMMAR_HINT)


class _Parser:
    def __init__(self, columns: Dict[str, str]) -> None:
        self.columns = columns
        self.types: dict[str, str] = {}

    # -- leaves ----------------------------------------------------------------------------
    def column(self, node: Any) -> Optional[str]:
        """Resolve a Column node to an allowed column name, or None if it is not a column."""
        if not isinstance(node, exp.Column):
            return None
        extra = [k for k, v in node.args.items() if k != "this" and v]
        if extra:
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"qualified column names are not allowed in a selection: {_snippet(node)}",
                            hint="Write the bare column name.")
        ident = node.this
        if not isinstance(ident, exp.Identifier) or any(
                v for k, v in ident.args.items() if k not in ("this", "quoted")):
            _refuse(ident)
        raw: str = ident.this
        name = raw if ident.args.get("quoted") else _fold(raw)
        if name not in self.columns:
            similar = [c for c in self.columns if c.lower() == raw.lower()]
            hint = (f"Did you mean {quote_ident(similar[0])}? Unquoted names are folded to lower case."
                    if similar else "Allowed columns: " + ", ".join(sorted(self.columns)))
            raise DeidError(UNDEFINED_COLUMN, f"column {name!r} does not exist or may not be used "
                            "in this selection", hint=hint)
        if name not in self.types:
            self.types[name] = cast_type(name, self.columns[name])
        return name

    @staticmethod
    def literal(node: Any) -> Optional[Tuple[str, Optional[str]]]:
        """(kind, text) of a whitelisted literal node, or None.  kind: string|number|boolean|null."""
        while isinstance(node, exp.Paren):
            node = node.this
        if type(node) is exp.Literal:
            if node.args.get("is_string"):
                return ("string", node.this)
            text = node.this
            if isinstance(text, str) and _NUMBER_RE.match(text):
                return ("number", text)
            return None
        if type(node) is exp.Neg and type(node.this) is exp.Literal and not node.this.args.get("is_string"):
            text = node.this.this
            if isinstance(text, str) and _NUMBER_RE.match(text):
                return ("number", "-" + text)
            return None
        if type(node) is exp.Boolean:
            return ("boolean", "true" if node.this else "false")
        if type(node) is exp.Null:
            return ("null", None)
        return None

    def operand(self, node: Any) -> Any:
        while isinstance(node, exp.Paren):
            node = node.this
        return node

    def value(self, node: Any, context: str) -> str:
        """A non-NULL literal value as str; refuse anything else."""
        lit = self.literal(node)
        if lit is None:
            node = self.operand(node)
            if isinstance(node, exp.Column):
                self.column(node)  # unknown column -> 42703 first
                raise DeidError(FEATURE_NOT_SUPPORTED,
                                f"column-to-column comparisons are not allowed in a selection: {context}",
                                hint="Compare a column with a literal value.")
            _refuse(node)
        if lit[0] == "null":
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"comparison with NULL is never true: {context}",
                            hint="Use IS NULL or IS NOT NULL.")
        return str(lit[1])

    # -- predicates ------------------------------------------------------------------------
    def predicate(self, node: Any, depth: int = 0) -> Node:
        """The whitelisted tree of a condition node; anything else is refused."""
        if depth > _MAX_DEPTH:
            raise DeidError(FEATURE_NOT_SUPPORTED, "selection is nested too deeply",
                            hint="Write long OR chains as col IN (...) and flatten parentheses.")
        t = type(node)
        if t is exp.Paren:
            return self.predicate(node.this, depth + 1)
        if t in (exp.And, exp.Or):
            return self._chain(node, t, depth)
        if t is exp.Not:
            return self._negated(self.predicate(node.this, depth + 1))
        if t in _CMP_NODES:
            return self._comparison(node, _CMP_NODES[t])
        if t is exp.In:
            return self._in_list(node)
        if t is exp.Between:
            return self._between(node)
        if t is exp.Is:
            return self._is_null(node)
        if t is exp.Column:
            return self._bool_column(node)
        if self.literal(node) is not None:
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"a selection must be a condition on columns, not the literal {_snippet(node)}",
                            hint=_GRAMMAR_HINT)
        _refuse(node)

    def _chain(self, node: Any, t: Type[exp.Expression], depth: int) -> Node:
        """A chain of one operator (AND or OR), flattened left to right."""
        items: List[Node] = []
        stack = [node]
        while stack:
            n = stack.pop()
            if type(n) is t:
                stack.append(n.expression)
                stack.append(n.this)
            else:
                items.append(self.predicate(n, depth + 1))
        return (_And if t is exp.And else _Or)(tuple(items))

    @staticmethod
    def _negated(inner: Node) -> Node:
        if isinstance(inner, _InList):
            return _InList(inner.column, inner.values, not inner.negated)
        if isinstance(inner, _Between):
            return _Between(inner.column, inner.low, inner.high, not inner.negated)
        if isinstance(inner, _IsNull):
            return _IsNull(inner.column, not inner.negated)
        return _Not(inner)

    def _comparison(self, node: Any, op: str) -> Node:
        """A column compared with a literal (either side); column to column is refused."""
        left, right = self.operand(node.this), self.operand(node.expression)
        ctx = _snippet(node)
        lcol, rcol = self.column(left), self.column(right)
        if lcol is not None and rcol is not None:
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"column-to-column comparisons are not allowed in a selection: {ctx}",
                            hint="Compare a column with a literal value.")
        if lcol is not None:
            return _Cmp(op, lcol, self.value(right, ctx))
        if rcol is not None:
            return _Cmp(_FLIP[op], rcol, self.value(left, ctx))
        for side in (left, right):
            if self.literal(side) is None:
                _refuse(side)
        raise DeidError(FEATURE_NOT_SUPPORTED,
                        f"a comparison must involve a column: {ctx}", hint=_GRAMMAR_HINT)

    def _in_list(self, node: Any) -> Node:
        self._only_args(node, {"this", "expressions"})
        col = self.column(self.operand(node.this))
        if col is None:
            _refuse(self.operand(node.this))
        items = node.args.get("expressions") or []
        if not items:
            raise DeidError(SYNTAX_ERROR, f"empty IN list: {_snippet(node)}",
                            hint="List at least one value: col IN ('a', 'b').")
        ctx = _snippet(node)
        return _InList(col, tuple(self.value(i, ctx) for i in items), False)

    def _between(self, node: Any) -> Node:
        self._only_args(node, {"this", "low", "high"})
        col = self.column(self.operand(node.this))
        if col is None:
            _refuse(self.operand(node.this))
        ctx = _snippet(node)
        return _Between(col, self.value(node.args["low"], ctx), self.value(node.args["high"], ctx), False)

    def _is_null(self, node: Any) -> Node:
        self._only_args(node, {"this", "expression", "negate"})
        col = self.column(self.operand(node.this))
        if col is None:
            _refuse(self.operand(node.this))
        if type(node.expression) is not exp.Null:
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"only IS NULL and IS NOT NULL are allowed in a selection: {_snippet(node)}",
                            hint=_GRAMMAR_HINT)
        return _IsNull(col, bool(node.args.get("negate")))

    def _bool_column(self, node: Any) -> Node:
        col = self.column(node)
        if col is None:
            _refuse(node)
        if self.types[col] != "boolean":
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"column {col!r} is not boolean and cannot stand alone as a condition",
                            hint="Compare it with a value, e.g. col = 'x'.")
        return _BoolColumn(col)

    @staticmethod
    def _only_args(node: Any, allowed: Set[str]) -> None:
        extra = sorted(k for k, v in node.args.items() if k not in allowed and v)
        if extra:
            if "query" in extra:
                raise DeidError(FEATURE_NOT_SUPPORTED,
                                f"subqueries are not allowed in a selection: {_snippet(node)}",
                                hint=_GRAMMAR_HINT)
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"{type(node).__name__} with {', '.join(extra)} is not allowed in a selection: "
                            f"{_snippet(node)}", hint=_GRAMMAR_HINT)


def parse_selection(text: str, columns: Dict[str, str],
                    as_text: AbstractSet[str] = frozenset()) -> Selection:
    """Parse and validate a selection (002 sec. 4.4) against the allowed ``columns``.

    ``columns`` maps each column the requester may reference to its PostgreSQL type name as
    ``format_type()`` prints it; ``as_text`` names those compared as their text.  Raises
    :class:`DeidError` (22023, 42601, 0A000 or 42703) naming the offending part of the text.
    """
    if text is None or not isinstance(text, str) or not text.strip():
        raise DeidError(INVALID_PARAMETER_VALUE, "selection is empty",
                        hint="Pass NULL for no selection, or a condition such as age >= 18.")
    if len(text) > MAX_SELECTION_LENGTH:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"selection is too long ({len(text)} characters, at most {MAX_SELECTION_LENGTH})",
                        hint="Select on fewer values, or release a view that holds the selection.")
    if "\x00" in text:
        raise DeidError(INVALID_PARAMETER_VALUE, "selection contains a NUL character",
                        hint="Remove the NUL byte from the selection text.")
    dialect = Dialect.get_or_raise("postgres")
    try:
        tokens = dialect.tokenize(text)
    except sg_errors.SqlglotError as e:
        raise DeidError(SYNTAX_ERROR, f"cannot tokenize selection: {_first_line(e)}", hint=_GRAMMAR_HINT)
    for tok in tokens:
        if tok.comments:
            raise DeidError(SYNTAX_ERROR,
                            f"comments are not allowed in a selection: {tok.comments[0].strip()[:60]!r}",
                            hint="Remove the -- or /* */ comment.")
        if tok.token_type == TokenType.SEMICOLON:
            raise DeidError(SYNTAX_ERROR,
                            f"';' is not allowed in a selection (line {tok.line}, column {tok.col}): "
                            "a selection is one condition, not statements",
                            hint="Remove the ';' and anything after it.")
        if tok.token_type == TokenType.DCOLON:
            raise DeidError(FEATURE_NOT_SUPPORTED,
                            f"casts ('::') are not allowed in a selection (line {tok.line}, column {tok.col})",
                            hint="Write the value as a plain literal; deid converts it to the column's type.")
    try:
        trees = dialect.parser().parse(tokens, text)
    except sg_errors.ParseError as e:
        err = (e.errors or [{}])[0]
        where = f" at or near {err.get('highlight')!r}" if err.get("highlight") else ""
        raise DeidError(SYNTAX_ERROR,
                        f"syntax error in selection{where}: "
                        f"{_plain(err.get('description') or _first_line(e))}",
                        hint=_GRAMMAR_HINT)
    except sg_errors.SqlglotError as e:
        raise DeidError(SYNTAX_ERROR, f"syntax error in selection: {_first_line(e)}", hint=_GRAMMAR_HINT)
    except RecursionError:
        raise DeidError(FEATURE_NOT_SUPPORTED, "selection is nested too deeply",
                            hint="Write long OR chains as col IN (...) and flatten parentheses.")
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise DeidError(SYNTAX_ERROR, "a selection must be exactly one condition", hint=_GRAMMAR_HINT)
    if not isinstance(columns, dict):
        raise DeidError(INVALID_PARAMETER_VALUE, "columns must be a dict of column name -> type")
    p = _Parser(columns)
    try:
        root = p.predicate(trees[0])
    except RecursionError:
        raise DeidError(FEATURE_NOT_SUPPORTED, "selection is nested too deeply",
                            hint="Write long OR chains as col IN (...) and flatten parentheses.")
    return Selection(root, p.types, text, frozenset(as_text) & frozenset(p.types))


def _plain(description: Any) -> str:
    """sqlglot's description of a parse error without its Python internals (class names)."""
    if "Required keyword" in description or "<class" in description:
        return "the condition is incomplete"
    return str(description)


def _first_line(e: BaseException) -> str:
    msg = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
    return _plain(msg.strip().splitlines()[0][:200]) if msg.strip() else "the selection is malformed"
