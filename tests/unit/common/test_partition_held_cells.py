"""partition.small_held_cells: a new disassociation release may not hold a cell smaller than
the largest k of the releases holding it, unless that cell is one whole group of a release
(found by the composition fuzzer: a class grown by a few records at a small k, then held by
a release at a larger k)."""
import numpy as np

from deid.log.partition import Layer, cells, small_held_cells


def layer(groups, k):
    """Layer of {label: ids}."""
    pairs = sorted((i, g) for g, ids in groups.items() for i in ids)
    return Layer(np.array([i for i, _ in pairs], np.int64),
                 np.array([g for _, g in pairs], np.int64), k)


def held_small(earlier, new):
    return small_held_cells(cells(earlier, new), earlier, new)


def test_a_class_grown_by_few_at_a_small_k_then_held_at_a_larger_k():
    r0 = layer({0: [1, 2], 1: range(3, 11)}, 5)                       # 2 code-less of 1-10
    r1 = layer({0: [1, 2, 11, 12, 13, 14], 1: list(range(3, 11)) + list(range(15, 21))}, 3)
    r3 = layer({0: [1, 2, 11, 12, 13, 14] + list(range(21, 27)),
                1: list(range(3, 11)) + list(range(15, 21)) + list(range(27, 33))}, 6)
    assert not held_small([r0], r1)            # r1 alone: 4 new rows >= its k of 3
    assert held_small([r0, r1], r3)            # {11..14}: 4 rows, held at k = 6


def test_kept_groups_and_new_groups_of_new_rows_pass():
    month1 = layer({0: range(1, 7), 1: range(7, 13)}, 5)
    month2 = layer({0: range(1, 7), 1: range(7, 13), 2: range(13, 19)}, 5)
    month3 = layer({0: range(1, 7), 1: range(7, 13), 2: range(13, 19), 3: range(19, 22)}, 5)
    assert not held_small([month1], month2)
    assert not held_small([month1, month2], month3)       # a new cluster of 3: its own group


def test_a_small_group_of_an_earlier_release_kept_whole_passes():
    r0 = layer({0: [1, 2], 1: range(3, 11)}, 5)
    assert not held_small([r0], layer({0: [1, 2], 1: range(3, 11)}, 8))


def test_random_kept_clusterings_never_hold_a_small_cell():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(2, 60))
        labels = rng.integers(0, max(1, n // 4), n)
        first = Layer(np.arange(n, dtype=np.int64), labels, int(rng.integers(1, 9)))
        grown = int(rng.integers(0, 30))
        more = rng.integers(0, max(1, grown // 5) + 1, grown) + labels.max() + 1
        second = Layer(np.arange(n + grown, dtype=np.int64),
                       np.concatenate([labels, more]), int(rng.integers(1, 9)))
        assert not held_small([first], second)
