"""Refining with shared chunks (003 Fig. 10): move codes from item chunks into chunks shared
by a joint cluster.

003 (Sec. 4, "Refining"; Sec. 5): a set T^s of refining codes "commonly appear[s] in the item
chunks of two or more clusters"; a joint cluster is defined by projecting the original records
of those clusters on T^s, running VERPART (Fig. 9) on the projection, and keeping the
resulting record chunks as *shared chunks*; the codes of T^s leave those item chunks.  In the
worked example the total support of 834.0 and 944.01 in P_1 and P_2 is 2 + 2 >= k.  "Large
joint clusters can be built by combining smaller joint clusters."

How we choose them (003 leaves it open):
  * Clusters are taken in HORPART's depth-first order (records split apart late are
    neighbours), and joint clusters grow bottom-up inside aligned blocks of 2, 4, 8, ...
    consecutive clusters, up to ``max_joint_clusters``.
  * At each level, for every block and code t, the occurrences of t still in item chunks of
    the block's clusters are pooled; when they number at least k, the clusters holding them
    (J_t: at least two, since an item code has support < k in its cluster) form a joint
    cluster for t.  Codes of a block with the same J are refined together: the records of J
    are projected on them and VERPART lines 5-20 split them into k^m-anonymous domains (each
    code has support >= k in J, so none is left over), each a shared chunk over J.
  * Codes left in item chunks of a block keep being pooled at the next level with those of
    the sibling block.
Every occurrence stays in exactly one place: a refined code leaves the item chunks of J, and
it is in no record chunk of J (it was in their item chunks).  The blocks of one level are
refined together (verpart.verpart_groups): a few numpy passes per level, log2 of the block
size levels; grouping codes by J is one dict lookup per (block, code).
"""

from dataclasses import dataclass

import numpy as np

from .verpart import verpart_groups


@dataclass
class SharedChunks:
    cluster_offsets: np.ndarray   # int64 (n_shared + 1,) into cluster_ids
    cluster_ids: np.ndarray       # int64: the clusters of each shared chunk (sorted)
    domain_offsets: np.ndarray    # int64 (n_shared + 1,) into domain_codes
    domain_codes: np.ndarray      # int64: the domain of each shared chunk (sorted codes)

    @property
    def n_shared(self):
        return self.cluster_offsets.size - 1

    def with_clusters(self, cluster_ids):
        """The same chunks over other cluster ids (a segment's, shifted to its place)."""
        return SharedChunks(self.cluster_offsets, cluster_ids, self.domain_offsets,
                            self.domain_codes)

    @staticmethod
    def joined(pieces):
        """The shared chunks of several pieces, one after the other."""
        return SharedChunks(
            _offsets([c for p in pieces for c in np.diff(p.cluster_offsets)]),
            _concat([p.cluster_ids for p in pieces]),
            _offsets([d for p in pieces for d in np.diff(p.domain_offsets)]),
            _concat([p.domain_codes for p in pieces]))


@dataclass(frozen=True)
class Occurrences:
    """The records' codes, one entry per occurrence, records in cluster order."""
    position: np.ndarray          # int64: the record's position in cluster order (non-decreasing)
    code: np.ndarray              # int64: the code
    pair: np.ndarray              # int64: its row of the (cluster, code) table


@dataclass(frozen=True)
class Pairs:
    """The (cluster, code) table, sorted by cluster then code."""
    cluster: np.ndarray           # int64
    code: np.ndarray              # int64
    support: np.ndarray           # int64: the code's support in the cluster
    chunk: np.ndarray             # int64: its record chunk in the cluster, -1: the item chunk


def refine(cluster_start, occ, pairs, n_codes, k, m, constraint_of_code,
           max_joint_clusters=None):
    """Shared chunks over joint clusters (module docstring).

    ``occ``: the occurrences of the records in cluster order; ``pairs``: the (cluster, code)
    table with each code's support in its cluster and its record chunk (-1 when in the item
    chunk). Joint clusters lie within blocks of at most ``max_joint_clusters`` consecutive
    clusters (None: no limit; below 2: no refining).  Returns (pair_shared, SharedChunks):
    the shared chunk of each (cluster, code) row, or -1.
    """
    run = _Refining(occ, pairs, max(int(n_codes), 1), k, m, constraint_of_code,
                    int(cluster_start[-1]))
    n_clusters = cluster_start.size - 1
    item_rows = np.flatnonzero(pairs.chunk < 0)
    top = 1 << 62 if max_joint_clusters is None else max_joint_clusters
    level = 0
    while (1 << level) < n_clusters and (2 << level) <= top:
        level += 1
        live = item_rows[run.pair_shared[item_rows] < 0]
        if live.size == 0:
            break
        groups = _joint_groups(pairs, live, level, run.D, k)
        if groups is not None:
            run.share(*groups)
    return run.pair_shared, run.shared_chunks()


