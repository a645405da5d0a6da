"""log/partition.py: the cells several releases induce, and which ones a new release creates
(the composition rule's pure part), against a brute force over Python sets."""
import numpy as np

from deid.log.partition import Layer, cells, too_few_values, too_small, positions


def ids(*xs):
    return np.asarray(sorted(set(xs)), np.int64)


def test_tracker_third_release_creates_a_cell_of_one():
    u, v, x = range(0, 20), range(20, 40), 99
    r1, r2, r3 = ids(*u, x), ids(*u, *v, x), ids(*v, x)
    assert not too_small(cells([Layer(r1, k=5)], Layer(r2, k=5)))
    assert too_small(cells([Layer(r1, k=5), Layer(r2, k=5)], Layer(r3, k=5)))


def test_identical_selection_creates_no_cell():
    a = ids(*range(30))
    c = cells([Layer(a, k=5)], Layer(a, k=5))
    assert not c.changed.any() and not too_small(c)
    assert too_small(cells([Layer(a, k=5)], Layer(ids(*range(27)), k=5)))


def test_a_larger_k_holds_an_earlier_cell_to_it():
    a, b = ids(*range(30)), ids(*range(24))       # cells of 24 and 6
    assert not too_small(cells([Layer(a, k=5), Layer(b, k=5)], Layer(a, k=5)))
    assert too_small(cells([Layer(a, k=5), Layer(b, k=5)], Layer(a, k=7)))


def test_larger_k_of_the_releases_holding_a_cell():
    a, b = ids(*range(100)), ids(*range(5, 100))
    assert too_small(cells([Layer(a, k=10)], Layer(b, k=5)))
    assert not too_small(cells([Layer(a, k=5)], Layer(b, k=5)))


def test_groups_kept_or_unioned_create_only_the_new_rows_cells():
    old = Layer(ids(*range(20)), np.repeat([0, 1, 2, 3], 5), 5)
    kept = Layer(ids(*range(25)), np.repeat([0, 1, 2, 3, 4], 5), 5)
    union = Layer(ids(*range(20)), np.repeat([7, 8], 10), 5)
    assert not too_small(cells([old], kept)) and not too_small(cells([old], union))
    shifted = Layer(ids(*range(20)), np.repeat([0, 1, 2, 3], [6, 4, 5, 5]), 4)
    assert too_small(cells([old], shifted))


def test_values_per_cell():
    old = Layer(ids(*range(10)), np.repeat([0, 1], 5), 2)
    new = Layer(ids(*range(10)), np.asarray([0, 0, 1, 1, 1, 0, 0, 1, 1, 1]), 2)
    c = cells([old], new)
    _, pos = positions([old, new])
    values = np.asarray([0, 0, 1, 1, 1, 0, 1, 1, 1, 1])    # rows 2-4: one value only
    assert too_few_values(c, values, pos[-1], 2)
    assert not too_few_values(c, np.arange(10) % 2, pos[-1], 2)


def brute(layers, new):
    """Per row, its labels in every layer; cells created by the new layer below their k."""
    def label(layer, r):
        if r not in set(layer.ids.tolist()):
            return None
        return 0 if layer.labels is None else int(layer.labels[np.searchsorted(layer.ids, r)])

    def sig(ls, r):
        return tuple(label(l, r) for l in ls)
    rows = set().union(*(set(l.ids.tolist()) for l in layers + [new]))
    old_rows = set().union(*(set(l.ids.tolist()) for l in layers))
    new_cells, old_cells = {}, {}
    for r in rows:
        new_cells.setdefault(sig(layers + [new], r), set()).add(r)
        if r in old_rows:
            old_cells.setdefault(sig(layers, r), set()).add(r)
    old_sets = {frozenset(c) for c in old_cells.values()}
    for c in new_cells.values():
        k = max([new.k] + [l.k for l in layers if c & set(l.ids.tolist())])
        if (frozenset(c) not in old_sets or c & set(new.ids.tolist())) and len(c) < k:
            return True
    return False


def test_agrees_with_brute_force_dense_and_sparse():
    rng = np.random.default_rng(3)
    for trial in range(300):
        scale = 1 if trial % 2 else 10 ** 9          # dense ids, or sparse ones
        layers = []
        for _ in range(rng.integers(1, 5)):
            sel = np.unique(rng.integers(0, 40, rng.integers(0, 40))) * scale
            labels = rng.integers(0, 3, sel.size) if rng.random() < 0.5 else None
            layers.append(Layer(sel.astype(np.int64), labels, int(rng.integers(1, 6))))
        *earlier, new = layers
        if not earlier:
            continue
        assert too_small(cells(earlier, new)) == brute(earlier, new), trial


def test_selection_by_span_and_gaps_is_the_plain_xor():
    from deid.log import partition
    rng = np.random.default_rng(5)
    for density in (0.3, 0.6, 0.95, 0.999, 1.0):
        pos = np.flatnonzero(rng.random(5000) < density).astype(np.int64)
        sig = np.zeros(5000, np.uint64)
        partition._mix(sig, pos, 3, None)
        expect = np.zeros(5000, np.uint64)
        expect[pos] ^= partition._splitmix(np.full(1, 4, np.uint64))[0]
        assert np.array_equal(sig, expect), density


def test_regrouping_released_rows_and_new_rows_in_groups_of_their_own():
    from deid.log.partition import regroups
    old = Layer(ids(*range(6)), np.asarray([0, 0, 1, 1, 2, 2]), 2)
    assert not regroups(cells([old], Layer(ids(*range(6)), np.asarray([5, 5, 6, 6, 7, 7]), 2)))
    grown = Layer(ids(*range(9)), np.asarray([0, 0, 1, 1, 2, 2, 3, 3, 3]), 2)
    assert not regroups(cells([old], grown))
    assert regroups(cells([old], Layer(ids(*range(6)), np.asarray([0, 1, 0, 1, 2, 2]), 2)))


def test_values_bar_per_cell_and_cells_held_but_unchanged():
    old = Layer(ids(*range(6)), np.asarray([0, 0, 0, 1, 1, 1]), 3)
    same = Layer(ids(*range(6)), np.asarray([4, 4, 4, 5, 5, 5]), 3)
    c = cells([old], same)
    assert not c.changed.any() and c.held.all()
    _, pos = positions([old, same])
    values = np.asarray([0, 1, 2, 0, 1, 1])          # group 1: two values
    assert not too_few_values(c, values, pos[-1], np.asarray([2, 2]))
    assert too_few_values(c, values, pos[-1], np.asarray([3, 3]))    # held: a larger l


def test_a_cluster_of_released_rows_plus_fewer_than_k_new_ones_is_a_small_remainder():
    from deid.log.partition import small_remainders
    earlier = Layer(ids(*range(10)), np.zeros(10, np.int64), k=5)
    plus_three = Layer(ids(*range(20)), np.asarray([0] * 13 + [1] * 7, np.int64), k=5)
    assert small_remainders([earlier], plus_three, 5)
    kept_apart = Layer(ids(*range(20)), np.asarray([0] * 10 + [1] * 10, np.int64), k=5)
    assert not small_remainders([earlier], kept_apart, 5)
    plus_five = Layer(ids(*range(20)), np.asarray([0] * 15 + [1] * 5, np.int64), k=5)
    assert not small_remainders([earlier], plus_five, 5)
    assert not small_remainders([Layer(ids(), np.zeros(0, np.int64))], plus_three, 5)
