"""The toy fifth method (tests/fixtures/toy_method) over a sharded source, on real PL/Proxy
nodes: installed as a fifth method is -- its folder, its verifier and its registry line in
deid's package -- and requested on the coordinator like a shipped method. It declares
DISTRIBUTION "shard_local": every node releases its own classes, the coordinator logs the
union; nothing of the distributed path names it."""
import os
import pathlib
import shutil
import subprocess

import psycopg
import pytest

from .conftest import NODES, member_url

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOY = ROOT / "tests" / "fixtures" / "toy_method"
TOY_REQUEST = ("SELECT * FROM deid.anonymize_request('registry.patients', 'toy_counts', k => 5,"
               " columns => '{sex,race}', options => '{\"seed\": 3}', release => 'toy_sharded')")


def _pydir():
    share = subprocess.run([os.environ.get("PG_CONFIG", "pg_config"), "--sharedir"], check=True,
                           capture_output=True, text=True).stdout.strip()
    version = next(line.split("'")[1] for line in
                   (ROOT / "extension" / "deid.control").read_text().splitlines()
                   if line.startswith("default_version"))
    return pathlib.Path(share) / "deid" / f"python-{version}"


def _install(source):
    subprocess.run(["/usr/bin/python3", str(ROOT / "extension" / "install_python.py"),
                    str(_pydir()), str(source), "30.30.0"], check=True, capture_output=True)


@pytest.fixture
def toy_installed(tmp_path):
    """deid's package with the toy's folder, verifier and registry line, installed as a build
    (every new backend of every member imports it); the shipped package again afterwards."""
    stage = tmp_path / "deid"
    shutil.copytree(ROOT / "python_udfs" / "deid", stage,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (stage / "methods" / "toy_counts").mkdir()
    (stage / "methods" / "toy_counts" / "__init__.py").write_text("")
    shutil.copy(TOY / "methods" / "toy_counts" / "plugin.py", stage / "methods" / "toy_counts")
    shutil.copy(TOY / "verify" / "toy_counts.py", stage / "verify")
    with open(stage / "methods" / "registry.py", "a") as f:
        f.write("\n" + (TOY / "registry_line.txt").read_text())
    _install(stage)
    try:
        yield
    finally:
        _install(ROOT / "python_udfs" / "deid")


def test_the_toy_method_runs_on_every_node(wh, toy_installed):
    analyst = wh.connect("coord", "deid_t_analyst")
    rid, relations, rows, groups, _, verified = analyst.execute(TOY_REQUEST).fetchone()
    assert verified and relations == ["release.toy_sharded_counts"]
    stored = analyst.execute("SELECT sex::text, race::text, count FROM release.toy_sharded_counts"
                             ).fetchall()
    assert stored and min(c for *_, c in stored) >= 5 and len(stored) == rows == groups
    # each node released its own rows' classes (shard-local): counted again on the nodes
    want = []
    for m in NODES:
        with psycopg.connect(member_url(m), autocommit=True) as c:
            want += c.execute("SELECT sex::text, race::text, count(*) FROM registry.patients"
                              " GROUP BY 1, 2 HAVING count(*) >= 5").fetchall()
    assert sorted(stored) == sorted(want)
    coord = wh.connect("coord")
    assert coord.execute("SELECT method FROM deid.distributed_release WHERE name = 'toy_sharded'"
                         ).fetchone()[0] == "toy_counts"
    coord.execute("SELECT deid.drop_release('toy_sharded')")
