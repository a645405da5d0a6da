"""A fifth method through the whole pipeline, in the shape every method has: a method folder
(tests/fixtures/toy_method/methods/toy_counts/plugin.py), a verifier module
(tests/fixtures/toy_method/verify/toy_counts.py) and one registry line
(tests/fixtures/toy_method/registry_line.txt) are loaded into the server's interpreter as
deid.methods.toy_counts.plugin and deid.verify.toy_counts and registered, then requested with
plain SQL by a role with SELECT and by a policy-only role -- read, method, plan, write, verify
and log as for the shipped methods."""
import pathlib

import psycopg
import pytest

TOY = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "toy_method"
SOURCES = [("deid.verify.toy_counts", (TOY / "verify" / "toy_counts.py").read_text()),
           ("deid.methods.toy_counts.plugin",
            (TOY / "methods" / "toy_counts" / "plugin.py").read_text())]
REGISTRY_LINE = (TOY / "registry_line.txt").read_text()
REGISTER = """
CREATE OR REPLACE FUNCTION pg_temp.register_toy(names text[], sources text[], line text)
RETURNS text LANGUAGE plpython3u AS $$
import sys, types
from deid.methods import registry
for name, src in zip(names, sources):     # the verifier first: the plug-in imports its Evidence
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(src, name, "exec"), module.__dict__)
exec(line, vars(registry))
return registry.METHODS["toy_counts"].plugin.NAME
$$"""


@pytest.fixture
def toy(admin, url):
    """A superuser session whose backend knows the toy method."""
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("SELECT deid.usage()")               # loads deid into this backend
    conn.execute(REGISTER)
    assert conn.execute("SELECT pg_temp.register_toy(%s, %s, %s)",
                        [[n for n, _ in SOURCES], [s for _, s in SOURCES],
                         REGISTRY_LINE]).fetchone()[0] == "toy_counts"
    admin.execute("DROP TABLE IF EXISTS public.t_toy CASCADE")
    admin.execute("CREATE TABLE public.t_toy (id int PRIMARY KEY, a text, b int, s text)")
    admin.execute("INSERT INTO public.t_toy SELECT i, 'v' || (i % 3), i % 7, 'x' FROM generate_series(1, 100) i")
    for col, role in [("a", "quasi_identifier"), ("b", "quasi_identifier"), ("s", "sensitive")]:
        admin.execute("SELECT deid.set_role('public.t_toy', %s, %s)", [col, role])
    yield conn
    conn.close()
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 't_toy%'")


def test_toy_method_runs_through_the_pipeline(toy, admin):
    notices = []
    toy.add_notice_handler(lambda d: notices.append(d.message_primary))
    toy.execute("SET client_min_messages = notice")
    rid, relations, rows, groups, disc, verified = toy.execute(
        "SELECT * FROM deid.anonymize_request('public.t_toy', 'toy_counts', k => 5,"
        " columns => '{a,b}', options => '{\"seed\": 3}', release => 't_toy')").fetchone()
    assert verified and relations == ["release.t_toy_counts"]
    stored = toy.execute("SELECT a, b, count FROM release.t_toy_counts ORDER BY 1, 2").fetchall()
    expected = admin.execute("SELECT 'v' || (i % 3), (i % 7)::text, count(*) FROM generate_series(1, 100) i"
                             " GROUP BY 1, 2 HAVING count(*) >= 5 ORDER BY 1, 2").fetchall()
    assert stored == expected and rows == len(expected) and groups == len(expected)
    log = admin.execute("SELECT method, seed, metrics->'verification'->>'min_count',"
                        " metrics->'seconds' ? 'verify' FROM deid.release WHERE release_id = %s",
                        [rid]).fetchone()
    assert log[0] == "toy_counts" and log[1] == 3 and int(log[2]) >= 5 and log[3]
    assert admin.execute("SELECT count(*) FROM deid.equivalence_class WHERE release_id = %s",
                         [rid]).fetchone()[0] == groups
    # progress: one NOTICE per phase
    phases = [n.split()[1] for n in notices if n.startswith("deid: ")]
    assert phases == ["read", "method", "write", "verify", "publish", "digest"], notices


