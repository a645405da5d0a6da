"""`deid report RELEASE --out DIR` (client/) as a real process, as real login roles:
the HTML page and its JSON twin for an anatomy and a generalization release, and a report
written by a deid_admin without SELECT on the source, which carries no source-derived number."""
import json

import pytest
from psycopg import sql

from test_cli import deid

ANATOMY, GENERALIZED = "t_rep_anatomy", "t_rep_generalized"
NO_SELECT = "deid_t_report_admin"          # deid_admin, no SELECT on registry.patients
SECTIONS = ["request", "verification", "privacy", "utility"]
HEADINGS = ["<h2>Summary</h2>", "<h2>Request</h2>", "<h2>Verification</h2>", "<h2>Privacy</h2>",
            "<h2>Utility</h2>"]


@pytest.fixture(scope="module")
def releases(admin):
    if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [NO_SELECT]).fetchone():
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(NO_SELECT)))
    admin.execute(sql.SQL("GRANT deid_admin TO {}").format(sql.Identifier(NO_SELECT)))
    assert not admin.execute("SELECT has_table_privilege(%s, 'registry.patients', 'SELECT')",
                             [NO_SELECT]).fetchone()[0]
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchy WHERE name IN ('rep_age', 'rep_sex')")
    admin.execute("SELECT deid.interval_hierarchy('rep_age', 0, 120, '{5,10,20}')")
    admin.execute("SELECT deid.load_hierarchy('rep_sex', %s)", ["F;*\nM;*"])
    for col, role, h in [("name", "identifier", None), ("age", "quasi_identifier", "rep_age"),
                         ("sex", "quasi_identifier", "rep_sex"), ("zip", "quasi_identifier", None),
                         ("diagnosis", "sensitive", None)]:
        admin.execute("SELECT deid.set_role('registry.patients', %s, %s, %s)", [col, role, h])
    admin.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 10,"
                  " l => 2, columns => '{age,sex,zip,diagnosis}', options => '{\"seed\": 1}',"
                  " release => %s)", [ANATOMY])
    # no diagnosis: the anatomy release publishes it for the same patients, and a second
    # method's release of it would be refused (one method per sensitive column, docs/security.md)
    admin.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'generalization', k => 5,"
                  " columns => '{age,sex}', selection => $$sex = 'F'$$,"
                  " options => '{\"seed\": 1}', release => %s)", [GENERALIZED])
    yield admin
    for name in (ANATOMY, GENERALIZED):
        admin.execute("SELECT deid.drop_release(%s)", [name])


def report(url, role, name, out):
    r = deid(url, role, "report", name, "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(out / f"{name}.html"), str(out / f"{name}.json")]
    return json.loads((out / f"{name}.json").read_text()), (out / f"{name}.html").read_text()


@pytest.mark.parametrize("name,method", [(ANATOMY, "anatomy"), (GENERALIZED, "generalization")])
def test_report_html_and_json(url, releases, tmp_path, name, method):
    rep, page = report(url, "deid_t_admin", name, tmp_path)
    assert all(s in rep for s in SECTIONS)
    assert rep["request"]["method"] == method and rep["request"]["seed"] == 1
    assert rep["verification"]["logged"] and rep["verification"]["fresh"]["verified"] is True
    dist = rep["privacy"]["distributions"]
    assert dist and all(d["histogram"] and d["risk"]["records"] > 0 for d in dist.values())
    if method == "anatomy":
        assert dist["groups"]["risk"]["min_size"] >= 10 and dist["groups"]["risk"]["records_at_risk"] == 0
        assert dist["groups"]["risk"]["highest"] == 1 / dist["groups"]["risk"]["min_size"]
        assert rep["privacy"]["facts"]["min_certified_l"] >= 2
    else:
        joint = dist["all quasi-identifiers, from the release"]["risk"]
        assert joint["classes"] == rep["utility"]["groups"]
        assert "loss" in rep["utility"] and "levels" in rep["utility"]
        assert rep["privacy"]["facts"]["joint_k"] == joint["min_size"] == rep["privacy"]["joint_k"]
    assert "data:image/png;base64," in page and all(h in page for h in HEADINGS)
    assert page.count("data:image/png;base64,") == len(dist)
    # deid_t_admin may SELECT the source: the source section is there
    n = releases.execute("SELECT count(*) FROM registry.patients").fetchone()[0]
    assert rep["source"]["rows"] == n and "<h2>Against the source</h2>" in page


def _numbers(obj):
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _numbers(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _numbers(v)]
    return [obj] if isinstance(obj, (int, float)) and not isinstance(obj, bool) else []


def test_report_without_select_has_no_source_number(url, releases, tmp_path):
    rep, page = report(url, NO_SELECT, GENERALIZED, tmp_path)
    assert all(s in rep for s in SECTIONS)
    assert "source" not in rep and "Against the source" not in page
    total = releases.execute("SELECT count(*) FROM registry.patients").fetchone()[0]
    released = releases.execute(sql.SQL("SELECT count(*) FROM {}").format(
        sql.Identifier("release", GENERALIZED))).fetchone()[0]
    assert released < total                     # the selection kept part of the source
    assert total not in _numbers(rep) and f">{total}<" not in page


def test_report_of_an_unknown_release_fails(url, releases, tmp_path):
    r = deid(url, "deid_t_admin", "report", "t_rep_no_such", "--out", str(tmp_path))
    assert r.returncode == 1 and "no release named" in r.stderr and not list(tmp_path.iterdir())


def test_report_help_shows_an_example():
    import os
    import subprocess
    import sys
    from test_cli import ROOT
    r = subprocess.run([sys.executable, "-m", "deid_cli", "report", "--help"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "client")))
    assert r.returncode == 0 and "example" in r.stdout and "deid report" in r.stdout


def _page_text(page):
    """The page's visible text: no tags, no embedded images, no style."""
    import html
    import re
    page = re.sub(r"<style>.*?</style>|data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.mark.parametrize("name", [ANATOMY, GENERALIZED])
def test_numbers_for_people(url, releases, tmp_path, name):
    """Three significant digits, shares as percentages, and no JSON on the page: the verifier's
    report and every nested value are in the JSON twin only."""
    import re
    rep, page = report(url, "deid_t_admin", name, tmp_path)
    shown = _page_text(page)
    assert not re.search(r"\d\.\d{4,}", shown), re.findall(r"\S*\d\.\d{4,}\S*", shown)[:5]
    assert '{"' not in shown and '["' not in shown
    assert rep["verification"]["logged"] and "verification" in shown and f"{name}.json" in shown
    risk = rep["privacy"]["distributions"]
    highest = next(iter(risk.values()))["risk"]["highest"]
    assert f"{100 * highest:.3g}" in shown and " %" in shown
    if name == ANATOMY:
        are = rep["utility"]["measures"]["are"]
        assert f"{100 * are:.3g}"[:3] in shown


def test_sig_and_pct():
    from deid_cli.report_html import pct, sig, text
    assert sig(0.07345162620972935) == "0.0735" and sig(13.900666) == "13.9"
    assert sig(1234.5) == "1,230" and sig(20000) == "20000" and sig(0.0) == "0"
    assert sig(-0.00430123) == "-0.00430" and sig(1e-7) == "1.00e-07"
    assert pct(0.0735) == "7.35 %" and pct(1.0) == "100 %" and pct(None) == ""
    assert text({"a": 1.23456, "b": [1, 2]}) == "a: 1.23\nb: [1, 2]"
    assert text(True) == "yes" and text(None) == ""
