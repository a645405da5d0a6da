"""A re-release keeps the earlier groups of the old rows and groups the new rows apart
(methods/kept_groups.py), and anatomy and condensation build on it."""
import numpy as np
import pytest

from deid.errors import DeidError
from deid.log import partition as cells
from deid.methods.kept_groups import (KeptGroups, check_moments_kept, combine, groups_digest,
                                      row_hashes, split)
from deid.methods.anatomy import partition as anatomy
from deid.methods.condensation.condense import condense


def test_split_numbers_the_present_groups_densely():
    kept = KeptGroups(1, np.array([2, 4, 6, 8]), np.array([70, 70, 90, 90]))
    s = split(np.array([1, 2, 4, 6, 8, 9]), kept)
    assert s.group.tolist() == [-1, 0, 0, 1, 1, -1] and s.n_kept == 2
    group, n = combine(s, np.array([0, 0]))
    assert group.tolist() == [2, 0, 0, 1, 1, 2] and n == 3
    with pytest.raises(ValueError):
        combine(s, np.array([0]))


def test_a_group_present_only_in_part_is_not_kept():
    """Row 4 deleted (or not selected): its group's other rows are grouped afresh."""
    kept = KeptGroups(1, np.array([2, 4, 6, 8]), np.array([70, 70, 90, 90]))
    s = split(np.array([2, 6, 8, 9]), kept)
    assert s.group.tolist() == [-1, 0, 0, -1] and s.n_kept == 1


def test_nothing_kept():
    s = split(np.array([3, 1]), None)
    assert s.n_kept == 0 and s.new.all()


def _rows(n, seed):
    rng = np.random.default_rng(seed)
    qi = rng.integers(0, 90, (n, 2)).astype(float)
    sa = rng.integers(0, 6, (n, 1))
    return qi, sa


def _anatomy_month(rid, qi, sa, kept):
    s = split(rid, kept)
    r = anatomy.anatomize_kept(qi, sa, 10, 3, kept=s) if s.n_kept else \
        anatomy.anatomize(qi, sa, 10, 3)
    return r.group_id


def test_anatomy_months_pass_the_composition_rule():
    """Twelve months of a growing table: every month's groups, crossed with every earlier
    month's, make only cells of k rows or more (the rule log/composition.py enforces)."""
    qi, sa = _rows(1000 + 11 * 60, 3)
    layers, kept = [], None
    for month in range(12):
        n = 1000 + month * 60
        rid = np.arange(1, n + 1, dtype=np.int64)
        group = _anatomy_month(rid, qi[:n], sa[:n], kept)
        new = cells.Layer(rid, group.astype(np.int64), 10)
        if layers:
            c = cells.cells(layers, new)
            assert not cells.too_small(c) and not cells.regroups(c)
        layers.append(new)
        kept = KeptGroups(month, rid, group.astype(np.int64))


def test_anatomy_fresh_grouping_of_grown_rows_regroups():
    """What the rule refused before: a fresh grouping of the grown table splits old groups."""
    qi, sa = _rows(1060, 3)
    first = anatomy.anatomize(qi[:1000], sa[:1000], 10, 3).group_id
    again = anatomy.anatomize(qi, sa, 10, 3).group_id
    c = cells.cells([cells.Layer(np.arange(1000), first.astype(np.int64), 10)],
                    cells.Layer(np.arange(1060), again.astype(np.int64), 10))
    assert cells.regroups(c)


def test_anatomy_new_rows_too_few_for_a_group_are_refused():
    qi, sa = _rows(1005, 4)
    first = anatomy.anatomize(qi[:1000], sa[:1000], 10, 3).group_id
    s = split(np.arange(1005), KeptGroups(1, np.arange(1000), first.astype(np.int64)))
    with pytest.raises(DeidError):
        anatomy.anatomize_kept(qi, sa, 10, 3, kept=s)


def test_anatomy_kept_group_that_lost_its_diversity_is_refused():
    """A row whose sensitive value changed since: its group may fall below l."""
    qi = np.arange(20, dtype=float).reshape(-1, 1)
    sa = np.repeat([[0], [1]], 10, axis=0)
    labels = np.arange(20) % 2          # two groups, each holding both values
    s = split(np.arange(20), KeptGroups(1, np.arange(20), labels))
    anatomy.anatomize_kept(qi, sa, 10, 2, kept=s)
    sa[np.flatnonzero(labels == 0)] = 0
    with pytest.raises(DeidError):
        anatomy.anatomize_kept(qi, sa, 10, 2, kept=s)


