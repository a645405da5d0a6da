"""Rare records in a condensation release without a server: rare categories
generalized (hierarchy level, else one merged label that no value equals), released rows moved
off every source row shared by fewer than k rows with the moments still exact, tie-heavy,
skewed and degenerate inputs, and the independent verifier failing a release that shows a
rare value or copies a rare row."""
from dataclasses import replace

import numpy as np
import pytest

from deid.catalog.relations import Column
from deid.errors import DeidError
from deid.read.frame import EncodedColumn, Frame
from deid.catalog.hierarchies import Hierarchy
from deid.methods.condensation.condense import condense
from deid.methods.condensation.rare_values import (OTHER, ColumnRules, Release, avoid_rare_copies,
                                                   generalize_column)
from deid.plan import Labels
from deid.methods.condensation import plugin
from deid.verify.shared.cluster_moments import verify_condensation
from deid.verify.shared.rare_records import (check_rare_records, count_rare_copies, mapped_codes,
                                             stored_category_counts)
from test_condensation_plugin import SURV, relation, req


# --------------------------------------------------------------------------- generalize_column
def test_no_rare_value_keeps_the_column():
    g = generalize_column(["a", "b", None], [10, 12, 0], 10)
    assert g.mode == "none" and g.code_of.tolist() == [0, 1, 2]


def test_rare_values_merge_and_the_least_frequent_join_until_k():
    g = generalize_column(["A", "B", "C", "D", None], [50, 3, 2, 45, 0], 10)
    assert g.mode == "other" and g.labels == ["A", OTHER]
    assert g.code_of[:4].tolist() == [0, 1, 1, 1]          # B, C (5 rows) + D -> 50 rows


def test_the_merged_label_never_equals_a_value():
    g = generalize_column(["*", "**", "x", None], [1, 2, 30, 0], 3)
    assert g.labels == ["x", "***"] and "***" not in ("*", "**", "x")


def test_a_unique_valued_column_becomes_one_label():
    labels = [f"CODE-{i}" for i in range(600)] + [None]
    g = generalize_column(labels, [1] * 600 + [0], 10)
    assert g.labels == [OTHER] and set(g.code_of[:600].tolist()) == {0}


@pytest.mark.parametrize("null_rows,kept", [(30, True), (2, False)])
def test_null_as_a_category(null_rows, kept):
    g = generalize_column(["a", "b", "c", "d", None], [40, 40, 1, 9, null_rows], 10)
    assert g.mode == "other"
    if kept:     # NULL stays NULL: the code after the last label
        assert g.code_of[4] == len(g.labels) and g.labels == ["a", "b", OTHER]
    else:
        assert g.code_of[4] == g.code_of[2] == g.labels.index(OTHER)


def test_hierarchy_lowest_level_with_k_rows_per_label():
    levels = [["AB", "AB", "CD", "CD", None], ["*", "*", "*", "*", "*"]]
    g = generalize_column(["A", "B", "C", "D", None], [30, 30, 9, 1, 0], 10, levels)
    assert g.mode == "hierarchy" and g.level == 1 and g.labels == ["AB", "CD"]
    g = generalize_column(["A", "B", "C", "D", None], [30, 3, 30, 1, 0], 10, levels[:1] + [
        ["*"] * 5])
    assert g.level == 1
    g = generalize_column(["A", "B", "C", "D", None], [30, 3, 4, 1, 0], 10, levels)
    assert g.level == 2 and g.labels == ["*"]


# --------------------------------------------------------------------------- through the plug-in
def cat_frame(columns, n):
    """A Frame of int and category columns: {name: (kind, values, dictionary)}."""
    cols = {c: EncodedColumn(c, kind, np.asarray(v, np.int64), np.zeros(n, bool), d)
            for c, (kind, v, d) in columns.items()}
    return Frame(n, np.arange(1, n + 1, dtype=np.int64), cols)


def with_columns(r, types):
    rel = relation()
    rel.columns.update({c: Column(c, t, b, False, role="quasi_identifier")
                        for c, (t, b) in types.items()})
    return replace(r, rel=rel)


def released_rows(plan):
    return plan.evidence.released


def mapped_source(f, r, plan):
    gen = plan.evidence.generalized
    return np.stack([mapped_codes(c, f.columns[c], gen[c], r.k).astype(float) if c in gen
                     else f.columns[c].values.astype(float) for c in r.columns], axis=1)


