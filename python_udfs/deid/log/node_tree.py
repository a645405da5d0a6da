"""A reader of PostgreSQL's stored query trees (pg_node_tree text, e.g. pg_rewrite.ev_action).

The composition rule asks which base table a view's row ids come from (log/source_identity.py).
The answer is in the view's stored rule; reading it as text runs no code of anyone's, where
planning or executing the view would. This parses the text form of nodes (outfuncs.c):
``{NAME :field value ...}`` is a node (a dict with its name under ``"_"``), ``( ... )`` a list
(a leading ``b``, ``i`` or ``o`` marks a bitmapset or integer/oid list), ``<>`` is NULL,
``"..."`` a string; a field's value may be several tokens (a Const's ``4 [ 1 0 0 0 ]``), which
come back as a list of atoms. Pure Python, no plpy.
"""
from typing import Any, List

_SPECIAL = "(){}"


def tokens(text: str) -> List[str]:
    """pg_strtok's tokens: ( ) { } alone, else runs up to whitespace or one of them; a
    backslash escapes the next character; quotes stay on the token."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in _SPECIAL:
            out.append(c)
            i += 1
        else:
            j, buf = i, []
            while j < n and not text[j].isspace() and text[j] not in _SPECIAL:
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                buf.append(text[j])
                j += 1
            out.append("".join(buf))
            i = j
    return out


def parse(text: str) -> Any:
    """The tree of one stored node (or list of nodes)."""
    toks = tokens(text)
    value, at = _value(toks, 0)
    return value


def _value(toks, at):
    t = toks[at]
    if t == "{":
        return _node(toks, at + 1)
    if t == "(":
        return _list(toks, at + 1)
    return _atom(t), at + 1


def _atom(t):
    if t == "<>":
        return None
    if len(t) >= 2 and t[0] == t[-1] == '"':
        return t[1:-1]
    return t


def _node(toks, at):
    node = {"_": toks[at]}
    at += 1
    while toks[at] != "}":
        field = toks[at]
        at += 1
        if toks[at].startswith(":") or toks[at] == "}":
            node[field[1:]] = None
            continue
        value, at = _value(toks, at)
        extra = []
        while toks[at] != "}" and not toks[at].startswith(":"):
            more, at = _value(toks, at)
            extra.append(more)
        node[field[1:]] = [value] + extra if extra else value
    return node, at + 1


def _list(toks, at):
    items = []
    while toks[at] != ")":
        item, at = _value(toks, at)
        items.append(item)
    if items and items[0] in ("b", "i", "o"):
        items = items[1:]
    return items, at + 1
