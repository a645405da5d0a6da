"""k^m generalization (options.model 'generalization'): Apriori Anonymization of Terrovitis,
Mamoulis, Kalnis (VLDB 2008) in methods.apriori_anonymization, and its independent verifier
verify.km_generalization: hand-checked tiny inputs, ambiguous hierarchies, and a fuzz of
>= 1,000 random, skewed, tie-heavy and degenerate inputs where the verifier and a brute-force
k^m check agree."""
import itertools

import numpy as np
import pytest

from deid.errors import DeidError
from deid.methods.disassociation.apriori_anonymization import (AmbiguousLabel, apriori_anonymize,
                                                               build_tree)
from deid.verify.shared import km_generalization as vk

LEAVES = ["a1", "a2", "b1", "b2"]
CHAINS = [["A", "*"], ["A", "*"], ["B", "*"], ["B", "*"]]


def csr(records):
    return (np.r_[0, np.cumsum([len(r) for r in records])].astype(np.int64),
            np.asarray([c for r in records for c in r], np.int64))


def released(tree, r):
    return [sorted(tree.labels[x] for x in r.nodes[r.offsets[i]:r.offsets[i + 1]])
            for i in range(len(r.offsets) - 1)]


def test_tiny_pairs_generalize_both_sides():
    # k=2, m=2. Singletons: a1 3, b1 3, a2 2, b2 2 -> pass 1 clean. Pairs {a2,b2} and {b1,b2}
    # have support 1. Fixing {a2,b2}: (a2,B) and (A,b2) cost 2.5 NCP-weighted occurrences
    # each but keep support 1; (A,B) costs 5 and has support 3; then {b1,b2} -> {B}: merged.
    tree = build_tree(LEAVES, CHAINS)
    off, codes = csr([[0, 2], [0, 2], [1, 3], [1], [2, 3], [0]])
    r = apriori_anonymize(off, codes, tree, 2, 2)
    assert released(tree, r) == [["A", "B"], ["A", "B"], ["A", "B"], ["A"], ["B"], ["A"]]
    assert r.fixes == 1 and r.passes == [0, 2]


def test_tiny_m1_generalizes_the_rare_subtree_only():
    # k=2, m=1: a1 x2, a2 x1, b1 x2, b2 x2 -> a2 is rare; (A) costs 3 occurrences x 2/4,
    # (*) more -> A; b1 and b2 stay.
    tree = build_tree(LEAVES, CHAINS)
    off, codes = csr([[0, 2], [0, 3], [1, 2], [3], []])
    r = apriori_anonymize(off, codes, tree, 2, 1)
    assert released(tree, r) == [["A", "b1"], ["A", "b2"], ["A", "b1"], ["b2"], []]
    assert r.label.tolist() == [4, 4, 2, 3]


def test_root_when_nothing_else_works():
    # two records, disjoint subtrees, k=2: only '*' reaches support 2
    tree = build_tree(LEAVES, CHAINS)
    off, codes = csr([[0], [3]])
    r = apriori_anonymize(off, codes, tree, 2, 2)
    assert released(tree, r) == [["*"], ["*"]]


def test_one_child_chain_is_one_node_and_ambiguous_labels_are_refused():
    tree = build_tree(["x", "y"], [["X", "X", "*"], ["Y", "S", "*"]])   # X at two levels
    assert tree.labels.count("X") == 1 and tree.n_leaves[tree.labels.index("X")] == 1
    with pytest.raises(AmbiguousLabel):
        build_tree(["x", "y", "z"], [["X", "Y", "*"], ["Y", "Z", "*"], ["Z", "Z", "*"]])
    with pytest.raises(AmbiguousLabel):              # a leaf's label names a node above others
        build_tree(["x", "y"], [["y", "*"], ["Y", "*"]])


# ------------------------------------------------------------------ fuzz against brute force
def brute_km(rows, k, m):
    """Every itemset of <= m codes occurring in a row occurs in >= k rows."""
    sets = [frozenset(r) for r in rows]
    for r in sets:
        for i in range(1, min(m, len(r)) + 1):
            for t in itertools.combinations(sorted(r), i):
                if sum(1 for s in sets if s.issuperset(t)) < k:
                    return False
    return True


def hierarchy_rows(leaves, chains):
    rows = set()
    for leaf, chain in zip(leaves, chains):
        path = [leaf] + chain
        for lv, (v, p) in enumerate(zip(path, path[1:] + [None])):
            rows.add((lv, v, p))
    return [{"level": lv, "value": v, "parent": p} for lv, v, p in rows]


