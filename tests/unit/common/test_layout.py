"""The test tree's layout holds what CONTRIBUTING.md says: `make test` is made of the targets
unit, integration, cluster-test and pgtap, a plain `pytest` collects the same folders
(pytest.ini's testpaths), CI runs `make test`, the unit tests sit in one folder per method
(plus common/ and tools/), and no two test modules share a basename (the test folders are not
packages: pytest would refuse the second one with "import file mismatch")."""
import ast
import collections
import configparser
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
UNIT_FOLDERS = {"anatomy", "generalization", "condensation", "disassociation", "common", "tools"}


def makefile_rules():
    """target -> (prerequisites, recipe lines) of the top-level Makefile."""
    rules, target = {}, None
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([A-Za-z][\w.-]*):(?!=)\s*(.*)$", line)
        if m:
            target = m.group(1)
            rules[target] = (m.group(2).split(), [])
        elif line.startswith("\t") and target:
            rules[target][1].append(line.strip())
        elif not line.strip().startswith("#") and line.strip() and not line.startswith("\t"):
            target = None
    return rules


def pytest_folders(target, rules, seen=None):
    """The test folders pytest runs in `make target`, prerequisites included, in order."""
    seen = set() if seen is None else seen
    if target in seen or target not in rules:
        return []
    seen.add(target)
    prereqs, recipe = rules[target]
    folders = [f for p in prereqs for f in pytest_folders(p, rules, seen)]
    for line in recipe:
        if "pytest" in line:
            folders += re.findall(r"\btests/[\w/]+", line)
    return folders


def test_make_test_is_made_of_the_documented_targets():
    rules = makefile_rules()
    assert rules["test"][0] == ["typecheck", "unit", "integration", "cluster-test", "pgtap"]
    assert any("mypy" in line for line in rules["typecheck"][1])
    assert any("pg_prove" in line for line in rules["pgtap"][1])
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_pytest_ini_collects_what_make_test_runs():
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    testpaths = ini["pytest"]["testpaths"].split()
    assert sorted(testpaths) == sorted(pytest_folders("test", makefile_rules()))


def test_unit_tests_sit_in_a_folder_per_method():
    assert not list((TESTS / "unit").glob("test_*.py")), "a unit test belongs in a folder"
    folders = {p.name for p in (TESTS / "unit").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == UNIT_FOLDERS


def test_no_two_test_modules_share_a_basename():
    by_name = collections.defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "fixtures" not in path.parts:
            by_name[path.name].append(str(path.relative_to(ROOT)))
    assert {n: p for n, p in by_name.items() if len(p) > 1} == {}


def test_the_client_imports_nothing_of_the_server_package():
    """client/ talks to the server through SQL only (CONTRIBUTING.md, who may import whom)."""
    offenders = []
    for path in sorted((ROOT / "client").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "deid"]
    assert offenders == []


def test_bench_scripts_sit_in_the_folders_bench_paths_knows():
    """bench_paths.FOLDERS puts every folder of bench/ on sys.path; a folder it misses would
    leave its scripts unimportable by their neighbours."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_paths_probe", ROOT / "bench" / "bench_paths.py")
    saved = list(sys.path)
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    folders = {p.name for p in (ROOT / "bench").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert folders - {"results", "eval_condensation"} == set(module.FOLDERS)
    assert sorted(p.name for p in (ROOT / "bench").glob("*.py")) == ["bench_paths.py", "common.py", "run_all.py"]


TRACKER = re.compile(r"\bissues? ?#?\d+|\bthe issue[']s\b", re.I)
CODE = ("python_udfs", "sql", "tests", "client", "bench", "scripts", "extension", "docker")
# its docstring is rewritten together with the report's own code
NOT_YET = {"client/deid_cli/report_data.py"}


def tracked_files(*tops):
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *tops], cwd=ROOT, check=True,
                             capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / p for p in out.decode().split("\0") if p]


def test_code_names_reasons_not_tracker_numbers():
    """A reader of the code has no issue tracker: code, SQL, tests and the Makefile say why."""
    files = [p for p in tracked_files("Makefile", *CODE)
             if "results" not in p.parts and p.suffix not in (".png", ".gz", ".zip")]
    found = [f"{p.relative_to(ROOT)}:{n}" for p in files if str(p.relative_to(ROOT)) not in NOT_YET
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
             if TRACKER.search(line)]
    assert found == []
