"""Attack: a later disassociation release absorbs an earlier cluster whole, with fewer than k
new records.

Found by the composition fuzzer (tests/fuzz/sequences.py, seed 1; the attack of
tests/fuzz/check_composition.py on per-cluster statistics). The rule lets a later release keep
the earlier clusters or unions of them, and put the rows new to the source in new clusters.
When a new cluster is an earlier cluster plus fewer than k new records, every code's support
in its record chunks, minus that code's support in the earlier cluster, is the support among
those few new records alone: a set of fewer than k records singled out.

Here: ten records released first (k = 5, one cluster: at most ten records per cluster); ten
more arrive; the second release (k = 5, at most thirteen per cluster) splits on the most
frequent code and puts the ten earlier records with three new ones. The reader (deid_reader)
subtracts the supports. The release must be refused (uniformly: a policy requester), or
leave no cluster that is an earlier cluster plus fewer than k records.
"""
import re
from collections import Counter

import psycopg
import pytest
from psycopg import sql

RESEARCHER, READER = "deid_t_researcher", "deid_t_reader"
K = 5
OLD = [["a", "d"]] * 5 + [["a"]] * 5                 # released first
NEW = [["a", "d"]] + [["a"]] * 2 + [["b", "e"]] * 7  # arrive later: three join the a-records


@pytest.fixture
def source(admin):
    ident = sql.Identifier("public", "cmp_remainder")
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))
    admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, codes text[])").format(ident))
    for i, codes in enumerate(OLD, 1):
        admin.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(ident), [i, codes])
    admin.execute("SELECT deid.allow_requests(%s, 'public.cmp_remainder', %s)", [RESEARCHER, K])
    yield "public.cmp_remainder", ident
    for name in ("cmp_rem_1", "cmp_rem_2"):
        if admin.execute("SELECT 1 FROM deid.release WHERE name = %s AND status = 'committed'",
                         [name]).fetchone():
            admin.execute("SELECT deid.drop_release(%s)", [name])
    admin.execute("DELETE FROM deid.policy WHERE relation = 'public.cmp_remainder'::regclass")


def release(conn, name, max_size):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request('public.cmp_remainder', 'disassociation', k => %s,"
        " columns => '{codes}', options => %s, release => %s)",
        [K, '{"m": 1, "seed": 7, "max_cluster_size": %d}' % max_size, name]).fetchone()


def supports(reader, name):
    """{cluster: (size, Counter of code supports in its record chunks)} as a reader reads them."""
    sizes = dict(reader.execute(sql.SQL("SELECT cluster_id, size FROM {}").format(
        sql.Identifier("release", name + "_cluster"))).fetchall())
    out = {c: Counter() for c in sizes}
    for cid, codes in reader.execute(sql.SQL("SELECT cluster_id, codes FROM {}").format(
            sql.Identifier("release", name + "_record_chunk"))):
        out[cid].update(set(codes or ()))
    return {c: (sizes[c], out[c]) for c in sizes}


def test_an_old_cluster_plus_fewer_than_k_new_records_is_refused(source, connect, admin):
    rel, ident = source
    researcher, reader = connect(RESEARCHER), connect(READER)
    assert release(researcher, "cmp_rem_1", 10)[5]
    first = supports(reader, "cmp_rem_1")
    assert [s for s, _ in first.values()] == [len(OLD)]          # one cluster of the ten
    for i, codes in enumerate(NEW, len(OLD) + 1):
        admin.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(ident), [i, codes])
    try:
        release(researcher, "cmp_rem_2", 13)
    except psycopg.Error as e:                                    # refused: the promise holds
        d = e.diag
        assert d.sqlstate == "DE001" and not re.search(r"\d", d.message_primary)
        return
    (old_size, old_support), = first.values()
    for size, support in supports(reader, "cmp_rem_2").values():
        extra = size - old_size
        if 0 < extra < K and all(support[c] >= n for c, n in old_support.items()):
            left = {c: support[c] - old_support[c] for c in old_support}
            pytest.fail(f"a cluster of {size} records is the earlier cluster plus {extra}: "
                        f"their supports {left} are read off (k = {K})")
