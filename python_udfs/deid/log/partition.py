"""The cells several releases of one source induce on its rows, and which of them a new
release would make public: the pure part of the composition rule (log/composition.py).

A release is a *layer*: the sorted distinct ids of the rows it selected, and optionally a
label per id (its group, class or cluster). A reader who holds every release can add and
subtract whatever they publish per selection (totals) or per group (counts, moments): the
smallest sets of rows such arithmetic isolates are the *cells* -- rows carrying exactly the
same labels in every layer (absent counts as a label). A release is safe to add when every
cell it creates or holds has at least k rows (k: the largest of the releases holding it); a
cell it leaves as it was (an identical selection, a group kept as it was) tells nothing new,
so it is not held to the l of the new release.

A cell is a 64-bit signature per row, the XOR of a tag per (layer, label), then grouped. Ids are mapped to positions once: directly (id - min) when they are dense, which
row ids usually are, else through their sorted union. A selection is XORed over the span of its
positions and back off its gaps; a grouping, a gather and a scatter over its ids;
bench/release/bench_composition.py measures both.
"""
from dataclasses import dataclass

import numpy as np

_DENSE = 4                                     # id span up to 4x the rows: direct positions
_RUNS = 64                                     # a selection of so few runs: XOR by slices


@dataclass
class Layer:
    ids: np.ndarray                 # sorted distinct int64
    labels: np.ndarray = None       # int64 per id (its group), or None: one group
    k: int = 0                      # the k this release promised


