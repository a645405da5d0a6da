"""log/cellvalues.py: anatomy's kept values and l per cell decide a new release's l check
(and its refusal of a changed value) exactly as the full crossing of every earlier release's
RID sets does (composition._values_hold over partition.py), on random, tie-heavy sequences
with per-attribute l, appended rows and values changed between releases."""
import numpy as np
import pytest

from deid.log import cellstate, cellvalues, composition, partition

ATTRS = ("dx", "tx")


def _release(rng, release_id, n):
    universe = np.arange(n + rng.integers(0, 5), dtype=np.int64)
    ids = universe[rng.random(universe.size) < rng.choice([0.6, 1.0])]
    size = int(rng.integers(2, 7))
    groups = (np.arange(ids.size) + int(rng.integers(0, size))) // size
    attrs = [a for a in ATTRS if rng.random() < 0.7] or ["dx"]
    column_l = {"tx": int(rng.integers(1, 3))} if rng.random() < 0.3 else None
    values = {}
    for a in attrs:
        v = (ids * (3 if a == "dx" else 5)) % int(rng.integers(2, 4))
        if rng.random() < 0.15:                      # a value updated since: changed rows
            v = np.where(rng.random(ids.size) < 0.1, v + 1, v)
        values[a] = v
    return dict(release_id=release_id, ids=ids, groups=groups, k=int(rng.choice([1, 2, 3])),
                l=int(rng.choice([0, 1, 2, 3])), column_l=column_l, values=values)


def _full(history, new):
    """The full computation's decision: refused or not."""
    layers = [partition.Layer(h["ids"], h["groups"], h["k"]) for h in history if h["ids"].size]
    if not layers:
        return False
    nl = partition.Layer(new["ids"], new["groups"], new["k"])
    c = partition.cells(layers, nl)
    if partition.too_small(c):
        return True
    every = layers + [nl]
    _, pos = partition.positions(every)
    kept = [h for h in history if h["ids"].size]
    for a, v in new["values"].items():
        for h in kept:
            if a in h["values"] and partition.changed_values(new["ids"], v, h["ids"], h["values"][a]):
                return True
        bar = np.zeros(c.sizes.size, np.int64)
        for h, p in zip(kept, pos):
            np.maximum.at(bar, c.rows[p], composition._l_of(h["l"], h["column_l"], a))
        bar[c.rows[pos[-1]]] = np.maximum(bar[c.rows[pos[-1]]],
                                          composition._l_of(new["l"], new["column_l"], a))
        if not bar.any():
            continue
        rid = np.concatenate([h["ids"] for h in kept + [new] if a in h["values"]])
        val = np.concatenate([h["values"][a] for h in kept + [new] if a in h["values"]])
        at = composition._position(every, pos, rid)
        if partition.too_few_values(c, val[at >= 0], at[at >= 0], bar):
            return True
    return False


def _codes(vals, release):
    return {a: cellvalues.encode_new(vals, a, release["ids"], [str(x) for x in v], np.ones(v.size))
            for a, v in release["values"].items()}


def _incremental(state, vals, new):
    """The fast path's decision, or None when the kept values are conflicted."""
    if vals.conflicted:
        return None
    c = cellstate.cross(state, new["ids"], new["groups"], new["k"], new["release_id"])
    if not c.released.any():
        return False
    if cellstate.too_small(c):
        return True
    return cellvalues.check(vals, c, state.ids, _codes(vals, new), new["l"],
                            new["column_l"]) is not None


@pytest.mark.parametrize("seed", range(6))
def test_kept_values_decide_as_the_full_crossing(seed):
    rng = np.random.default_rng(seed)
    compared = 0
    for _ in range(40):
        n = int(rng.integers(0, 30))
        history, state, vals = [], cellstate.empty(), cellvalues.Values()
        for step in range(int(rng.integers(1, 6))):
            new = _release(rng, step + 1, n)
            got = _incremental(state, vals, new)
            if got is not None:
                assert got == _full(history, new)
                compared += 1
            c = cellstate.cross(state, new["ids"], new["groups"], new["k"], new["release_id"])
            vals = cellvalues.fold(vals, c, state.ids, _codes(vals, new), new["l"],
                                   new["column_l"])
            state = c.after
            history.append(new)
            back = cellvalues.decode(cellvalues.encode(vals))
            assert back.conflicted == vals.conflicted and back.names == vals.names
            assert all(np.array_equal(back.codes[a], vals.codes[a]) for a in vals.codes)
    assert compared >= 60


def test_distinct_values_per_cell_by_counting_or_sorting():
    rng = np.random.default_rng(2)
    for cells, values, rows in ((5, 3, 40), (3000, 900, 50)):     # counted; sorted
        cell = rng.integers(0, cells, rows)
        code = rng.integers(-1, values, rows)
        want = [len({v for c, v in zip(cell, code) if c == i and v >= 0}) for i in range(cells)]
        assert cellvalues._distinct(cell, code, cells).tolist() == want