def test_toy_method_options_come_from_its_schema(toy):
    with pytest.raises(psycopg.Error) as e:
        toy.execute("SELECT * FROM deid.anonymize_request('public.t_toy', 'toy_counts', k => 5,"
                    " columns => '{a,b}', options => '{\"min_classes\": 0}')").fetchall()
    assert e.value.diag.sqlstate == "22023" and e.value.diag.message_hint
    assert "toy_counts" in toy.execute("SELECT deid.usage('anonymize_request')").fetchone()[0]


def test_unregistered_in_other_sessions(admin):
    """Registration is this backend's: other sessions never see the toy."""
    with pytest.raises(psycopg.Error) as e:
        admin.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'toy_counts', k => 5)")
    assert e.value.diag.sqlstate == "22023"


def test_toy_method_through_the_cli_and_the_report(toy, tmp_path):
    """deid list, verify and report on the toy's release, over the session that knows it: the
    report's facts, the name of its groups and its guarantee are the toy plug-in's REPORT,
    handed over by the server (the client names no method)."""
    import argparse
    import io
    import json

    from deid_cli import list_cmd, report_cmd, verify_cmd
    toy.execute("SELECT * FROM deid.anonymize_request('public.t_toy', 'toy_counts', k => 5,"
                " columns => '{a,b}', options => '{\"seed\": 3}', release => 't_toy')").fetchall()
    out = io.StringIO()
    assert list_cmd.run(argparse.Namespace(json=True, all=False), toy, out) == 0
    assert {"name": "t_toy", "method": "toy_counts"}.items() <= \
        next(r for r in json.loads(out.getvalue()) if r["name"] == "t_toy").items()
    out = io.StringIO()
    assert verify_cmd.run(argparse.Namespace(json=True, release="t_toy"), toy, out) == 0
    assert json.loads(out.getvalue())["verified"] is True
    out = io.StringIO()
    assert report_cmd.run(argparse.Namespace(json=True, release="t_toy", out=str(tmp_path)),
                          toy, out) == 0
    rep = json.loads(out.getvalue())
    assert rep["method"]["subject"] == "class" and rep["method"]["facts"] == ["suppressed_rows"]
    assert rep["privacy"]["facts"]["suppressed_rows"] > 0
    assert any("the smallest class holds" in s for s in rep["summary"])
    html = (tmp_path / "t_toy.html").read_text()
    assert "Every released class counts at least k rows." in html


def test_toy_method_through_the_fuzzer(url, tmp_path):
    """A few fuzz requests of the toy method (its generator and checker parts,
    tests/fixtures/toy_method/fuzz/), the toy installed as a fifth method is: plausible and
    hostile requests by the three roles, every success checked, every refusal checked for
    leaks; no finding."""
    import importlib
    import sys

    from tests.fuzz import checkers, generator, runner
    install = _load("toy_install", TOY / "install.py")
    sys.modules[f"{checkers.__name__}.toy_counts"] = _load(
        "toy_checker_part", TOY / "fuzz" / "checker_part.py")
    parts, methods = generator.PARTS, generator.METHODS
    generator.PARTS = {"toy_counts": _load("toy_generator_part", TOY / "fuzz" / "generator_part.py")}
    generator.METHODS = ("toy_counts",)
    try:
        with install.installed(tmp_path):
            runner.setup(url)
            d = runner.run_worker(url, seed=11, worker=0, n_per_method=24, batch=12)
    finally:
        generator.PARTS, generator.METHODS = parts, methods
        sys.modules.pop(f"{checkers.__name__}.toy_counts", None)
        importlib.invalidate_caches()
    toy = d["methods"]["toy_counts"]
    assert toy["requests"] == 24 and toy["successes"] > 0, d
    assert d["checked"].get("toy_counts_releases_checked") == toy["successes"], d
    assert "toy_counts_releases_without_own_checks" not in d["checked"], d
    assert not d["findings"], d["findings"]


def _load(name, path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
