"""The report of each method's demo release (scripts/demo.sql: anatomy, generalization,
condensation, disassociation), rendered by a real browser (chromium, headless): the page's
sections are there and every image loaded; a screenshot of each (docs/img/). The demo runs in
a database of its own beside the test database, as `make demo` runs it."""
import os
import pathlib
import shutil
import subprocess
import sys

import psycopg
import pytest
from psycopg import sql

from test_cli import ROOT, deid

sys.path.insert(0, str(ROOT / "tests"))
import browser  # noqa: E402

pytestmark = pytest.mark.skipif(browser.CHROMIUM is None, reason="chromium is not installed")

DEMO = {"demo_anatomy": "anatomy", "demo_generalized": "generalization",
        "demo_synthetic": "condensation", "demo_dx": "disassociation"}
SECTIONS = ["Summary", "Request", "Verification", "Privacy", "Risk", "Utility", "Against the source"]


def _psql():
    bindir = os.environ.get("PG_BINDIR")
    return str(pathlib.Path(bindir) / "psql") if bindir else shutil.which("psql")


@pytest.fixture(scope="module")
def demo_url(admin, url):
    """scripts/demo.sql run in <test database>_demo, as `make demo` runs it in database deid."""
    base, _, db = url.rpartition("/")
    name = db.split("?")[0] + "_demo"
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    demo = f"{base}/{name}"
    r = subprocess.run([_psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "scripts/demo.sql", demo],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    yield demo
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.mark.parametrize("release", list(DEMO))
def test_demo_report_renders_in_a_browser(demo_url, tmp_path, release):
    r = deid(demo_url, "postgres", "report", release, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    page = tmp_path / f"{release}.html"
    headings, images = browser.load(page, tmp_path / "chromium")
    assert ("h1", f"Release report: {release}") in headings
    h2 = [text for tag, text in headings if tag == "h2"]
    assert h2 == SECTIONS, h2
    # every image decoded to a picture: the class / group / cluster size plots, one at least
    assert images is not None, "the page's load event never ran"
    assert images and all(images), images
    assert len(images) == page.read_text().count("<img ")
    png = browser.screenshot(page, tmp_path / f"{release}.png", tmp_path / "chromium")
    assert browser.png_size(png) == (1000, 1300)
    assert png.stat().st_size > 20_000              # a rendered page, not a blank one


NO_SELECT = "deid_t_report_demo"        # a deid_admin without SELECT on the demo's sources


@pytest.fixture(scope="module")
def no_select(admin, demo_url):
    if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [NO_SELECT]).fetchone():
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(NO_SELECT)))
    admin.execute(sql.SQL("GRANT deid_admin TO {}").format(sql.Identifier(NO_SELECT)))
    with psycopg.connect(demo_url) as conn:
        rows = conn.execute("SELECT has_table_privilege(%s, source, 'SELECT') FROM deid.release"
                            " WHERE name = ANY(%s) AND status = 'committed'", [NO_SELECT, list(DEMO)]).fetchall()
    assert len(rows) == len(DEMO) and not any(r[0] for r in rows)
    return NO_SELECT


def _report(url, role, release, out):
    import json
    r = deid(url, role, "report", release, "--out", str(out))
    assert r.returncode == 0, r.stderr
    return json.loads((out / f"{release}.json").read_text()), (out / f"{release}.html").read_text()


def test_utility_in_the_papers_measures(demo_url, tmp_path):
    """With SELECT on the source: 001's ARE of random COUNT queries (the paper's ~1.6 % for
    queries returning >= 1 % of the rows at K = 50), 004's moments of the original beside the
    release's (equal means: condensation keeps each cluster's mean)."""
    rep, page = _report(demo_url, "postgres", "demo_anatomy", tmp_path)
    m = rep["utility"]["measures"]
    assert m["queries"] >= 100 and 0 < m["are"] < 0.5 and m["are_from_1pct"] < 0.05
    assert "Random COUNT queries (001)" in page
    rep, page = _report(demo_url, "postgres", "demo_synthetic", tmp_path)
    m = rep["utility"]["measures"]
    assert set(m["original"]["mean"]) == set(m["release"]["mean"]) >= {"age", "surv_months"}
    for c, v in m["original"]["mean"].items():
        assert m["release"]["mean"][c] == pytest.approx(v, rel=1e-2)
    assert "surv_months" in m["model"] and "(intercept)" in m["release"]["coefficients"]
    assert "(004)" in page
    rep, page = _report(demo_url, "postgres", "demo_dx", tmp_path)
    m = rep["utility"]["measures"]
    assert m["mre_constraints"] == 30 and abs(m["mre_mean"]) < 0.05 and 0 <= m["are"] < 0.5
    assert "On a reconstruction (003" in page
    with psycopg.connect(demo_url) as conn:      # the reconstruction was rolled back
        assert not conn.execute("SELECT 1 FROM pg_class WHERE relname LIKE 'report%%'").fetchone()
    rep, page = _report(demo_url, "postgres", "demo_generalized", tmp_path)
    assert "Per attribute (002)" in page and "age" in rep["utility"]["levels"]
    assert any("not over all quasi-identifiers jointly" in x for x in rep["summary"])


