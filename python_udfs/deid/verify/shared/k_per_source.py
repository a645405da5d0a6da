"""k data twins in every source system separately (002 sec. 2, sec. 4).

002 sec. 2: "we impose the k-anonymity constraint on each data source
separately.  Any globally shared record has to have k data twins in every
data source."  Sec. 4: source table T_j provides the attributes AS_j; every
equivalence class [class_i] of T_j's attribute value combinations has a
cardinality c_i, and k-anonymity holds when every c_i >= k (sec. 4.5).

Checked from the cardinalities the SQL side computed on the stored release
(GROUP BY each source's quasi-identifiers).

k per source is not k: check_joint_k checks the classes over ALL
quasi-identifiers together, where the request required it (a policy's minimum).
"""

import numpy as np

from .failures import _bad, _examples, _fail
from .readers import _count_param, _int_array


def check_k_per_source(class_counts, k, n_rows=None):
    """k data twins in every source system separately (002 sec. 2, sec. 4.5).

    ``class_counts[source]`` holds the cardinalities of the equivalence
    classes of the released relation grouped by that source's
    quasi-identifying attributes (the SQL side computes them with GROUP BY);
    every cardinality must be >= k.  ``k`` is one integer or a mapping
    ``{source: k}`` (every source needs an entry).  A source with an empty
    array has none of the projected attributes and is trivially anonymous
    (002 sec. 4.5).  With ``n_rows`` every non-empty source's cardinalities
    must add up to the released row count (the GROUP BY saw every row).

    Returns ``{"sources": {source: {"classes": c, "min_size": m}},
    "min_size": m over all sources}``.
    """
    if not hasattr(class_counts, "items"):
        _bad("class_counts must be a mapping {source: array of class cardinalities}")
    if hasattr(k, "items"):
        kmap = {s: _count_param(v, f"k[{s!r}]") for s, v in k.items()}
        missing = [s for s in class_counts if s not in kmap]
        if missing:
            _bad(f"no k given for source {missing[0]!r}")
    else:
        kk = _count_param(k, "k")
        kmap = {s: kk for s in class_counts}
    if n_rows is not None:
        n_rows = _count_param(n_rows, "n_rows")
    out, overall = {}, None
    for source in sorted(class_counts, key=str):
        c = _int_array(class_counts[source], f"class_counts[{source!r}]")
        if c.size and c.min() < 1:
            _bad(f"class_counts[{source!r}] has a cardinality below 1")
        ks = kmap[source]
        if c.size:
            low = np.flatnonzero(c < ks)
            if low.size:
                _fail(f"source {source!r}: an equivalence class over its quasi-identifiers "
                      f"has {c[low].min()} rows, fewer than k = {ks} "
                      f"(002 sec. 2: k data twins in every source)",
                      detail=f"{low.size} of {c.size} classes of source {source!r} "
                             f"are below k; their sizes: {_examples(np.sort(c[low]))}")
            if n_rows is not None and int(c.sum()) != n_rows:
                _fail(f"source {source!r}: the class cardinalities add up to {int(c.sum())} "
                      f"but the release has {n_rows} rows",
                      detail="the per-source GROUP BY did not see every released row")
        m = int(c.min()) if c.size else None
        out[source] = {"classes": int(c.size), "min_size": m}
        if m is not None:
            overall = m if overall is None else min(overall, m)
    return {"sources": out, "min_size": overall}


def check_joint_k(class_counts, k, n_rows=None, hint=None):
    """k over ALL released quasi-identifiers together (k per source is not k).

    002 makes each source system k-anonymous on its own attributes; a record can still be
    unique over the attributes of all sources together.  Where the request required it (a
    policy requester whose policy does not allow per-source k), every class of the stored
    release grouped by all its quasi-identifiers must hold >= k rows.  ``class_counts`` are
    those cardinalities (GROUP BY every quasi-identifier); with ``n_rows`` they must add up to
    the released row count.  The message holds no count (details may; a policy requester never
    sees details); ``hint`` replaces the default one (rolled back).  Returns
    ``{"classes": c, "min_size": m, "required": k}``.
    """
    k = _count_param(k, "k")
    c = _int_array(class_counts, "class_counts")
    if c.size and c.min() < 1:
        _bad("class_counts has a cardinality below 1")
    low = np.flatnonzero(c < k)
    if low.size:
        _fail(f"an equivalence class over all quasi-identifiers jointly is smaller than k = {k} "
              "(the policy requires k over all released quasi-identifiers, not per source)",
              hint=hint, detail=f"{low.size} of {c.size} joint classes are below k; their sizes: "
                     f"{_examples(np.sort(c[low]))}")
    if n_rows is not None and int(c.sum()) != _count_param(n_rows, "n_rows"):
        _fail("the joint class cardinalities do not add up to the release's rows", hint=hint,
              detail=f"{int(c.sum())} counted, {n_rows} released: the joint GROUP BY did not "
                     "see every released row")
    return {"classes": int(c.size), "min_size": int(c.min()) if c.size else None, "required": k}