def check(f, r, plan):
    """The independent checks: moments exact, category counts kept, no rare record."""
    ev = plan.evidence
    source = mapped_source(f, r, plan)
    sizes, rids = ev.membership
    cluster = np.empty(f.n, np.int64)
    cluster[np.searchsorted(f.rid, rids)] = np.repeat(np.arange(len(sizes)), sizes)
    cats = [j for j, kd in enumerate(ev.kinds) if kd == "categorical"]
    nums = [j for j, kd in enumerate(ev.kinds) if kd != "categorical"]
    verify_condensation(source, cluster, ev.released, ev.cluster, r.k,
                        moment_columns=nums, moment_values=ev.unrounded, count_columns=cats,
                        check_ranges=True)
    check_rare_records(source, ev.released, r.k, cats, list(r.columns))
    return source


INT2 = {"a": ("integer", "int4"), "b": ("integer", "int4"), "c": ("integer", "int4"),
        "dx": ("text", "text")}


def unique_row_table(n=300):
    """The plainest attack: one source-unique row (age 99, zip 10099, a secret code)."""
    i = np.arange(1, n + 1)
    age, zipc = 30 + (i * 7) % 40, 10000 + (i * 13) % 60
    dx = i % 4
    age[-1], zipc[-1], dx[-1] = 99, 10099, 4
    return cat_frame({"a": ("int", age, None), "b": ("int", zipc, None),
                      "dx": ("category", dx, ["A01", "B02", "C03", "D04", "SECRET"])}, n)


@pytest.mark.parametrize("seed", range(6))
def test_a_source_unique_row_releases_no_secret_and_no_unique_row(seed):
    f = unique_row_table()
    r = with_columns(req(("a", "b", "dx"), k=10, seed=seed), INT2)
    plan = plugin.run(f, r)
    dx = plan.tables[0].columns[2]
    assert isinstance(dx, Labels) and "SECRET" not in dx.labels
    rows = released_rows(plan)
    assert not ((rows[:, 0] == 99) & (rows[:, 1] == 10099)).any()
    check(f, r, plan)
    assert plan.metrics["categories"] == {"dx": {"mode": "other", "label": OTHER}}


def test_the_kernel_alone_copies_rare_rows():
    """What the plug-in repairs: the bare 004 kernel puts rows on rare source rows."""
    f = unique_row_table()
    X = np.stack([f.columns[c].values.astype(float) for c in ("a", "b")], axis=1)
    copies = sum(count_rare_copies(X, condense(X, ["int", "int"], 10, seed=s).synthetic, 10)
                 for s in range(3))
    assert copies > 0


@pytest.mark.parametrize("seed", range(4))
def test_tie_heavy_small_grids(seed):
    rng = np.random.default_rng(seed)
    n = 200
    f = cat_frame({"a": ("int", rng.integers(0, 6, n), None), "b": ("int", rng.integers(0, 4, n), None),
                   "c": ("int", rng.integers(0, 3, n), None),
                   "dx": ("category", rng.integers(0, 3, n), ["x", "y", "z"])}, n)
    r = with_columns(req(("a", "b", "c", "dx"), k=5, seed=seed), INT2)
    check(f, r, plugin.run(f, r))


def test_skewed_values_and_categories():
    rng = np.random.default_rng(5)
    n = 400
    a = np.minimum(rng.geometric(0.2, n), 40)
    dx = np.minimum(rng.geometric(0.5, n) - 1, 12)          # a long tail of rare codes
    f = cat_frame({"a": ("int", a, None), "b": ("int", rng.integers(0, 100, n), None),
                   "dx": ("category", dx, [f"d{i}" for i in range(13)])}, n)
    r = with_columns(req(("a", "b", "dx"), k=8, seed=2), INT2)
    plan = plugin.run(f, r)
    labels = plan.tables[0].columns[2].labels
    source = check(f, r, plan)
    counts = np.bincount(source[:, 2].astype(int))
    assert counts.min() >= 8 and labels[-1] == OTHER


def test_all_rows_identical_release_them_as_they_are():
    n = 30
    f = cat_frame({"a": ("int", np.full(n, 7), None), "b": ("int", np.full(n, 3), None),
                   "dx": ("category", np.zeros(n, np.int64), ["only"])}, n)
    r = with_columns(req(("a", "b", "dx"), k=10, seed=1), INT2)
    plan = plugin.run(f, r)
    assert np.array_equal(released_rows(plan), np.tile([7.0, 3.0, 0.0], (n, 1)))
    assert "categories" not in plan.metrics
    check(f, r, plan)


