"""Generalization (002) over shards without a server: the nodes' class tables merged
(methods/generalization/class_merge.py) give the search exactly what the class table of the
union of the rows gives it -- the same levels, suppression, loss and classes -- for random,
tie-heavy and skewed splits, with nodes holding no row; the node/coordinator steps
(distributed/generalization.py) release every row as the single-node request does; the
coordinator's check of the nodes' stored classes (verify/shared/merged_classes.py)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deid.catalog.hierarchies import Hierarchy
from deid.catalog.relations import Column, Relation
from deid.distributed import generalization as dg
from deid.errors import DeidError
from deid.methods.generalization import plugin
from deid.methods.generalization.class_merge import (NodeClasses, merge_classes, node_classes,
                                                     pack, unpack)
from deid.read.frame import EncodedColumn, Frame
from deid.request.release import Request
from deid.verify.shared.merged_classes import JOINT, check_merged, merge_labelled

# -- the request: three quasi-identifiers of two sources, member hierarchies of 3-4 levels ------

SIZES = {"a": 12, "b": 6, "c": 8}


def member(name, n):
    """leaves x0..x{n-1}; level 1 pairs them, level 2 halves, then '*'."""
    m1 = {f"{name}{i}": f"{name}/{i // 2}" for i in range(n)}
    m2 = {f"{name}/{j}": f"{name}//{j // 2}" for j in range((n + 1) // 2)}
    m3 = {v: "*" for v in set(m2.values())}
    return Hierarchy(name, "member", 4, [0.0, 0.3, 0.6, 1.0], members=[m1, m2, m3])


def request(k, search="greedy", grant=None, priorities=None):
    cols = {q: Column(q, "text", "text", False, role="quasi_identifier", hierarchy=q,
                      source="A" if q != "c" else "B") for q in SIZES}
    return Request(Relation(1, "public", "t", "r", False, cols), "generalization", k, None,
                   list(SIZES), None, None, {"search": search, "priorities": priorities or {}},
                   "rel", 1, 3, "me", grant or {"via": "select", "reader": "me"},
                   hierarchies={q: member(q, n) for q, n in SIZES.items()})


def frame_of(rows):
    """A snapshot of rows (one array of leaf numbers per column), each column dictionary-coded
    over ITS OWN values present, as a node's read codes them."""
    n = len(rows["a"])
    cols = {}
    for q, v in rows.items():
        uniq, codes = np.unique(v, return_inverse=True)
        cols[q] = EncodedColumn(q, "category", codes.reshape(-1).astype(np.int64), np.zeros(n, bool),
                                [f"{q}{i}" for i in uniq])
    return Frame(n, np.arange(n, dtype=np.int64), cols)


def draw(rng, n, shape):
    out = {}
    for q, s in SIZES.items():
        if shape == "ties":
            out[q] = rng.integers(0, 2, n) * (s - 1)
        elif shape == "skewed":
            out[q] = np.minimum(rng.zipf(1.6, n) - 1, s - 1)
        else:
            out[q] = rng.integers(0, s, n)
    return out


def split(rng, rows, nodes, how):
    n = len(rows["a"])
    if how == "empty":                     # node 0 holds no row
        node = rng.integers(1, nodes, n) if nodes > 1 else np.zeros(n, int)
    elif how == "skewed":                  # most rows on one node
        node = np.where(rng.random(n) < 0.9, 0, rng.integers(0, nodes, n))
    elif how == "by_value":                # a node holds whole classes (a hash of a QI)
        node = rows["a"] % nodes
    else:
        node = rng.integers(0, nodes, n)
    return [{q: v[node == i] for q, v in rows.items()} for i in range(nodes)]


def labelled(plan):
    """The release table's rows as label tuples (QIs only)."""
    cols = [c for c in plan.tables[0].columns if c.name in SIZES]
    return list(zip(*[np.asarray(c.labels, dtype=object)[c.codes] for c in cols]))


def classes(rows):
    u, c = np.unique(np.asarray([":".join(r) for r in rows]), return_counts=True)
    return dict(zip(u.tolist(), c.tolist()))


