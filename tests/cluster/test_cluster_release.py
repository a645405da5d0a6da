"""Every shard-local method, requested on the coordinator and run on both nodes: the same
result row as on one server, the release readable on the coordinator, and an independent check
over the union of the parts (plain SQL and Python over what the coordinator's views return,
nothing of deid imported) agrees with what the coordinator logged."""
import itertools
import json
from collections import Counter, defaultdict

import psycopg
import pytest
from psycopg import sql

from .conftest import NODES, member_url

ANATOMY = ("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => %s, l => %s,"
           " columns => '{age,sex,race,zip,diagnosis}', options => '{\"seed\": 7}', release => %s)")
CONDENSATION = ("SELECT * FROM deid.anonymize_request('registry.patients_survival', 'condensation',"
                " k => %s, columns => '{age,sex,race,pt,surv_months,vital}', options =>"
                " '{\"survival\": {\"time\": \"surv_months\", \"status\": \"vital\"},"
                " \"row_id\": \"patient_id\", \"seed\": 7}', release => %s)")
DISASSOCIATION = ("SELECT * FROM deid.anonymize_request('registry.diagnoses', 'disassociation',"
                  " k => %s, options => '{\"m\": 2, \"record\": \"patient_id\", \"item\": \"icd9\","
                  " \"seed\": 7}', release => %s)")


def source_count(query):
    n = 0
    for m in NODES:
        with psycopg.connect(member_url(m), autocommit=True) as c:
            n += c.execute(query).fetchone()[0]
    return n


def logged(coord, name):
    return coord.execute("SELECT metrics, parts FROM deid.distributed_release WHERE name = %s",
                         [name]).fetchone()


def test_anatomy_distributed_agrees_with_an_independent_check(wh):
    analyst, reader, coord = (wh.connect("coord", "deid_t_analyst"),
                              wh.connect("coord", "deid_t_reader"), wh.connect("coord"))
    row = analyst.execute(ANATOMY, [10, 3, "cl_anatomy"]).fetchone()
    release_id, relations, rows, groups, disc, verified = row
    assert verified and sorted(relations) == ["release.cl_anatomy_diagnosis", "release.cl_anatomy_qit"]
    assert rows == source_count("SELECT count(*) FROM registry.patients")
    qit = reader.execute("SELECT node, group_id, count(*) FROM release.cl_anatomy_qit"
                         " GROUP BY 1, 2").fetchall()
    dx = reader.execute("SELECT node, group_id, count(DISTINCT diagnosis), sum(count)"
                        " FROM release.cl_anatomy_diagnosis GROUP BY 1, 2").fetchall()
    sizes = {(n, g): s for n, g, s in qit}
    assert {n for n, _ in sizes} == {n for n, _, _, _ in dx} and len({n for n, _ in sizes}) == 2
    assert min(sizes.values()) >= 10                       # K per group, on every node
    assert all(d >= 3 and s == sizes[(n, g)] for n, g, d, s in dx)   # L distinct, counts add up
    assert sum(sizes.values()) == rows and len(sizes) == groups
    assert disc == pytest.approx(sum(s * s for s in sizes.values()) / rows)
    metrics, parts = logged(coord, "cl_anatomy")
    assert metrics["rows"] == rows and len(parts) == 2
    estimate_view_over_the_nodes(wh, reader, dx, rows)


def estimate_view_over_the_nodes(wh, reader, dx, rows):
    """release.cl_anatomy_estimate on the coordinator: 001's estimate over both nodes' groups
    (joined on group and node), readable by the release's audience only; each node's own
    estimate view of its held part is withheld like the part's views."""
    by_dx = dict(reader.execute("SELECT diagnosis, sum(weight) FROM release.cl_anatomy_estimate"
                                " GROUP BY 1").fetchall())
    counts = dict(reader.execute("SELECT diagnosis, sum(count) FROM release.cl_anatomy_diagnosis"
                                 " GROUP BY 1").fetchall())
    assert by_dx.keys() == counts.keys()
    assert all(by_dx[d] == pytest.approx(float(counts[d]), rel=1e-9) for d in counts)
    assert reader.execute("SELECT sum(weight) FROM release.cl_anatomy_estimate"
                          ).fetchone()[0] == pytest.approx(rows)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        wh.connect("coord", "deid_t_attacker").execute("SELECT 1 FROM release.cl_anatomy_estimate")
    for m in NODES:
        with psycopg.connect(member_url(m), autocommit=True) as c:
            view = c.execute("SELECT r.metrics->>'estimate_view' FROM deid.release r WHERE"
                             " r.status = 'committed' AND r.name = 'cl_anatomy'").fetchone()
        assert view is not None and view[0] == "release.cl_anatomy_estimate"
        for role in ("deid_t_reader", "deid_t_analyst"):
            with psycopg.connect(member_url(m), user=role, autocommit=True) as c, \
                    pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("SELECT 1 FROM release.cl_anatomy_estimate")


