"""Utility of set-valued releases (paper 003 Sec. 3.3): ARE (Def. 2) and MRE (Def. 3).

Data sets are CSR records (``offsets``, ``codes``: code ids, unique within a record), e.g. the
original records and a reconstruction (deid.methods.disassociation.reconstruct).  Pure numpy.

* :func:`itemset_counts` -- C(q): the number of records containing every code of itemset q.
* :func:`average_relative_error` -- Def. 2: avg over the workload of |C_A(q) - C_O(q)| / C_O(q).
* :func:`matching_counts` -- M(u): the number of records matched to a utility constraint u,
  i.e. holding at least one of its codes ("any combination of codes in them", 003 Sec. 1.1).
* :func:`matching_relative_error` -- Def. 3: (M_O(u) - M_A(u)) / M_O(u) per constraint (a
  fraction; multiply by 100 for the percent error that 003 reports).
"""

import numpy as np

from ...errors import DeidError, INVALID_PARAMETER_VALUE


class CodeIndex:
    """The records holding each code (the transpose of the CSR records)."""

    def __init__(self, offsets, codes, n_codes=None):
        offsets = np.asarray(offsets, dtype=np.int64)
        codes = np.asarray(codes, dtype=np.int64)
        self.n_records = offsets.size - 1
        self.n_codes = int(n_codes if n_codes is not None else (codes.max() + 1 if codes.size
                                                                 else 0))
        row = np.repeat(np.arange(self.n_records, dtype=np.int64), np.diff(offsets))
        order = np.argsort(codes, kind="stable")
        self.rows = row[order]
        self.code_offsets = np.zeros(self.n_codes + 1, dtype=np.int64)
        np.cumsum(np.bincount(codes, minlength=self.n_codes), out=self.code_offsets[1:])

    def records_with(self, code):
        if code < 0 or code >= self.n_codes:
            return self.rows[:0]
        return self.rows[self.code_offsets[code]:self.code_offsets[code + 1]]

    def count(self, itemset):
        """Records containing every code of ``itemset`` (the empty set: all records)."""
        items = sorted(set(int(c) for c in itemset),
                       key=lambda c: self.records_with(c).size)
        if not items:
            return self.n_records
        rows = self.records_with(items[0])
        for c in items[1:]:
            if rows.size == 0:
                break
            rows = np.intersect1d(rows, self.records_with(c), assume_unique=True)
        return int(rows.size)

    def count_any(self, codes):
        """Records containing at least one of ``codes``."""
        parts = [self.records_with(int(c)) for c in set(codes)]
        return int(np.unique(np.concatenate(parts)).size) if parts else 0


def itemset_counts(offsets, codes, itemsets, n_codes=None):
    """int64 array: C(q) for every itemset q of ``itemsets`` (sequences of code ids)."""
    index = CodeIndex(offsets, codes, n_codes)
    return np.array([index.count(q) for q in itemsets], dtype=np.int64)


def average_relative_error(original_counts, anonymized_counts):
    """003 Def. 2.  Every query must have C_O(q) > 0 (Def. 2 divides by it)."""
    c_o = np.asarray(original_counts, dtype=np.float64)
    c_a = np.asarray(anonymized_counts, dtype=np.float64)
    if c_o.shape != c_a.shape or c_o.size == 0:
        raise DeidError(INVALID_PARAMETER_VALUE, "ARE needs one anonymized count per query",
                        hint="pass the counts of the same non-empty workload")
    if np.any(c_o <= 0):
        raise DeidError(INVALID_PARAMETER_VALUE, "ARE is undefined for a query no original "
                        "record answers", hint="draw the workload from itemsets that occur")
    return float(np.mean(np.abs(c_a - c_o) / c_o))


def are(original, anonymized, workload, n_codes=None):
    """003 Def. 2 for ``workload`` (itemsets) on two CSR data sets (offsets, codes)."""
    c_o = itemset_counts(*original, workload, n_codes)
    c_a = itemset_counts(*anonymized, workload, n_codes)
    return average_relative_error(c_o, c_a)


def matching_counts(offsets, codes, constraints, n_codes=None):
    """int64 array: M(u) for every constraint u (records holding >= 1 code of u)."""
    index = CodeIndex(offsets, codes, n_codes)
    return np.array([index.count_any(u) for u in constraints], dtype=np.int64)


def matching_relative_error(original, anonymized, constraints, n_codes=None):
    """003 Def. 3 per constraint (float64 array of fractions); constraints that no original
    record matches are undefined and raise."""
    m_o = matching_counts(*original, constraints, n_codes).astype(np.float64)
    m_a = matching_counts(*anonymized, constraints, n_codes).astype(np.float64)
    if np.any(m_o <= 0):
        raise DeidError(INVALID_PARAMETER_VALUE, "MRE is undefined for a constraint no "
                        "original record matches", hint="drop constraints whose codes never occur")
    return (m_o - m_a) / m_o