def distributed(req, parts):
    frames = [frame_of(p) for p in parts]
    chosen = dg.choose(req, [dg.node_classes(f, req) for f in frames])
    chosen = dg.Choice.from_json(chosen.to_json())          # as it travels to the nodes
    return chosen, [dg.node_plan(f, req, chosen) for f in frames]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["uniform", "ties", "skewed"]),
       st.sampled_from(["random", "empty", "skewed", "by_value"]), st.integers(1, 4),
       st.integers(2, 9), st.sampled_from(["greedy", "optimal"]),
       st.sampled_from([None, 0, 5]))
def test_merged_search_equals_the_single_node_search(seed, shape, how, nodes, k, search, joint):
    rng = np.random.default_rng(seed)
    rows = draw(rng, int(rng.integers(k, 400)), shape)
    grant = None if joint is None else {"via": "policy", "grantee": "r", "min_k": joint or k,
                                        "min_l": None, "reader": "owner"}
    pr = {q: float(p) for q, p in zip(SIZES, rng.choice([0.2, 0.5, 0.9], 3))}
    req = request(k, search, grant, pr)
    try:
        single = plugin.run(frame_of(rows), req)
    except DeidError as e:
        with pytest.raises(DeidError) as d:
            distributed(req, split(rng, rows, nodes, how))
        assert (d.value.sqlstate, d.value.message) == (e.sqlstate, e.message)
        return
    chosen, plans = distributed(req, split(rng, rows, nodes, how))
    m = single.metrics
    assert chosen.metrics == m                      # levels, steps, loss, suppression, joint k
    assert (chosen.rows, chosen.groups) == (single.rows, single.groups)
    assert chosen.discernibility == pytest.approx(single.discernibility)
    assert sum(p.rows for p in plans) == single.rows
    union = [r for p in plans for r in labelled(p)]
    assert classes(union) == classes(labelled(single))


def test_node_with_no_rows_adds_nothing():
    nc = node_classes([np.array([1, 0, 1]), np.array([0, 0, 0])], [["x", "y"], ["u"]])
    empty = node_classes([np.zeros(0, np.int64), np.zeros(0, np.int64)], [[], []])
    m = merge_classes([empty, nc, empty])
    assert m.leaves == [["x", "y"], ["u"]]
    assert m.codes.tolist() == [[0, 0], [1, 0]] and m.counts.tolist() == [1, 2]
    assert merge_classes([empty]).counts.size == 0


def test_merge_unites_the_dictionaries_and_sums_counts():
    n1 = NodeClasses([["b", "c"]], np.array([[0], [1]]), np.array([2, 3]))
    n2 = NodeClasses([["a", "c"]], np.array([[0], [1]]), np.array([4, 5]))
    m = merge_classes([n1, n2])
    assert m.leaves == [["a", "b", "c"]]
    assert m.codes[:, 0].tolist() == [0, 1, 2] and m.counts.tolist() == [4, 2, 8]


@pytest.mark.parametrize("nc", [
    NodeClasses([["a", "b"], ["x"]], np.array([[1, 0], [0, 0]]), np.array([3, 70000])),
    NodeClasses([[f"v{i}" for i in range(300)]], np.array([[299], [5]]), np.array([1, 2**40])),
    NodeClasses([[]], np.zeros((0, 1), np.int64), np.zeros(0, np.int64)),
])
def test_pack_round_trip(nc):
    back = unpack(pack(nc))
    assert back.leaves == nc.leaves
    assert np.array_equal(back.codes, nc.codes) and np.array_equal(back.counts, nc.counts)


@pytest.mark.parametrize("buf", [b"", b"XXXX\0\0\0\0", lambda b: b[:-1], lambda b: b + b"\0",
                                 lambda b: b.replace(b'"classes": 2', b'"classes": 3')])
def test_unpack_refuses_bytes_it_did_not_write(buf):
    good = pack(NodeClasses([["a", "b"]], np.array([[1], [0]]), np.array([3, 4])))
    with pytest.raises(DeidError) as e:
        unpack(buf(good) if callable(buf) else buf)
    assert e.value.sqlstate == "22023" and e.value.hint


