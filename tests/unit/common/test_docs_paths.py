"""Docs that name code cannot drift: every repository path written in backticks in README.md,
CONTRIBUTING.md and docs/ exists; the developers' guide (docs/dev/) names every folder of the
repository and of tests/; architecture.md names every folder of the server's package and every
module of the request's path (a module added, moved or removed without its line fails here)."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "python_udfs" / "deid"
PAGES = sorted({*ROOT.glob("docs/**/*.md"), ROOT / "README.md", ROOT / "CONTRIBUTING.md"})
DEV = sorted((ROOT / "docs" / "dev").glob("*.md"))
ARCHITECTURE = ROOT / "docs" / "dev" / "architecture.md"

# Paths made at run time (git-ignored), and backticked text that only looks like a path.
RUNTIME = (".pgdata", ".shard", ".bench_shard", ".venv", "build", "reports",
           "bench/.venv-eval", "bench/.venv-peers")
NOT_PATHS = {
    "c/w",                        # cold/warm, a column of docs/benchmarks.md
    "base/pgsql_tmp",             # PostgreSQL's data directory, not this repository's
    "../shared/data/",            # the papers' data sets, beside the repository
    "DIR/RELEASE.html", "DIR/RELEASE.json",     # placeholders of `deid report`
    "deid--1.1.0.sql", "deid--1.0.0--1.1.0.sql",  # scripts the build makes from sql/
}
# Packages whose every module is a step of the request's path (docs/dev/architecture.md).
PATH_STEPS = ("", "request", "read", "write", "log", "catalog", "releases", "distributed")
SUFFIX = re.compile(r"\.(py|sql|sh|md|txt|toml|json|control|out|png|ini)$")


def spans(page):
    """The backticked spans of a page's prose (fenced blocks are tested by running them)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [s.strip() for s in re.findall(r"`([^`\n]+)`", text)]


def path_like(span):
    if " " in span or span.startswith(("/", "http", "~")) or re.search(r"[<>*{}$()=,:;|\"'@]", span):
        return False
    return "/" in span or bool(SUFFIX.search(span))


def exists(span, page, names):
    rel = span[2:] if span.startswith("./") else span
    rel = rel.rstrip("/")
    if span in NOT_PATHS or rel.startswith(RUNTIME):
        return True
    if "/" not in rel:                     # a bare name: some file or folder of the repository
        return rel in names
    candidates = [base / rel for base in (ROOT, PACKAGE, page.parent)]
    module = re.sub(r"\.\w+$", ".py", rel)     # methods/x/plugin.run -> methods/x/plugin.py
    candidates += [base / module for base in (ROOT, PACKAGE)]
    return any(c.exists() for c in candidates)


def repository_names():
    made = set(RUNTIME)
    return {p.name for p in ROOT.rglob("*") if ".git" not in p.parts and "__pycache__" not in p.parts
            and not made.intersection(p.relative_to(ROOT).parts[:1])}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_backticked_path_exists(page):
    if not page.exists():
        pytest.fail(f"{page.relative_to(ROOT)} is missing")
    names = repository_names()
    missing = [s for s in spans(page) if path_like(s) and not exists(s, page, names)]
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_checker_sees_a_wrong_path(tmp_path):
    page = tmp_path / "x.md"
    page.write_text("`python_udfs/deid/methods/nowhere.py` and `methods/contract.py`\n")
    names = repository_names()
    assert [s for s in spans(page) if path_like(s) and not exists(s, page, names)] == [
        "python_udfs/deid/methods/nowhere.py"]


def folders_of(path):
    return sorted(p.name for p in path.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name != "__pycache__")


def test_docs_dev_names_every_folder_of_the_repository_and_of_tests():
    text = "\n".join(p.read_text() for p in DEV)
    made = set(RUNTIME)                  # folders made at run time (git-ignored) are not the layout
    wanted = ([f"{f}/" for f in folders_of(ROOT) if f not in made]
              + [f"tests/{f}/" for f in folders_of(ROOT / "tests")])
    unnamed = [w for w in wanted if w not in text]
    assert not unnamed, f"docs/dev/ never names {unnamed}"


def test_architecture_names_every_package_and_every_module_of_the_path():
    text = ARCHITECTURE.read_text()
    packages = sorted(p.relative_to(PACKAGE) for p in PACKAGE.rglob("*")
                      if p.is_dir() and p.name != "__pycache__")
    unnamed = [f"{p.name}/" for p in packages if f"{p.name}/" not in text]
    assert not unnamed, f"architecture.md never names the packages {unnamed}"
    modules = [m for step in PATH_STEPS for m in sorted((PACKAGE / step).glob("*.py"))
               if m.name != "__init__.py"]
    unnamed = [str(m.relative_to(PACKAGE)) for m in modules if m.name not in text]
    assert not unnamed, f"architecture.md never names the modules {unnamed}"