def test_condensation_distributed_agrees_with_an_independent_check(wh):
    analyst, reader = wh.connect("coord", "deid_t_analyst"), wh.connect("coord", "deid_t_reader")
    k = 15
    _, relations, rows, groups, _, verified = analyst.execute(CONDENSATION, [k, "cl_cond"]).fetchone()
    assert verified and relations == ["release.cl_cond"]
    n = source_count("SELECT count(*) FROM registry.patients_survival")
    assert rows == n == reader.execute("SELECT count(*) FROM release.cl_cond").fetchone()[0]
    # every categorical value of the union held by >= k rows; the union's means are the source's
    for col in ("sex", "race", "pt"):
        counts = reader.execute(sql.SQL("SELECT count(*) FROM release.cl_cond GROUP BY {}")
                                .format(sql.Identifier(col))).fetchall()
        assert min(c for c, in counts) >= k, col
    released = reader.execute("SELECT avg(age), avg(surv_months) FROM release.cl_cond").fetchone()
    total = [0.0, 0.0]
    for m in NODES:
        with psycopg.connect(member_url(m), autocommit=True) as c:
            s = c.execute("SELECT sum(age), sum(surv_months) FROM registry.patients_survival").fetchone()
            total = [total[0] + float(s[0]), total[1] + float(s[1])]
    # age: exact up to rounding and the one-year moves off rare source rows; the recoded
    # survival time never moves (its pairs of >= k rows), so those moves all fall on age
    assert float(released[0]) == pytest.approx(total[0] / n, abs=0.1)
    assert float(released[1]) == pytest.approx(total[1] / n, abs=0.05)
    # clusters of >= k on every node (the nodes' audit catalogs), as many as the log says, and
    # together every source row once
    sizes, members = [], []
    for m in NODES:
        with psycopg.connect(member_url(m), autocommit=True) as c:
            for (rids,) in c.execute("SELECT m.rids FROM deid.cluster_member m JOIN deid.release r"
                                     " USING (release_id) WHERE r.name = 'cl_cond'").fetchall():
                sizes.append(len(rids))
                members += rids
    assert min(sizes) >= k and len(sizes) == groups
    assert len(members) == len(set(members)) == n


def test_disassociation_distributed_agrees_with_an_independent_check(wh):
    analyst, reader = wh.connect("coord", "deid_t_analyst"), wh.connect("coord", "deid_t_reader")
    k, m = 5, 2
    _, relations, rows, groups, _, verified = analyst.execute(DISASSOCIATION, [k, "cl_dx"]).fetchone()
    assert verified and "release.cl_dx_cluster" in relations
    assert rows == source_count("SELECT count(DISTINCT patient_id) FROM registry.diagnoses")
    clusters = reader.execute("SELECT node, cluster_id, size FROM release.cl_dx_cluster").fetchall()
    assert len(clusters) == groups and sum(s for _, _, s in clusters) == rows
    assert min(s for _, _, s in clusters) >= k
    # k^m per record chunk: every itemset of <= m codes in a chunk's subrecords is in >= k of them
    chunks = defaultdict(list)
    for node, cl, ch, codes in reader.execute(
            "SELECT node, cluster_id, chunk_id, codes FROM release.cl_dx_record_chunk").fetchall():
        chunks[(node, cl, ch)].append(set(codes or ()))
    assert chunks
    for key, subrecords in chunks.items():
        support = Counter(s for r in subrecords for size in range(1, m + 1)
                          for s in itertools.combinations(sorted(r), size))
        assert not support or min(support.values()) >= k, key


def test_generalization_refused_by_a_node_leaves_nothing(wh):
    """generalization merges its class counts over the nodes (tests/cluster/
    test_cluster_generalization.py); a request the nodes refuse (here: no hierarchy) gets the
    node's own refusal, and nothing is left on any node."""
    analyst = wh.connect("coord", "deid_t_analyst")
    with pytest.raises(psycopg.Error) as e:
        analyst.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'generalization',"
                        " k => 5, columns => '{age,sex}', release => 'cl_gen')")
    assert e.value.diag.sqlstate == "22023" and e.value.diag.message_hint
    assert "has no hierarchy" in e.value.diag.message_primary
    assert not any(node_rows for node_rows in _parts_named(wh, "cl_gen").values())


def _parts_named(wh, name):
    out = {}
    for m in NODES:
        with psycopg.connect(member_url(m), autocommit=True) as c:
            out[m] = c.execute("SELECT 1 FROM deid.release WHERE name = %s", [name]).fetchall()
    return out


def test_the_result_row_has_the_single_node_shape(wh):
    analyst = wh.connect("coord", "deid_t_analyst")
    cur = analyst.execute(ANATOMY, [10, 2, "cl_shape"])
    assert [d.name for d in cur.description] == ["release_id", "relations", "rows", "groups",
                                                 "discernibility", "verified"]
    assert json.dumps(cur.fetchone(), default=str)


def test_a_dropped_source_is_registered_no_more(wh):
    coord = wh.connect("coord")
    coord.execute("CREATE TABLE registry.gone (patient_id int PRIMARY KEY, age int)")
    coord.execute("SELECT deid.register_distributed_source('registry.gone', 'deid_shards',"
                  " 'patient_id')")
    oid = coord.execute("SELECT 'registry.gone'::regclass::oid").fetchone()[0]
    coord.execute("DROP TABLE registry.gone")
    assert not coord.execute("SELECT 1 FROM deid.distributed_source WHERE source = %s",
                             [oid]).fetchall()
