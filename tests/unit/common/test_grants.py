"""Who may execute which of deid's functions is declared once (the #@GRANT lines of
sql/90_usage_privileges.sql, and every #@WRAP line for its public function and the
implementation it calls) and written by extension/build_sql.py as one GRANT per role, each
function by its full signature: a new public function needs no grant of its own, a declared
name that names no function fails the build instead of granting nothing, and no definer's
PL/Python body (``<name>__py``) is ever granted."""
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _build_sql():
    spec = importlib.util.spec_from_file_location("build_sql", ROOT / "extension" / "build_sql.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SQL = _build_sql().sources(str(ROOT))     # sql/*.sql and the methods' own fragments


@pytest.fixture(scope="module")
def built():
    b = _build_sql()
    return b, b.build("/pydir", SQL)


def granted(script):
    """{role: {signature, ...}} of the built script's GRANT EXECUTE statements."""
    out = {}
    for m in re.finditer(r"^GRANT EXECUTE ON FUNCTION\n(?P<fns>.*?)\n  TO (?P<role>\w+);$",
                         script, re.S | re.M):
        out.setdefault(m["role"], set()).update(
            s.strip() for s in m["fns"].split(",\n"))
    return out


def test_every_function_is_granted_by_its_signature_and_no_body_is(built):
    b, script = built
    g = granted(script)
    assert set(g) == {"PUBLIC", "deid_admin", "deid_owner"}
    sigs = {s for ss in b.signatures(script).values() for s in ss}
    every = set().union(*g.values())
    assert every <= sigs
    assert not [s for s in every if "__py(" in s]
    assert "deid._request_begin(request jsonb, caller name)" in g["PUBLIC"]
    assert not re.search("^#@GRANT", script, re.M) and "ltrim(p.proname" not in script


def test_a_wrapped_function_and_its_implementation_need_no_grant_line(built):
    b, script = built
    public = granted(script)["PUBLIC"]
    for path in SQL:
        for line in open(path, encoding="utf-8").read().splitlines():
            m = b.WRAP.match(line)
            if m:
                names = {s.split("(")[0] for s in public}
                assert m["name"] in names, m["name"]
                assert re.match(r"(deid\.\w+)\(", m["call"])[1] in names


def test_a_declared_name_that_names_no_function_fails_the_build(tmp_path):
    b = _build_sql()
    f = tmp_path / "x.sql"
    f.write_text("CREATE FUNCTION deid.f(a int) RETURNS int LANGUAGE sql AS $$ SELECT a $$;\n"
                 "#@GRANT PUBLIC deid.f deid.g\n#@GRANTS\n")
    with pytest.raises(ValueError, match="deid.g"):
        b.build("/pydir", [str(f)])
    f.write_text("CREATE FUNCTION deid.f(a int DEFAULT 1) RETURNS int LANGUAGE sql AS $$ SELECT a $$;\n"
                 "CREATE FUNCTION deid.f(a text) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n"
                 "#@GRANT deid_admin deid.f\n#@GRANTS\n")
    assert granted(b.build("/pydir", [str(f)])) == {"deid_admin": {"deid.f(a int)", "deid.f(a text)"}}
