"""The disassociation plug-in (003) without a server: option checks (SQLSTATE, hint, no value
and no count in message or hint), what it reads, and the release plan of the worked example
(Figs. 1, 3b, 4, 10: k=3, m=2, maxClusterSize 6)."""
import types

import numpy as np
import pytest

from deid.catalog.relations import Column, Relation
from deid.errors import DeidError
from deid.plan import IntArrays, TextArrays
from deid.methods.disassociation import plugin
from fixtures.paper003 import FIG1, FIG3B



def rel():
    r = Relation(1, "ehr", "patients", "r", False)
    for name, typ, base in [("id", "integer", "int4"), ("codes", "text[]", "_text"),
                            ("icd9", "text", "text"), ("name", "text", "text")]:
        r.columns[name] = Column(name, typ, base, False)
    r.columns["name"].role = "identifier"
    return r


@pytest.mark.parametrize("k, l, opts", [
    (1, None, {}), (3, 2, {}), (3, None, {"record": "id"}), (5, None, {"max_cluster_size": 4}),
    (3, None, {"utility": [["a", "b"], ["b"]]})])
def test_bad_options(k, l, opts):
    with pytest.raises(DeidError) as e:
        plugin.validate(k, l, opts)
    assert e.value.sqlstate == "22023" and e.value.hint
    # no raw value in the message (values and counts go to the detail)
    assert str(k) not in e.value.message.replace("2", "") and "'a'" not in e.value.message


def test_read_columns():
    assert plugin.read_columns(rel(), ["codes"], {}) == (["codes"], None)
    assert plugin.read_columns(rel(), None, {"record": "id", "item": "icd9"}) == (["icd9"], "id")
    for columns, opts in [(["icd9"], {}), (None, {}), (["codes", "icd9"], {}),
                          (None, {"record": "icd9", "item": "icd9"}),
                          (None, {"record": "id", "item": "name"}),
                          (["codes"], {"record": "id", "item": "icd9"})]:
        with pytest.raises(DeidError) as e:
            plugin.read_columns(rel(), columns, opts)
        assert e.value.sqlstate == "22023" and e.value.hint


def frame():
    dictionary = sorted({c for r in FIG1 for c in r})
    index = {c: i for i, c in enumerate(dictionary)}
    codes = [sorted(index[c] for c in r) for r in FIG1]
    return types.SimpleNamespace(
        rid=np.arange(1, 11, dtype=np.int64), n=10, dictionary=dictionary,
        offsets=np.cumsum([0] + [len(r) for r in codes]).astype(np.int64),
        codes=np.array([c for r in codes for c in r], np.int64))


def run(seed=3):
    req = types.SimpleNamespace(name="dx", k=3, seed=seed,
                                options={"m": 2, "max_cluster_size": 6, "utility": FIG3B})
    return plugin.run(frame(), req)


def rows(table):
    out = []
    for i in range(table.rows):
        row = []
        for c in table.columns:
            if isinstance(c, TextArrays):
                row.append(frozenset(c.labels[x] for x in c.codes[c.offsets[i]:c.offsets[i + 1]]))
            elif isinstance(c, IntArrays):
                row.append(tuple(c.values[c.offsets[i]:c.offsets[i + 1]].tolist()))
            elif hasattr(c, "labels"):
                row.append(c.labels[c.codes[i]])
            else:
                row.append(int(c.values[i]))
        out.append(tuple(row))
    return out


def test_worked_example_plan():
    plan = run()
    cluster, record, item, shared = plan.tables
    assert [t.name for t in plan.tables] == ["dx_cluster", "dx_record_chunk", "dx_item_chunk",
                                             "dx_shared_chunk"]
    assert rows(cluster) == [(1, 5), (2, 5)]
    assert plan.membership.record_ids.tolist() == list(range(1, 11))
    p1, p2 = plan.membership.cluster_ids[0], plan.membership.cluster_ids[5]
    assert plan.membership.cluster_ids.tolist() == [p1] * 5 + [p2] * 5
    domains = {}
    for c, j, codes in rows(record):
        domains.setdefault((c, j), set()).update(codes)
    assert sorted(sorted(d) for (c, _), d in domains.items() if c == p1) == [
        ["296.00", "296.01", "296.02"], ["692.71", "695.10"]]
    assert [d for (c, _), d in domains.items() if c == p2] == [{"294.10", "295.04", "296.03"}]
    assert len(rows(record)) == 15
    assert sorted(rows(item)) == sorted([(p1, "401.0"), (p2, "404.00"), (p2, "480.1")])
    sh = rows(shared)
    assert {r[1] for r in sh} == {(1, 2)} and {r[0] for r in sh} == {1}
    assert sorted(sorted(r[2]) for r in sh) == sorted(
        [["834.0", "944.01"]] * 3 + [["944.01"], ["834.0"]])


def test_seed_reproduces_the_plan():
    assert rows(run(5).tables[1]) == rows(run(5).tables[1])


def test_record_chunk_rows_are_stored_by_length():
    """Rows of the record-chunk table in a stable order of the bytes of their codes (the
    writer copies rows of one length as one block), each row the subrecord it was: the same
    rows as made, cluster by cluster and chunk by chunk within one length."""
    plan = run()
    record = plan.tables[1]
    got = rows(record)
    length = [sum(len(c) + 4 for c in codes) for _, _, codes in got]
    assert length == sorted(length) and len(set(length)) > 1
    for size in set(length):
        same = [(c, j) for (c, j, _), n in zip(got, length) if n == size]
        assert same == sorted(same)


def test_shared_chunk_rows_are_stored_by_shape():
    """Rows of the shared-chunk table in a stable order of the bytes of their codes, then of
    their number of clusters (the writer copies rows of one shape as one block): within one
    shape, shared chunk after shared chunk as made, and every row of a shared chunk names
    the same clusters."""
    rng = np.random.default_rng(11)
    dictionary = [f"{c:03d}.{d}" for c in range(40) for d in range(1 + c % 3)]
    records = [np.unique(rng.zipf(1.6, rng.integers(1, 9)) % len(dictionary))
               for _ in range(600)]
    f = types.SimpleNamespace(
        rid=np.arange(1, 601, dtype=np.int64), n=600, dictionary=dictionary,
        offsets=np.cumsum([0] + [len(r) for r in records]).astype(np.int64),
        codes=np.concatenate(records).astype(np.int64))
    req = types.SimpleNamespace(name="dx", k=3, seed=5, options={"m": 2})
    got = rows(plugin.run(f, req).tables[3])
    shape = [(sum(len(c) + 4 for c in codes), len(ids)) for _, ids, codes in got]
    assert shape == sorted(shape) and len({s[1] for s in shape}) > 1
    for s in set(shape):
        same = [sid for (sid, _, _), t in zip(got, shape) if t == s]
        assert same == sorted(same)
    clusters = {}
    for sid, ids, _ in got:
        assert clusters.setdefault(sid, ids) == ids
