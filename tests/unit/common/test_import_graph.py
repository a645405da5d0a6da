"""The server's package has no import loop, at file or at folder level, counting the imports
written inside functions (a loop hidden there still ties two steps together: neither can be
read, tested or changed alone). The single-node pipeline imports nothing of the distributed
path (dispatch.py chooses between them), and no private name (``_name``) is imported across
packages. The graph is scripts/code_metrics.py's (``--dot`` draws it)."""
import ast
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("code_metrics", ROOT / "scripts" / "code_metrics.py")
metrics = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(metrics)


def test_no_import_loop_between_files():
    assert metrics.loops(metrics.graph()) == []


def test_no_import_loop_between_folders():
    assert metrics.loops(metrics.folder_graph(metrics.graph())) == []


def test_the_pipeline_imports_nothing_of_the_distributed_path():
    files = metrics.graph()
    for module in ("deid.pipeline", "deid.pending", "deid.redaction"):
        assert [t for t in files[module] if t.startswith("deid.distributed")] == [], module


def test_the_graph_sees_imports_inside_functions(tmp_path):
    pkg = tmp_path / "deid"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("def f():\n    from .. import top\n")
    (pkg / "top.py").write_text("from .a import x\n")
    g = metrics.graph(pkg)
    assert g["deid.a.x"] == {"deid.top"} and g["deid.top"] == {"deid.a.x"}
    assert metrics.loops(g) == [["deid.a.x", "deid.top"]]


def test_no_private_name_crosses_packages():
    """A name with a leading underscore is its folder's own (deid's top-level folders, as
    scripts/code_metrics.py draws them): another folder neither imports it nor reaches it
    through an imported module."""
    known = metrics.modules()
    crossing = []
    for module, path in known.items():
        tree = ast.parse(path.read_text())
        modules_named = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(module, path, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in known:
                        modules_named[alias.asname or alias.name] = sub
                    elif alias.name.startswith("_") and _foreign(module, base):
                        crossing.append(f"{module} imports {base}.{alias.name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and node.value.id in modules_named \
                    and _foreign(module, modules_named[node.value.id]):
                crossing.append(f"{module} uses {modules_named[node.value.id]}.{node.attr}")
    assert crossing == [], "\n".join(crossing)


def _absolute(module, path, node):
    """The dotted module an ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    anchor = (module if path.name == "__init__.py" else module.rpartition(".")[0]).split(".")
    anchor = anchor[:len(anchor) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def _foreign(module, other):
    return metrics.folder_of(module) != metrics.folder_of(other)
