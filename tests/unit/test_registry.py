"""One registry of methods: it feeds anonymize_request, usage() and the README's method table,
which must agree; plug-ins are pure (no SQL, no plpy, no writer)."""
import ast
import pathlib
import re

from deid.methods import registry
from deid import usage
from deid.request.options import Option

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "python_udfs" / "deid" / "plugins"
# what a plug-in may not import: the database adapter, SQL-building and writing modules
IMPURE = {"pg", "plpy", "datapath", "catalog", "catalog_log", "writer", "pipeline", "access",
          "release", "copybin", "copyfields"}


def readme_methods():
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| method | paper | guarantee |"):]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(re.match(r"\|\s*`([a-z_]+)`", line).group(1))
    return rows


def test_readme_table_lists_exactly_the_registered_methods():
    assert readme_methods() == list(registry.METHODS)


def test_usage_names_every_method_and_its_options():
    text = usage.usage("anonymize_request")
    for m in registry.METHODS.values():
        assert f"{m.name} ({m.paper})" in text
        assert f"options ({m.name})" in text
        for o in m.plugin.OPTIONS:
            assert f"    {o.name}: " in text


def test_every_method_has_a_plugin_and_a_verifier():
    for name, m in registry.METHODS.items():
        assert m.plugin.NAME == name
        assert all(isinstance(o, Option) for o in m.plugin.OPTIONS)
        for fn in ("validate", "plan_read", "run"):
            assert callable(getattr(m.plugin, fn))
        assert callable(m.verifier.verify)
        assert m.verifier.__name__.startswith("deid.verify.")


def test_plugins_are_pure():
    for path in PLUGINS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module or ''}.{a.name}" for a in node.names]
            for n in names:
                parts = set(n.split("."))
                assert not parts & IMPURE, f"{path.name} imports {n}"
