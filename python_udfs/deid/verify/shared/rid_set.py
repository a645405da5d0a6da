"""The ``deid.rid_set`` catalog: read it, and check it is well formed and
describes a partition with complete rows (steps 1-2 of ``check_kl``).

001 Theorem 3: for each sensitive value v of a group, RID(v) is the set of
the ids of the group's rows holding v; the catalog stores one entry per
(group, sensitive attribute, value) with that RID set.  It describes a
release only if

1. every (group, attribute, value) has exactly one entry and no RID set is
   empty (split sets would let the diversity check count a value twice);
2. rows are complete: in every group each rid appears exactly once per
   sensitive attribute (one value per attribute), and a rid is in one group
   only (001 Def. 1: each record belongs to exactly one group).

:func:`_parse_rid_set` checks both and returns a :class:`_RidSet`, the form
the (K, L) check (``kl.py``) and its certificate work on.
"""

import numpy as np

from .arrays import _dense_codes, _runs
from .failures import _bad, _fail, _show
from .readers import _factorize, _flat_rids, _int_array


class _RidSet:
    """``deid.rid_set`` parsed.

    * ``anames``: the sensitive attribute names, sorted; attribute code a is
      ``anames[a]``.
    * ``G``: number of groups; ``gvals`` (G,): the group id of each group code
      (ascending), ``sizes`` (G,): rows per group.
    * entries, one per (group, attribute, value): ``gcode`` (e,) group code,
      ``acode`` (e,) attribute code, ``lens`` (e,) RID-set size.
    * rows, in rid order: ``row_g`` (N,) group
      code, ``row_ent`` (N, m) the entry of the row's value per attribute.

    An empty catalog has only ``anames`` and ``G`` (= 0).
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _parse_rid_set(rid_group, rid_attribute, rid_value, rids, rid_counts=None):
    """Steps 1-2 of check_kl: a well-formed catalog with complete rows.

    Input as for :func:`check_kl` (columnar, one entry per (group,
    attribute, value); ``rids`` a list of arrays, or flat with
    ``rid_counts``).  Malformed input raises INVALID_PARAMETER_VALUE, a
    catalog that breaks step 1 or 2 VERIFICATION_FAILED naming the first
    failing group.  Returns a :class:`_RidSet`.
    """
    # read every column before checking any of them against the others
    entry_gid = _int_array(rid_group, "rid_group")
    n_entries = entry_gid.size
    attr_keys, entry_attr = _factorize(rid_attribute, "rid_attribute", n_entries)
    if any(a is None for a in attr_keys):
        _bad("rid_attribute must not contain NULL")
    values = _EntryValues(rid_value, n_entries)
    rid_set_size, flat_rids = _flat_rids(rids, rid_counts, n_entries)
    attr_names, entry_attr = _sort_attributes(attr_keys, entry_attr)
    if n_entries == 0:
        return _RidSet(anames=attr_names, G=0)

    group_ids, entry_group = _dense_codes(entry_gid)
    values.encode(group_ids.size * len(attr_names))
    entries = _Entries(group_ids, entry_group, attr_names, entry_attr, values)
    _check_one_entry_per_value(entries)
    _check_no_empty_rid_set(entries, rid_set_size)
    return _complete_rows(entries, rid_set_size, flat_rids)


# ---------------------------------------------------------------------------
# reading the columns
# ---------------------------------------------------------------------------

def _sort_attributes(attr_keys, entry_attr):
    """(attribute names sorted, each entry's attribute code in that order)."""
    names = [str(a) for a in attr_keys]
    if len(set(names)) != len(names):
        _bad("rid_attribute has two attributes with the same name")
    order = np.argsort(np.array(names, dtype=object), kind="stable") if names else \
        np.zeros(0, np.int64)
    code_of_key = np.empty(len(names), dtype=np.int64)
    code_of_key[order] = np.arange(len(names))
    if entry_attr.size:
        entry_attr = code_of_key[entry_attr]
    return [names[i] for i in order], entry_attr


class _EntryValues:
    """The ``rid_value`` column as integer codes, equal values equal codes.

    ``code`` (e,) holds each entry's value code in [0, ``n_codes``);
    :meth:`show` renders an entry's value for a message.  Integer values
    (codes, hashes) are kept as they are in ``ints`` and coded by
    :meth:`encode`; anything else (text, floats, NULL) is factorized on
    reading, into ``keys`` (the distinct values) and ``code``.
    """

    def __init__(self, rid_value, n_entries):
        self.ints = self.keys = self.code = self.n_codes = None
        if (isinstance(rid_value, np.ndarray) and rid_value.ndim == 1
                and rid_value.size == n_entries
                and (rid_value.dtype.kind == "i"
                     or (rid_value.dtype.kind == "u" and rid_value.dtype.itemsize < 8))):
            self.ints = rid_value.astype(np.int64, copy=False)
        else:
            self.keys, self.code = _factorize(rid_value, "rid_value", n_entries)
            self.n_codes = len(self.keys)

    def encode(self, n_group_attrs):
        """Code integer values: the offset from the smallest one while the
        (group, attribute, value) key of :func:`_check_one_entry_per_value`
        fits in int64 (``n_group_attrs`` = groups x attributes), else the
        rank among the distinct values."""
        if self.ints is None:
            return
        lowest = int(self.ints.min())
        span = int(self.ints.max()) - lowest + 1
        if n_group_attrs * span < 2 ** 62:
            self.code = self.ints - lowest if lowest else self.ints
            self.n_codes = span
        else:
            self.keys, self.code = _dense_codes(self.ints)
            self.n_codes = self.keys.size

    def show(self, i):
        """Entry i's value as a message shows it."""
        return _show(self.ints[i] if self.ints is not None else self.keys[self.code[i]])


class _Entries:
    """The catalog's entries, coded: ``group`` (e,) group code (``group_ids[code]``
    is the id), ``attr`` (e,) attribute code (``attr_names[code]``),
    ``values`` (an :class:`_EntryValues`)."""

    def __init__(self, group_ids, group, attr_names, attr, values):
        self.group_ids, self.group = group_ids, group
        self.attr_names, self.attr = attr_names, attr
        self.values = values

    def describe(self, i):
        """'group g: value v of attribute a' of entry i, for a message."""
        return (f"group {self.group_ids[self.group[i]]}: value {self.values.show(i)} of "
                f"attribute {self.attr_names[self.attr[i]]!r}")

    def first_by_group(self, candidates):
        """The entry among ``candidates`` with the smallest group code (the
        first of them on a tie)."""
        return candidates[np.argmin(self.group[candidates])]


# ---------------------------------------------------------------------------
# step 1: one entry per (group, attribute, value), no empty RID set
# ---------------------------------------------------------------------------

def _check_one_entry_per_value(entries):
    """Fail on two entries for one (group, attribute, value) (001 Theorem 3:
    a value has one RID set per group)."""
    group, attr, value = entries.group, entries.attr, entries.values.code
    n_attrs, n_values = len(entries.attr_names), entries.values.n_codes
    span = entries.group_ids.size * n_attrs * n_values
    if span < 2 ** 62:
        key = (group * n_attrs + attr) * n_values + value
        if span <= 16 * key.size + (1 << 20):      # a presence table: no sort
            seen = np.zeros(span, dtype=bool)
            seen[key] = True
            repeats = np.array([np.count_nonzero(seen) != key.size])
        else:
            sorted_key = np.sort(key)
            repeats = sorted_key[1:] == sorted_key[:-1]
        order = None
        if np.any(repeats):
            order = np.argsort(key, kind="stable")
            repeats = key[order][1:] == key[order][:-1]
    else:
        order = np.lexsort((value, attr, group))
        repeats = (group[order][1:] == group[order][:-1]) \
            & (attr[order][1:] == attr[order][:-1]) \
            & (value[order][1:] == value[order][:-1])
    if np.any(repeats):
        i = entries.first_by_group(order[1:][repeats])
        _fail(f"{entries.describe(i)} has more than one rid_set entry",
              detail="a value's RID set must be one entry (001 Theorem 3); split sets "
                     "would let the diversity check count one value twice")


def _check_no_empty_rid_set(entries, rid_set_size):
    """Fail on an entry whose RID set is empty."""
    if np.any(rid_set_size == 0):
        i = entries.first_by_group(np.flatnonzero(rid_set_size == 0))
        _fail(f"{entries.describe(i)} has an empty RID set")


# ---------------------------------------------------------------------------
# step 2: complete rows
# ---------------------------------------------------------------------------

class _RidSlots:
    """Every stored rid mapped to a slot in [0, ``n``): rid - smallest rid
    when the rids are dense (serial ids), else the rank among the distinct
    rids.  ``slot`` (T,) is the slot of each rid of the flat RID list."""

    def __init__(self, flat_rids, n_attrs):
        self.lowest = int(flat_rids.min())
        highest = int(flat_rids.max())
        if highest - self.lowest < 4 * (flat_rids.size // max(n_attrs, 1)) + 1024:
            if highest - self.lowest < 2 ** 31 - 1:       # int32 slots, no int64 temporary
                self.slot = np.empty(flat_rids.size, np.int32)
                np.subtract(flat_rids, self.lowest, out=self.slot, casting="unsafe")
            else:
                self.slot = flat_rids.astype(np.int64) - self.lowest
            self.n = highest - self.lowest + 1
            self.distinct = None
        else:
            self.distinct, slot = np.unique(flat_rids, return_inverse=True)
            self.slot = slot.astype(np.int64)
            self.n = self.distinct.size

    def rid(self, slot):
        """The row id of one slot, as a Python int."""
        return int(slot) + self.lowest if self.distinct is None else int(self.distinct[slot])

    def rids(self, slots):
        """The row ids of an array of slots."""
        return (slots + self.lowest) if self.distinct is None else self.distinct[slots]


def _complete_rows(entries, rid_set_size, flat_rids):
    """Step 2: every rid has exactly one value per attribute, all in one
    group (001 Def. 1).  Builds the rows of the :class:`_RidSet`."""
    n_entries = rid_set_size.size
    n_attrs = len(entries.attr_names)
    # for each rid of the flat list: its entry and that entry's attribute (int32 codes
    # where they fit: these are as long as the flat RID list); groups come by entry
    code_type = np.int32 if n_entries < 2 ** 31 - 1 else np.int64
    entry_group = entries.group.astype(code_type)
    slots = _RidSlots(flat_rids, n_attrs)
    # per slot and attribute the entry holding the rid's value (-1: not stored): the rows'
    # entries themselves when every slot holds a rid; and per slot the group of the rid by
    # attribute 0 (-1: not stored)
    entry_of_slot = np.full((slots.n, n_attrs), -1, code_type)
    group_by_attr0 = None
    for a, (entry_a, slot_a) in enumerate(_rids_by_attribute(entries.attr, n_attrs, rid_set_size,
                                                             slots.slot, code_type)):
        entry_of_slot[slot_a, a] = entry_a
        group_a = entry_group[entry_a]
        if np.count_nonzero(entry_of_slot[:, a] >= 0) != slot_a.size:    # a rid stored twice
            _check_one_value_per_attribute(entries, slots, a, slot_a, group_a)
        if group_by_attr0 is None:
            group_by_attr0 = np.full(slots.n, -1, dtype=code_type)
            group_by_attr0[slot_a] = group_a
            stored0 = slot_a.size
        elif slot_a.size != stored0 or not np.array_equal(group_by_attr0[slot_a], group_a):
            # not the same rids in the same groups as attribute 0 (the rids of each are
            # distinct, so equal counts and groups mean equal sets): name the first
            group_of_slot = np.full(slots.n, -1, dtype=code_type)
            group_of_slot[slot_a] = group_a
            _check_same_group(entries, slots, a, group_by_attr0, group_of_slot)
        del entry_a, slot_a, group_a
    del entry_group
    if stored0 == slots.n:                  # every slot holds a row: rows are the slots
        row_group = group_by_attr0.astype(np.int64)
        row_entries = entry_of_slot
    else:
        row_slots = np.flatnonzero(group_by_attr0 >= 0)
        row_group = group_by_attr0[row_slots].astype(np.int64)
        row_entries = np.take(entry_of_slot, row_slots, axis=0)
    del group_by_attr0, entry_of_slot
    sizes = np.bincount(row_group, minlength=entries.group_ids.size).astype(np.int64)
    return _RidSet(anames=entries.attr_names, G=entries.group_ids.size,
                   gvals=entries.group_ids, gcode=entries.group, acode=entries.attr,
                   lens=rid_set_size, row_g=row_group, row_ent=row_entries, sizes=sizes)


def _rids_by_attribute(attr, n_attrs, rid_set_size, slot, code_type):
    """Per attribute a (0, 1, ...): (the entry of each of its rids, each rid's slot), in
    flat-list order. When every attribute's entries are one run (as the writer and the
    catalog reader lay them out), its rids are one slice of the flat list: no per-rid
    attribute codes and masks over every attribute's rids."""
    n_entries = attr.size
    heads = np.flatnonzero(np.r_[True, attr[1:] != attr[:-1]]) if n_entries else np.zeros(0, np.int64)
    if np.unique(attr[heads]).size == heads.size:          # one run per attribute
        ends = np.r_[heads[1:], n_entries]
        first, last = np.zeros(n_attrs, np.int64), np.zeros(n_attrs, np.int64)
        first[attr[heads]], last[attr[heads]] = heads, ends
        before = np.zeros(n_entries + 1, np.int64)
        np.cumsum(rid_set_size, out=before[1:])
        for a in range(n_attrs):
            e0, e1 = int(first[a]), int(last[a])
            yield (_runs(rid_set_size[e0:e1], e0, code_type),
                   slot[int(before[e0]):int(before[e1])])
        return
    flat_entry = np.repeat(np.arange(n_entries, dtype=code_type), rid_set_size)
    flat_attr = np.repeat(attr.astype(np.int8 if n_attrs < 128 else np.int32), rid_set_size)
    for a in range(n_attrs):
        of_a = flat_attr == a
        yield flat_entry[of_a], slot[of_a]


def _check_one_value_per_attribute(entries, slots, a, slot_a, group_a):
    """Fail on a rid stored twice for attribute ``a`` (two of its values, or
    two groups); ``slot_a``/``group_a``: slot and group code of each rid
    stored for ``a``.  Names the smallest group involved."""
    seen = np.zeros(slots.n, dtype=bool)
    seen[slot_a] = True
    if np.count_nonzero(seen) == slot_a.size:      # every rid once: no counting needed
        return
    del seen
    times = np.bincount(slot_a, minlength=slots.n)
    repeated = np.flatnonzero(times > 1)
    is_repeated = np.isin(slot_a, repeated)
    first_group = group_a[is_repeated].min()
    slot = slot_a[(group_a == first_group) & is_repeated][0]
    name = entries.attr_names[a]
    _fail(f"group {entries.group_ids[first_group]}: row id {slots.rid(slot)} appears more "
          f"than once for attribute {name!r} (in two values or two groups)",
          detail=f"{repeated.size} row ids appear more than once for "
                 f"{name!r}; a row has exactly one value per attribute "
                 f"and belongs to exactly one group (001 Def. 1)")


def _check_same_group(entries, slots, a, group_by_attr0, group_by_a):
    """Fail on a rid whose group by attribute ``a`` differs from its group
    by attribute 0 (-1: the rid has no value of that attribute).  Names the
    smallest group involved."""
    differ = np.flatnonzero(group_by_a != group_by_attr0)
    if not differ.size:
        return
    involved = np.concatenate([group_by_attr0[differ], group_by_a[differ]])
    first_group = involved[involved >= 0].min()
    slot = differ[(group_by_attr0[differ] == first_group)
                  | (group_by_a[differ] == first_group)][0]
    rid, g0, ga = slots.rid(slot), group_by_attr0[slot], group_by_a[slot]
    names, gids = entries.attr_names, entries.group_ids
    if g0 >= 0 and ga >= 0:
        msg = (f"group {gids[first_group]}: row id {rid} is in group {gids[g0]} for "
               f"attribute {names[0]!r} but in group {gids[ga]} for {names[a]!r}")
    else:
        have, lack = (names[0], names[a]) if ga < 0 else (names[a], names[0])
        msg = (f"group {gids[first_group]} is incomplete: row id {rid} has a value for "
               f"attribute {have!r} but none for {lack!r}")
    _fail(msg, detail=f"{differ.size} row ids are inconsistent between attributes "
                      f"{names[0]!r} and {names[a]!r}; every rid of a group must "
                      f"appear exactly once per sensitive attribute")
