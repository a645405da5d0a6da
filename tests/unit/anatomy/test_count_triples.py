"""The count-table check's comparison of (group, value key, count) triples
(verify/shared/count_tables.py same_triples) against a plain sorted comparison, and the labels
it keys a table's values by (used_labels)."""
import numpy as np
import pytest

from deid.verify.shared.count_tables import same_triples, used_labels


def reference(got, want):
    """Equal as multisets: both sorted as rows of three numbers."""
    a = sorted(zip(*[np.asarray(x).tolist() for x in got]))
    b = sorted(zip(*[np.asarray(x).tolist() for x in want]))
    return a == b


def triples(rng, n, groups=50, values=(-2 ** 31, 2 ** 31 - 1)):
    g = rng.integers(0, groups, n)
    v = rng.integers(values[0], values[1], n, endpoint=True)
    c = rng.integers(1, 100, n)
    return g, v, c


def shuffled(t, rng):
    order = rng.permutation(len(t[0]))
    return tuple(np.asarray(x)[order] for x in t)


@pytest.mark.parametrize("seed", range(20))
def test_agrees_with_a_sorted_comparison(seed):
    rng = np.random.default_rng(seed)
    want = triples(rng, int(rng.integers(0, 300)))
    got = shuffled(want, rng)
    assert same_triples(got, want) and reference(got, want)
    if len(want[0]):
        for column in range(3):            # one number changed in one row
            changed = [np.array(x) for x in got]
            changed[column][int(rng.integers(len(changed[0])))] += 1
            assert same_triples(tuple(changed), want) == reference(tuple(changed), want)
        dropped = tuple(x[1:] for x in got)
        assert not same_triples(dropped, want)


def test_repeated_keys_compare_their_counts_too():
    """A (group, value) twice: the comparison falls back to all three numbers."""
    want = (np.array([1, 1, 2]), np.array([5, 5, 7]), np.array([3, 4, 1]))
    assert same_triples((np.array([2, 1, 1]), np.array([7, 5, 5]), np.array([1, 4, 3])), want)
    assert not same_triples((np.array([2, 1, 1]), np.array([7, 5, 5]), np.array([1, 4, 4])), want)


def test_counts_move_between_values():
    """Counts swapped between two values of one group: not equal."""
    want = (np.array([1, 1]), np.array([5, 6]), np.array([3, 4]))
    assert not same_triples((np.array([1, 1]), np.array([5, 6]), np.array([4, 3])), want)


def test_numbers_beyond_int4_still_compare_exactly():
    want = (np.array([2 ** 40, 0]), np.array([1, -2 ** 31]), np.array([2, 3]))
    assert same_triples((np.array([0, 2 ** 40]), np.array([-2 ** 31, 1]), np.array([3, 2])), want)
    assert not same_triples((np.array([0, 2 ** 40 + 1]), np.array([-2 ** 31, 1]),
                             np.array([3, 2])), want)


def test_used_labels_are_the_non_null_labels_the_codes_use():
    dictionary = ["b", None, "a", "c"]
    assert used_labels(dictionary, np.array([2, 0, 2, 1, 4])) == ["a", "b"]
    assert used_labels(dictionary, np.array([], np.int64)) == []
