"""Member and dimension hierarchies of the quasi-identifiers (paper 002 sec. 4.1-4.3, Tables 6-7)
and the selection-derived generalization limits (002 sec. 4.5 step 2).

Split out of :mod:`generalize`, which documents the reading of the paper and its deviations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import INVALID_PARAMETER_VALUE, DeidError

HINT = ("Check the hierarchy's rows (deid.load_hierarchy: value;level1;...;*) and its binding "
        "(deid.set_role(..., hierarchy => ...)).")
REPEATED_HINT = ("Every level's labels must be distinct. Under options.nulls = 'value' a NULL is "
                 "released as the label 'NULL': a column whose text also holds 'NULL' needs "
                 "nulls => 'error' or another spelling of that value.")

__all__ = ["AttributeHierarchy", "selection_limit"]


@dataclass
class AttributeHierarchy:
    """Member + dimension hierarchy of one quasi-identifier (002 sec. 4.1-4.3, Tables 6-7).

    ``parents[i][c]`` is the level-(i+1) code of level-i code ``c``; ``labels[i][c]`` its text;
    the top level is ``['*']`` (suppression).  ``info_loss[i]`` is phi of level i (0 at level 0,
    1 at the top, non-decreasing); the edge i -> i+1 costs ``priority * info_loss[i+1]``.
    ``limit`` is the highest level allowed (None: the top), ``source`` the source system (sec. 2).
    """

    name: str
    parents: list
    labels: list
    info_loss: list
    priority: float = 1.0
    limit: int | None = None
    source: str | None = None
    _maps: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _label_levels: dict | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        def bad(msg, hint=HINT):
            raise DeidError(INVALID_PARAMETER_VALUE, f"hierarchy {self.name!r}: {msg}", hint=hint)

        if not isinstance(self.labels, (list, tuple)) or len(self.labels) < 1:
            bad("needs at least one level of labels")
        self.labels = [list(map(str, lv)) for lv in self.labels]
        nlev = len(self.labels)
        if len(self.labels[-1]) != 1:
            bad(f"the top level must hold exactly one value (suppression), has {len(self.labels[-1])}")
        if len(self.parents) != nlev - 1:
            bad(f"{nlev} levels need {nlev - 1} parent arrays, got {len(self.parents)}")
        parents = []
        for i, p in enumerate(self.parents):
            a = np.asarray(p, dtype=np.int64).reshape(-1)
            if a.shape[0] != len(self.labels[i]):
                bad(f"parents[{i}] has {a.shape[0]} entries for {len(self.labels[i])} level-{i} values")
            if a.size and (a.min() < 0 or a.max() >= len(self.labels[i + 1])):
                bad(f"parents[{i}] points outside level {i + 1}")
            parents.append(a)
        self.parents = parents
        for i, lv in enumerate(self.labels):
            if len(set(lv)) != len(lv):
                bad(f"level {i} repeats a label", hint=REPEATED_HINT)
        loss = [float(x) for x in self.info_loss]
        if len(loss) != nlev:
            bad(f"info_loss needs {nlev} values (one per level), got {len(loss)}")
        if loss[0] != 0.0 or loss[-1] != 1.0 or any(b < a for a, b in zip(loss, loss[1:])):
            bad("info_loss must start at 0, end at 1 and never decrease (002 sec. 4.2)")
        self.info_loss = loss
        self.priority = float(self.priority)
        if not (0.0 <= self.priority <= 1.0):
            bad(f"priority must be in [0, 1] (002 sec. 4.5), got {self.priority}")
        if self.limit is not None:
            if int(self.limit) != self.limit or self.limit < 0:
                bad(f"limit must be a level >= 0, got {self.limit!r}")
            self.limit = int(self.limit)

    # -- structure -------------------------------------------------------------------------
    @property
    def top(self) -> int:
        """Index of the suppression level L_max."""
        return len(self.labels) - 1

    @property
    def cap(self) -> int:
        """Highest level the attribute may reach: min(limit, top)."""
        return self.top if self.limit is None else min(self.limit, self.top)

    def size(self, level: int) -> int:
        return len(self.labels[level])

    def edge_cost(self, level: int) -> float:
        """phi x priority of the edge level -> level+1 (002 sec. 4.5, Table 7)."""
        return self.priority * self.info_loss[level + 1]

    def level_map(self, to: int, frm: int = 0) -> np.ndarray:
        """int64 array mapping codes at level ``frm`` to their ancestors at level ``to``."""
        key = (frm, to)
        m = self._maps.get(key)
        if m is None:
            if not (0 <= frm <= to <= self.top):
                raise DeidError(INVALID_PARAMETER_VALUE,
                                f"hierarchy {self.name!r}: no map from level {frm} to level {to}")
            m = np.arange(self.size(frm), dtype=np.int64)
            for i in range(frm, to):
                m = self.parents[i][m]
            self._maps[key] = m
        return m

    def levels_of(self, value: str) -> list[int]:
        """Levels at which ``value`` is a label (ascending)."""
        if self._label_levels is None:
            d: dict = {}
            for i, lv in enumerate(self.labels):
                for c, lab in enumerate(lv):
                    d.setdefault(lab, []).append((i, c))
            self._label_levels = d
        return [i for i, _ in self._label_levels.get(str(value), [])]

    def leaves(self, value: str) -> list[str] | None:
        """Level-0 labels under ``value`` at its lowest level (None if not in the hierarchy).

        For :meth:`deid.request.Selection.render`'s ``expand``: 002 sec. 5.2 step 1, "PT = 1"
        searches for 1a, 1b, 1c, 1mic.
        """
        self.levels_of(value)
        hits = self._label_levels.get(str(value))
        if not hits:
            return None
        level, code = hits[0]
        under = np.flatnonzero(self.level_map(level) == code)
        return [self.labels[0][c] for c in under]

    @classmethod
    def from_paths(cls, name, paths, info_loss, priority=1.0, limit=None, source=None):
        """Build from ARX-style rows ``(value, level1, ..., '*')``, one row per level-0 value.

        Codes follow first appearance.  A label that appears twice at one level must have the
        same parent both times.
        """
        paths = [tuple(map(str, p)) for p in paths]
        if not paths:
            raise DeidError(INVALID_PARAMETER_VALUE, f"hierarchy {name!r} has no values")
        nlev = len(paths[0])
        if any(len(p) != nlev for p in paths):
            raise DeidError(INVALID_PARAMETER_VALUE, f"hierarchy {name!r}: rows have different lengths")
        index = [dict() for _ in range(nlev)]
        for p in paths:
            for i, lab in enumerate(p):
                index[i].setdefault(lab, len(index[i]))
        parents = [np.full(len(index[i]), -1, dtype=np.int64) for i in range(nlev - 1)]
        for p in paths:
            for i in range(nlev - 1):
                c, up = index[i][p[i]], index[i + 1][p[i + 1]]
                if parents[i][c] not in (-1, up):
                    raise DeidError(INVALID_PARAMETER_VALUE,
                                    f"hierarchy {name!r}: {p[i]!r} has two parents at level {i + 1}")
                parents[i][c] = up
        labels = [list(ix) for ix in index]
        return cls(name, parents, labels, info_loss, priority, limit, source)


def selection_limit(h: AttributeHierarchy, values: set[str]) -> int:
    """Generalization limit implied by a selection ``col = v`` / ``col IN (...)`` (002 sec. 4.5 step 2).

    An equality on a leaf pins the attribute at level 0; on a generalized value (e.g. PT = '1',
    a level-1 value of 1a/1b/1c/1mic) the attribute may rise up to that value's level.  With several
    values, or a value present at several levels, the lowest level is taken (the more restrictive
    limit).  A value that is not in the hierarchy raises DeidError.
    """
    if not values:
        return 0
    best = None
    for v in values:
        lv = h.levels_of(v)
        if not lv:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"selection value {v!r} of column {h.name!r} is not in its hierarchy",
                            hint="Use a value of the column or one of its generalized values.")
        best = lv[0] if best is None else min(best, lv[0])
    return best
