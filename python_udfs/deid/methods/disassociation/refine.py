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


def refine(cluster_start, occ_position, occ_code, occ_pair, pair_cluster, pair_code,
           pair_support, pair_chunk, n_codes, k, m, constraint_of_code,
           max_joint_clusters=None):
    """Shared chunks over joint clusters (module docstring).

    Occurrences are those of the records in cluster order: ``occ_position`` (position of the
    record in cluster order, non-decreasing), ``occ_code``, ``occ_pair`` (row of the
    (cluster, code) table).  The (cluster, code) table (sorted by cluster then code) holds
    the support of the code in the cluster and its record chunk (``pair_chunk``, -1 when in
    the item chunk).  Joint clusters lie within blocks of at most ``max_joint_clusters``
    consecutive clusters (None: no limit; below 2: no refining).  Returns (pair_shared,
    SharedChunks): the shared chunk of each (cluster, code) row, or -1.
    """
    D = max(int(n_codes), 1)
    n_clusters = cluster_start.size - 1
    n_positions = int(cluster_start[-1])
    pair_shared = np.full(pair_cluster.size, -1, dtype=np.int64)
    item_rows = np.flatnonzero(pair_chunk < 0)
    item_occ = np.flatnonzero(pair_chunk[occ_pair] < 0)
    joint_of_row = np.full(pair_cluster.size, -1, dtype=np.int64)
    clusters_out, domains_out = [], []
    n_shared = 0
    top = 1 << 62 if max_joint_clusters is None else max_joint_clusters
    level = 0
    while (1 << level) < n_clusters and (2 << level) <= top:
        level += 1
        live = item_rows[pair_shared[item_rows] < 0]
        if live.size == 0:
            break
        key = (pair_cluster[live] >> level) * D + pair_code[live]
        by_key = np.argsort(key, kind="stable")          # clusters stay sorted in a group
        rows, key = live[by_key], key[by_key]
        head = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        n_rows = np.diff(np.r_[head, rows.size])
        pooled = np.add.reduceat(pair_support[rows], head)
        refined = np.flatnonzero(pooled >= k)
        if refined.size == 0:
            continue
        # one joint cluster per distinct cluster set J (exact: keyed by the cluster list)
        cluster_of_row = pair_cluster[rows]
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
        refined_rows = rows[members]
        joint_of_row[refined_rows] = np.repeat(joint_of_group, sizes)
        # project the records of each joint cluster on its codes: rows (joint, position)
        occ = item_occ[joint_of_row[occ_pair[item_occ]] >= 0]
        joint_of_occ = joint_of_row[occ_pair[occ]]
        row_key = joint_of_occ * max(n_positions, 1) + occ_position[occ]
        by_row = np.argsort(row_key, kind="stable")        # codes stay sorted in a row
        occ, row_key = occ[by_row], row_key[by_row]
        row_head = np.flatnonzero(np.r_[True, row_key[1:] != row_key[:-1]])
        proj_offsets = np.r_[row_head, occ.size].astype(np.int64)
        g_joint, g_code, _, g_chunk = verpart_groups(
            row_key[row_head] // max(n_positions, 1), proj_offsets, occ_code[occ], D, k, m,
            constraint_of_code)
        width = int(g_chunk.max()) + 1
        ids, local = np.unique(g_joint * width + g_chunk, return_inverse=True)
        by_chunk = np.lexsort((g_code, local))
        domain_len = np.bincount(local, minlength=ids.size)
        domain_codes = g_code[by_chunk]
        starts = np.r_[0, np.cumsum(domain_len)]
        for s, joint in enumerate((ids // width).tolist()):
            clusters_out.append(joint_clusters[joint])
            domains_out.append(domain_codes[starts[s]:starts[s + 1]])
        # (joint, code) of every refined row -> its shared chunk
        g_key = g_joint * D + g_code
        at = np.searchsorted(g_key, joint_of_row[refined_rows] * D + pair_code[refined_rows])
        pair_shared[refined_rows] = n_shared + local[at]
        n_shared += ids.size
        joint_of_row[refined_rows] = -1
    return pair_shared, SharedChunks(_offsets([c.size for c in clusters_out]),
                                     _concat(clusters_out), _offsets([d.size for d in
                                                                      domains_out]),
                                     _concat(domains_out))


def _offsets(counts):
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=out[1:])
    return out


def _concat(arrays):
    return np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, dtype=np.int64)
