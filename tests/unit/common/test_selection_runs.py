"""log/runs.py: the selections' check over runs gives partition.py's answer."""
import numpy as np

from deid.log import partition, rowids, runs


def _selection(rng, universe):
    shape = rng.integers(4)
    if shape == 0:                                   # all rows but a band
        lo = rng.integers(universe.size)
        return np.concatenate([universe[:lo], universe[lo + rng.integers(1, 12):]])
    if shape == 1:                                   # a range
        lo = rng.integers(universe.size)
        return universe[lo:lo + rng.integers(1, universe.size)]
    if shape == 2:                                   # scattered
        return universe[rng.random(universe.size) < rng.random()]
    return universe.copy()


def test_runs_agree_with_the_partition_on_random_selections():
    rng = np.random.default_rng(11)
    disagreements = []
    for case in range(600):
        n = int(rng.integers(5, 80))
        universe = np.unique(rng.integers(1, 3 * n, n)).astype(np.int64)
        grown = np.unique(np.concatenate([universe, rng.integers(1, 4 * n, 5)])).astype(np.int64)
        earlier = []
        for _ in range(int(rng.integers(1, 5))):
            ids = _selection(rng, universe if rng.random() < 0.7 else grown)
            if ids.size:
                earlier.append((ids, int(rng.choice([2, 3, 5, 8]))))
        new = _selection(rng, grown)
        if not earlier or not new.size:
            continue
        k = int(rng.choice([2, 3, 5, 8]))
        want = partition.too_small(partition.cells(
            [partition.Layer(i, None, kk) for i, kk in earlier], partition.Layer(new, None, k)))
        got = runs.too_small([(runs.of_stored(rowids.pack(i)), kk) for i, kk in earlier],
                             runs.of_ids(new), k)
        if want != got:
            disagreements.append(case)
    assert not disagreements


def test_runs_of_every_layout():
    ids = np.array([3, 4, 5, 9, 10, 20], np.int64)
    want = [[3, 6], [9, 11], [20, 21]]
    assert runs.of_ids(ids).tolist() == want
    for data in (rowids.pack(ids), b"I" + ids.astype(">i8").tobytes(),
                 rowids.pack(np.arange(3, 3000, dtype=np.int64))):
        assert runs.of_ids(rowids.unpack(data)).tolist() == runs.of_stored(data).tolist()
    assert runs.of_stored(rowids.pack(np.arange(1, 10 ** 6 + 1))).tolist() == [[1, 10 ** 6 + 1]]


def test_a_band_of_a_million_rows_is_a_few_bytes():
    ids = np.arange(1, 10 ** 6 + 1, dtype=np.int64)
    data = rowids.pack(np.concatenate([ids[:5000], ids[6000:]]))
    assert data[:1] == b"R" and len(data) == 1 + 2 * 16
    assert rowids.count(data) == 10 ** 6 - 1000


def test_many_runs_are_crossed_row_by_row(monkeypatch):
    """Scattered selections (more runs than the limit) take the partition's way: same answer."""
    from deid.log import composition
    rng = np.random.default_rng(3)
    universe = np.arange(1, 400, dtype=np.int64)
    layers = [(runs.of_ids(universe[rng.random(universe.size) < 0.5]), 3) for _ in range(3)]
    new = universe[rng.random(universe.size) < 0.5]
    want = runs.too_small(layers, runs.of_ids(new), 3)
    monkeypatch.setattr(composition, "RUNS_LIMIT", 10)
    assert composition._selections_too_small(layers, new, 3) == want
    assert runs.ids_of(runs.of_ids(new)).tolist() == new.tolist()
