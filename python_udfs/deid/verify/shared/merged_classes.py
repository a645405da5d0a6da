"""k per source system (002 sec. 2) and joint k over a release whose rows several
nodes store: every node reports the classes of what IT STORED (its part grouped by each
source's quasi-identifiers, the labels as stored, and the rows of each); the classes of the
release are those parts merged by their labels, counts summed.  A class below k on every node
can be k-anonymous over the release (and a release k-anonymous on every node can not be: a
node's check proves nothing here), so the check runs only on the merged classes.

Independent of the method's own merge (methods/generalization/class_merge.py, which merges
codes over dictionaries): here the stored label tuples are the key.  Pure numpy.
"""
import numpy as np

from .failures import _bad, _fail
from .k_per_source import check_joint_k, check_k_per_source

JOINT = "*joint*"   # the key of the classes over all quasi-identifiers together


def merge_labelled(parts, columns):
    """Cardinalities of the union of the nodes' classes over ``columns``: each part is
    ``{"columns": [...], "labels": [[label of each class] per column], "counts": [...]}``
    (None labels stand for NULL).  Returns the summed counts of the distinct label tuples."""
    keys, counts = [], []
    for p in parts:
        if list(p.get("columns", [])) != list(columns):
            _bad(f"a node's stored classes are over {p.get('columns')}, not {list(columns)}")
        c = np.asarray(p["counts"], dtype=np.int64).reshape(-1)
        labels = p["labels"]
        if len(labels) != len(columns) or any(len(col) != c.size for col in labels):
            _bad("a node's stored classes have labels and counts of different lengths")
        if c.size and c.min() < 1:
            _bad("a node's stored classes hold a class of fewer than one row")
        keys.extend(map(_key, zip(*labels)) if columns else [""] * c.size)
        counts.append(c)
    if not keys:
        return np.zeros(0, np.int64)
    _, inv = np.unique(np.asarray(keys, dtype=object).astype(str), return_inverse=True)
    return np.bincount(inv.reshape(-1), weights=np.concatenate(counts)).astype(np.int64)


def _key(row):
    """One string per label tuple, unambiguous: each label marked as NULL or text, a separator
    inside a label doubled."""
    return "\x1f".join("\x02" if v is None else "\x01" + str(v).replace("\x1f", "\x1f\x1f")
                       for v in row)


def check_merged(parts, by_source, k, n_rows, joint_k=None):
    """The release's guarantee from its nodes' stored classes: every source's merged classes
    hold >= k rows and add up to ``n_rows`` (check_k_per_source), and with ``joint_k`` the
    merged classes over all quasi-identifiers (key :data:`JOINT`) hold >= joint_k rows.
    ``parts`` is one ``{source or JOINT: part}`` per node.  Returns the report of
    check_k_per_source, with "joint" and the number of nodes."""
    parts = list(parts)
    if not parts:
        _fail("no node reported the classes of its part")
    counts = {}
    for s, cols in by_source.items():
        if any(s not in p for p in parts):
            _fail(f"a node did not report the stored classes of source {s!r}")
        counts[s] = merge_labelled([p[s] for p in parts], cols)
    out = check_k_per_source(counts, k, n_rows=n_rows)
    if joint_k is not None:
        cols = [q for qs in by_source.values() for q in qs]
        if any(JOINT not in p for p in parts):
            _fail("a node did not report its stored classes over all quasi-identifiers")
        out["joint"] = check_joint_k(merge_labelled([p[JOINT] for p in parts], cols), joint_k,
                                     n_rows=n_rows)
    out["nodes"] = len(parts)
    return out
