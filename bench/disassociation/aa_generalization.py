"""Bench-only generalization peer for 003's comparison: an AA-like k^m-anonymizer by global,
full-subtree generalization over the code hierarchy (after Terrovitis, Mamoulis, Kalnis,
"Privacy-preserving anonymization of set-valued data", VLDB 2008, the Apriori Anonymization
(AA) algorithm that 003 Sec. 2 cites as [54]).  NOT the deid method {"model": "generalization"}
(not built): a simplified greedy, documented here so its numbers are read as a peer's.

Like AA: bottom-up over itemset sizes i = 1..m, each round counts the supports of the
generalized i-itemsets and, while some has support < k, generalizes globally (a node of the
hierarchy replaces every leaf below it: the full-subtree model).  Unlike AA, which picks for
each violating itemset the cheapest cut that fixes it, we raise per round, for the most often
chosen 5 % of items, the item of a violating itemset at the lower level (then the rarer one)
to its parent.  Pure numpy.

Counts on generalized data (003 Sec. 3.2: "interpreting a generalized code as an original
diagnosis code, with a certain probability"): a record holding node g holds each leaf below
g with probability 1 / leaves(g), independently.
"""
from dataclasses import dataclass

import numpy as np


@dataclass
class Generalized:
    label: np.ndarray        # node id of every leaf code (leaf ids 0..D-1 map to themselves)
    n_leaves: np.ndarray     # leaves below every node id (1 for a leaf)
    offsets: np.ndarray      # the generalized records (CSR over node ids, de-duplicated)
    nodes: np.ndarray
    n_nodes: int
    codes_generalized: float         # share of distinct codes replaced by an ancestor
    occurrences_generalized: float   # share of code occurrences replaced
    level_counts: list               # distinct codes per level of their label (0 = leaf)


def _tree(hier):
    """Node ids: leaves 0..D-1, then every distinct ancestor label; parent of each node."""
    D = len(hier)
    depth = len(hier[0])
    ids, parent, level = {}, [], []
    anc = np.zeros((D, depth + 2), dtype=np.int64)
    anc[:, 0] = np.arange(D)
    nxt = D
    for lv in range(1, depth + 2):
        for i in range(D):
            key = (lv, hier[i][lv - 1] if lv <= depth else "*")
            if key not in ids:
                ids[key] = nxt
                nxt += 1
            anc[i, lv] = ids[key]
    parent = np.full(nxt, -1, dtype=np.int64)
    level = np.zeros(nxt, dtype=np.int64)
    for lv in range(depth + 1):
        parent[anc[:, lv]] = anc[:, lv + 1]
        level[anc[:, lv + 1]] = lv + 1
    n_leaves = np.bincount(anc[:, 1:].ravel(), minlength=nxt)
    n_leaves[:D] = 1
    return anc, parent, level, n_leaves, nxt


def _records(offsets, codes, label, N):
    row = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    key = np.unique(row * N + label[codes])
    r, node = key // N, key % N
    off = np.r_[0, np.cumsum(np.bincount(r, minlength=offsets.size - 1))].astype(np.int64)
    return off, node


def _pairs(off, node):
    lengths = np.diff(off)
    pos = np.arange(node.size) - np.repeat(off[:-1], lengths)
    later = np.repeat(lengths, lengths) - 1 - pos
    first = np.repeat(np.arange(node.size), later)
    second = first + 1 + np.arange(first.size) - np.repeat(np.cumsum(later) - later, later)
    return node[first], node[second]


def aa_generalize(offsets, codes, hier, k, m=2, share=0.05, max_rounds=500):
    """k^m (m <= 2) by greedy global full-subtree generalization; hier[i] = ancestors of
    leaf i from the lowest level up (without '*')."""
    if m > 2:
        raise ValueError("this peer handles m <= 2")
    anc, parent, level, n_leaves, N = _tree(hier)
    D = len(hier)
    on = np.zeros(N, dtype=bool)
    for _ in range(max_rounds):
        label = np.arange(D)
        for lv in range(1, anc.shape[1]):
            label = np.where(on[anc[:, lv]], anc[:, lv], label)
        off, node = _records(offsets, codes, label, N)
        support = np.bincount(node, minlength=N)
        bad = np.flatnonzero((support > 0) & (support < k))
        if bad.size == 0 and m == 2:
            a, b = _pairs(off, node)
            key, cnt = np.unique(a * N + b, return_counts=True)
            viol = key[cnt < k]
            if viol.size:
                a, b = viol // N, viol % N
                pick = np.where((level[a] < level[b]) | ((level[a] == level[b])
                                                        & (support[a] <= support[b])), a, b)
                pick = pick[parent[pick] >= 0]
                items, times = np.unique(pick, return_counts=True)
                top = max(1, int(np.ceil(share * items.size)))
                bad = items[np.argsort(-times, kind="stable")[:top]]
        if bad.size == 0:
            break
        on[parent[bad[parent[bad] >= 0]]] = True
    gen_codes = label != np.arange(D)
    freq = np.bincount(codes, minlength=D)
    return Generalized(label=label, n_leaves=n_leaves, offsets=off, nodes=node, n_nodes=N,
                       codes_generalized=float(gen_codes.mean()),
                       occurrences_generalized=float(freq[gen_codes].sum() / freq.sum()),
                       level_counts=np.bincount(level[label], minlength=anc.shape[1]).tolist())


def generalized_counts(gen, queries):
    """Estimated C_A(q) of itemsets of leaf codes on the generalized records."""
    row = np.repeat(np.arange(gen.offsets.size - 1), np.diff(gen.offsets))
    order = np.argsort(gen.nodes, kind="stable")
    rows = row[order]
    start = np.r_[0, np.cumsum(np.bincount(gen.nodes, minlength=gen.n_nodes))]
    out = []
    for q in queries:
        labels = gen.label[np.asarray(q)]
        p = float(np.prod(1.0 / gen.n_leaves[labels]))
        hit = None
        for g in np.unique(labels):
            r = rows[start[g]:start[g + 1]]
            hit = r if hit is None else np.intersect1d(hit, r, assume_unique=True)
        out.append(hit.size * p)
    return np.array(out)
