"""The composition rule over a sharded source: a release read together with the earlier
releases of its source singles out no fewer than k rows -- whether the releases were made
through the coordinator, on one node, or both. Every node checks the selections of its rows
against every earlier release of the source it holds (the coordinator's parts and the node's
own releases alike): a cell of the source's partition is the union of the nodes' cells, each
empty or of at least k rows; and the coordinator's views publish every row with its node, so a
node's own cells are what a reader can count."""
import psycopg
import pytest
from dbfixtures import RESET

from .conftest import MEMBERS, member_url

REFUSAL = ("the release, read together with the earlier releases of the same source, would "
           "single out too few rows")
ANATOMY = ("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 10, l => 2,"
           " columns => '{age,sex,race,zip,diagnosis}', selection => %s, release => %s)")


def superuser(who):
    return psycopg.connect(member_url(who), autocommit=True)


def ids_on(node, n):
    with superuser(node) as c:
        return [r for r, in c.execute("SELECT patient_id FROM registry.patients"
                                      " ORDER BY patient_id LIMIT %s", [n]).fetchall()]


def without(ids):
    return "patient_id NOT IN (" + ", ".join(str(int(i)) for i in ids) + ")"


def parts(name):
    """{member: (log rows of `name` of any status, relations)}."""
    out = {}
    for m in MEMBERS:
        with superuser(m) as c:
            out[m] = (c.execute("SELECT count(*) FROM deid.release WHERE name = %s AND status"
                                " <> 'dropped'", [name]).fetchone()[0],
                      c.execute("SELECT count(*) FROM deid.distributed_release WHERE name = %s",
                                [name]).fetchone()[0])
    return out


def refused(conn, selection, name):
    with pytest.raises(psycopg.Error) as e:
        conn.execute(ANATOMY, [selection, name])
    assert e.value.diag.sqlstate == "DE001" and e.value.diag.message_primary == REFUSAL
    assert parts(name) == {m: (0, 0) for m in MEMBERS}
    return e.value


def test_a_tracker_split_over_both_nodes_is_refused(wh):
    """R1 all rows, R2 all but 3 rows (1 on node0, 2 on node1): R1 - R2 singles out 3 < k."""
    coord = wh.connect("coord", "deid_t_analyst")
    coord.execute(ANATOMY, [None, "co_all"])
    e = refused(coord, without(ids_on("node0", 1) + ids_on("node1", 2)), "co_tracker")
    assert e.diag.message_detail        # a requester with SELECT is told why


def test_a_tracker_on_one_node_is_refused(wh):
    coord = wh.connect("coord", "deid_t_analyst")
    coord.execute(ANATOMY, [None, "co_all1"])
    refused(coord, without(ids_on("node1", 9)), "co_tracker1")


def test_a_difference_of_k_over_the_source_but_fewer_on_each_node_is_refused(wh):
    """6 rows off on each node: 12 >= k over the source, but the views give every row its
    node, so each node's 6 rows are a cell a reader counts: refused."""
    coord = wh.connect("coord", "deid_t_analyst")
    coord.execute(ANATOMY, [None, "co_all2"])
    refused(coord, without(ids_on("node0", 6) + ids_on("node1", 6)), "co_split")


def test_a_nodes_own_release_and_a_distributed_one_are_one_source(wh):
    """A release made on node0 alone, then one through the coordinator whose node0 rows differ
    from it by 3: refused; and the other way round."""
    wh.connect("node0", "deid_t_analyst").execute(ANATOMY, [None, "co_node_first"])
    refused(wh.connect("coord", "deid_t_analyst"), without(ids_on("node0", 3)), "co_then_dist")
    wh.on_all(RESET)                  # a study of its own from here
    wh.connect("coord", "deid_t_analyst").execute(ANATOMY, [None, "co_dist_first"])
    refused(wh.connect("node0", "deid_t_analyst"), without(ids_on("node0", 3)), "co_then_node")
