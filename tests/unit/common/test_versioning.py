"""Versioning without a server: one version number everywhere, and the PL/Python preamble that
loads each version's own package (extension/build_sql.py, ``#@BOOT``)."""
import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


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
        from .plugins import plugin
        def entry():
            assert plugin.VERSION == VERSION
            return VERSION, sqlglot.VERSION
    """))
    (d / "deid" / "plugins").mkdir()           # a namespace package: no __init__.py, no __file__
    (d / "deid" / "plugins" / "plugin.py").write_text("from .. import VERSION\n")
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
        "assert loaded_from_old() == ['deid', 'deid.pg', 'deid.plugins.plugin', 'sqlglot'], loaded_from_old()",
        "assert 'deid.plugins' in sys.modules",
        "assert new() == ('1.1.0', '1.1.0'), new()",
        "assert loaded_from_old() == [], loaded_from_old()",
        "assert list(sys.modules['deid.plugins'].__path__) == [" + repr(str(new / "deid" / "plugins")) + "]",
        "assert [p for p in sys.path if 'python-' in p] == [" + repr(str(new)) + "], sys.path",
        "assert new() == ('1.1.0', '1.1.0')",
        "assert old() == ('1.0.0', '1.0.0')",
        "print('ok')",
    ])
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_statements_split_at_top_level_semicolons_only():
    split = _build_sql().statements
    text = ("-- a comment; with a semicolon\nCREATE FUNCTION f() RETURNS int AS $fn$ SELECT 1; $x$;$x$ $fn$;\n"
            "SELECT E'it\\'s; here', 'a''b;c' /* ; */ ;\nDO $$ BEGIN PERFORM 1; END $$;\n")
    assert split(text) == ["CREATE FUNCTION f() RETURNS int AS $fn$ SELECT 1; $x$;$x$ $fn$;",
                           "SELECT E'it\\'s; here', 'a''b;c' /* ; */;",
                           "DO $$ BEGIN PERFORM 1; END $$;"]


# Statements of the SQL sources that an update does not re-run: they change only through fragments.
CATALOG_ONLY = re.compile(r"^(CREATE\s+(UNIQUE\s+)?INDEX|CREATE\s+(TABLE|VIEW|TRIGGER|SCHEMA|SEQUENCE)|"
                          r"CREATE\s+EVENT\s+TRIGGER|ALTER\s+TABLE)\b", re.I)


def test_every_statement_of_sql_is_re_created_or_catalog():
    """Each statement of the full script is either re-run by every update (functions, comments,
    grants, owners, DO blocks, dumped configuration) or a catalog change that a fragment in
    sql/upgrade/<version>/ must repeat. Anything else (an INSERT of seed rows, say) would be
    silently missing from an updated database: write it as a fragment (sql/upgrade/README.md)."""
    bs = _build_sql()
    sources = bs.sources(str(ROOT))
    full = bs.build("/x/deid/python-9.9.9", sources)
    other = [s[:80] for s in bs.statements(full) if not bs.RERUN.match(s) and not CATALOG_ONLY.match(s)]
    assert other == []
    assert len(bs.rerunnable(full)) > 50


def test_update_script_re_creates_every_function(tmp_path):
    """The last step: the fragments first, in sorted order, then every CREATE FUNCTION of the
    full script as CREATE OR REPLACE, pointing at the new version's package."""
    bs = _build_sql()
    sql = tmp_path / "sql"
    (sql / "upgrade" / "2.0.0").mkdir(parents=True)
    (sql / "00_a.sql").write_text("CREATE TABLE deid.t (a int);\n"
                                  "CREATE FUNCTION deid.f() RETURNS int LANGUAGE plpython3u AS $$\n"
                                  "#@BOOT\nreturn 1\n$$;\nGRANT EXECUTE ON FUNCTION deid.f() TO PUBLIC;\n")
    (sql / "upgrade" / "2.0.0" / "20_b.sql").write_text("ALTER TABLE deid.t ADD COLUMN b int;\n")
    (sql / "upgrade" / "2.0.0" / "10_a.sql").write_text("CREATE TABLE deid.t (a int);\n")
    script = bs.update("1.0.0--2.0.0", "2.0.0", "/x/deid/python-2.0.0", [str(sql / "00_a.sql")])
    body = [line for line in script.splitlines() if line and not line.startswith(("--", "\\echo"))]
    assert body[:2] == ["CREATE TABLE deid.t (a int);", "ALTER TABLE deid.t ADD COLUMN b int;"]
    assert body[2].startswith("CREATE OR REPLACE FUNCTION deid.f()")
    assert "/x/deid/python-2.0.0" in script and body[-1].startswith("GRANT EXECUTE")
    assert script.count("CREATE TABLE") == 1
    # an intermediate step of a longer chain: only its fragments
    step = bs.update("1.0.0--2.0.0", "3.0.0", "/x/deid/python-3.0.0", [str(sql / "00_a.sql")])
    assert "FUNCTION" not in step and "ADD COLUMN b" in step


def test_a_definer_is_split_into_its_python_body_and_a_plpgsql_definer():
    """A role may call deid's definers directly; PL/Python would answer with its exception class
    in the message and a traceback in CONTEXT. The build keeps the name, signature and
    attributes for a PL/pgSQL definer that re-raises through deid._raise, and moves the body
    to <name>__py (no defaults, not a definer: it runs as the definer that calls it)."""
    bs = _build_sql()
    definer = ("CREATE FUNCTION deid._f(a text, caller name DEFAULT NULL)\nRETURNS TABLE (x int, y text)"
               " LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$\n"
               "return entry('m.f', a, caller)\n$$;")
    py, wrapper = bs.split_definer(definer).split("\n$$;\n")
    assert py.startswith("CREATE FUNCTION deid._f__py(a text, caller name)\nRETURNS TABLE (x int, y text)"
                         " LANGUAGE plpython3u SET search_path")
    assert "SECURITY DEFINER" not in py and "return entry('m.f', a, caller)" in py
    assert wrapper.startswith("CREATE FUNCTION deid._f(a text, caller name DEFAULT NULL)\n"
                              "RETURNS TABLE (x int, y text) LANGUAGE plpgsql SECURITY DEFINER SET search_path")
    assert "RETURN QUERY SELECT * FROM deid._f__py(a, caller);" in wrapper
    assert "PERFORM deid._raise(s, m, d, h);" in wrapper
    invoker = definer.replace(" SECURITY DEFINER", "")
    assert bs.split_definer(invoker) == invoker
