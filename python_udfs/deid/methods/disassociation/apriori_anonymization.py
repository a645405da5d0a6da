"""Apriori Anonymization (AA): k^m-anonymity of set-valued records by GLOBAL generalization
over a code hierarchy, after Terrovitis, Mamoulis, Kalnis, "Privacy-preserving anonymization
of set-valued data", VLDB 2008 (the global-generalization cut model and the Apriori-based
anonymization algorithm AA, with its direct-anonymization step DA applied per itemset size).
Pure numpy; no SQL.

The model: a *cut* of the hierarchy replaces every leaf below a chosen node by
that node (full-subtree, global recoding: the same leaf maps to the same node in every
record); records are de-duplicated after mapping. A release is k^m-anonymous when every
itemset of at most m released codes that occurs in a record occurs in at least k records.

AA: for i = 1 .. m: count the supports of the generalized i-itemsets of the
records under the current cut and, for every i-itemset t with support in (0, k), take the
generalization of t with the least information loss that makes t's support reach k (or
merges two of its items into one), and apply it globally. Information loss is the paper's
NCP: NCP(g) = |leaves below g| / |I| for a generalized code g, 0 for a leaf, over
the code occurrences. Supports only grow as the cut coarsens (a generalized itemset's records
include those of every itemset mapped to it), so the itemsets of sizes < i fixed in earlier
passes stay fixed.

Termination: every fix moves at least one item of t strictly up the hierarchy; the root '*'
merges every item of an itemset into one, and {'*'} has the support of the non-empty records,
which the caller guarantees to be >= k. A cut is an antichain (a node and its ancestor are
never both used: leaves take their highest chosen ancestor), so an itemset holding an item and
its own ancestor never occurs and is never counted.

Deviations from the paper (README "Deviations"):
  * AA's count-tree is replaced by exact counts: supports of the i-itemsets of the
    mapped records (packed keys, numpy unique), and the support of a candidate generalization
    by intersecting the record lists of its nodes. Same supports, other data structure.
  * Candidates for an itemset t = (g1..gi) are all combinations of an ancestor-or-self of
    every gj (as DA's "possible generalizations of t"); among those that fix t the one with
    the least increase of NCP, weighted by the leaf occurrences of the source (the paper
    weighs the de-duplicated generalized occurrences); ties: fewer leaves moved, then the
    lower node ids. Candidates are tried cheapest first; the support of a node set (which
    does not depend on the cut) is memoized.
  * Violating itemsets of a pass are handled in the order of ascending support, then of
    their node ids (the paper walks its count-tree); each is re-checked under the current
    cut before it is fixed, and the pass recounts until none is left.
  * No randomness: AA is deterministic; the plug-in's seeded shuffle orders the release.
  * Labels that name the same set of leaves at two levels (a one-child chain such as a
    section equal to its chapter) are one node; labels naming two different leaf sets are
    refused (the release would be ambiguous).
"""
import itertools
from dataclasses import dataclass
from functools import reduce

import numpy as np


class AmbiguousLabel(ValueError):
    """A label names two different sets of leaves (args[0]: the label)."""


@dataclass
class Tree:
    labels: list              # node id -> label (leaves 0 .. D-1 first)
    anc: np.ndarray           # (D, depth) node id of each leaf's ancestor per level (0: itself)
    n_leaves: np.ndarray      # leaves below every node
    leaf_offsets: np.ndarray  # CSR node -> leaves below it
    leaf_ids: np.ndarray
    rep: np.ndarray           # one leaf below every node

    @property
    def n_nodes(self):
        return len(self.labels)


def build_tree(leaves, chains):
    """leaves[i] and chains[i] = its ancestors' labels from its parent up to the root."""
    D = len(leaves)
    ids = {v: i for i, v in enumerate(leaves)}
    labels = list(leaves)
    depth = 1 + (len(chains[0]) if D else 0)
    anc = np.zeros((D, depth), np.int64)
    anc[:, 0] = np.arange(D)
    for i, chain in enumerate(chains):
        for lv, v in enumerate(chain, 1):
            if v not in ids:
                ids[v] = len(labels)
                labels.append(v)
            anc[i, lv] = ids[v]
    N = len(labels)
    key = np.unique(np.repeat(np.arange(D), depth) + D * anc.ravel()) if D else np.zeros(0, np.int64)
    node, leaf = key // max(D, 1), key % max(D, 1)
    n_leaves = np.bincount(node, minlength=N)
    for lv in range(depth):                      # a label must name one set of leaves
        c = np.bincount(anc[:, lv], minlength=N)
        bad = np.flatnonzero((c > 0) & (c != n_leaves))
        if bad.size:
            raise AmbiguousLabel(labels[bad[0]])
    offsets = np.r_[0, np.cumsum(n_leaves)].astype(np.int64)
    rep = np.zeros(N, np.int64)
    rep[node[::-1]] = leaf[::-1]
    return Tree(labels, anc, n_leaves, offsets, leaf, rep)


