"""One registry of methods: it feeds anonymize_request, usage() and the README's method table,
which must agree; plug-ins are pure (no SQL, no plpy, no writer)."""
import ast
import pathlib
import re

import types

from deid.methods import contract, registry
from deid import usage
from deid.request.options import Option

ROOT = pathlib.Path(__file__).resolve().parents[3]
METHODS = ROOT / "python_udfs" / "deid" / "methods"
# what a plug-in may not import: the database adapter, SQL-building, reading and writing modules
IMPURE = {"pg", "plpy", "snapshot", "copy_files", "relations", "release_log", "writer",
          "pipeline", "access", "release", "copybin", "copyfields", "parallel_pass", "admin"}


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


def test_every_method_conforms_to_the_declared_contract():
    """Every member the pipeline uses is declared by every method (methods/contract.py)."""
    for m in registry.METHODS.values():
        assert isinstance(m.plugin, contract.Plugin), m.name
        assert isinstance(m.verifier, contract.Verifier), m.name
        assert contract.conforms(m.plugin, m.verifier) == [], m.name
        assert m.plugin.read_columns is None or callable(m.plugin.read_columns)
        assert isinstance(m.plugin.RELEASE_HEAP, bool)
        assert isinstance(m.verifier.READS_SNAPSHOT_VALUES, bool)


def test_the_contract_check_names_what_is_missing():
    def nothing(*a):
        return None
    plugin = types.SimpleNamespace(NAME="x", OPTIONS=(), validate=nothing, plan_read=nothing,
                                   run=nothing)
    verifier = types.SimpleNamespace(verify=nothing)
    assert not isinstance(plugin, contract.Plugin)
    assert not isinstance(verifier, contract.Verifier)
    assert contract.conforms(plugin, verifier) == ["plugin.RELEASE_HEAP", "plugin.read_columns",
                                                   "plugin.DISTRIBUTION", "plugin.HAS_L",
                                                   "plugin.COMPOSITION", "plugin.ESTIMATE_VIEW",
                                                   "plugin.SHARD_PRECHECK", "plugin.REPORT", "plugin.KEEPS_GROUPS",
                                                   "verifier.READS_SNAPSHOT_VALUES"]
    plugin.DISTRIBUTION, plugin.HAS_L, plugin.COMPOSITION = "everywhere", False, "by name"
    plugin.KEEPS_GROUPS = False
    plugin.RELEASE_HEAP, plugin.read_columns = False, None
    plugin.ESTIMATE_VIEW, plugin.SHARD_PRECHECK, plugin.REPORT = False, None, {}
    assert contract.conforms(plugin, types.SimpleNamespace(verify=nothing, READS_SNAPSHOT_VALUES=True)) \
        == [f"plugin.DISTRIBUTION in {contract.DISTRIBUTIONS}",
            f"plugin.COMPOSITION in {contract.COMPOSITIONS}", "plugin.REPORT a contract.Report"]


def test_the_pipeline_probes_no_member():
    """Declared, not probed: the pipeline and the pending-snapshot store (begin) read the
    contract's members directly."""
    for module in ("pipeline.py", "pending.py"):
        src = (ROOT / "python_udfs" / "deid" / module).read_text()
        assert "hasattr(" not in src
        assert not re.search(r"getattr\((p|r)\.(method|entry)|getattr\(plugin", src)


def test_a_method_is_one_folder_with_its_plugin():
    for m in registry.METHODS.values():
        assert m.plugin.__name__ == f"deid.methods.{m.name}.plugin"
        assert m.verifier.__name__ == f"deid.verify.{m.name}"
        assert (METHODS / m.name / "plugin.py").is_file()


def test_plugins_are_pure():
    plugins = sorted(METHODS.glob("*/plugin.py"))
    assert len(plugins) == len(registry.METHODS)
    for path in plugins:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module or ''}.{a.name}" for a in node.names]
            for n in names:
                parts = set(n.split("."))
                assert not parts & IMPURE, f"{path.name} imports {n}"


def test_every_method_declares_how_it_runs_over_a_sharded_source():
    """The distributed request (deid.distributed) dispatches on the plug-in's DISTRIBUTION."""
    for m in registry.METHODS.values():
        assert isinstance(m.plugin, contract.Plugin), m.name
        assert m.plugin.DISTRIBUTION in contract.DISTRIBUTIONS, m.name


def test_every_method_declares_whether_it_has_an_l():
    """A policy's min_l applies to the requests of a method with an l, and only to those
    (request/access.py): the plug-in says, no list of names does."""
    has = {m.name: m.plugin.HAS_L for m in registry.METHODS.values()}
    assert all(isinstance(v, bool) for v in has.values())
    assert has["anatomy"] is True
    assert not any(v for name, v in has.items() if name != "anatomy")


def test_usage_lists_of_methods_come_from_the_registry(monkeypatch):
    """A fifth method appears in deid.usage's lists of methods by what its plug-in declares
    (an l, how it runs over shards), and no list is written by hand."""
    import sys
    fake = types.ModuleType("deid.methods.fifth_m.plugin")
    fake.NAME, fake.HAS_L, fake.DISTRIBUTION, fake.OPTIONS = "fifth_m", True, "shard_local", ()
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    monkeypatch.setitem(registry.METHODS, "fifth_m",
                        registry.Method(fake.__name__, "deid.verify.fifth_m", "-", "a fifth"))
    assert "has an l: anatomy, fifth_m;" in usage.usage("allow_requests")
    text = usage.usage("register_distributed_source")
    assert "node: anatomy, condensation, disassociation, fifth_m (" in text
    assert "its policy is needed here too):\n  generalization." in text
