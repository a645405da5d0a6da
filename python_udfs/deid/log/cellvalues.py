"""Anatomy's part of the kept cells (log/cellstate.py): per sensitive attribute, each row's
value, and per cell the l it must keep -- so the rule's l check (composition.py _values_hold)
also runs in time of the rows.

A row's value is the same in every release that holds it (the rule refuses a change: the
group's counts would differ by that row alone), so one value per row and attribute stands for
all the releases. A history where two releases disagree (one let through with the rule
overridden) is marked conflicted, and never used: the rule crosses the releases themselves.
A cell's l for an attribute is the largest of the releases holding it (a release's l, or its
column_l for that attribute when smaller), kept once for every attribute no column_l names
(`default`) and once per named attribute. Pure numpy, no plpy.
"""
import json
from dataclasses import dataclass, field

import numpy as np

from . import cellstate
from .cellstate import Crossing, lookup


@dataclass
class Values:
    names: dict = field(default_factory=dict)     # attribute -> values, a code's value
    codes: dict = field(default_factory=dict)     # attribute -> code per state id (-1: none)
    default: np.ndarray = None                    # per cell: l for an attribute none names
    named: dict = field(default_factory=dict)     # attribute -> per cell: its l
    conflicted: bool = False


def l_of(l, column_l, attribute) -> int:
    """A release's l for one attribute (column_l: its per-attribute limits, or None)."""
    l = int(l or 0)
    limit = column_l.get(attribute) if isinstance(column_l, dict) else None
    return min(l, int(limit)) if limit is not None else l


def _bar(values, attribute, parent):
    """Per crossed cell, the l the earlier releases holding it ask for `attribute`."""
    base = values.named.get(attribute, values.default)
    if base is None or base.size == 0:
        return np.zeros(parent.size, np.int64)
    return np.where(parent >= 0, base[np.maximum(parent, 0)], 0)


def encode_new(values, attribute, rid, entry_values, entry_counts):
    """(row ids, codes) of a release's values of `attribute` (a value per entry of its RID
    set, rows per entry), in the kept code space (a value not seen yet gets a new code)."""
    names = values.names.setdefault(attribute, [])
    index = {v: i for i, v in enumerate(names)}
    per_entry = np.asarray([index.setdefault(v, len(index)) for v in entry_values], np.int64)
    names.extend(sorted(set(index) - set(names), key=index.get))
    return np.asarray(rid, np.int64), np.repeat(per_entry, np.asarray(entry_counts, np.int64))


def _row_codes(values, attribute, before_ids, after_ids):
    """The kept codes of `attribute` re-laid on the crossing's ids."""
    out = np.full(after_ids.size, -1, np.int64)
    old = values.codes.get(attribute)
    if old is not None and before_ids.size:
        out[lookup(after_ids, before_ids)] = old
    return out


def _distinct(cells, codes, count):
    """Per cell, how many distinct codes its rows hold (-1: no value, not counted)."""
    keep = codes >= 0
    width = int(codes.max()) + 1 if keep.any() else 1
    key = cells[keep] * width + codes[keep]
    if count * width <= 4 * key.size + 1024:       # few values: count, not sort
        present = np.bincount(key, minlength=count * width) > 0
        return present.reshape(count, width).sum(axis=1)
    return np.bincount(np.unique(key) // width, minlength=count)


def check(values, c: Crossing, before_ids, new, l, column_l):
    """(why, or None) for the new release's values: `new` {attribute: (row ids, codes)}."""
    for attribute, (rid, code) in new.items():
        rows = _row_codes(values, attribute, before_ids, c.after.ids)
        at = lookup(c.after.ids, rid)
        known = rows[at]
        if np.any((known >= 0) & (known != code)):
            return "a row's sensitive value changed since an earlier release"
        bar = _bar(values, attribute, c.parent)
        bar[c.held] = np.maximum(bar[c.held], l_of(l, column_l, attribute))
        if not bar.any():
            continue
        rows[at] = code
        if np.any((c.changed | c.held) & (_distinct(c.after.labels, rows, c.sizes.size) < bar)):
            return "a cell of the groupings' common refinement would hold fewer than l sensitive values"
    return None


def fold(values, c: Crossing, before_ids, new, l, column_l) -> Values:
    """The values with the new release folded in (after check(), or while rebuilding from the
    releases themselves: a disagreement then marks the history conflicted)."""
    out = Values(values.names, {}, None, {}, values.conflicted)
    for attribute in set(values.codes) | set(new):
        rows = _row_codes(values, attribute, before_ids, c.after.ids)
        if attribute in new:
            rid, code = new[attribute]
            at = lookup(c.after.ids, rid)
            out.conflicted |= bool(np.any((rows[at] >= 0) & (rows[at] != code)))
            rows[at] = np.where(rows[at] >= 0, rows[at], code)
        out.codes[attribute] = rows
    out.default = _bar(values, None, c.parent)
    out.default[c.held] = np.maximum(out.default[c.held], l_of(l, None, None))
    for attribute in set(values.named) | set((column_l or {}).keys()):
        bar = _bar(values, attribute, c.parent)
        bar[c.held] = np.maximum(bar[c.held], l_of(l, column_l, attribute))
        out.named[attribute] = bar
    return out


def encode(values: Values) -> bytes:
    """A JSON head (names, the order of the arrays) then the arrays, each in the narrowest
    of 1, 2 or 4 bytes per entry (codes shifted by one: -1, no value, is 0)."""
    attrs, named = sorted(values.codes), sorted(values.named)
    arrays = [values.codes[a] + 1 for a in attrs] + [values.default] + \
        [values.named[a] for a in named]
    parts = [cellstate.narrow(a) for a in arrays]
    head = json.dumps({"names": values.names, "codes": attrs, "named": named,
                       "conflicted": values.conflicted,
                       "sizes": [len(p) for p in parts]}).encode()
    return len(head).to_bytes(8, "big") + head + b"".join(parts)


def decode(data: bytes) -> Values:
    data = bytes(data)
    n = int.from_bytes(data[:8], "big")
    head = json.loads(data[8:8 + n])
    parts, at = [], 8 + n
    for size in head["sizes"]:
        parts.append(cellstate.widen(data[at:at + size]))
        at += size
    k = len(head["codes"])
    return Values(head["names"], {a: p - 1 for a, p in zip(head["codes"], parts[:k])},
                  parts[k], dict(zip(head["named"], parts[k + 1:])), head["conflicted"])
