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
import hashlib
from dataclasses import dataclass

import numpy as np

from ..errors import DeidError, PRIVACY_MODEL_UNSATISFIABLE


@dataclass(frozen=True)
class KeptGroups:
    """The earlier release's assignment of the rows it grouped."""
    release_id: int
    ids: np.ndarray         # sorted distinct int64 row ids
    labels: np.ndarray      # int64 per id: its group (any numbering)
    levels: dict = None     # generalization: {label: {quasi-identifier: level}}, the levels
    #                         each label's rows were published at
    logged: dict = None     # what the earlier release logged for a re-release to check (its
    #                         metrics "kept": disassociation's segments, condensation's digest)


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


# ------------------------------------------------------------------ digests
# A re-release checks that a kept group publishes what it published before: the earlier
# release logged a digest (metrics "kept"), this one computes it again over the same groups.
# The digests are of what a group publishes (or of its rows, where the release publishes
# their exact moments): a reader who could test a guess against one learns nothing the
# releases themselves do not tell.
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def mix(x):
    """splitmix64's finalizer over uint64 arrays (wrapping arithmetic)."""
    x = np.asarray(x, np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= _M1
        x ^= x >> np.uint64(27)
        x *= _M2
        x ^= x >> np.uint64(31)
    return x


def mixed(*parts):
    """One uint64 per element of the (broadcast) parts, order-sensitive across parts."""
    out = np.zeros(np.broadcast(*parts).shape, np.uint64)
    for i, p in enumerate(parts):
        with np.errstate(over="ignore"):
            out = mix(out ^ (np.asarray(p).astype(np.uint64) + np.uint64(i + 1)))
    return out


def label_hashes(labels):
    """A stable uint64 per label (codes shift when a dictionary grows; labels do not)."""
    return np.array([int.from_bytes(hashlib.blake2b(str(v).encode(), digest_size=8).digest(),
                                    "little") for v in labels] or [0], np.uint64)


def digest(values):
    """The hex digest of a uint64 array, in its order."""
    return hashlib.blake2b(np.ascontiguousarray(values, np.uint64).tobytes(),
                           digest_size=16).hexdigest()


def groups_digest(group, n_groups, row_hash):
    """The digest of the groups 0..n_groups-1: each group's rows' hashes summed (order-free
    within a group), the groups in their order; rows of group -1 or >= n_groups left out."""
    group = np.asarray(group, np.int64)
    take = (group >= 0) & (group < n_groups)
    sums = np.zeros(n_groups, np.uint64)
    with np.errstate(over="ignore"):
        np.add.at(sums, group[take], mix(np.asarray(row_hash, np.uint64)[take]))
    return digest(mixed(np.arange(n_groups), sums))


_NULL = np.uint64(0x9E3779B97F4A7C15)
CHANGED = "a released row's value changed since an earlier release"
MISSING = ("an earlier group is not released whole again (a row deleted since, or another "
           "selection)")
CHANGED_HINT = ("A row of a group the earlier release published changed, or was deleted, since: "
                "release the rows that did not change, or ask for a fresh grouping "
                "(options.regroup), which the composition rule judges.")


def row_hashes(rid, columns):
    """One uint64 per row: its id and its values in `columns` (encoded columns: a category
    by its label, a number by its bits, NULL as NULL), in the columns' order."""
    h = mixed(np.asarray(rid, np.int64))
    for col in columns:
        values = np.asarray(col.values)
        if col.kind == "category":
            v = label_hashes(list(col.dictionary) + [""])[np.minimum(
                values.astype(np.int64), len(col.dictionary))]
        else:
            v = np.ascontiguousarray(values).view(np.uint64)
        h = mixed(h, np.where(np.asarray(col.null, bool), _NULL, v))
    return h


def check_moments_kept(kept, s, group, row_hash):
    """A re-release's kept groups hold the rows, with the values, the earlier release logged
    (its metrics "kept" digest, over every group it published): a group whose exact moments
    are published would otherwise publish the change of one member's value. `s`: the Split,
    `group`: the group per row (kept ones first). Raises the refusal (no fresh grouping
    after it: one could rebuild the same groups) unless every earlier group is kept as it
    was; a release that logged no digest keeps nothing (a fresh grouping, judged)."""
    logged = (kept.logged or {}).get("digest") if kept is not None else None
    if kept is None or s.n_kept == 0:
        return
    if logged is None:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE, "the earlier release logged no digest of "
                        "its groups", hint=CHANGED_HINT, data_dependent=True)
    whole = np.unique(kept.labels).size == s.n_kept
    if not whole or groups_digest(group, s.n_kept, row_hash) != logged:
        e = DeidError(PRIVACY_MODEL_UNSATISFIABLE, CHANGED if whole else MISSING,
                      hint=CHANGED_HINT, data_dependent=True)
        e.no_fresh_grouping = True
        raise e
