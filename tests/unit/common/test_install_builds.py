"""The install of deid's Python without a server (extension/install_python.py, and the ``#@BOOT``
preamble of extension/build_sql.py): each install is a build of its own, switched to in one
step; a backend keeps the build it loaded, lazy imports included, whatever is installed
meanwhile; a build is removed only when no backend holds it; a module that cannot be imported
is deid's DE003 with a hint, not Python's ImportError."""
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SQLGLOT = "0.0.1"


def _module(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "extension" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _source(tmp_path, marker):
    """A deid package whose modules say which install they come from; ``late`` is imported
    only on the second call (a lazy import)."""
    src = tmp_path / f"src-{marker}" / "deid"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text(f"MARK = {marker!r}\n")
    (src / "pg.py").write_text(textwrap.dedent("""
        import sqlglot
        from . import MARK
        calls = []
        def entry():
            calls.append(1)
            if len(calls) > 1:
                from . import late
                return MARK, late.MARK
            return MARK, MARK
    """))
    (src / "late.py").write_text(f"MARK = {marker!r}\n")
    return src


def _share(tmp_path):
    """share/deid with an older version of the layout without builds that vendors sqlglot."""
    old = tmp_path / "share" / "deid" / "python-0.9.0"
    (old / "sqlglot").mkdir(parents=True)
    (old / "sqlglot" / "__init__.py").write_text("VERSION = 'vendored'\n")
    (old / f"sqlglot-{SQLGLOT}.dist-info").mkdir()
    (old / f"sqlglot-{SQLGLOT}.dist-info" / "METADATA").write_text("Name: sqlglot\n")
    return tmp_path / "share" / "deid" / "python-1.1.0"


def _install(pydir, src):
    _module("install_python").install(str(pydir), str(src), SQLGLOT)
    return os.readlink(pydir / "current")


BACKEND = """
import sys
def call():
{boot}
    return entry()
for line in sys.stdin:
    print(repr(call()), flush=True)
"""


class Backend:
    """A long-lived interpreter running the preamble, called once per line."""

    def __init__(self, pydir):
        boot = textwrap.indent(_module("build_sql").boot(str(pydir)), "    ")
        self.proc = subprocess.Popen([sys.executable, "-c", BACKEND.format(boot=boot)], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def call(self):
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return eval(self.proc.stdout.readline())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def test_each_install_is_a_build_switched_to_at_once(tmp_path):
    pydir = _share(tmp_path)
    first = _install(pydir, _source(tmp_path, "a"))
    assert first.startswith("builds/")
    built = pydir / first
    assert (built / "deid" / "__pycache__").is_dir() and (built / ".in-use").is_file()
    assert (built / "sqlglot" / "__init__.py").read_text() == "VERSION = 'vendored'\n"
    second = _install(pydir, _source(tmp_path, "b"))
    assert second != first
    assert sorted(os.listdir(pydir / "builds")) == [second.split("/")[1]]     # the unused one went


def test_a_backend_keeps_its_build_until_it_ends(tmp_path):
    pydir = _share(tmp_path)
    first = _install(pydir, _source(tmp_path, "a"))
    backend = Backend(pydir)
    try:
        assert backend.call() == ("a", "a")
        second = _install(pydir, _source(tmp_path, "b"))
        assert (pydir / first).is_dir(), "a build in use was removed"
        assert backend.call() == ("a", "a"), "the lazy import mixed two builds"
        fresh = Backend(pydir)
        assert fresh.call() == ("b", "b")
        fresh.close()
    finally:
        backend.close()
    _install(pydir, _source(tmp_path, "c"))
    assert not (pydir / first).exists() and not (pydir / second).exists()


def test_a_missing_module_is_deids_error_with_a_hint(tmp_path):
    pydir = tmp_path / "deid" / "python-1.1.0"
    pydir.mkdir(parents=True)            # no build, no package: the import fails
    boot = _module("build_sql").boot(str(pydir))
    program = "\n".join([
        "class plpy:",
        "    @staticmethod",
        "    def error(message, sqlstate, hint):",
        "        print(sqlstate, message, '|', hint)",
        "def call():",
        textwrap.indent(boot, "    "),
        "call()"])
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    state, rest = out.stdout.split(" ", 1)
    message, hint = rest.split(" | ")
    assert state == "DE003" and "No module named 'deid'" in message and "reconnect" in hint
    from deid import errors           # the same code and hint once deid is loaded (pg.entry)
    assert (errors.CODE_CHANGED, errors.CODE_CHANGED_HINT) == (state, hint.strip())