def test_one_category_and_k_equal_to_n():
    rng = np.random.default_rng(3)
    n = 12
    f = cat_frame({"a": ("int", rng.integers(0, 50, n), None), "b": ("int", rng.integers(0, 50, n), None),
                   "dx": ("category", np.zeros(n, np.int64), ["one"])}, n)
    r = with_columns(req(("a", "b", "dx"), k=n, seed=4), INT2)
    plan = plugin.run(f, r)
    assert plan.groups == 1
    check(f, r, plan)


def test_a_grid_of_only_rare_rows_is_refused():
    """Every permissible row equals a source row of fewer than k rows: nothing can be released."""
    a = np.array([0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1])
    b = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    f = cat_frame({"a": ("int", a, None), "b": ("int", b, None)}, 12)
    r = with_columns(req(("a", "b"), k=10, seed=1), INT2)
    with pytest.raises(DeidError) as e:
        plugin.run(f, r)
    assert e.value.sqlstate == "DE001" and e.value.hint and "12" not in str(e.value)


def test_nans_are_refused_before_anything_else():
    with pytest.raises(DeidError) as e:
        condense(np.array([[1.0, np.nan]] * 10), ["float", "float"], 3)
    assert e.value.sqlstate == "22004"


def test_member_hierarchy_generalizes_to_the_lowest_level():
    f = unique_row_table()
    h = Hierarchy("dx_h", "member", 3, [0, 0.5, 1],
                  members=[{"A01": "AB", "B02": "AB", "C03": "CDS", "D04": "CDS", "SECRET": "CDS"},
                           {"AB": "*", "CDS": "*"}])
    r = with_columns(req(("a", "b", "dx"), k=10, seed=3), INT2)
    r = replace(r, hierarchies={"dx": h})
    plan = plugin.run(f, r)
    assert plan.tables[0].columns[2].labels == ["AB", "CDS"]
    assert plan.metrics["categories"]["dx"] == {"mode": "hierarchy", "level": 1}
    check(f, r, plan)
    h.members[0].pop("SECRET")                  # a value the hierarchy lacks: merged instead
    plan = plugin.run(f, r)
    assert plan.metrics["categories"]["dx"]["mode"] == "other"


def test_interval_hierarchy_on_a_number():
    f = unique_row_table()
    h = Hierarchy("age_h", "interval", 4, [0, 0.3, 0.6, 1], low=0, high=200, widths=[10, 50])
    r = with_columns(req(("a", "b", "dx"), k=10, seed=3), INT2)
    r.rel.columns["a"].hierarchy = "age_h"
    r = replace(r, hierarchies={"a": h})
    plan = plugin.run(f, r)
    age = plan.tables[0].columns[0]
    assert isinstance(age, Labels) and plan.metrics["categories"]["a"]["mode"] == "hierarchy"
    assert all(lab.startswith("[") for lab in age.labels)
    check(f, r, plan)


def test_survival_columns_are_never_moved():
    rng = np.random.default_rng(1)
    n = 120
    f = cat_frame({"age": ("int", rng.integers(20, 30, n), None),
                   "t": ("int", rng.integers(1, 20, n), None),
                   "dead": ("int", (np.arange(n) % 3 == 0).astype(np.int64), None)}, n)
    r = req(("age", "t", "dead"), k=5, seed=2, survival_times="original", **SURV)
    plan = plugin.run(f, r)
    rows = released_rows(plan)
    assert np.array_equal(np.sort(rows[:, 1]), np.sort(f.columns["t"].values))
    assert rows[:, 2].sum() == f.columns["dead"].values.sum()


# --------------------------------------------------------------------------- avoid_rare_copies
def test_moves_keep_the_grain_the_range_and_the_unrounded_values():
    rng = np.random.default_rng(0)
    X = np.c_[rng.integers(0, 10, 100), np.round(rng.uniform(0, 1, 100), 2)].astype(float)
    res = condense(X, ["int", "float"], 5, seed=1)
    released = res.synthetic.copy()
    released[:, 1] = np.round(released[:, 1], 2)
    released[:7] = X[:7]                                      # plant copies of source rows
    unrounded = res.synthetic_unrounded.copy()
    avoid_rare_copies(X, res.cluster_id, Release(released, res.synthetic_cluster_id, unrounded),
                      5, ColumnRules(decimals=[0, 2], relative=[0.0, 0.0], float32=[False, False],
                                     categorical=[False, False], fixed=[False, False]),
                      np.random.default_rng(0))
    assert count_rare_copies(X, released, 5) == 0
    assert np.array_equal(unrounded, res.synthetic_unrounded)
    assert np.array_equal(released[:, 0], np.rint(released[:, 0]))
    assert np.array_equal(released[:, 1], np.round(released[:, 1], 2))
    assert (released.min(axis=0) >= X.min(axis=0)).all() and (released.max(axis=0) <= X.max(axis=0)).all()


