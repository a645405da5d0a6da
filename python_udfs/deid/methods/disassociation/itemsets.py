"""Support counting over sets of diagnosis codes, and the k^m-anonymity test (003 Def. 1).

Records are CSR arrays: ``offsets`` (int64, n_records + 1) and ``codes`` (int64 code ids,
sorted and unique within each record; empty records allowed).  The support of an itemset is
the number of records (subrecords, in a chunk) that contain all of its codes.

A chunk is k^m-anonymous (003 Def. 1 applied to one chunk, Fig. 9 line 12) when every itemset
of at most m codes that occurs in some subrecord occurs in at least k subrecords.  Checking it
needs the supports of every occurring itemset of size 1..m; they are counted level by level:
code supports with ``np.bincount``, pair supports by enumerating the pairs of every record at
once, and larger itemsets Apriori-style on a boolean record x code matrix (an itemset of size
j can only occur if its (j-1)-subsets occur, and if one of those is rarer than k the chunk has
already failed).  Nothing here loops over records in Python.
"""

import numpy as np

# boolean cells (records x candidates x size) materialised at once in the Apriori levels
_CELL_BUDGET = 1 << 24


def take_records(offsets, codes, rows):
    """CSR (offsets, codes) of the records ``rows``, in that order."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    new_offsets = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    source = np.arange(new_offsets[-1], dtype=np.int64) - np.repeat(new_offsets[:-1] - starts,
                                                                       lengths)
    return new_offsets, codes[source]


def row_of_occurrence(offsets):
    """The record of every position of ``codes`` (int64, offsets[-1])."""
    lengths = np.diff(offsets)
    return np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)


def code_supports(codes, n_codes):
    """Support of every code 0..n_codes-1 (codes are unique within a record)."""
    return np.bincount(np.asarray(codes, dtype=np.int64), minlength=n_codes)


def record_pairs(offsets):
    """Positions (first, second), first < second, of every 2-subset of every record: each
    unordered pair of codes of a record appears once."""
    lengths = np.diff(offsets)
    n_occ = int(offsets[-1])
    pos_in_record = np.arange(n_occ, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    later = np.repeat(lengths, lengths) - 1 - pos_in_record     # codes after each position
    first = np.repeat(np.arange(n_occ, dtype=np.int64), later)
    group_start = np.repeat(np.cumsum(later) - later, later)
    second = first + 1 + (np.arange(first.size, dtype=np.int64) - group_start)
    return first, second


def pair_supports(offsets, codes, n_codes):
    """Dense (n_codes, n_codes) int64 matrix of pair supports; the diagonal holds the code
    supports.  For a chunk domain (``n_codes`` small)."""
    codes = np.asarray(codes, dtype=np.int64)
    first, second = record_pairs(offsets)
    flat = np.bincount(codes[first] * n_codes + codes[second], minlength=n_codes * n_codes)
    counts = flat.reshape(n_codes, n_codes)
    counts = counts + counts.T
    counts[np.diag_indices(n_codes)] = code_supports(codes, n_codes)
    return counts


def incidence_matrix(offsets, codes, n_codes):
    """Boolean (n_records, n_codes) matrix: cell (r, c) is True when record r has code c."""
    n = offsets.size - 1
    matrix = np.zeros((n, n_codes), dtype=bool)
    matrix[row_of_occurrence(offsets), np.asarray(codes, dtype=np.int64)] = True
    return matrix


def is_km_anonymous(matrix, k, m):
    """True when every itemset of 1..m columns that occurs in a row of the boolean
    ``matrix`` occurs in at least k rows (003 Def. 1 for one chunk)."""
    matrix = np.asarray(matrix, dtype=bool)
    if m < 1 or matrix.size == 0:
        return True
    support = matrix.sum(axis=0)
    if np.any((support > 0) & (support < k)):
        return False
    level = np.flatnonzero(support >= k)[:, None]              # occurring itemsets, size 1
    for _ in range(2, m + 1):
        candidates = _apriori_candidates(level)
        if candidates.shape[0] == 0:
            return True
        support = _supports(matrix, candidates)
        if np.any((support > 0) & (support < k)):
            return False
        level = candidates[support > 0]
    return True


def _supports(matrix, itemsets):
    """Support of every row of ``itemsets`` (int64, (n, size)) in the boolean matrix."""
    if itemsets.shape[1] == 2:
        as_float = matrix.astype(np.float32)                   # BLAS; exact below 2**24
        if matrix.shape[0] < (1 << 24):
            pairs = as_float.T @ as_float
            return np.rint(pairs[itemsets[:, 0], itemsets[:, 1]]).astype(np.int64)
    out = np.empty(itemsets.shape[0], dtype=np.int64)
    step = max(1, _CELL_BUDGET // max(1, matrix.shape[0] * itemsets.shape[1]))
    for lo in range(0, itemsets.shape[0], step):
        part = itemsets[lo:lo + step]
        out[lo:lo + step] = np.all(matrix[:, part], axis=2).sum(axis=0)
    return out


def _apriori_candidates(level):
    """Itemsets of size j+1 (sorted rows) all of whose j-subsets are rows of ``level``
    (sorted rows of size j, lexicographic order)."""
    size = level.shape[1]
    if level.shape[0] < 2:
        return np.zeros((0, size + 1), dtype=np.int64)
    rows = [tuple(r) for r in level.tolist()]
    known = set(rows)
    out = []
    start = 0
    while start < len(rows):                                   # runs sharing a prefix
        end = start
        while end < len(rows) and rows[end][:-1] == rows[start][:-1]:
            end += 1
        for i in range(start, end):
            for j in range(i + 1, end):
                cand = rows[i] + (rows[j][-1],)
                if all(cand[:d] + cand[d + 1:] in known for d in range(size - 1)):
                    out.append(cand)
        start = end
    return np.array(out, dtype=np.int64).reshape(-1, size + 1)
