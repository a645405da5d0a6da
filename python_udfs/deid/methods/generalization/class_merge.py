"""The class table of 002 sec. 4.5 step 1 over rows that several nodes hold (global recoding
over shards): each node counts its own rows' classes over its own dictionary of the values
present (:func:`node_classes`); the coordinator unites the dictionaries, maps every node's codes
into the union and sums the counts of equal classes (:func:`merge_classes`).  The search of
002 sec. 4.5 step 3 (generalize.greedy / lattice.optimal) then runs on the merged table exactly
as on the class table of the union of the rows: a class table is all it reads (the count of
every distinct combination of level-0 values), and summing the nodes' counts of a combination
gives its count over the union.

A node's table travels as bytes (:func:`pack` / :func:`unpack`): a JSON header (the labels of
the values present, per quasi-identifier) and the codes and counts as little-endian integers of
the narrowest width that holds them.  Pure numpy, no SQL.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

import numpy as np

from ...errors import DeidError, INVALID_PARAMETER_VALUE
from .class_table import _MAX_BITS, _group, _merge_keys
from .plugin import class_table

__all__ = ["NodeClasses", "node_classes", "merge_classes", "pack", "unpack"]

_MAGIC = b"DGC1"
_HINT = "The nodes must run the same deid version; run the request again."


@dataclass
class NodeClasses:
    """A class table with its own dictionaries: ``leaves[j]`` the level-0 labels of
    quasi-identifier j (distinct), ``codes`` (classes, d) int64 indexes into them, ``counts``
    (classes,) the rows of each class (>= 1)."""

    leaves: list
    codes: np.ndarray
    counts: np.ndarray
    names: list = None        # the quasi-identifiers, in column order (None: unnamed)

    @property
    def rows(self) -> int:
        return int(self.counts.sum())


def node_classes(codes, leaves, names=None) -> NodeClasses:
    """One node's class table (002 sec. 4.5 step 1): ``codes`` its rows' level-0 codes, one
    array per quasi-identifier, into ``leaves`` (that node's labels of the values present);
    ``names`` the quasi-identifiers."""
    leaves = [list(map(str, lv)) for lv in leaves]
    names = None if names is None else list(names)
    if len(codes) != len(leaves):
        raise DeidError(INVALID_PARAMETER_VALUE, "one code array per quasi-identifier is needed",
                        hint=_HINT)
    if not len(codes) or not len(codes[0]):
        return NodeClasses(leaves, np.zeros((0, len(leaves)), np.int64), np.zeros(0, np.int64),
                           names)
    classes, counts = class_table([np.asarray(c, np.int64) for c in codes],
                                  [max(len(lv), 1) for lv in leaves])
    return NodeClasses(leaves, classes.astype(np.int64), counts.astype(np.int64), names)


def merge_classes(parts) -> NodeClasses:
    """The class table of the union of the nodes' rows: per quasi-identifier the sorted union
    of the nodes' labels, every node's codes mapped into it (np.searchsorted), equal classes
    merged with their counts summed (merge() of 002 sec. 4.5).  A node with no rows adds
    nothing.  Classes come out in the packed key's order, leaves sorted."""
    parts = list(parts)
    if not parts:
        raise DeidError(INVALID_PARAMETER_VALUE, "no node's class table to merge", hint=_HINT)
    d, names = len(parts[0].leaves), parts[0].names
    if any(len(p.leaves) != d or p.codes.shape[1:] != (d,) or p.names != names for p in parts):
        raise DeidError(INVALID_PARAMETER_VALUE,
                        "the nodes' class tables are over different quasi-identifiers", hint=_HINT)
    union = [np.unique(np.concatenate([np.asarray(p.leaves[j], dtype=object).astype(str)
                                       for p in parts] + [np.array([], dtype=str)]))
             for j in range(d)]
    sizes = [max(len(u), 1) for u in union]
    leaves = [u.tolist() for u in union]
    live = [p for p in parts if p.counts.size]
    if not live:
        return NodeClasses(leaves, np.zeros((0, d), np.int64), np.zeros(0, np.int64), names)
    maps = [[np.searchsorted(union[j], np.asarray(p.leaves[j], dtype=str)) for j in range(d)]
            for p in live]
    if math.prod(sizes) < (1 << _MAX_BITS):
        return _merge_packed(live, maps, sizes, leaves, names)
    cols = [np.stack([m[j][p.codes[:, j]] for j in range(d)], axis=1) if d else p.codes
            for p, m in zip(live, maps)]
    codes, summed = _group(np.concatenate(cols), np.concatenate([p.counts for p in live]), sizes)
    return NodeClasses(leaves, codes, summed.astype(np.int64), names)


def _merge_packed(live, maps, sizes, leaves, names) -> NodeClasses:
    """merge_classes where one int64 holds a class (the product of the union's sizes below
    2**62): every node's classes packed straight into mixed-radix keys in the union's codes,
    merged by one bincount or one sort of keys and counts packed together
    (class_table._merge_keys), decoded. The same classes and counts in the same order as
    _group over the code matrix (ascending key), at a fraction of its time and memory: no
    code matrix of all the nodes' classes, no argsort."""
    strides = np.cumprod([1] + sizes[:0:-1])[::-1].astype(np.int64)
    keys = []
    for p, m in zip(live, maps):
        key = np.zeros(p.counts.shape[0], np.int64)
        for j, stride in enumerate(strides):
            key += m[j][p.codes[:, j]] * stride
        keys.append(key)
    bound = math.prod(sizes)
    key, summed = _merge_keys(np.concatenate(keys), np.concatenate([p.counts for p in live]),
                              max(bound - 1, 1).bit_length())
    codes = np.empty((key.shape[0], len(sizes)), np.int64)
    for j, stride in enumerate(strides):
        codes[:, j] = (key // stride) % sizes[j]
    return NodeClasses(leaves, codes, np.asarray(summed, np.int64), names)


def _dtype(top: int):
    for t in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(t).max:
            return np.dtype(t).newbyteorder("<")
    return np.dtype("<i8")


def pack(nc: NodeClasses) -> bytes:
    """Bytes of a node's class table: magic, header length, JSON header, then per
    quasi-identifier its codes and last the counts, each at the narrowest width."""
    c = int(nc.counts.shape[0])
    widths = [_dtype(max(len(lv) - 1, 0)) for lv in nc.leaves]
    cw = _dtype(int(nc.counts.max()) if c else 0)
    header = json.dumps({"names": nc.names, "leaves": nc.leaves, "classes": c, "widths": [w.str for w in widths],
                         "counts": cw.str}).encode()
    body = [nc.codes[:, j].astype(w).tobytes() for j, w in enumerate(widths)]
    return b"".join([_MAGIC, struct.pack("<I", len(header)), header, *body,
                     nc.counts.astype(cw).tobytes()])


def unpack(buf) -> NodeClasses:
    """The inverse of :func:`pack`; refuses bytes it did not write."""
    buf = bytes(buf)
    if buf[:4] != _MAGIC or len(buf) < 8:
        raise DeidError(INVALID_PARAMETER_VALUE, "a node's class table is not in deid's format",
                        hint=_HINT)
    n = struct.unpack("<I", buf[4:8])[0]
    try:
        h = json.loads(buf[8:8 + n])
        off, c, cols = 8 + n, int(h["classes"]), []
        for w in h["widths"]:
            dt = np.dtype(w)
            cols.append(np.frombuffer(buf, dt, c, off).astype(np.int64))
            off += c * dt.itemsize
        counts = np.frombuffer(buf, np.dtype(h["counts"]), c, off).astype(np.int64)
        if off + c * np.dtype(h["counts"]).itemsize != len(buf):
            raise ValueError("trailing bytes")
    except (ValueError, KeyError, TypeError) as e:
        raise DeidError(INVALID_PARAMETER_VALUE, "a node's class table is truncated or malformed",
                        detail=str(e), hint=_HINT) from None
    codes = np.stack(cols, axis=1) if cols else np.zeros((c, 0), np.int64)
    for j, lv in enumerate(h["leaves"]):
        if c and (codes[:, j].max() >= len(lv)):
            raise DeidError(INVALID_PARAMETER_VALUE, "a node's class table codes a value it does "
                            "not name", hint=_HINT)
    if c and counts.min() < 1:
        raise DeidError(INVALID_PARAMETER_VALUE, "a node's class table holds an empty class",
                        hint=_HINT)
    return NodeClasses(h["leaves"], codes, counts, h.get("names"))
