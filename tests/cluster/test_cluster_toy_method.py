"""The toy fifth method (tests/fixtures/toy_method) over a sharded source, on real PL/Proxy
nodes: installed as a fifth method is -- its folder, its verifier and its registry line in
deid's package -- and requested on the coordinator like a shipped method. It declares
DISTRIBUTION "shard_local": every node releases its own classes, the coordinator logs the
union; nothing of the distributed path names it."""
import importlib.util
import pathlib

import psycopg
import pytest

from .conftest import NODES, member_url

TOY = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "toy_method"
_spec = importlib.util.spec_from_file_location("toy_install", TOY / "install.py")
install = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install)
TOY_REQUEST = ("SELECT * FROM deid.anonymize_request('registry.patients', 'toy_counts', k => 5,"
               " columns => '{sex,race}', options => '{\"seed\": 3}', release => 'toy_sharded')")


@pytest.fixture
def toy_installed(tmp_path):
    with install.installed(tmp_path):
        yield


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
