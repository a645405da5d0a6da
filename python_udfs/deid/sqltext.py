"""SQL text helpers (pure): identifiers are always double-quoted."""


def quote_ident(name: str) -> str:
    """Quote an identifier like PostgreSQL's quote_ident, but always: "a""b"."""
    if name is None:
        raise ValueError("identifier is NULL")
    if "\x00" in name:
        raise ValueError("identifier contains a NUL byte")
    return '"' + name.replace('"', '""') + '"'


def qualified(schema: str, name: str) -> str:
    return quote_ident(schema) + "." + quote_ident(name)


def quote_literal(text: str) -> str:
    """A string literal for message text (hints), like PostgreSQL's quote_literal: 'it''s'."""
    return "'" + str(text).replace("'", "''") + "'"
