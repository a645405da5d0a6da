"""deid.verify never imports deid.methods, directly or through other modules.

The verifier re-checks every release from what was stored; it is only
independent if it shares no code with the methods it checks.  This is an
import-linter-style contract, decided by parsing the sources with ``ast``
(nothing is imported): every module under ``python_udfs/deid/verify/`` is
read, every import in it (at any depth, also inside functions) is resolved
to an absolute module name (relative imports included), and every deid
module reached is followed transitively.  The contract fails when

* a module named ``deid.methods`` or below is reached (say verify imports
  deid.metrics and deid.metrics imports deid.methods), or any relative
  ``.methods`` / ``..methods``;
* a deid module outside deid.verify is reached that is not in ALLOWED
  (widening the list is a design decision: check what the module imports);
* a verify module imports dynamically (``__import__``, ``importlib``), which
  parsing cannot follow.

The last tests run the checker on small synthetic trees, so that it is
known to catch what it is meant to catch.
"""

import ast
import sys
from pathlib import Path

import pytest

DEID_ROOT = Path(__file__).resolve().parents[3] / "python_udfs" / "deid"
PACKAGE = "deid.verify"
FORBIDDEN = "deid.methods"

# deid modules outside deid.verify that verify may import, directly or
# transitively.  Keep this short: each must be pure and free of methods.
ALLOWED = frozenset({
    "deid",           # the package itself (deid/__init__.py: docstring and version)
    "deid.errors",    # DeidError and the SQLSTATE constants
    "deid.sqltext",   # identifier quoting, for reading back the stored tables
                      # (verify/anatomy.py, verify/generalization.py)
})

# modules outside the standard library verify may import
THIRD_PARTY = frozenset({"numpy"})

DYNAMIC = "<dynamic import>"


def module_file(root, name):
    """The source file of module ``name`` ("deid.x.y") under the package
    directory ``root`` (.../deid), or None if there is none."""
    parts = name.split(".")
    if parts[0] != root.name:
        return None
    base = root.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def module_name(root, path):
    """The dotted name of the source file ``path`` under ``root``."""
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(root, name, path):
    """(imported module, line) for every import in the file, resolved to
    absolute names; ``from M import n`` yields M, and M.n too when M.n is a
    module (or names methods).  Dynamic imports yield DYNAMIC."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                up = node.level - 1
                parts = parts[:len(parts) - up] if up else parts
                base = ".".join(parts + ([node.module] if node.module else []))
                if up >= len(package.split(".")):          # beyond the top package
                    base = "." * node.level + (node.module or "")
            else:
                base = node.module
            yield base, node.lineno
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if alias.name != "*" and (module_file(root, sub) is not None
                                          or alias.name == "methods"):
                    yield sub, node.lineno
        elif isinstance(node, ast.Call):
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                f, ast.Attribute) else None
            if called in ("__import__", "import_module"):
                yield DYNAMIC, node.lineno


def prefixes(name):
    """Importing a.b.c imports a, a.b and a.b.c."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def is_forbidden(name):
    return name == FORBIDDEN or name.startswith(FORBIDDEN + ".") \
        or "methods" in name.split(".")


def in_verify(name):
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def check_contract(root, allowed=ALLOWED):
    """(problems, deid modules reached, modules outside deid imported by
    verify) for the verify package under ``root``; problems is a list of
    messages, each with the import chain from a verify module."""
    verify_files = sorted((root / "verify").rglob("*.py"))
    assert verify_files, f"no modules under {root / 'verify'}"
    start = {module_name(root, p): p for p in verify_files}
    came_from = {m: None for m in start}
    queue = list(start)
    problems, external = [], set()

    def chain(mod):
        out = [mod]
        while came_from.get(out[-1]):
            out.append(came_from[out[-1]])
        return " -> ".join(reversed(out))

    while queue:
        mod = queue.pop(0)
        path = start.get(mod) or module_file(root, mod)
        if path is None:
            continue                # a missing module is reported where it is imported
        for target, line in imports_of(root, mod, path):
            where = f"{chain(mod)} (line {line})"
            if target == DYNAMIC:
                problems.append(f"{where}: dynamic import; verify's imports must be "
                                f"static so this test can follow them")
                continue
            if target.startswith("."):
                problems.append(f"{where}: relative import {target!r} beyond the deid package")
                continue
            if target.split(".")[0] != root.name:
                if in_verify(mod):
                    external.add(target.split(".")[0])
                continue
            for name in prefixes(target):
                if is_forbidden(name):
                    problems.append(f"{where} -> {name}: the verifier must not import "
                                    f"deid.methods, directly or indirectly")
                elif not (in_verify(name) or name in allowed):
                    problems.append(f"{where} -> {name}: not in ALLOWED "
                                    f"(deid modules verify may use: {sorted(allowed)})")
                elif in_verify(name) and module_file(root, name) is None:
                    problems.append(f"{where} -> {name}: no such module in deid.verify")
                if name not in came_from and not is_forbidden(name):
                    came_from[name] = mod
                    queue.append(name)
    reached = {m for m in came_from if m.split(".")[0] == root.name}
    return sorted(set(problems)), reached, external


# ---------------------------------------------------------------------------
# the contract on the real tree
# ---------------------------------------------------------------------------

def per_method_verifiers(root):
    """The per-method verifiers: the modules directly under verify/ (the shared checks are in
    verify/shared/, the package's __init__ re-exports some of them)."""
    return {module_name(root, p): p for p in sorted((root / "verify").glob("*.py"))
            if p.name != "__init__.py"}