@pytest.mark.parametrize("release", list(DEMO))
def test_a_role_without_select_gets_no_source_derived_measure(demo_url, no_select, tmp_path, release):
    """Nothing computed on the source: no source section, no ARE (it needs the true counts),
    only the release's side of 004's moments; the summary speaks of the release alone."""
    rep, page = _report(demo_url, no_select, release, tmp_path)
    assert "source" not in rep and "Against the source" not in page
    m = rep["utility"].get("measures") or {}
    assert "are" not in m and "original" not in m
    if release == "demo_synthetic":
        assert m["release"]["mean"]
    assert rep["summary"] and "passed" in rep["summary"][1]
    assert "risk" not in rep and "<h2>Risk</h2>" in page
    if release == "demo_synthetic":
        assert "Distance to closest record" in page and "needs SELECT on the source" in page


RISK_HEIGHT = 560


@pytest.mark.parametrize("release", list(DEMO))
def test_risk_section_in_a_browser(demo_url, tmp_path, release):
    """The Risk section by itself in chromium: prosecutor risk for every method (highest,
    average, records in classes below k and 2k), and for condensation the distance to closest
    record computed in the server; a screenshot of it (docs/img/report_risk_<release>.png)."""
    rep, page = _report(demo_url, "postgres", release, tmp_path)
    part = browser.section(tmp_path / f"{release}.html", "Risk", tmp_path / f"risk_{release}.html")
    headings, images = browser.load(part, tmp_path / "chromium")
    h3 = [text for tag, text in headings if tag == "h3"]
    assert h3[0] == "Prosecutor risk" and images == []
    risks = [d["risk"] for d in rep["privacy"]["distributions"].values()]
    assert risks and all(0 <= r["records_at_risk"] <= r["records_below_2k"] <= 1 for r in risks)
    if release == "demo_synthetic":
        dcr = rep["risk"]["dcr"]
        assert h3 == ["Prosecutor risk", "Distance to closest record"]
        assert dcr["checked"] == 2000 and dcr["of"] == 20000
        assert 0 <= dcr["closer_than_neighbour"] <= 1 and 0 <= dcr["identical"] <= 1
        assert set(dcr["columns"]) <= set(rep["utility"]["measures"]["release"]["mean"])
        assert any("synthetic rows checked" in x for x in rep["summary"])
    else:
        assert "risk" not in rep
    png = browser.screenshot(part, tmp_path / f"risk_{release}.png", tmp_path / "chromium",
                             height=RISK_HEIGHT)
    assert browser.png_size(png) == (1000, RISK_HEIGHT) and png.stat().st_size > 5_000


def test_the_probe_sees_a_broken_image(tmp_path):
    """The image check itself: an image that does not decode is reported as not loaded."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><h2>Privacy</h2>"
                    "<img alt='x' src='data:image/png;base64,AAAA'></body></html>")
    headings, images = browser.load(page, tmp_path / "chromium")
    assert headings == [("h2", "Privacy")] and images == [False]


def test_the_docs_show_a_screenshot_of_each_demo_report():
    for release in DEMO:
        assert browser.png_size(ROOT / "docs" / "img" / f"report_{release}.png")[0] >= 600
        assert browser.png_size(ROOT / "docs" / "img" / f"report_risk_{release}.png")[0] >= 600
    assert "img/report_risk_demo_" in (ROOT / "docs" / "cli.md").read_text()
    assert "img/report_demo_" in (ROOT / "docs" / "cli.md").read_text()
    assert "docs/img/report_demo_" in (ROOT / "README.md").read_text()


def test_make_demo_reports_the_demo_releases():
    """`make demo` writes the reports of exactly these releases."""
    import re
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^DEMO_RELEASES := (.*)$", makefile, re.M).group(1).split() == list(DEMO)


def test_demo_connection_is_the_demo_database(demo_url):
    with psycopg.connect(demo_url) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM deid.release WHERE status = 'committed'")}
    assert set(DEMO) <= names
