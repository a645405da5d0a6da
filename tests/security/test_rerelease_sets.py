"""Disassociation (003) of a growing table of diagnosis-code records, released every month.

A re-release keeps the earlier clusters (methods/disassociation/kept.py): the old records'
clusters publish exactly what they published before, and the new records form clusters of
their own, refined among themselves. Real login roles: a policy requester without SELECT, an
analyst with SELECT, a reader who compares the two releases; an admin changes the source.
"""
import re
import zlib
from collections import Counter

import psycopg
import pytest
from psycopg import sql

from dbfixtures import sqlstate_of
from test_rerelease import (ANALYST, FIRST, MONTHLY, READER, RESEARCHER,  # noqa: F401
                            registry, release)

K = 5


def tables(reader, source, name):
    """{kind: rows} of a disassociation release as a deid_reader reads it (codes sorted)."""
    tag = f"{zlib.crc32(source.encode()):x}"
    queries = {
        "cluster": "SELECT cluster_id, size FROM {}",
        "record_chunk": "SELECT cluster_id, chunk_id, (SELECT coalesce(array_agg(c ORDER BY c),"
                        " '{{}}') FROM unnest(codes) c) FROM {}",
        "item_chunk": "SELECT cluster_id, code FROM {}",
        "shared_chunk": "SELECT cluster_ids, (SELECT array_agg(c ORDER BY c) FROM unnest(codes)"
                        " c) FROM {}"}
    return {kind: Counter(tuple(tuple(v) if isinstance(v, list) else v for v in row)
                          for row in reader.execute(sql.SQL(q).format(sql.Identifier(
                              "release", f"{name}_{tag}_{kind}"))).fetchall())
            for kind, q in queries.items()}


def old_part(t, n_old):
    """The rows of the clusters 1..n_old (a shared chunk: all of its clusters among them)."""
    return {"cluster": Counter({r: n for r, n in t["cluster"].items() if r[0] <= n_old}),
            "record_chunk": Counter({r: n for r, n in t["record_chunk"].items()
                                     if r[0] <= n_old}),
            "item_chunk": Counter({r: n for r, n in t["item_chunk"].items() if r[0] <= n_old}),
            "shared_chunk": Counter({r: n for r, n in t["shared_chunk"].items()
                                     if max(r[0]) <= n_old})}


def test_rerelease_republishes_old_clusters_and_adds_new_ones(registry, connect):
    """The reader's comparison of two months: every old cluster's size, record chunks, item
    chunk and shared chunks as they were; the new clusters hold the new records alone, each
    at least k, and no shared chunk joins an old cluster to a new one."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, "rs_a_0", "disassociation")
    grow(FIRST + MONTHLY)
    release(researcher, source, "rs_a_1", "disassociation")
    reader = connect(READER)
    before, after = (tables(reader, source, n) for n in ("rs_a_0", "rs_a_1"))
    n_old = len(before["cluster"])
    assert old_part(after, n_old) == before
    new_sizes = [size for (c, size) in after["cluster"] if c > n_old]
    assert new_sizes and sum(new_sizes) == MONTHLY and min(new_sizes) >= K
    assert all(min(ids) > n_old or max(ids) <= n_old for ids, _ in after["shared_chunk"])


@pytest.mark.parametrize("change", [
    "UPDATE {} SET codes = ARRAY['c0', 'c9'] WHERE id = 7",
    "UPDATE {} SET codes = codes || ARRAY['c5'] WHERE id = 8",
], ids=["replaced", "added"])
@pytest.mark.parametrize("grown", [0, MONTHLY], ids=["same", "grown"])
def test_changed_codes_of_a_released_record_are_refused(registry, connect, admin, change,
                                                        grown):
    """A record's codes changed since: its cluster's chunks would publish the change (the
    two releases' difference is that patient's codes). Refused uniformly for the policy
    requester, with no fresh clustering that could rebuild the same clusters."""
    source, grow = registry
    researcher, analyst = connect(RESEARCHER), connect(ANALYST)
    release(researcher, source, "rs_c_0", "disassociation")
    admin.execute(sql.SQL(change).format(sql.Identifier(*source.split("."))))
    if grown:
        grow(FIRST + grown)
    with pytest.raises(psycopg.Error) as e:
        release(researcher, source, "rs_c_1", "disassociation")
    d = e.value.diag
    assert d.sqlstate == "DE001" and d.message_detail is None and d.message_hint
    assert not re.search(r"\d", d.message_primary + " " + d.message_hint)
    with pytest.raises(psycopg.Error) as e:
        release(analyst, source, "rs_c_1", "disassociation")
    assert sqlstate_of(e) == "DE001" and e.value.diag.message_hint


def test_deleted_record_of_a_released_cluster_is_refused(registry, connect, admin):
    """A patient deleted since: its cluster would be published without it. Refused
    uniformly."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, "rs_x_0", "disassociation")
    admin.execute(sql.SQL("DELETE FROM {} WHERE id = 7").format(
        sql.Identifier(*source.split("."))))
    grow(FIRST + MONTHLY)
    with pytest.raises(psycopg.Error) as e:
        release(researcher, source, "rs_x_1", "disassociation")
    d = e.value.diag
    assert d.sqlstate == "DE001" and d.message_detail is None
    assert not re.search(r"\d", d.message_primary + " " + d.message_hint)


def test_fewer_than_k_new_records_wait(registry, connect):
    """K - 1 new records cannot form a cluster of their own and may not join an old one:
    refused uniformly for the policy requester (with the hint); they go out with the next
    month's records."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, "rs_w_0", "disassociation")
    grow(FIRST + K - 1)
    with pytest.raises(psycopg.Error) as e:
        release(researcher, source, "rs_w_1", "disassociation")
    d = e.value.diag
    assert d.sqlstate == "DE001" and d.message_detail is None and d.message_hint
    with pytest.raises(psycopg.Error) as e:
        release(connect(ANALYST), source, "rs_w_1", "disassociation")
    assert "fewer than k records are new" in e.value.diag.message_primary
    assert "at least k records have been added" in e.value.diag.message_hint
    grow(FIRST + MONTHLY)
    assert release(researcher, source, "rs_w_1", "disassociation")[5]


def test_a_disassociation_rerelease_verifies_afterwards(registry, connect, admin):
    """deid.verify_release checks k^m on the stored re-release alone."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    for month in range(3):
        if month:
            grow(FIRST + month * MONTHLY)
        release(researcher, source, f"rs_v_{month}", "disassociation")
    name = f"rs_v_2_{zlib.crc32(source.encode()):x}"
    assert admin.execute("SELECT deid.verify_release(%s)", [name]).fetchone()[0]
