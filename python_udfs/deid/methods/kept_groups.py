"""Groups kept across releases of a growing source: the re-release keeps, for the rows an
earlier release grouped, the group / cluster each had, and groups the rows new since then
among themselves only.

Why: a group's published count (or moments, or chunk supports) in the re-release minus the
same group's in the earlier release isolates the rows that joined it. If fewer than k new
rows join an old group, their sensitive values are singled out (the linear attack); if old
rows are regrouped, a reader intersects a patient's two groups (Ganta, Kasiviswanathan,
Smith, KDD 2008). Keeping every old group as it was (m-invariance, Xiao and Tao, SIGMOD
2007, without counterfeits) and forming new groups of new rows alone leaves every cell of
the two groupings' common refinement either an old group, unchanged, or a new group that
meets the method's model by itself. A remainder of new rows too small for a group of its own
is never merged into an old group: the method refuses it like any table too small, and the
rows wait for the next release. A group the snapshot holds only in part (rows deleted since,
or another selection) is not kept: its rows are grouped afresh and the composition rule
(log/composition.py) judges that regrouping (a group that lost fewer than k rows is refused).

Generalization logs no class per row: its old rows keep the earlier release's levels (so
each is published as it was), and the new rows are generalized at levels searched over the
new rows alone (every class of new rows holds k of them; a class the two share holds k old
and k new rows).

The pipeline hands a plug-in that declares KEEPS_GROUPS the earlier release's assignment
(req.run.kept, loaded by log/composition.kept_groups); pure numpy, no SQL.
"""
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class KeptGroups:
    """The earlier release's assignment of the rows it grouped."""
    release_id: int
    ids: np.ndarray         # sorted distinct int64 row ids
    labels: np.ndarray      # int64 per id: its group (any numbering)
    levels: dict = None     # generalization: {label: {quasi-identifier: level}}, the levels
    #                         each label's rows were published at
    segments: dict = None   # disassociation: the earlier release's refining segments and
    #                         each one's digest (its metrics "segments", disassociation/kept.py)


@dataclass(frozen=True)
class Split:
    """A snapshot's rows split into kept and new."""
    group: np.ndarray       # int64 per row: its kept group, 0..n_kept-1, or -1 for a new row
    n_kept: int             # the kept groups present in the snapshot

    @property
    def new(self):
        """Bool per row: a row no earlier group holds."""
        return self.group < 0


def split(rid, kept):
    """The rows `rid` (any order) against the earlier assignment `kept` (None: every row new).
    Only a group all of whose rows are present is kept; the rows of a group the snapshot
    holds only in part (rows deleted, or another selection) are grouped afresh, which the
    composition rule judges (it refuses the regrouping unless it isolates no one)."""
    rid = np.asarray(rid, np.int64)
    group = np.full(rid.size, -1, np.int64)
    if kept is None or kept.ids.size == 0 or rid.size == 0:
        return Split(group, 0)
    at = np.minimum(np.searchsorted(kept.ids, rid), kept.ids.size - 1)
    hit = kept.ids[at] == rid
    labels, of_id = np.unique(kept.labels, return_inverse=True)
    of_id = of_id.reshape(-1)
    whole = np.bincount(of_id[at[hit]], minlength=labels.size) == \
        np.bincount(of_id, minlength=labels.size)
    keep = np.zeros(rid.size, bool)
    keep[hit] = whole[of_id[at[hit]]]
    if not keep.any():
        return Split(group, 0)
    present, dense = np.unique(of_id[at[keep]], return_inverse=True)
    group[keep] = dense.reshape(-1)
    return Split(group, int(present.size))


def labels_of(rid, kept):
    """The earlier label of each row of `rid` (-1: a new row), as the earlier release had it."""
    rid = np.asarray(rid, np.int64)
    if kept is None or kept.ids.size == 0:
        return np.full(rid.size, -1, np.int64)
    at = np.minimum(np.searchsorted(kept.ids, rid), kept.ids.size - 1)
    return np.where(kept.ids[at] == rid, kept.labels[at], -1)


def combine(s, new_group):
    """(group per row, number of groups): the kept groups first, then the new rows' groups
    (`new_group`: int64 per new row, in row order, 0..g-1) numbered after them."""
    group = s.group.copy()
    new_group = np.asarray(new_group, np.int64)
    if new_group.size != int(np.count_nonzero(s.new)):
        raise ValueError("one group per new row")
    group[s.new] = new_group + s.n_kept
    extra = int(new_group.max()) + 1 if new_group.size else 0
    return group, s.n_kept + extra
