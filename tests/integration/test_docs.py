"""Every ```sql block of the docs (docs/tutorial.md, docs/methods/*.md, docs/hierarchies.md,
docs/install.md, docs/operations.md) and of README.md's tour runs, in order, against the demo's data, and its output is compared with tests/golden/docs/<page>.out (pg_regress style,
the golden mechanism of test_golden.py; DEID_GOLDEN_UPDATE=1 rewrites the files).

The pages run in one psql session as the superuser, inside one transaction that is rolled
back at the end (so the tests after this one find the database as the session fixture left
it): a fresh extension, then registry.patients as `make demo` generates it (scripts/demo.sql's
own call of registry.generate_patients), then the tutorial, then each method page. Errors do
not abort the session (ON_ERROR_ROLLBACK): a page that fails shows the error in its diff.
Only ```sql blocks run; other fences (```text, ```sh) are not SQL of the demo. Each block is
an example of its own for the composition rule (FORGET)."""
import pathlib
import re

import pytest

from test_golden import GOLDEN, assert_golden, run_psql

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = (["tutorial"] + sorted(f"methods/{p.stem}" for p in (DOCS / "methods").glob("*.md"))
         + ["hierarchies", "install", "operations", "README"])
PATHS = {"README": ROOT / "README.md"}      # the user's first page; the others under docs/
MARK = "@@page "
_SQL_BLOCK = re.compile(r"^```sql[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_GENERATE = re.compile(r"SELECT registry\.generate_patients\(\d+, [0-9.]+\)")


# Each block is an example of its own: the releases of earlier blocks no longer bear on it
# through the composition rule (a superuser's reset, as tests/dbfixtures.py own_history does per test), not echoed.
FORGET = ["\\set ECHO none", "\\o /dev/null",
          "INSERT INTO deid.composition_reset (after_release)"
          " SELECT coalesce(max(release_id), 0) FROM deid.release;", "\\o", "\\set ECHO all"]


def sql_blocks(page):
    """The ```sql blocks of a doc page, in order."""
    return _SQL_BLOCK.findall(PATHS.get(page, DOCS / f"{page}.md").read_text())


def script():
    """The psql script: set-up (not echoed), then each page's blocks echoed after a marker."""
    demo = (ROOT / "scripts" / "demo.sql").read_text()
    generate = _GENERATE.search(demo).group(0)       # the demo's size and seed
    parts = ["\\set ON_ERROR_ROLLBACK on", "\\set SHOW_CONTEXT never", "\\pset footer off",
             "SET client_min_messages = warning;", "SET lc_messages = 'C';",
             "BEGIN;", "SET LOCAL deid.drop_with_releases = on;",
             "DROP EXTENSION IF EXISTS deid CASCADE;", "CREATE EXTENSION deid CASCADE;",
             "DROP SCHEMA IF EXISTS registry CASCADE;",
             # the roles docs/install.md grants to (created in the rolled-back transaction)
             "DO $$ BEGIN CREATE ROLE alice; CREATE ROLE bob;"
             " EXCEPTION WHEN duplicate_object THEN NULL; END $$;",
             (ROOT / "scripts" / "sample_patients.sql").read_text(), generate + ";"]
    for page in PAGES:
        parts += [f"\\echo {MARK}{page}", "\\set ECHO all"]
        for block in sql_blocks(page):
            parts += [block.rstrip("\n")] + FORGET
        parts += ["\\set ECHO none"]
    parts += ["ROLLBACK;"]
    # the set-up runs without echo: psql -a echoes from the start, so switch it off first
    return "\\set ECHO none\n" + "\n".join(parts) + "\n"


@pytest.fixture(scope="module")
def outputs(admin, url, tmp_path_factory):
    path = tmp_path_factory.mktemp("docs") / "docs.sql"
    path.write_text(script())
    out = run_psql(url, path, "docs.sql", keep_lines=False)
    pages, current = {}, None
    for line in out.splitlines(True):
        if line.startswith(MARK):
            current = line[len(MARK):].strip()
            pages[current] = []
        elif current is not None and line.rstrip("\n") != "\\set ECHO none":
            pages[current].append(line)
    return {page: "".join(lines) for page, lines in pages.items()}


def test_every_page_with_sql_runs():
    """A doc page with a ```sql block is one of PAGES (a new page is not left untested)."""
    pages = {str(p.relative_to(DOCS).with_suffix("")) for p in DOCS.rglob("*.md")
             if _SQL_BLOCK.search(p.read_text())}
    if _SQL_BLOCK.search((ROOT / "README.md").read_text()):
        pages.add("README")
    assert pages <= set(PAGES), sorted(pages - set(PAGES))


def test_pages_have_sql():
    for page in PAGES:
        assert sql_blocks(page), f"docs/{page}.md has no ```sql block"


@pytest.mark.parametrize("page", PAGES)
def test_doc_page(outputs, page):
    assert page in outputs, f"docs/{page}.md did not run (see the other pages' output)"
    assert_golden(GOLDEN / "docs" / f"{page}.out", outputs[page], f"docs/{page}.md's SQL output")