@dataclass
class Result:
    label: np.ndarray         # node id of every leaf under the final cut
    offsets: np.ndarray       # the generalized records (CSR over node ids, sorted, de-duplicated)
    nodes: np.ndarray
    fixes: int                # generalizations applied
    passes: list              # per i: violating itemsets met at the first count


def _mapped(offsets, leaves, label, N):
    n = len(offsets) - 1
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    key = np.unique(row * N + label[leaves])
    off = np.r_[0, np.cumsum(np.bincount(key // N, minlength=n))].astype(np.int64)
    return off, key % N


def itemsets(offsets, nodes, i):
    """Every i-subset of every record (records sorted, de-duplicated): an (s, i) array."""
    lengths = np.diff(offsets)
    out = [np.zeros((0, i), np.int64)]
    for L in np.unique(lengths[lengths >= i]):
        rows = np.flatnonzero(lengths == L)
        mat = nodes[offsets[rows][:, None] + np.arange(L)]
        idx = np.asarray(list(itertools.combinations(range(int(L)), i)), np.int64)
        out.append(mat[:, idx].reshape(-1, i))
    return np.concatenate(out)


def supports(offsets, nodes, i, N):
    """(distinct i-itemsets (rows, sorted), their supports)."""
    sets = itemsets(offsets, nodes, i)
    if N ** i < 2 ** 62:
        key = np.zeros(len(sets), np.int64)
        for j in range(i):
            key = key * N + sets[:, j]
        key, first, count = np.unique(key, return_index=True, return_counts=True)
        return sets[first], count
    return np.unique(sets, axis=0, return_counts=True)


def apriori_anonymize(offsets, leaves, tree, k, m):
    """AA on records given as CSR `offsets` over leaf ids `leaves` (0 .. D-1 into `tree`)."""
    offsets, leaves = np.asarray(offsets, np.int64), np.asarray(leaves, np.int64)
    D, N = tree.anc.shape[0], tree.n_nodes
    n = len(offsets) - 1
    freq = np.bincount(leaves, minlength=D).astype(np.float64)
    ncp = np.where(tree.n_leaves > 1, tree.n_leaves / max(D, 1), 0.0)
    # node -> records holding a leaf below it (sorted): CSR
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    key = np.unique(tree.anc[leaves].T.ravel() * max(n, 1) + np.tile(row, tree.anc.shape[1]))
    rec_off = np.r_[0, np.cumsum(np.bincount(key // max(n, 1), minlength=N))].astype(np.int64)
    rec_ids = key % max(n, 1)
    label = np.arange(D, dtype=np.int64)
    fixes, passes = 0, []

    def records(g):
        return rec_ids[rec_off[g]:rec_off[g + 1]]

    known = {}                # a node set's support does not depend on the cut: memoized

    def support(nodes):
        key = tuple(sorted(nodes))
        if key not in known:
            parts = sorted((records(g) for g in key), key=len)
            known[key] = len(reduce(lambda a, b: np.intersect1d(a, b, assume_unique=True), parts))
        return known[key]

    def chain_up(g):                         # g and its ancestors, lowest first
        c = tree.anc[tree.rep[g]]
        return list(dict.fromkeys(int(x) for x in c[np.flatnonzero(c == g)[0]:]))

    def apply(nodes, lab):
        lab = lab.copy()
        for g in sorted(set(nodes), key=lambda g: tree.n_leaves[g]):
            lab[tree.leaf_ids[tree.leaf_offsets[g]:tree.leaf_offsets[g + 1]]] = g
        return lab

    for i in range(1, m + 1):
        first = True
        while True:
            off, nodes = _mapped(offsets, leaves, label, N)
            sets, count = supports(off, nodes, i, N)
            viol = np.flatnonzero(count < k)
            if first:
                passes.append(int(viol.size))
                first = False
            if viol.size == 0:
                break
            viol = viol[np.lexsort(tuple(sets[viol].T[::-1]) + (count[viol],))]
            for t in sets[viol].tolist():
                cur = [int(label[tree.rep[g]]) for g in t]
                if len(set(cur)) < i or (cur != t and support(cur) >= k):
                    continue
                cands = []
                for combo in itertools.product(*(chain_up(g) for g in cur)):
                    if list(combo) == cur:
                        continue
                    new = apply(combo, label)
                    moved = np.flatnonzero(new != label)
                    cost = float(np.dot(freq[moved], ncp[new[moved]] - ncp[label[moved]]))
                    cands.append((cost, moved.size, combo, new))
                cands.sort(key=lambda c: c[:3])
                for cost, _, combo, new in cands:
                    eff = sorted({int(new[tree.rep[g]]) for g in combo})
                    if len(eff) < i or support(eff) >= k:
                        label = new
                        fixes += 1
                        break
    off, nodes = _mapped(offsets, leaves, label, N)
    return Result(label, off, nodes, fixes, passes)