def test_condensation_keeps_its_clusters_and_clusters_new_rows_apart():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(260, 3))
    first = condense(X[:200], ["float"] * 3, 10, seed=1).cluster_id
    s = split(np.arange(260), KeptGroups(1, np.arange(200), first))
    again = condense(X, ["float"] * 3, 10, seed=2, kept=s).cluster_id
    assert np.array_equal(again[:200], s.group[:200])
    assert set(again[200:].tolist()).isdisjoint(again[:200].tolist())
    assert np.bincount(again[200:] - again[200:].min()).min() >= 10 or \
        np.bincount(again[200:])[again[200:].min():].min() >= 10
    # no new rows: the earlier clusters, as they were
    same = condense(X[:200], ["float"] * 3, 10, seed=3,
                    kept=split(np.arange(200), KeptGroups(1, np.arange(200), first))).cluster_id
    assert np.array_equal(same, s.group[:200])


def test_changed_values_between_two_releases():
    rid, values = np.array([5, 1, 3]), np.array([0, 1, 2])
    assert not cells.changed_values(rid, values, np.array([3, 9, 5]), np.array([2, 7, 0]))
    assert cells.changed_values(rid, values, np.array([1]), np.array([2]))
    assert not cells.changed_values(rid, values, np.zeros(0, np.int64), np.zeros(0, np.int64))


# ------------------------------------------------------------------ kept groups' digests
class _Col:
    def __init__(self, kind, values, null=None, dictionary=None):
        self.kind, self.values, self.dictionary = kind, np.asarray(values), dictionary
        self.null = np.zeros(self.values.size, bool) if null is None else np.asarray(null)


def _frame(bmi=(20.5, 31.0, 25.25, 22.0, 27.5, 30.0), sex=(0, 1, 1, 0, 0, 1),
           labels=("F", "M")):
    return [_Col("number", np.asarray(bmi, np.float64)),
            _Col("category", np.asarray(sex, np.int64), dictionary=list(labels))]


def _logged(group, n, row_hash, rid=None):
    rid = np.arange(1, len(group) + 1) if rid is None else rid
    return KeptGroups(1, np.asarray(rid, np.int64), np.asarray(group, np.int64) + 1,
                      logged={"digest": groups_digest(group, n, row_hash)})


def test_a_kept_cluster_with_the_same_rows_passes():
    rid, group = np.arange(1, 7), np.array([0, 0, 0, 1, 1, 1])
    h = row_hashes(rid, _frame())
    earlier = _logged(group, 2, h)
    grown = np.arange(1, 10)
    s = split(grown, earlier)
    h2 = row_hashes(grown, _frame(bmi=(20.5, 31.0, 25.25, 22.0, 27.5, 30.0, 1, 2, 3),
                                  sex=(1, 2, 2, 1, 1, 2, 0, 0, 0), labels=("A", "F", "M")))
    check_moments_kept(earlier, s, combine(s, np.zeros(3, np.int64))[0], h2)


@pytest.mark.parametrize("change", ["value", "label", "null", "deleted group"])
def test_a_changed_member_is_refused_with_no_fresh_grouping(change):
    rid, group = np.arange(1, 7), np.array([0, 0, 0, 1, 1, 1])
    earlier = _logged(group, 2, row_hashes(rid, _frame()))
    cols, now = _frame(), rid
    if change == "value":
        cols = _frame(bmi=(20.5, 31.0, 25.25, 22.0, 27.5, 30.5))
    elif change == "label":
        cols = _frame(sex=(0, 1, 1, 0, 1, 1))
    elif change == "null":
        cols[0].null = np.array([0, 0, 1, 0, 0, 0], bool)
    else:
        now, cols = rid[:3], [_Col(c.kind, c.values[:3], dictionary=c.dictionary) for c in cols]
    s = split(now, earlier)
    with pytest.raises(DeidError) as e:
        check_moments_kept(earlier, s, s.group, row_hashes(now, cols))
    assert e.value.sqlstate == "DE001" and e.value.hint and e.value.no_fresh_grouping


def test_an_earlier_release_without_a_digest_keeps_nothing():
    rid = np.arange(1, 7)
    earlier = KeptGroups(1, rid, np.array([1, 1, 1, 2, 2, 2]))
    s = split(rid, earlier)
    with pytest.raises(DeidError) as e:
        check_moments_kept(earlier, s, s.group, row_hashes(rid, _frame()))
    assert not getattr(e.value, "no_fresh_grouping", False)
