"""A method's SQL (its tables and functions) lives in its folder, python_udfs/deid/methods/<m>/sql/,
and the build collects it: right after deid's core catalog (sql/00_*.sql, which it builds on), in
the registry's order, and before the rest of sql/ (whose functions may use it). The build reads
the order from the registry's source, without importing deid."""
import importlib.util
from pathlib import Path

from deid.methods.registry import METHODS

ROOT = Path(__file__).resolve().parents[3]
METHOD_DIR = ROOT / "python_udfs" / "deid" / "methods"


def _build_sql():
    spec = importlib.util.spec_from_file_location("build_sql", ROOT / "extension" / "build_sql.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_build_reads_the_registry_order():
    assert _build_sql().registered_methods(str(ROOT)) == list(METHODS)


def test_method_fragments_come_after_the_core_catalog_in_registry_order():
    paths = [Path(p).resolve() for p in _build_sql().sources(str(ROOT))]
    shared = sorted((ROOT / "sql").glob("*.sql"))
    core = [p for p in shared if p.name.startswith("00_")]
    methods = [p for m in METHODS for p in sorted((METHOD_DIR / m / "sql").glob("*.sql"))]
    assert methods, "no method has SQL of its own"
    assert paths == core + methods + [p for p in shared if p not in core]


def test_every_method_sql_folder_is_a_registered_method_s():
    """A fragment under an unregistered folder would silently be left out of the script."""
    folders = sorted(p.parent.name for p in METHOD_DIR.glob("*/sql") if p.is_dir())
    assert [f for f in folders if f not in METHODS] == []


def test_the_extension_makefile_takes_the_build_order():
    makefile = (ROOT / "extension" / "Makefile").read_text()
    assert "build_sql.py --sources .." in makefile
    assert "wildcard ../sql/*.sql" not in makefile
