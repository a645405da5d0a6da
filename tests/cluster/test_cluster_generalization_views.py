"""A distributed generalization's views on the coordinator show the release, not its nodes.

Generalization's k holds over the union of the parts: a class of 8 rows may be 3 on one node
and 5 on the other. A node is a function of the shard key (PL/Proxy's hash of patient_id), so
a reader who could tell each row's node would see classes below k -- a node's cell is what a
reader counts (the composition rule's own reasoning, docs/sharding.md). So these views have
no node column, and their rows come in an order of their values alone, not node by node."""
import psycopg
import pytest
from psycopg import sql

from .conftest import member_url
from .test_cluster_generalization import (GEN, GEN_REQUEST, SOURCES,  # noqa: F401
                                          gen_warehouse)

K = 5


@pytest.fixture(scope="module")
def gen_ready(warehouse, request):
    """The distributed generalization source of test_cluster_generalization.py (its fixture,
    unless another module already made it in this session: its hierarchies exist then)."""
    with psycopg.connect(member_url("coord"), autocommit=True) as c:
        ready = c.execute("SELECT 1 FROM deid.distributed_source"
                          " WHERE source = to_regclass(%s)", [GEN]).fetchone()
    return warehouse if ready else request.getfixturevalue("gen_warehouse")


def test_no_reader_tells_a_rows_node(gen_ready):
    w = gen_ready
    w.connect("coord", "deid_t_analyst").execute(GEN_REQUEST, [GEN, K, "{}", "gv_node"])
    reader = w.connect("coord", "deid_t_reader")
    view = sql.Identifier("release", "gv_node")
    cur = reader.execute(sql.SQL("SELECT * FROM {}").format(view))
    names = [d.name for d in cur.description]
    rows = cur.fetchall()
    assert "node" not in names
    ordered = reader.execute(sql.SQL("SELECT * FROM {} t ORDER BY t::text").format(view)
                             ).fetchall()
    assert rows == ordered            # the values decide the order, not the node
    for qis in SOURCES.values():      # k holds per source (the sources' own quasi-identifiers)
        group = sql.SQL(", ").join(map(sql.Identifier, qis))
        sizes = [c for (c,) in reader.execute(sql.SQL("SELECT count(*) FROM {} GROUP BY {}")
                                              .format(view, group)).fetchall()]
        assert min(sizes) >= K
        try:                          # the attack of the old views: a node's share of a class
            reader.execute(sql.SQL("SELECT min(n) FROM (SELECT count(*) AS n FROM {} GROUP BY"
                                   " node, {}) s").format(view, group))
            raise AssertionError("the view tells a row's node")
        except psycopg.errors.UndefinedColumn:
            pass
