"""Column-wise deletion caps L_i (001 Def. 7).

001 Def. 7: to delete all rows of a group at least L distinct values must
be deleted, "and at most L_i (0 <= L_i <= L) of them are from sensitive
attribute A_si".  The checks carry the caps as an int64 array, one per
attribute in the sorted attribute order, with :data:`_INF` for an
attribute without a cap (Def. 6: any number of its values may be deleted).
"""

import numpy as np

from .failures import _bad
from .readers import _count_param

# "No admissible set of deletions can remove every row" (001 Def. 7 with
# small L_i): the group is L-diverse for every L.  Also the cap of an
# unconstrained attribute.
_INF = np.iinfo(np.int64).max // 4


def _column_caps(column_l, anames, L, e):
    """Per-attribute deletion caps L_i (001 Def. 7); _INF = unconstrained.

    ``column_l`` maps attribute names to L_i (None: no caps); ``anames`` are
    the release's sensitive attributes, sorted; ``e`` is non-zero when the
    release has groups (then a cap on an unknown attribute is an error).
    """
    caps = np.full(len(anames), _INF, dtype=np.int64)
    if column_l is None:
        return caps
    if not hasattr(column_l, "items"):
        _bad("column_l must be a mapping {attribute: max deletions}")
    if column_l and L is None:
        _bad("column_l needs L")
    pos = {a: i for i, a in enumerate(anames)}
    for name, li in column_l.items():
        li = _count_param(li, f"column_l[{name!r}]")
        if str(name) not in pos:
            if e:
                _bad(f"column_l names {name!r}, which is not a sensitive attribute of "
                     f"the release ({', '.join(anames)})")
            continue
        # 001 Def. 7 requires 0 <= L_i <= L; a larger cap means the same as L.
        caps[pos[str(name)]] = min(li, L)
    return caps