# --------------------------------------------------------------------------- the verifier
def planned(seed=3):
    f = unique_row_table()
    r = with_columns(req(("a", "b", "dx"), k=10, seed=seed), INT2)
    plan = plugin.run(f, r)
    return f, r, plan, mapped_source(f, r, plan)


def test_verifier_fails_a_rare_released_value():
    f, r, plan, source = planned()
    released = released_rows(plan).copy()
    released[0, 2] = len(plan.evidence.generalized["dx"]["labels"])   # a code of no row
    source[-1, 2] = released[0, 2]                       # ... held by one source row
    with pytest.raises(DeidError) as e:
        check_rare_records(source, released, 10, [2], ["a", "b", "dx"])
    assert e.value.sqlstate == "DE002" and "SECRET" not in str(e.value)


def test_verifier_fails_a_copied_unique_row():
    f, r, plan, source = planned()
    released = released_rows(plan).copy()
    released[5] = source[-1]                             # the unique row, verbatim
    with pytest.raises(DeidError) as e:
        check_rare_records(source, released, 10, [2], ["a", "b", "dx"])
    assert e.value.sqlstate == "DE002" and "99" not in str(e.value)


def test_verifier_fails_a_mapping_that_releases_a_rare_value_under_its_own_name():
    f, r, plan, _ = planned()
    gen = dict(plan.evidence.generalized["dx"])
    gen["labels"] = ["A01", "SECRET"]                    # SECRET named, padded with B-D rows
    gen["map"] = {"A01": 0, "B02": 1, "C03": 1, "D04": 1, "SECRET": 1, None: 2}
    with pytest.raises(DeidError) as e:
        mapped_codes("dx", f.columns["dx"], gen, 10)
    assert e.value.sqlstate == "DE002"


class _Db:
    def __init__(self, rare):
        self.rare = rare

    def value(self, sql, params, types):
        return self.rare


def test_stored_category_counts():
    assert stored_category_counts(_Db(0), "t", ["dx"], 10)["category_columns"] == ["dx"]
    with pytest.raises(DeidError) as e:
        stored_category_counts(_Db(1), "t", ["dx"], 10)
    assert e.value.sqlstate == "DE002"


@pytest.mark.parametrize("seed", range(3))
def test_coarsened_times_move_last_when_nothing_else_can(seed):
    rng = np.random.default_rng(seed)
    n = 90
    f = cat_frame({"t": ("int", rng.integers(1, 40, n), None),
                   "dead": ("int", (np.arange(n) % 3 == 0).astype(np.int64), None)}, n)
    r = req(("t", "dead"), k=5, seed=seed, survival_times="coarsened", **SURV)
    plan = plugin.run(f, r)
    rows = released_rows(plan)
    source = np.stack([f.columns[c].values.astype(float) for c in ("t", "dead")], axis=1)
    assert count_rare_copies(source, rows, 5) == 0
    assert rows[:, 1].sum() == source[:, 1].sum()


@pytest.mark.parametrize("seed", range(3))
def test_recoded_times_compare_with_the_source_at_their_bins(seed):
    """Under 'recode' a released time is a bin's value: the rare-record rule compares the
    released rows with the source rows' bins (the release's representation), and the times
    never move (their pairs of >= k rows are the promise)."""
    from deid.verify.shared.survival_pairs import check_pairs, released_source_times
    rng = np.random.default_rng(seed)
    n = 90
    f = cat_frame({"t": ("int", rng.integers(1, 40, n), None),
                   "dead": ("int", (np.arange(n) % 3 == 0).astype(np.int64), None)}, n)
    plan = plugin.run(f, req(("t", "dead"), k=5, seed=seed, **SURV))
    rows = released_rows(plan)
    source = np.stack([f.columns[c].values.astype(float) for c in ("t", "dead")], axis=1)
    check_pairs(source[:, 0], source[:, 1], rows[:, 0], rows[:, 1], 5)
    source[:, 0] = released_source_times(source[:, 0], source[:, 1], rows[:, 0], rows[:, 1])
    assert count_rare_copies(source, rows, 5) == 0


@pytest.mark.parametrize("shape,seed", [((5, 6, 10), 4), ((5, 6, 10), 5), ((5, 6, 10), 13),
                                        ((6, 6, 2), 39), ((6, 6, 2), 55)])
