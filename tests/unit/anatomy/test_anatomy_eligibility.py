"""partition.check_eligible (a sharded request's pre-check on each node) refuses exactly the
rows anatomize refuses before it splits, with the same error, from the sensitive codes alone."""
import numpy as np
import pytest

from deid.errors import DeidError
from deid.methods.anatomy.partition import anatomize, check_eligible


def outcome(f):
    try:
        f()
        return None
    except DeidError as e:
        return (e.sqlstate, e.message, e.detail, e.hint)


@pytest.mark.parametrize("seed", range(40))
def test_eligible_exactly_when_anatomize_gets_past_its_root(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 40))
    s = int(rng.integers(1, 3))
    sa = rng.integers(0, int(rng.integers(1, 5)), size=(n, s))
    qi = rng.integers(0, 10, size=(n, 2)).astype(float)
    K = int(rng.integers(2, 8))
    L = [None, 1, 2, 3, 4][int(rng.integers(0, 5))]
    model = "exponential_l" if L and rng.random() < 0.2 else "kl"
    column_l = {0: int(rng.integers(0, L + 1))} if L and model == "kl" and rng.random() < 0.3 else None
    pre = outcome(lambda: check_eligible(sa, K, L, column_l=column_l, model=model))
    full = outcome(lambda: anatomize(qi, sa, K, L, column_l=column_l, model=model))
    assert pre == full


def test_the_refusals_are_the_methods():
    with pytest.raises(DeidError) as e:
        check_eligible(np.zeros((3, 1), np.int64), 5, 2)
    assert "fewer rows than K = 5" in e.value.message
    with pytest.raises(DeidError) as e:
        check_eligible(np.zeros((30, 1), np.int64), 5, 2)
    assert e.value.sqlstate == "22023"
    check_eligible(np.arange(30).reshape(30, 1) % 3, 5, 2)
