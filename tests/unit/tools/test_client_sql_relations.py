"""The `deid` client composes no SQL over a relation whose name it got at run time, other than a
release's own relations in schema `release`.

Reading a relation runs whatever code it holds (a view's functions, row-security policies)
with the rights of whoever runs the command; a superuser running `deid report` on a release of
a hostile administrator's view would lend her the superuser's rights. So the client names only
deid's catalog (`deid.<table>`), pg_catalog, deid's functions, and relations of schema
`release` it checked to be there; anything derived from a source comes from the server
(deid.report_source), which reads after its code walk. Checked on the source text of every
module of client/deid_cli/ (ast), and the check itself on the pattern it must refuse."""
import ast
import pathlib
import re

import pytest

CLIENT = pathlib.Path(__file__).resolve().parents[3] / "client" / "deid_cli"
# a relation position filled at run time: FROM / JOIN / INTO / UPDATE / TABLE then {} or %s
RUNTIME_RELATION = re.compile(r"\b(FROM|JOIN|INTO|UPDATE|TABLE)\s+(\{[^}]*\}|%s|%\(\w+\)s)")
# a literal relation after FROM / JOIN
LITERAL_RELATION = re.compile(r"\b(?:FROM|JOIN)\s+([A-Za-z_][\w.]*)\s*(\(?)")
ALLOWED_PREFIXES = ("deid.", "release.", "pg_", "pg_catalog.")
SQL_WORDS = re.compile(r"\bSELECT\b|\bFROM\b|\bJOIN\b")     # deid writes SQL in capitals
GUARD = "RELEASE_SCHEMA"      # the name a function compares a relation's schema with


def _strings(node):
    """(text, is_fstring_with_placeholders) of every string constant and f-string in `node`;
    an f-string's placeholders read as {}."""
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield n.value, False
        elif isinstance(n, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in n.values]
            yield "".join(parts), True


def _functions(tree):
    """Every top-level function (and the module body outside functions, as '<module>')."""
    funcs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    rest = ast.Module(body=[n for n in tree.body if n not in funcs], type_ignores=[])
    return [("<module>", rest)] + [(f.name, f) for f in funcs]


def _guarded(func):
    """The function compares a schema with RELEASE_SCHEMA before composing."""
    return any(isinstance(n, ast.Name) and n.id == GUARD for n in ast.walk(func))


def problems(source, filename="<client>"):
    """Where `source` composes SQL over a relation it did not get from deid's own schemas."""
    out = []
    for name, func in _functions(ast.parse(source, filename)):
        for text, fstring in _strings(func):
            if not SQL_WORDS.search(text):
                continue
            for m in RUNTIME_RELATION.finditer(text):
                before = text[:m.start(2)]
                if re.search(r"\b(deid|release)\.$", before):       # deid.{table}: deid's own
                    continue
                if not _guarded(func):
                    out.append(f"{filename}:{name}: a relation named at run time: {m.group(0)!r}")
            for m in LITERAL_RELATION.finditer(text):
                rel, call = m.group(1), m.group(2)
                if call or rel.lower() in ("unnest", "lateral") or rel.startswith(ALLOWED_PREFIXES):
                    continue
                out.append(f"{filename}:{name}: reads relation {rel!r}")
        for n in ast.walk(func):
            if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "Identifier" \
                    and len(n.args) >= 2 and not _release_literal(n.args[0]) and not _guarded(func):
                out.append(f"{filename}:{name}: a qualified identifier not checked to be in schema"
                           " release")
    return out


def _release_literal(arg):
    return isinstance(arg, ast.Constant) and arg.value == "release"


@pytest.mark.parametrize("path", sorted(CLIENT.glob("*.py")), ids=lambda p: p.name)
def test_client_module_reads_only_deids_relations(path):
    assert problems(path.read_text(), path.name) == []


OLD_REPORT = '''
def _source(conn, rel):
    row = conn.execute("SELECT n.nspname, c.relname FROM deid.release r JOIN pg_class c ON c.oid = r.source"
                       " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE r.release_id = %s", [1]).fetchone()
    return sql.Identifier(*row)


def _source_facts(conn, rel, source):
    (n,) = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(source)).fetchone()
    return n
'''


@pytest.mark.parametrize("snippet", [
    OLD_REPORT,
    'def f(conn, t):\n    return conn.execute(f"SELECT count(*) FROM {t}")\n',
    'def f(conn):\n    return conn.execute("SELECT * FROM registry.patients")\n',
    'def f(conn, s, t):\n    return sql.SQL("SELECT 1 FROM {}").format(sql.Identifier(s, t))\n',
    'def f(conn, t):\n    return conn.execute("SELECT * FROM %s" % t)\n',
])
def test_the_check_refuses_a_source_read(snippet):
    assert problems(snippet)


@pytest.mark.parametrize("snippet", [
    'def f(conn):\n    return conn.execute("SELECT name FROM deid.release WHERE status = %s", ["x"])\n',
    'def f(conn, table):\n    return f"SELECT level FROM deid.{table} WHERE hierarchy = %(a)s"\n',
    'RELEASE_SCHEMA = "release"\n\ndef f(conn, s, t):\n    if s != RELEASE_SCHEMA:\n        return\n'
    '    return sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(s, t))\n',
    'def f(conn):\n    return conn.execute("SELECT deid.report_source(%s)", ["r"])\n',
])
def test_the_check_allows_deids_own(snippet):
    assert problems(snippet) == []


@pytest.mark.parametrize("module", ["list_cmd.py", "verify_cmd.py", "report_cmd.py"])
def test_read_only_commands_pin_search_path(module):
    """deid list / verify / report resolve their statements' names in pg_catalog only: a
    function or operator another role puts in "$user" or public is never theirs to call."""
    tree = ast.parse((CLIENT / module).read_text())
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    first_calls = [n.func.id for n in ast.walk(run) if isinstance(n, ast.Call)
                   and isinstance(n.func, ast.Name)]
    assert first_calls and first_calls[0] == "pin_search_path"
