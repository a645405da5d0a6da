"""The composition rule's cells kept from one release to the next: a label per row, so a new
release is crossed with its source's history in time that grows with the rows, not with the
number of earlier releases (log/composition.py; stored by log/cellstore.py).

The cells of several releases (partition.py: rows that every release selected, or grouped,
alike) are a partition of the rows any of them held. Kept as a *state*: the sorted ids of
those rows, a cell label per id and, per cell, the largest k of the releases holding it. The
releases it covers are listed with it: it is the exact fold of those releases and of no
other, so a state whose list differs from the releases the rule must read (a history
cleared, a release dropped from the log, an audience that no longer meets, a release logged
with the rule overridden) is never used -- it is rebuilt from the releases themselves.

Crossing a state with a new release (its ids, and a group per id or none) refines each cell
by the new group: the same cells partition.cells finds over all the layers, found without
hashing (a pair of labels is a label), and the same decisions (too_small, regroups,
small_remainders), checked against partition.py on random and degenerate sequences
(tests/unit/common/test_cellstate.py). Pure numpy, no plpy.
"""
from dataclasses import dataclass

import numpy as np

from . import rowids

_DENSE = 4                          # id span up to 4x the rows: a direct lookup table


@dataclass
class State:
    covers: np.ndarray              # sorted release ids folded in
    ids: np.ndarray                 # sorted distinct int64: rows any of them held
    labels: np.ndarray              # int64 per id: its cell, 0..cells-1
    cell_k: np.ndarray              # int64 per cell: the largest k of the releases holding it


def empty() -> State:
    z = np.zeros(0, np.int64)
    return State(z, z, z, z)


@dataclass
class Crossing:
    """The cells of a state refined by a new release, and what the rule asks of them."""
    sizes: np.ndarray               # rows per cell
    k: np.ndarray                   # the k each must meet (the new release's or larger)
    changed: np.ndarray             # bool: not a cell of the state left as it was
    held: np.ndarray                # bool: the new release holds its rows
    released: np.ndarray            # bool: the state's rows (an earlier release held them)
    fresh_in_group: np.ndarray      # per new group: rows no earlier release held
    old_in_group: np.ndarray        # per new group: rows an earlier release held
    after: State                    # the state with the new release folded in
    cell_of_new: np.ndarray         # per new id, its cell
    parent: np.ndarray              # per cell, the state's cell it refines (-1: new rows)


