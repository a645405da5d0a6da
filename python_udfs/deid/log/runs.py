"""The selections' part of the composition rule over runs of consecutive row ids: the same
answer as partition.too_small(partition.cells(...)) for layers without labels, in time that
grows with the number of runs, not of rows.

A selection is a sorted list of half-open runs [start, end) of ids (a range of ids, all rows
but a few: a handful of runs). All releases' run boundaries cut the id line into segments;
every row of a segment is selected by exactly the same releases, so a cell of the partition
(partition.py) is a union of segments with the same signature (the XOR of a 64-bit tag per
release covering it), and its size the sum of their lengths. A release whose ids are
scattered has as many runs as rows at worst: no slower than the rows themselves. Pure numpy.
"""
import numpy as np

from . import rowids


def of_ids(ids: np.ndarray) -> np.ndarray:
    """Sorted distinct int64 ids as runs: an (n, 2) array of [start, end)."""
    ids = np.asarray(ids, np.int64)
    if ids.size == 0:
        return np.zeros((0, 2), np.int64)
    cut = np.flatnonzero(np.diff(ids) != 1) + 1
    starts = ids[np.concatenate([[0], cut])]
    ends = ids[np.concatenate([cut - 1, [ids.size - 1]])] + 1
    return np.stack([starts, ends], axis=1)


def of_stored(data) -> np.ndarray:
    """The runs of a stored selection (log/rowids.py), without listing its ids where the layout
    holds runs already."""
    data = bytes(data or b"")
    if data[:1] == rowids.RUNS:
        pairs = np.frombuffer(data, ">i8", offset=1).astype(np.int64).reshape(-1, 2)
        return np.stack([pairs[:, 0], pairs[:, 0] + pairs[:, 1]], axis=1)
    if data[:1] == rowids.BITMAP:
        lo = int(np.frombuffer(data, ">i8", 1, 1)[0])
        bits = np.unpackbits(np.frombuffer(data, np.uint8, offset=9)).astype(np.int8)
        edge = np.diff(np.concatenate([[0], bits, [0]]))
        return np.stack([np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)], axis=1) + lo
    return of_ids(rowids.unpack(data))


def ids_of(runs: np.ndarray) -> np.ndarray:
    """The sorted ids of runs."""
    starts, lengths = runs[:, 0], runs[:, 1] - runs[:, 0]
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return offsets + np.arange(int(lengths.sum()), dtype=np.int64)


def _tags(count):
    """A distinct 64-bit tag per layer (splitmix64 of its index)."""
    x = np.arange(1, count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x * np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def too_small(earlier, new, k_new):
    """earlier: [(runs, k)], new: runs. Whether a cell the new selection creates (one that is
    not exactly an earlier cell) or holds has fewer rows than its k, the largest of the
    releases holding it -- partition.too_small of partition.cells, over segments."""
    layers = [r for r, _ in earlier] + [new]
    bounds = np.unique(np.concatenate([r.ravel() for r in layers] + [np.zeros(0, np.int64)]))
    if bounds.size < 2:
        return False
    tags = _tags(len(layers))
    before = _xor_cover(bounds, layers[:-1], tags[:-1])
    cov_new = _cover(bounds, [new]) > 0
    cov_old = _cover(bounds, layers[:-1]) > 0
    kmax = _kmax(bounds, earlier)
    length = np.diff(bounds)
    after = before ^ np.where(cov_new, tags[-1], np.uint64(0))
    seen = np.flatnonzero((cov_new | cov_old) & (length > 0))
    keys, first, inverse = np.unique(after[seen], return_index=True, return_inverse=True)
    size = np.bincount(inverse, weights=length[seen], minlength=keys.size)
    k = np.full(keys.size, int(k_new), np.int64)
    np.maximum.at(k, inverse, kmax[seen])
    held = np.bincount(inverse, weights=cov_new[seen], minlength=keys.size) > 0
    changed = ~_same_as_before(before, cov_old, length, seen[first], size)
    return bool(np.any((changed | held) & (size < k)))


def _events(bounds, layers):
    """Per layer, the segment indexes where its runs start and end."""
    return [(np.searchsorted(bounds, r[:, 0]), np.searchsorted(bounds, r[:, 1])) for r in layers]


def _cover(bounds, layers):
    """How many of `layers` cover each segment [bounds[i], bounds[i+1])."""
    ev = _events(bounds, layers)
    if not ev:
        return np.zeros(bounds.size - 1, np.int64)
    starts = np.concatenate([s for s, _ in ev])
    ends = np.concatenate([e for _, e in ev])
    delta = np.bincount(starts, minlength=bounds.size) - np.bincount(ends, minlength=bounds.size)
    return np.cumsum(delta)[:-1]


def _xor_cover(bounds, layers, tags):
    """Per segment, the XOR of the tags of the layers covering it: a prefix XOR over the runs'
    start and end events in segment order."""
    ev = _events(bounds, layers)
    if not ev:
        return np.zeros(bounds.size - 1, np.uint64)
    at = np.concatenate([np.concatenate([s, e]) for s, e in ev])
    val = np.concatenate([np.full(s.size + e.size, t, np.uint64) for (s, e), t in zip(ev, tags)])
    order = np.argsort(at, kind="stable")
    at, acc = at[order], np.bitwise_xor.accumulate(val[order])
    last = np.searchsorted(at, np.arange(bounds.size - 1), side="right") - 1
    return np.where(last >= 0, acc[np.maximum(last, 0)], np.uint64(0))


def _kmax(bounds, earlier):
    """Per segment, the largest k of the earlier layers covering it (0: none)."""
    out = np.zeros(bounds.size - 1, np.int64)
    for k in sorted({int(k) for _, k in earlier}):
        covered = _cover(bounds, [r for r, kk in earlier if int(kk) == k]) > 0
        out[covered] = k
    return out


def _same_as_before(before, cov_old, length, lead, size):
    """Per new cell (its lead segment): exactly an earlier cell -- its rows were all released
    and the earlier cell of the lead's signature holds no other row."""
    old = np.flatnonzero(cov_old & (length > 0))
    old_keys, inv = np.unique(before[old], return_inverse=True)
    old_size = np.bincount(inv, weights=length[old], minlength=old_keys.size)
    if old_keys.size == 0:
        return np.zeros(lead.size, bool)
    at = np.minimum(np.searchsorted(old_keys, before[lead]), old_keys.size - 1)
    return cov_old[lead] & (old_keys[at] == before[lead]) & (old_size[at] == size)
