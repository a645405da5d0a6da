"""Reading a stored release for the fuzzer's checker (tests/fuzz/checker.py): the release's
relations in schema deid_release, found by their names in deid.release.relations. Imports
nothing of deid."""
from psycopg import sql


class Finding(Exception):
    """A check that cannot go on: args (kind, text)."""


def rel(name):
    """The stored table behind a release view name (release.x -> deid_release.x)."""
    schema, _, table = name.partition(".")
    return sql.Identifier("deid_release" if schema == "release" else schema, table)


def by_suffix(relations, name, suffix):
    """The relation of the release named name + suffix, or None."""
    want = f"release.{name}{suffix}"
    return next((r for r in relations if r == want), None)