def lookup(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Per id of `wanted`, its index in the sorted distinct `ids`, or -1."""
    wanted = np.asarray(wanted, np.int64)
    if ids.size == 0 or wanted.size == 0:
        return np.full(wanted.size, -1, np.int64)
    lo, hi = int(ids[0]), int(ids[-1])
    if hi - lo + 1 == ids.size:                 # every id of the span: no table needed
        if int(wanted.min()) >= lo and int(wanted.max()) <= hi:
            return wanted - lo
        return np.where((wanted >= lo) & (wanted <= hi), wanted - lo, -1)
    if hi - lo + 1 <= _DENSE * ids.size + 1024:
        table = np.full(hi - lo + 1, -1, np.int64)
        table[ids - lo] = np.arange(ids.size)
        inside = (wanted >= lo) & (wanted <= hi)
        out = np.full(wanted.size, -1, np.int64)
        out[inside] = table[wanted[inside] - lo]
        return out
    at = np.minimum(np.searchsorted(ids, wanted), ids.size - 1)
    return np.where(ids[at] == wanted, at, -1)


def _compact(keys: np.ndarray, bound: int):
    """(distinct keys, index of each key) -- by counting when the keys' range is small."""
    if keys.size and bound <= _DENSE * keys.size + 1024:
        present = np.bincount(keys, minlength=bound) > 0
        code = np.cumsum(present) - 1
        return np.flatnonzero(present), code[keys]
    return np.unique(keys, return_inverse=True)


def _group_codes(ids, groups):
    """The new release's groups as codes 0..n-1 (a selection: one group, 0)."""
    if groups is None or ids.size == 0:
        return np.zeros(ids.size, np.int64)
    g = np.asarray(groups, np.int64)
    lo = int(g.min())
    return _compact(g - lo, int(g.max()) - lo + 1)[1]


def _refine(labels, mark, cells, width):
    """(distinct (cell, new group) keys, index of each row's key): when every cell's rows
    fall in one new group (groups kept, a selection holding whole cells) the cells stay,
    found in time of the rows; else the pairs are compacted."""
    if labels.size:
        rep = np.empty(cells, np.int64)
        rep[labels] = np.arange(labels.size)          # a row of each cell
        first = mark[rep]
        if np.array_equal(mark, first[labels]):
            return np.arange(cells) * width + first + 1, labels
    return _compact(labels * width + mark + 1, cells * width)


def cross(state: State, ids: np.ndarray, groups, k: int, release_id: int) -> Crossing:
    """Refine the state's cells by a new release: `ids` sorted distinct, `groups` an int64
    group per id (None: one group, a selection), `k` its k."""
    ids = np.asarray(ids, np.int64)
    g = _group_codes(ids, groups)
    width = int(g.max()) + 2 if g.size else 1
    at = lookup(state.ids, ids)
    old = at >= 0
    every = bool(old.all())                     # no row new to the history: no masks
    mark = np.full(state.ids.size, -1, np.int64)
    if every:
        mark[at] = g
    else:
        mark[at[old]] = g[old]
    cells_before = state.cell_k.size
    old_keys, old_cell = _refine(state.labels, mark, cells_before, width)
    fresh_g = g[:0] if every else g[~old]
    fresh_groups, fresh_cell = _compact(fresh_g, width - 1)
    n_old = old_keys.size
    parent = old_keys // width
    held = np.concatenate([old_keys % width != 0, np.ones(fresh_groups.size, bool)])
    sizes = np.concatenate([np.bincount(old_cell, minlength=n_old),
                            np.bincount(fresh_cell, minlength=fresh_groups.size)])
    before = sizes[:n_old] if old_cell is state.labels else \
        np.bincount(state.labels, minlength=cells_before)
    changed = np.concatenate([sizes[:n_old] != before[parent],
                              np.ones(fresh_groups.size, bool)])
    released = np.concatenate([np.ones(n_old, bool), np.zeros(fresh_groups.size, bool)])
    earlier_k = np.concatenate([state.cell_k[parent], np.zeros(fresh_groups.size, np.int64)])
    if every:
        cell_of_new = old_cell[at]
    else:
        cell_of_new = np.empty(ids.size, np.int64)
        cell_of_new[old] = old_cell[at[old]]
        cell_of_new[~old] = n_old + fresh_cell
    after = _fold(state, ids, old, old_cell, cell_of_new,
                  np.where(held, np.maximum(earlier_k, int(k)), earlier_k), release_id)
    fresh_in_group = np.bincount(fresh_g, minlength=width - 1)
    if groups is None:              # a selection joins no group: no remainder to judge
        fresh_in_group[:] = 0
    return Crossing(sizes, np.maximum(earlier_k, int(k)), changed, held, released,
                    fresh_in_group, np.bincount(g if every else g[old], minlength=width - 1),
                    after, cell_of_new,
                    np.concatenate([parent, np.full(fresh_groups.size, -1, np.int64)]))


def _fold(state, ids, old, old_cell, cell_of_new, cell_k, release_id):
    """The state with the new release's rows and cells in it (rows new to the history join
    the id list in order)."""
    fresh = ids[~old]
    if fresh.size == 0:                         # no row new to the history: the same ids
        covers = np.union1d(state.covers, [int(release_id)]).astype(np.int64)
        return State(covers, state.ids, old_cell, np.asarray(cell_k, np.int64))
    union = np.concatenate([state.ids, fresh])
    labels = np.concatenate([old_cell, cell_of_new[~old]])
    if state.ids.size and fresh[0] <= state.ids[-1]:
        order = np.argsort(union, kind="stable")
        union, labels = union[order], labels[order]
    covers = np.union1d(state.covers, [int(release_id)]).astype(np.int64)
    return State(covers, union, labels.astype(np.int64), np.asarray(cell_k, np.int64))


def fold_all(layers) -> State:
    """The state of releases [(release_id, ids, groups or None, k)], folded in order."""
    state = empty()
    for release_id, ids, groups, k in layers:
        state = cross(state, ids, groups, k, release_id).after
    return state


def too_small(c: Crossing) -> bool:
    """partition.too_small: a cell the new release creates or holds has fewer than its k."""
    return bool(np.any((c.changed | c.held) & (c.sizes < c.k)))


def regroups(c: Crossing) -> bool:
    """partition.regroups: the new release splits rows already released otherwise."""
    return bool(np.any(c.changed & c.released))


def small_remainders(c: Crossing, k: int) -> bool:
    """partition.small_remainders: a new group joins released rows to 0 < r < k new ones."""
    return bool(np.any((c.old_in_group > 0) & (c.fresh_in_group > 0) &
                       (c.fresh_in_group < int(k))))


def usable(state, covers) -> bool:
    """Whether a stored state is the fold of exactly the releases `covers` (any order)."""
    if state is None:
        return False
    want = np.unique(np.asarray(list(covers), np.int64))
    return want.size == state.covers.size and bool(np.array_equal(want, state.covers))


def narrow(values: np.ndarray) -> bytes:
    """Non-negative ints in the narrowest of 1, 2 or 4 bytes (a width byte first): a
    history of few cells stores a byte per row. Not deflated: random cells would cost more
    time to deflate than the rule's whole check."""
    top = int(values.max()) if values.size else 0
    width = 1 if top < 1 << 8 else 2 if top < 1 << 16 else 4
    return bytes([width]) + values.astype(f"<u{width}").tobytes()


def widen(data: bytes) -> np.ndarray:
    return np.frombuffer(data, f"<u{data[0]}", offset=1).astype(np.int64)


def encode(state: State) -> bytes:
    """The stored body of a state (its covers are stored beside it): the ids as the
    selections are (log/rowids.py: runs, a bitmap of a dense span, or int8), the cell of
    each id, and each cell's k."""
    parts = [rowids.pack(state.ids), narrow(state.labels), narrow(state.cell_k)]
    return b"".join(len(p).to_bytes(8, "big") + p for p in parts)


def decode(covers, body: bytes) -> State:
    body, parts, at = bytes(body), [], 0
    while at < len(body):
        n = int.from_bytes(body[at:at + 8], "big")
        parts.append(body[at + 8:at + 8 + n])
        at += 8 + n
    ids, labels, cell_k = rowids.unpack(parts[0]), widen(parts[1]), widen(parts[2])
    if len(parts) != 3 or labels.size != ids.size:
        raise ValueError("a stored composition state does not add up")
    return State(np.unique(np.asarray(list(covers), np.int64)), ids, labels, cell_k)