def cross_imports(root):
    """(importer, imported) pairs of per-method verifiers importing each other."""
    verifiers = per_method_verifiers(root)
    return sorted({(mod, name) for mod, path in verifiers.items()
                   for target, _ in imports_of(root, mod, path)
                   for name in prefixes(target) if name in verifiers and name != mod})


def test_per_method_verifiers_do_not_import_each_other():
    """A verifier shares code with another only through verify/shared/."""
    assert len(per_method_verifiers(DEID_ROOT)) >= 4
    assert cross_imports(DEID_ROOT) == []


def test_cross_import_check_catches_one(tmp_path):
    root = tmp_path / "deid"
    (root / "verify" / "shared").mkdir(parents=True)
    for f in ("__init__.py", "verify/__init__.py", "verify/shared/__init__.py",
              "verify/shared/arrays.py"):
        (root / f).write_text("")
    (root / "verify" / "anatomy.py").write_text("from .shared import arrays\n")
    (root / "verify" / "condensation.py").write_text("from .anatomy import unpack\n")
    assert cross_imports(root) == [("deid.verify.condensation", "deid.verify.anatomy")]


def test_verify_is_a_package_of_several_modules():
    mods = sorted(p.name for p in (DEID_ROOT / "verify").glob("*.py"))
    assert "__init__.py" in mods and len(mods) > 3, mods
    assert not (DEID_ROOT / "verify.py").exists(), "a stale verify.py is left next to the package"


def test_verify_never_imports_methods():
    problems, reached, _ = check_contract(DEID_ROOT)
    assert not problems, "\n".join(problems)
    # the walk saw what verify really imports (the test is not vacuous)
    assert "deid.errors" in reached and "deid.verify.shared.kl" in reached


def test_verify_is_pure_python_and_numpy():
    # no plpy, no other third-party package: the verifier runs on the
    # server's interpreter and in the unit tests alike
    _, _, external = check_contract(DEID_ROOT)
    stdlib = set(sys.stdlib_module_names)
    assert external - stdlib <= THIRD_PARTY, sorted(external - stdlib - THIRD_PARTY)


# ---------------------------------------------------------------------------
# the checker catches what it should (synthetic trees)
# ---------------------------------------------------------------------------

def make_tree(tmp_path, verify_kl="from deid.errors import DeidError\n", extra=None):
    root = tmp_path / "deid"
    files = {
        "__init__.py": '"""deid"""\n',
        "errors.py": "class DeidError(Exception):\n    pass\n",
        "metrics.py": "import numpy as np\n",
        "methods/__init__.py": "",
        "methods/anatomy.py": "from ..errors import DeidError\n",
        "verify/__init__.py": "from .kl import check_kl\n",
        "verify/kl.py": verify_kl + "\ndef check_kl():\n    pass\n",
    }
    files.update(extra or {})
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_checker_passes_a_clean_tree(tmp_path):
    problems, reached, external = check_contract(make_tree(tmp_path))
    assert problems == []
    assert {"deid", "deid.errors", "deid.verify", "deid.verify.kl"} <= reached
    assert "deid.methods" not in reached


@pytest.mark.parametrize("line", [
    "from ..methods import anatomy",
    "from .. import methods",
    "from .methods import anatomy",
    "from deid.methods.anatomy import x",
    "from deid.methods import anatomy",
    "from deid import methods",
    "import deid.methods.anatomy",
    "import deid.methods as m",
    "def f():\n    from ..methods import anatomy\n",
    "try:\n    pass\nexcept ImportError:\n    from ..methods import anatomy\n",
])
def test_checker_catches_a_direct_import(tmp_path, line):
    problems, _, _ = check_contract(make_tree(tmp_path, verify_kl=line + "\n"))
    assert any("must not import deid.methods" in p for p in problems), problems


def test_checker_catches_an_indirect_import(tmp_path):
    # verify -> deid.metrics -> deid.methods: fails twice over (metrics is
    # not allowed, and it reaches methods), and the chain is shown
    root = make_tree(tmp_path, verify_kl="from deid import metrics\n",
                     extra={"metrics.py": "from .methods import anatomy\n"})
    problems, _, _ = check_contract(root)
    assert any("deid.verify.kl -> deid.metrics (line 1) -> deid.methods" in p
               for p in problems), problems
    assert any("deid.metrics: not in ALLOWED" in p for p in problems), problems
    # even if metrics were allowed, its import of methods is still caught
    problems, _, _ = check_contract(root, allowed=ALLOWED | {"deid.metrics"})
    assert problems and all("deid.methods" in p for p in problems), problems


def test_checker_catches_an_allowed_module_importing_methods(tmp_path):
    root = make_tree(tmp_path, extra={"errors.py": "from deid.methods import anatomy\n"})
    problems, _, _ = check_contract(root)
    assert any("deid.verify.kl -> deid.errors (line 1) -> deid.methods" in p
               for p in problems), problems


def test_checker_catches_dynamic_and_unlisted_imports(tmp_path):
    root = make_tree(tmp_path, verify_kl="import importlib\n"
                                         "m = importlib.import_module('deid.methods')\n")
    problems, _, _ = check_contract(root)
    assert any("dynamic import" in p for p in problems), problems
    root = make_tree(tmp_path / "b", verify_kl="from .. import metrics\n")
    problems, _, _ = check_contract(root)
    assert any("deid.metrics: not in ALLOWED" in p for p in problems), problems
