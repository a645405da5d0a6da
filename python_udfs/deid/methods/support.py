"""Pieces shared by the method plug-ins (pure): what to read, NULL quasi-identifiers,
hierarchy-ordered codes, per-source QI sets."""
import numpy as np

from ..errors import DeidError, NULL_VALUE_NOT_ALLOWED
from ..plan import ReadSpec


def read_spec(req, names, rid):
    """Read `names` (+ the row id) of the selected rows of the source, ordered by row id (the
    join of the dictionary encoding scrambles the scan order)."""
    selection = req.selection.render() if req.selection is not None else None
    return ReadSpec(req.rel, names, rid, selection)


def columns_with_role(req, role):
    return [c for c in req.columns if req.rel.columns[c].role == role]


def refuse_null_qis(frame, qis, options):
    """NULL quasi-identifiers need options.nulls = 'value' (NULL is then a value
    of its own); otherwise the request is refused."""
    nulls = options.get("nulls", "error")
    for q in qis:
        n = int(frame.columns[q].null.sum())
        if n and nulls == "error":
            raise DeidError(NULL_VALUE_NOT_ALLOWED,
                            f'quasi-identifier "{q}" is NULL in some selected rows',
                            detail=f"{n} selected row(s)",
                            hint='Filter them out with selection => \'... AND '
                                 f'{q} IS NOT NULL\', or pass options => \'{{"nulls": "value"}}\' '
                                 "to treat NULL as a value of its own.", data_dependent=True)


def hierarchy_rank(h, dictionary):
    """Rank of each dictionary label in hierarchy order: leaves sorted by their
    chain of ancestors from the top down (so siblings are adjacent)."""
    if h is None or h.kind != "member":
        return np.arange(len(dictionary))
    order = h.rank(dictionary)
    rank = np.empty(len(dictionary), dtype=np.int64)
    rank[order] = np.arange(len(dictionary))
    return rank


def qi_matrix(req, frame, qis):
    """float64 (n, d) matrix of the QIs for the k-d split: numbers as they are,
    categories as codes in hierarchy (or sort) order; NULL after every value.

    Written column by column into the matrix (no float copy of each column, no stacking:
    at 1M rows those temporaries were as large as the matrix, and fresh memory costs page
    faults)."""
    out = np.empty((frame.n, len(qis)))
    for j, q in enumerate(qis):
        col = frame.columns[q]
        dest = out[:, j]
        if col.kind == "category":
            h = req.hierarchies.get(q)
            rank = np.append(hierarchy_rank(h, col.dictionary), len(col.dictionary))
            rank = rank.astype(np.float64)
            for lo in range(0, frame.n, _CHUNK):           # small temporaries only
                dest[lo:lo + _CHUNK] = rank.take(col.values[lo:lo + _CHUNK])
        else:
            dest[:] = col.values                          # as values.astype(np.float64)
            if col.null.any():
                known = ~col.null
                dest[col.null] = dest[known].max() + 1 if known.any() else 0
    return out


_CHUNK = 1 << 16


def sources_of(req, qis):
    """{source system: [QI names]} (002 sec. 2); columns without a source form one
    source named after the relation."""
    out = {}
    for q in qis:
        out.setdefault(req.rel.columns[q].source or req.rel.display, []).append(q)
    return out