def test_the_merged_table_is_checked_against_k_not_each_node():
    req = request(6)
    rows = {"a": np.zeros(8, int), "b": np.zeros(8, int), "c": np.zeros(8, int)}
    parts = [{q: v[:3] for q, v in rows.items()}, {q: v[3:] for q, v in rows.items()}]
    chosen, plans = distributed(req, parts)      # 3 + 5 rows: below k on each node, 8 together
    assert chosen.levels == {"a": 0, "b": 0, "c": 0} and chosen.groups == 1
    with pytest.raises(DeidError) as e:
        distributed(request(9), parts)
    assert e.value.sqlstate == "DE001" and "fewer rows than k" in e.value.message


# -- the coordinator's check of what the nodes stored -------------------------------------------

def part(cols, labels, counts):
    return {"columns": cols, "labels": labels, "counts": counts}


BY_SOURCE = {"A": ["a", "b"], "B": ["c"]}


def node_part(a, b, c, n):
    return {"A": part(["a", "b"], [a, b], n), "B": part(["c"], [c], n),
            JOINT: part(["a", "b", "c"], [a, b, c], n)}


def test_check_merged_sums_the_nodes_classes():
    n1 = node_part(["x", "y"], ["1", None], ["p", "p"], [3, 2])
    n2 = node_part(["x", "y"], ["1", None], ["p", "p"], [1, 3])
    out = check_merged([n1, n2], BY_SOURCE, 4, n_rows=9, joint_k=4)
    assert out["sources"]["A"] == {"classes": 2, "min_size": 4}
    assert out["sources"]["B"] == {"classes": 1, "min_size": 9}
    assert out["joint"]["min_size"] == 4 and out["nodes"] == 2


@pytest.mark.parametrize("parts, n_rows, joint_k", [
    ([node_part(["x"], ["1"], ["p"], [3]), node_part(["y"], ["1"], ["p"], [3])], 6, None),  # no merge
    ([node_part(["x"], ["1"], ["p"], [3]), node_part(["x"], ["1"], ["p"], [3])], 7, None),  # rows
    ([node_part(["x", "x"], ["1", "2"], ["p", "q"], [3, 1]),
      node_part(["x", "x"], ["1", "2"], ["q", "p"], [1, 3])], 8, 4),                       # joint
    ([{"A": part(["a", "b"], [["x"], ["1"]], [6])}], 6, None),                               # no B
])
def test_check_merged_refuses(parts, n_rows, joint_k):
    with pytest.raises(DeidError) as e:
        check_merged(parts, BY_SOURCE, 4, n_rows=n_rows, joint_k=joint_k)
    assert e.value.sqlstate == "DE002"


def test_merge_labelled_keys_are_unambiguous():
    got = merge_labelled([part(["a", "b"], [["x\x1f", "x"], [None, "\x1f\x02"]], [1, 2]),
                          part(["a", "b"], [["x\x1f"], [None]], [5])], ["a", "b"])
    assert sorted(got.tolist()) == [2, 6]
    with pytest.raises(DeidError):
        merge_labelled([part(["b", "a"], [["x"], ["y"]], [1])], ["a", "b"])


def test_tables_over_other_columns_or_another_order_are_refused():
    a = node_classes([np.array([0, 1]), np.array([0, 0])], [["x", "y"], ["u"]], ["age", "sex"])
    b = node_classes([np.array([0]), np.array([1])], [["u"], ["x", "y"]], ["sex", "age"])
    assert unpack(pack(a)).names == ["age", "sex"]
    with pytest.raises(DeidError) as e:
        merge_classes([a, unpack(pack(b))])
    assert e.value.sqlstate == "22023"
    req = request(2)
    wrong = node_classes([np.array([0])] * 3, [["a0"], ["b0"], ["c0"]], ["b", "a", "c"])
    with pytest.raises(DeidError):
        dg.choose(req, [pack(wrong)])