def random_case(rng):
    D = int(rng.integers(1, 13))
    depth = int(rng.integers(1, 4))
    leaves = [f"c{i:02d}" for i in range(D)]
    chains = []
    fan = [int(rng.integers(1, 4)) for _ in range(depth)]
    for i in range(D):
        g, chain = i, []
        for lv in range(depth):
            g //= fan[lv] + 1
            chain.append(f"L{lv + 1}_{g}")
        chains.append(chain + ["*"])
    kind = rng.integers(0, 5)
    n = int(rng.integers(0, 25))
    p = 1.0 / np.arange(1, D + 1) ** rng.uniform(0, 2.5)          # Zipf-skewed
    p /= p.sum()
    if kind == 0:                                                   # one code everywhere
        records = [[0] for _ in range(n)]
    elif kind == 1:                                                 # a single record type
        one = sorted(set(rng.choice(D, size=int(rng.integers(0, D + 1)), p=p).tolist()))
        records = [one for _ in range(n)]
    else:
        records = [sorted(set(rng.choice(D, size=int(rng.integers(0, 6)), p=p).tolist()))
                   for _ in range(n)]
        if kind == 2:                                               # many empty records
            records = [r if rng.random() < 0.5 else [] for r in records]
    return leaves, chains, records, int(rng.integers(2, 6)), int(rng.integers(1, 4))


def test_fuzz_verifier_and_brute_force_agree():
    rng = np.random.default_rng(20081)
    ran = 0
    for _ in range(1400):
        leaves, chains, records, k, m = random_case(rng)
        if sum(1 for r in records if r) < k:
            continue                                  # refused by the plug-in before AA runs
        ran += 1
        tree = build_tree(leaves, chains)
        off, codes = csr(records)
        r = apriori_anonymize(off, codes, tree, k, m)
        rows = released(tree, r)
        assert brute_km(rows, k, m)
        # the same leaf maps to the same node everywhere (the cut), rows are the records mapped
        assert all(sorted({tree.labels[r.label[c]] for c in rec}) == row
                   for rec, row in zip(records, rows))
        labels, vleaves, pairs = vk.leafsets(hierarchy_rows(leaves, chains))
        lid = {v: i for i, v in enumerate(labels)}
        perm = rng.permutation(len(rows))
        s_off, s_ids = csr([[lid[c] for c in rows[i]] for i in perm])
        groups = {}
        gid = [groups.setdefault(tuple(rows[i]), len(groups)) for i in range(len(rows))]
        rid = np.arange(len(rows)) * 3 + 1
        source = (rid, leaves, off, codes)
        vk.check(labels, vleaves, pairs, s_off, s_ids, rid[perm], np.asarray(gid)[perm], source, k, m)
        # the raw records: the verifier's k^m verdict is brute force's
        raw_off, raw_ids = csr([[lid[leaves[c]] for c in rec] for rec in records])
        raw_groups = {}
        raw_gid = [raw_groups.setdefault(tuple(rec), len(raw_groups)) for rec in records]
        try:
            vk.check(labels, vleaves, pairs, raw_off, raw_ids, rid, raw_gid, source, k, m)
            ok = True
        except DeidError as e:
            assert e.sqlstate == "DE002" and "fewer than k" in e.message
            ok = False
        assert ok == brute_km([[leaves[c] for c in rec] for rec in records], k, m)
    assert ran >= 1000


def test_verifier_catches_each_tamper():
    leaves, chains = LEAVES, CHAINS
    labels, vleaves, pairs = vk.leafsets(hierarchy_rows(leaves, chains))
    lid = {v: i for i, v in enumerate(labels)}
    records = [[0, 2], [0, 2], [1, 3], [1], [2, 3], [0]]
    rows = [["A", "B"], ["A", "B"], ["A", "B"], ["A"], ["B"], ["A"]]
    gid = [0, 0, 0, 1, 2, 1]
    rid = np.arange(1, 7)
    off, codes = csr(records)
    source = (rid, leaves, off, codes)

    def run(rows, gid=gid):
        s_off, s_ids = csr([[lid[c] for c in r] for r in rows])
        return vk.check(labels, vleaves, pairs, s_off, s_ids, rid, np.asarray(gid), source, 2, 2)

    assert run(rows)["min_itemset_support"] == 3
    for bad in ([["A", "B"], ["A", "B"], ["A", "B"], ["A"], ["B"], ["a1"]],     # A and a1: no cut
                [["A", "B"], ["A", "B"], ["A", "B"], ["A"], ["B"], ["B"]],      # not the record
                [["A", "B"], ["A", "B"], ["A", "B"], ["A"], ["B"], ["*"]],      # * over A
                [["A", "B"], ["A", "B"], ["A", "B"], ["A"], ["A"], ["A"]]):     # B lost
        with pytest.raises(DeidError) as e:
            run(bad)
        assert e.value.sqlstate == "DE002" and e.value.hint
    with pytest.raises(DeidError):                 # the membership moved a record
        run(rows, [0, 0, 1, 1, 2, 1])