def _splitmix(x):
    """splitmix64 of a uint64 array: a label's tag, far from every other label's."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def positions(layers):
    """(size of the position space, per layer its ids' positions)."""
    present = [l.ids for l in layers if l.ids.size]
    if not present:
        return 0, [np.zeros(0, np.int64) for _ in layers]
    lo = min(int(a[0]) for a in present)
    hi = max(int(a[-1]) for a in present)
    if hi - lo + 1 <= _DENSE * max(a.size for a in present) + 1024:
        return hi - lo + 1, [l.ids - lo for l in layers]
    union = np.unique(np.concatenate(present))
    return union.size, [np.searchsorted(union, l.ids) for l in layers]


def _mix(sig, pos, index, labels):
    """sig[pos] ^= tag(layer, label): a row's signature is the XOR of its (layer, label)
    tags, exact up to a 64-bit collision. A selection (one tag) is XORed over the span of
    its positions and back off the gaps (all rows but a few, a range of ids: a few slices
    and the gaps' positions, rather than a gather and a scatter of every position)."""
    salt = _splitmix(np.full(1, index + 1, np.uint64))
    if labels is not None:
        if labels.size and labels.min() >= 0 and labels.max() < 4 * labels.size + 1024:
            table = _splitmix(np.arange(int(labels.max()) + 1, dtype=np.uint64) ^ salt)
            sig[pos] ^= table[labels]              # a tag per group, gathered per row
        else:
            sig[pos] ^= _splitmix(labels.astype(np.uint64) ^ salt)
        return
    if pos.size == 0:
        return
    tag = salt[0]
    breaks = np.flatnonzero(np.diff(pos) != 1)
    lo, hi = int(pos[0]), int(pos[-1]) + 1
    if hi - lo > 2 * pos.size:                  # sparse in its span: each position
        sig[pos] ^= tag
        return
    sig[lo:hi] ^= tag
    if breaks.size <= _RUNS:
        for a, b in zip((pos[breaks] + 1).tolist(), pos[breaks + 1].tolist()):
            sig[a:b] ^= tag
        return
    sig[_gaps(pos, breaks)] ^= tag


def _gaps(pos, breaks):
    """The positions between pos[0] and pos[-1] that pos lacks (pos sorted, distinct)."""
    starts = pos[breaks] + 1
    lengths = pos[breaks + 1] - starts
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return offsets + np.arange(int(lengths.sum()))


@dataclass
class Cells:
    """The new partition's cells that the new release creates (splits or adds)."""
    sizes: np.ndarray               # rows per new cell
    k: np.ndarray                   # the k each must meet: the largest of its releases'
    rows: np.ndarray                # per position: the cell's index, -1 for no cell
    changed: np.ndarray             # bool per cell: not an earlier cell left as it was
    held: np.ndarray                # bool per cell: the new release holds its rows
    released: np.ndarray            # bool per cell: an earlier layer held its rows


def cells(earlier, new):
    """The cells of `earlier` + [new]; which of them the new layer creates."""
    layers = list(earlier) + [new]
    size, pos = positions(layers)
    sig = np.zeros(size, np.uint64)
    seen = np.zeros(size, bool)
    kmax = np.zeros(size, np.int64) if len({l.k for l in layers}) > 1 else None
    for i, (layer, p) in enumerate(zip(earlier, pos)):
        _mix(sig, p, i, layer.labels)
        seen[p] = True
        if kmax is not None:
            kmax[p] = np.maximum(kmax[p], layer.k)
    before = sig.copy()
    old_present = seen.copy()
    _mix(sig, pos[-1], len(earlier), new.labels)
    seen[pos[-1]] = True
    where = np.flatnonzero(seen)
    keys, first, inverse, sizes = np.unique(sig[where], return_index=True,
                                            return_inverse=True, return_counts=True)
    rows = np.full(size, -1, np.int64)
    rows[where] = inverse
    held = np.zeros(keys.size, bool)
    held[rows[pos[-1]]] = True
    return Cells(sizes, _cell_k(kmax, where, inverse, keys.size, new.k), rows,
                 _changed(before, old_present, where, first, sizes), held,
                 old_present[where][first])


def _cell_k(kmax, where, inverse, count, k_new):
    """Per cell, the largest k of the releases holding it (and the new one's)."""
    out = np.full(count, int(k_new), np.int64)
    if kmax is not None:
        np.maximum.at(out, inverse, kmax[where])
    return out


def _changed(before, old_present, where, first, sizes):
    """A cell is new unless it is exactly an earlier cell: its rows were released, and its
    earlier cell holds no other row."""
    old = before[where]
    present = old_present[where]
    old_keys, old_sizes = np.unique(old[present], return_counts=True)
    lead = first                                   # one row of each new cell
    at = np.searchsorted(old_keys, old[lead])
    at = np.minimum(at, max(old_keys.size - 1, 0))
    same = present[lead] & (old_keys.size > 0)
    if old_keys.size:
        same &= (old_keys[at] == old[lead]) & (old_sizes[at] == sizes)
    return ~same


def too_small(c):
    """Whether a cell the new release creates, or holds, has fewer rows than its k (the
    largest k of the releases holding it: a cell left as it was but now held by a release
    of a larger k would break that release's promise)."""
    return bool(np.any((c.changed | c.held) & (c.sizes < c.k)))


def regroups(c):
    """Whether the new release splits an earlier cell (regroups rows already released): a
    cell it creates that holds rows an earlier layer held. Cells of rows new to every layer
    are new groups, not a regrouping."""
    return bool(np.any(c.changed & c.released))


def small_remainders(layers, new, k):
    """Whether a group of the new release joins rows an earlier layer released to fewer than
    k rows no earlier layer released: a cluster that is an earlier cluster (or a union of them)
    plus 0 < r < k new rows publishes counts whose difference with the earlier release's is
    about those r rows alone."""
    if new.ids.size == 0 or new.labels is None:
        return False
    released = np.zeros(new.ids.size, bool)
    for layer in (x for x in layers if x.ids.size):
        at = np.minimum(np.searchsorted(layer.ids, new.ids), layer.ids.size - 1)
        released |= layer.ids[at] == new.ids
    _, group = np.unique(new.labels, return_inverse=True)
    old = np.bincount(group, weights=released, minlength=group.max() + 1)
    fresh = np.bincount(group, weights=~released, minlength=group.max() + 1)
    return bool(np.any((old > 0) & (fresh > 0) & (fresh < k)))


def small_held_cells(c, layers, new):
    """Whether the new release holds a cell of fewer rows than its k (the largest k of the
    releases holding it) that is not one whole group of some release: earlier releases at a
    smaller k may single such a cell out between them (a group grown by a few rows, then
    grown again), and this release's counts would then be about it under a larger k. A cell
    that is a whole group of one release is that release's own group, published as such."""
    small = c.held & (c.sizes < c.k)
    if not small.any():
        return False
    whole = np.zeros(c.sizes.size, bool)
    _, pos = positions(list(layers) + [new])
    for layer, p in zip(list(layers) + [new], pos):
        whole |= _whole_groups(c, p, layer.labels)
    return bool(np.any(small & ~whole))


def _whole_groups(c, pos, labels):
    """Per cell: whether it is exactly one group of a layer (positions `pos`, `labels`)."""
    out = np.zeros(c.sizes.size, bool)
    if pos.size == 0:
        return out
    cell = c.rows[pos]
    _, group = np.unique(labels if labels is not None else np.zeros(pos.size, np.int64),
                         return_inverse=True)
    n = int(group.max()) + 1
    lo = np.full(n, np.iinfo(np.int64).max, np.int64)
    hi = np.full(n, -1, np.int64)
    np.minimum.at(lo, group, cell)
    np.maximum.at(hi, group, cell)
    size = np.bincount(group, minlength=n)
    one = (lo == hi) & (lo >= 0)
    one[one] &= c.sizes[lo[one]] == size[one]
    out[lo[one]] = True
    return out


def too_few_values(c, values, pos_of_values, l):
    """Whether a cell the new release creates or holds has fewer distinct values than its bar
    `l` (one number, or one per cell): `values` (codes) of the rows at positions
    `pos_of_values` (rows without a known value count as none)."""
    cell = c.rows[pos_of_values]
    keep = cell >= 0
    pairs = np.unique(np.stack([cell[keep], np.asarray(values, np.int64)[keep]]), axis=1)
    distinct = np.bincount(pairs[0], minlength=c.sizes.size)
    return bool(np.any((c.changed | c.held) & (distinct < l)))


def changed_values(rid, values, rid_before, values_before):
    """Whether a row both arrays hold carries another value now than before (value codes of
    one code space; rows unsorted). Its group's counts would differ by that change alone."""
    if rid.size == 0 or rid_before.size == 0:
        return False
    order = np.argsort(rid_before, kind="stable")
    ids, vals = rid_before[order], np.asarray(values_before, np.int64)[order]
    at = np.minimum(np.searchsorted(ids, rid), ids.size - 1)
    both = ids[at] == rid
    return bool(np.any(vals[at[both]] != np.asarray(values, np.int64)[both]))