def test_moving_rare_copies_keeps_every_clusters_category_counts(shape, seed):
    """A row left stuck in a round may have been another row's swap partner in that round; its
    random numeric move must not write back the category it held before the swap (found at
    1M rows: a cluster's sex counts changed and the verifier refused the release)."""
    rng = np.random.default_rng(seed)
    n = 400
    cluster = np.repeat(np.arange(n // 10), 10)
    source = np.c_[[rng.integers(0, top, n) for top in shape]].T.astype(float)
    released = source.copy()
    for c in range(n // 10):                     # each column shuffled within its cluster
        rows = np.flatnonzero(cluster == c)
        for j in range(3):
            released[rows, j] = released[rng.permutation(rows), j]

    def counts(x):
        return [np.bincount(cluster * 8 + x[:, j].astype(int), minlength=n * 8) for j in (0, 1)]

    before = counts(released)
    try:
        avoid_rare_copies(source, cluster, Release(released, cluster.copy(), released.copy()), 5,
                          ColumnRules(decimals=[-1, -1, 0], relative=[0, 0, 0],
                                      float32=[False] * 3, categorical=[True, True, False],
                                      fixed=[False] * 3),
                          np.random.default_rng(seed))
    except DeidError:
        pytest.fail("these inputs are satisfiable")
    for b, a in zip(before, counts(released)):
        assert np.array_equal(a, b)


def _stuck_table(seed, n=600, size=12):
    """Clusters whose rows sit on rare source rows with two categorical columns to swap."""
    rng = np.random.default_rng(seed)
    cluster = np.repeat(np.arange(n // size), size)
    source = np.c_[rng.integers(0, 4, n), rng.integers(0, 3, n), rng.integers(0, 40, n)].astype(float)
    released = source.copy()
    for c in range(n // size):                   # the categories shuffled within the cluster
        rows = np.flatnonzero(cluster == c)
        for j in (0, 1):
            released[rows, j] = released[rng.permutation(rows), j]
    return cluster, source, released


@pytest.mark.parametrize("seed", range(4))
def test_category_swaps_run_for_every_stuck_row_at_once(seed):
    """The swaps of a round are found for all its stuck rows together: every accepted swap
    exchanges one column's values of two rows of one cluster, each row in at most one swap, and
    both rows then equal no rare source row; the rows no swap frees stay as they were."""
    from deid.methods.condensation.rare_values import _members, _swaps, rare_keys, _keys, _member
    cluster, source, released = _stuck_table(seed)
    rare = rare_keys(source, 5)

    def is_rare(rows):
        return _member(_keys(rows), rare)

    stuck = np.flatnonzero(is_rare(released))
    assert stuck.size > 20
    before = released.copy()
    members = _members(cluster, int(cluster.max()) + 1)
    left = _swaps(released, stuck, cluster, members, [0, 1], is_rare)
    changed = np.flatnonzero((released != before).any(axis=1))
    assert changed.size and not is_rare(released[changed]).any()
    assert set(left.tolist()) <= set(stuck.tolist()) and left.size < stuck.size
    assert not set(left.tolist()) & set(changed.tolist())      # a row not freed is untouched
    assert not is_rare(np.delete(released, left, axis=0)).any()
    assert np.array_equal(released[:, 2], before[:, 2])
    for j in (0, 1):                                              # counts per cluster kept
        assert np.array_equal(np.bincount(cluster * 8 + released[:, j].astype(int)),
                              np.bincount(cluster * 8 + before[:, j].astype(int)))


@pytest.mark.parametrize("seed", range(6))
def test_count_rare_copies_matches_a_brute_force_count(seed):
    # short integer columns, one-decimal floats and wide columns (whose mixed-radix ids
    # overflow and are renumbered), released rows partly copied from the source
    rng = np.random.default_rng(seed)
    n, m = 200, 9 if seed % 2 else 3
    cols = [lambda s: rng.integers(0, 4, s).astype(float),
            lambda s: np.round(rng.normal(0, 1, s), 1),
            lambda s: rng.integers(0, 10 ** 9, s).astype(float) * 1e6]
    kinds = rng.integers(0, 3, m)
    source = np.column_stack([cols[kd](n) for kd in kinds])
    released = np.column_stack([cols[kd](150) for kd in kinds])
    released[:80] = source[rng.integers(0, n, 80)]
    held = {}
    for row in map(tuple, source):
        held[row] = held.get(row, 0) + 1
    for k in (2, 3, 5):
        expected = sum(0 < held.get(tuple(row), 0) < k for row in released)
        assert count_rare_copies(source, released, k) == expected