def _joint_groups(pairs, live, level, D, k):
    """The live item rows pooled per (block of 2^level clusters, code); for the groups whose
    pooled support reaches k: (their rows, each row's joint cluster, the joint clusters' cluster
    lists), or None. One joint cluster per distinct cluster set J (exact: keyed by the list)."""
    key = (pairs.cluster[live] >> level) * D + pairs.code[live]
    by_key = np.argsort(key, kind="stable")          # clusters stay sorted in a group
    rows, key = live[by_key], key[by_key]
    head = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    n_rows = np.diff(np.r_[head, rows.size])
    pooled = np.add.reduceat(pairs.support[rows], head)
    refined = np.flatnonzero(pooled >= k)
    if refined.size == 0:
        return None
    cluster_of_row = pairs.cluster[rows]
    joint_ids, joint_clusters = {}, []
    joint_of_group = np.empty(refined.size, dtype=np.int64)
    for i, g in enumerate(refined.tolist()):
        J = cluster_of_row[head[g]:head[g] + n_rows[g]]
        j = joint_ids.setdefault(J.tobytes(), len(joint_ids))
        if j == len(joint_clusters):
            joint_clusters.append(J)
        joint_of_group[i] = j
    sizes = n_rows[refined]
    members = np.repeat(head[refined], sizes) + np.arange(sizes.sum()) - np.repeat(
        np.cumsum(sizes) - sizes, sizes)
    return rows[members], np.repeat(joint_of_group, sizes), joint_clusters


class _Refining:
    """The shared chunks found so far, level after level."""

    def __init__(self, occ, pairs, D, k, m, constraint_of_code, n_positions):
        self.occ, self.pairs, self.D, self.k, self.m = occ, pairs, D, k, m
        self.constraint_of_code, self.n_positions = constraint_of_code, n_positions
        self.pair_shared = np.full(pairs.cluster.size, -1, dtype=np.int64)
        self.joint_of_row = np.full(pairs.cluster.size, -1, dtype=np.int64)
        self.item_occ = np.flatnonzero(pairs.chunk[occ.pair] < 0)
        self.clusters_out, self.domains_out = [], []
        self.n_shared = 0

    def share(self, refined_rows, joint_of_refined, joint_clusters):
        """The records of each joint cluster projected on its codes, split by VERPART into
        shared chunks; each refined (cluster, code) row gets its shared chunk."""
        occ, D, n_positions = self.occ, self.D, max(self.n_positions, 1)
        joint_of_row = self.joint_of_row
        joint_of_row[refined_rows] = joint_of_refined
        # project the records of each joint cluster on its codes: rows (joint, position)
        item_occ = self.item_occ
        sel = item_occ[joint_of_row[occ.pair[item_occ]] >= 0]
        joint_of_occ = joint_of_row[occ.pair[sel]]
        row_key = joint_of_occ * n_positions + occ.position[sel]
        by_row = np.argsort(row_key, kind="stable")        # codes stay sorted in a row
        sel, row_key = sel[by_row], row_key[by_row]
        row_head = np.flatnonzero(np.r_[True, row_key[1:] != row_key[:-1]])
        proj_offsets = np.r_[row_head, sel.size].astype(np.int64)
        g_joint, g_code, _, g_chunk = verpart_groups(
            row_key[row_head] // n_positions, proj_offsets, occ.code[sel], D, self.k, self.m,
            self.constraint_of_code)
        width = int(g_chunk.max()) + 1
        ids, local = np.unique(g_joint * width + g_chunk, return_inverse=True)
        by_chunk = np.lexsort((g_code, local))
        domain_len = np.bincount(local, minlength=ids.size)
        domain_codes = g_code[by_chunk]
        starts = np.r_[0, np.cumsum(domain_len)]
        for s, joint in enumerate((ids // width).tolist()):
            self.clusters_out.append(joint_clusters[joint])
            self.domains_out.append(domain_codes[starts[s]:starts[s + 1]])
        # (joint, code) of every refined row -> its shared chunk
        g_key = g_joint * D + g_code
        at = np.searchsorted(g_key, joint_of_row[refined_rows] * D + self.pairs.code[refined_rows])
        self.pair_shared[refined_rows] = self.n_shared + local[at]
        self.n_shared += ids.size
        joint_of_row[refined_rows] = -1

    def shared_chunks(self):
        return SharedChunks(_offsets([c.size for c in self.clusters_out]),
                            _concat(self.clusters_out),
                            _offsets([d.size for d in self.domains_out]),
                            _concat(self.domains_out))


def _offsets(counts):
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=out[1:])
    return out


def _concat(arrays):
    return np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, dtype=np.int64)
