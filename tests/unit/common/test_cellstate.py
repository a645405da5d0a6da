"""log/cellstate.py: the composition rule's cells kept as a label per row decide every new
release exactly as the full crossing of all earlier releases does (partition.py), on random,
tie-heavy and degenerate sequences -- and a state that does not cover exactly the releases
the rule reads (one dropped from it, a history cleared) is refused, since its decisions differ."""
import numpy as np
import pytest

from deid.log import cellstate, partition


def _full(earlier, new):
    """The full computation's decisions: partition.cells over every earlier layer."""
    layers = [partition.Layer(ids, groups, k) for _, ids, groups, k in earlier]
    c = partition.cells(layers, partition.Layer(new[1], new[2], new[3]))
    return (partition.too_small(c), partition.regroups(c),
            partition.small_remainders(layers, partition.Layer(new[1], new[2], new[3]), new[3]))


def _incremental(state, new):
    c = cellstate.cross(state, new[1], new[2], new[3], new[0])
    return (cellstate.too_small(c), cellstate.regroups(c), cellstate.small_remainders(c, new[3]))


def _release(rng, release_id, n, style, grouped):
    """One random release of a source of ids 0..n-1 (with gaps and appended rows)."""
    universe = np.arange(n + rng.integers(0, 6), dtype=np.int64) * (1 + (style == "sparse") * 7)
    if style == "ties":
        keep = rng.random(universe.size) < rng.choice([0.0, 0.5, 1.0])
    elif style == "band":
        lo = rng.integers(0, universe.size + 1)
        keep = np.ones(universe.size, bool)
        keep[lo:lo + rng.integers(0, 6)] = False
    elif style == "degenerate":
        keep = np.zeros(universe.size, bool)
        keep[: rng.integers(0, 3)] = True
    else:
        keep = rng.random(universe.size) < rng.random()
    ids = universe[keep]
    groups = None
    if grouped and ids.size:
        size = int(rng.integers(1, 6))
        groups = (np.arange(ids.size) + int(rng.integers(0, size))) // size
        if style == "ties":
            groups = groups * 0 + int(rng.integers(0, 3))
        elif rng.random() < 0.3:
            groups = rng.integers(0, 4, ids.size)
    k = int(rng.choice([1, 2, 3, 5])) if style != "ties" else 3
    return (release_id, ids, groups, k)


STYLES = ["random", "ties", "band", "degenerate", "sparse"]


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("style", STYLES)
def test_incremental_decides_as_the_full_crossing(style, grouped):
    rng = np.random.default_rng(2 * STYLES.index(style) + grouped)
    cases = 0
    for _ in range(60):
        n = int(rng.integers(0, 40))
        history, state = [], cellstate.empty()
        for step in range(int(rng.integers(1, 7))):
            new = _release(rng, step + 1, n, rng.choice([style, style, "random"]), grouped)
            if history and rng.random() < 0.3:          # an earlier release again: kept
                new = (step + 1,) + history[int(rng.integers(0, len(history)))][1:]
            assert _incremental(state, new) == _full(history, new)
            cases += 1
            history.append(new)
            state = cellstate.cross(state, *new[1:], new[0]).after
            assert cellstate.usable(state, [h[0] for h in history])
    assert cases >= 60


def test_the_state_is_the_fold_in_any_order_of_the_same_releases():
    rng = np.random.default_rng(7)
    for _ in range(100):
        history = [_release(rng, i + 1, 30, "random", True) for i in range(4)]
        new = _release(rng, 9, 30, "random", True)
        a = cellstate.fold_all(history)
        b = cellstate.fold_all(history[::-1])
        assert _incremental(a, new) == _incremental(b, new) == _full(history, new)


def _stale_differs(rng, drop):
    """A state folded without one of the releases (a drop from it, or a cleared history
    rebuilt on the wrong side) decides some release otherwise than the full crossing."""
    history = [_release(rng, i + 1, 25, "random", False) for i in range(3)]
    new = _release(rng, 9, 25, "random", False)
    stale = cellstate.fold_all([h for i, h in enumerate(history) if i != drop])
    assert not cellstate.usable(stale, [h[0] for h in history])
    return _incremental(stale, new) != _full(history, new)


def test_a_stale_state_is_refused_and_would_decide_otherwise():
    rng = np.random.default_rng(11)
    differing = sum(_stale_differs(rng, int(rng.integers(0, 3))) for _ in range(300))
    assert differing > 0      # so a stale state must never be used: usable() says no


def test_a_cleared_history_needs_another_state():
    rng = np.random.default_rng(5)
    history = [_release(rng, i + 1, 20, "random", True) for i in range(3)]
    state = cellstate.fold_all(history)
    assert cellstate.usable(state, [1, 2, 3]) and cellstate.usable(state, [3, 1, 2])
    assert not cellstate.usable(state, [3])              # releases 1 and 2 cleared
    assert not cellstate.usable(state, [1, 2, 3, 4])     # a release folded nowhere
    assert not cellstate.usable(None, [])


def test_tracker_in_three_requests():
    u, v, x = np.arange(0, 20), np.arange(20, 40), np.array([99])
    r1, r2, r3 = [np.unique(np.concatenate(p)) for p in ((u, x), (u, v, x), (v, x))]
    state = cellstate.fold_all([(1, r1, None, 5)])
    assert not cellstate.too_small(cellstate.cross(state, r2, None, 5, 2))
    state = cellstate.fold_all([(1, r1, None, 5), (2, r2, None, 5)])
    assert cellstate.too_small(cellstate.cross(state, r3, None, 5, 3))


def test_a_stored_state_reads_back_as_it_was():
    rng = np.random.default_rng(3)
    for style in STYLES:
        state = cellstate.fold_all([_release(rng, i + 1, 50, style, True) for i in range(4)])
        back = cellstate.decode(state.covers.tolist(), cellstate.encode(state))
        for field in ("covers", "ids", "labels", "cell_k"):
            assert np.array_equal(getattr(back, field), getattr(state, field))
