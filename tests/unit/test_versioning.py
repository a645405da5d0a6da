"""Versioning without a server: one version number everywhere, and the PL/Python preamble that
loads each version's own package (extension/build_sql.py, ``#@BOOT``)."""
import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _build_sql():
    spec = importlib.util.spec_from_file_location("build_sql", ROOT / "extension" / "build_sql.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_version_number():
    control = re.search(r"default_version = '([^']+)'", (ROOT / "extension/deid.control").read_text())[1]
    makefile = re.search(r"^EXTVERSION = (\S+)$", (ROOT / "extension/Makefile").read_text(), re.M)[1]
    package = re.search(r'^__version__ = "([^"]+)"$',
                        (ROOT / "python_udfs/deid/__init__.py").read_text(), re.M)[1]
    assert control == makefile == package


def _fake_version(share, version):
    """share/deid/python-VERSION with a deid package and a vendored sqlglot, both telling where
    they were loaded from."""
    d = share / "deid" / f"python-{version}"
    (d / "deid").mkdir(parents=True)
    (d / "deid" / "__init__.py").write_text(f"VERSION = {version!r}\n")
    (d / "deid" / "pg.py").write_text(textwrap.dedent("""
        import sqlglot
        from . import VERSION
        def entry():
            return VERSION, sqlglot.VERSION
    """))
    (d / "sqlglot").mkdir()
    (d / "sqlglot" / "__init__.py").write_text(f"VERSION = {version!r}\n")
    return d


def test_boot_switches_versions_in_one_interpreter(tmp_path):
    """A backend that imported 1.0.0's package and then runs 1.1.0's SQL (ALTER EXTENSION
    UPDATE in the same session) gets 1.1.0's package and no module of 1.0.0 stays loaded;
    going back (a second database still on 1.0.0, same backend is impossible, but the preamble
    is symmetric) works too."""
    old, new = _fake_version(tmp_path, "1.0.0"), _fake_version(tmp_path, "1.1.0")
    boot = _build_sql().boot
    # PL/Python runs each function body as the body of a def
    program = "\n".join([
        "import sys",
        "def old():\n" + textwrap.indent(boot(str(old)) + "\nreturn entry()", "    "),
        "def new():\n" + textwrap.indent(boot(str(new)) + "\nreturn entry()", "    "),
        f"OLD = {str(old)!r}",
        "def loaded_from_old():",
        "    return sorted(n for n, m in sys.modules.items()",
        "                  if (getattr(m, '__file__', None) or '').startswith(OLD))",
        "assert old() == ('1.0.0', '1.0.0'), old()",
        "assert old() == ('1.0.0', '1.0.0')",
        "assert loaded_from_old() == ['deid', 'deid.pg', 'sqlglot'], loaded_from_old()",
        "assert new() == ('1.1.0', '1.1.0'), new()",
        "assert loaded_from_old() == [], loaded_from_old()",
        "assert [p for p in sys.path if 'python-' in p] == [" + repr(str(new)) + "], sys.path",
        "assert new() == ('1.1.0', '1.1.0')",
        "assert old() == ('1.0.0', '1.0.0')",
        "print('ok')",
    ])
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
