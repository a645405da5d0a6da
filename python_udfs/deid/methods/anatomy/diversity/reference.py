"""Literal, row-at-a-time 001 Fig. 6 and Fig. 7 (with the Fig. 8 example in the tests).

:func:`greedy_trace` follows the figures line by line in plain Python, O(m^2) per group, with
the same strict Theorem 6 test and the same scan/keep/width limits as the vectorised checks
(package docstring, deviations 1-4).  It is the reference the tests compare
:mod:`.certify`, :mod:`.capped`, :mod:`.greedy` and :mod:`.column_wise` with.
"""

from .column_wise import PHASE2_MAX_KEEP, PHASE2_MAX_SCAN, PHASE2_MAX_WIDTH
from .common import _NO_LIMIT, UNBOUNDED_L, _check_l, as_codes, column_caps


def greedy_trace(codes, column_l=None, L=None):
    """Literal row-at-a-time 001 Fig. 6 / Fig. 7 (reference for tests, O(m^2) per group).

    Returns a dict: ``order`` (Fig. 6 line 3), ``independent`` (Fig. 6's C, in pick order),
    ``rows`` (final C), ``history`` (list of (row, x) for every row Fig. 7 kept) and
    ``certified`` (the certificate, capped at L when L is given).
    """
    codes = as_codes(codes)
    m, s = codes.shape
    caps = column_caps(column_l, s)
    freq = {}
    for row in codes:
        for a in range(s):
            freq[(a, int(row[a]))] = freq.get((a, int(row[a])), 0) + 1
    total = [sum(freq[(a, int(row[a]))] for a in range(s)) for row in codes]
    order = sorted(range(m), key=lambda i: (total[i], i))
    target = _NO_LIMIT if L is None else _check_l(L)
    chosen, taken = [], set()
    for i in order:
        vals = {(a, int(codes[i, a])) for a in range(s)}
        if not vals & taken:
            chosen.append(i)
            taken |= vals
            if len(chosen) >= target:
                break
    result = {"order": order, "independent": list(chosen), "rows": list(chosen),
              "history": [], "certified": min(len(chosen), target)}
    if caps is None or len(chosen) >= target or m == 0:
        return result

    x = _trace_x(codes, caps, chosen)
    in_c = set(chosen)
    rest = [i for i in order if i not in in_c][:PHASE2_MAX_SCAN]
    rows = list(chosen)
    for i in rest:
        if x >= target or len(rows) - len(chosen) >= PHASE2_MAX_KEEP:
            break
        x_new = _trace_x(codes, caps, rows + [i])
        if x_new >= x:
            rows.append(i)
            x = x_new
            result["history"].append((i, min(x, target)))
    result["rows"] = rows
    best = min(x, target)
    if best == _NO_LIMIT:
        best = UNBOUNDED_L
    result["certified"] = best
    return result


def _trace_x(codes, caps, rows):
    """x(C) of the rows ``rows`` (Fig. 7 lines 7-13, strict form of Theorem 6)."""
    s = codes.shape[1]
    cnt = {}
    for i in rows:
        for a in range(s):
            cnt[(a, int(codes[i, a]))] = cnt.get((a, int(codes[i, a])), 0) + 1
    allowed, per_attr = [], {}
    for (a, v), c in sorted(cnt.items(), key=lambda kv: -kv[1]):
        if per_attr.get(a, 0) < caps[a]:
            per_attr[a] = per_attr.get(a, 0) + 1
            allowed.append(c)
    if sum(allowed) < len(rows):
        return _NO_LIMIT                         # allowed values cannot delete C
    run, j = 0, 0
    for c in allowed[:PHASE2_MAX_WIDTH]:
        run += c
        if run >= len(rows):
            break
        j += 1
    return 1 + j
