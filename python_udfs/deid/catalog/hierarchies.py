"""Generalization hierarchies, pure logic (002 sections 4.1-4.2).

A *member hierarchy* maps each value at level i to its parent at level i+1;
the top level is '*' (suppression). A *dimension hierarchy* gives each level
an information loss phi in [0, 1]: level 0 has 0, '*' has 1.
"""
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from ..errors import DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED

TOP = "*"


def even_info_loss(levels):
    """phi growing evenly with the level: 0, 1/(n-1), ..., 1."""
    return [i / (levels - 1) for i in range(levels)]


def check_info_loss(info_loss, levels):
    if info_loss is None:
        return even_info_loss(levels)
    loss = [float(x) if x is not None else None for x in info_loss]
    hint = (f"Give {levels} values, one per level from 0 (raw, loss 0) to '*' "
            f"(suppressed, loss 1), non-decreasing, e.g. {even_info_loss(levels)}.")
    if len(loss) != levels or any(x is None for x in loss):
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"info_loss has {len(loss)} values for {levels} levels", hint=hint)
    if loss[0] != 0 or loss[-1] != 1 or any(b < a for a, b in zip(loss, loss[1:])) \
            or any(not 0 <= x <= 1 for x in loss):         # NaN too
        raise DeidError(INVALID_PARAMETER_VALUE,
                        "info_loss must start at 0, end at 1 and never decrease", hint=hint)
    return loss


def parse_member_rows(text):
    """Parse ARX-style CSV rows ``value;level1;...;*``.

    Returns members[level] = {value: parent} for levels 0..top. Rejects empty
    fields and rows of different lengths (levels that skip), and a value with
    two parents. A '*' level is appended when the rows do not end with one.
    """
    if text is None or not text.strip():
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "hierarchy rows must not be NULL or empty",
                        hint="One value a line: value;level1;...;*")
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(";")]
        if any(f == "" for f in fields):
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"hierarchy line {lineno} skips a level: {line!r}",
                            hint="Every line names one value per level: value;level1;...;*")
        rows.append((lineno, fields))
    if not all(f[-1] == TOP for _, f in rows):
        if any(f[-1] == TOP for _, f in rows):
            bad = next(ln for ln, f in rows if f[-1] != TOP)
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"hierarchy line {bad} skips a level: it does not end with '*' "
                            "like the others", hint="All lines need the same number of levels.")
        rows = [(ln, f + [TOP]) for ln, f in rows]
    width = len(rows[0][1])
    for ln, f in rows:
        if len(f) != width:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"hierarchy line {ln} has {len(f)} levels, line {rows[0][0]} has {width}",
                            hint="Levels may not be skipped: every line names a value at every level.")
        if TOP in f[:-1]:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"hierarchy line {ln} uses '*' below the top level",
                            hint="'*' is the top level (suppression) only.")
    members = [dict() for _ in range(width)]
    for ln, f in rows:
        for level, (value, parent) in enumerate(zip(f, f[1:] + [None])):
            seen = members[level].get(value, parent)
            if seen != parent:
                raise DeidError(INVALID_PARAMETER_VALUE,
                                f"value {value!r} at level {level} has two parents: "
                                f"{seen!r} and {parent!r} (line {ln})",
                                hint="A member hierarchy is a tree: each value has one parent.")
            members[level][value] = parent
    if len(members[0]) != len(rows):
        dup = len(rows) - len(members[0])
        raise DeidError(INVALID_PARAMETER_VALUE, f"{dup} leaf value(s) are listed twice",
                        hint="List each raw value once.")
    return members


UNKNOWN_SHOWN = 5            # the unknown values a refusal names


def unknown_values(hierarchy, where, unknown, count=None, data_dependent=None):
    """The refusal of values that are not in a member hierarchy -- never dropped silently:
    how many (`count`, else len(unknown)) and the first few, sorted, in the HINT. `where`
    names the column (or the codes) that holds them."""
    first = sorted(unknown)[:UNKNOWN_SHOWN]
    n = len(unknown) if count is None else count
    shown = ", ".join(repr(v) for v in first) + (", ..." if n > len(first) else "")
    return DeidError(INVALID_PARAMETER_VALUE,
                     f'{n} value{"s" if n != 1 else ""} of {where} {"are" if n != 1 else "is"} '
                     f'not in hierarchy "{hierarchy}", the first {first[0]!r}',
                     detail="missing: " + shown,
                     hint=f"{n} distinct value{'s' if n != 1 else ''} missing ({shown}): add "
                          "them to the hierarchy's rows and load it again. A standard ICD "
                          "hierarchy (deid.load_standard_hierarchy) writes codes with their dot: "
                          "load it with dots => false for codes written without.",
                     data_dependent=data_dependent)


def _num(x, what):
    try:
        d = Decimal(str(x))
    except (InvalidOperation, ValueError):
        raise DeidError(INVALID_PARAMETER_VALUE, f"{what} is not a number: {x!r}",
                        hint="Write numbers as in SQL, e.g. 0.5.")
    if not d.is_finite():              # numeric 'NaN' and '(-)Infinity': no band holds them
        raise DeidError(INVALID_PARAMETER_VALUE, f"{what} must be a finite number, not {x}",
                        hint="The bands cover [low, high) with finite bounds and widths: "
                             "e.g. low => 0, high => 120.")
    return d


def check_interval(low, high, widths):
    if low is None or high is None or not widths:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "low, high and widths must not be NULL or empty",
                        hint="e.g. deid.interval_hierarchy('age_5y', 0, 120, '{5,10,20}')")
    low, high = _num(low, "low"), _num(high, "high")
    ws = [_num(w, "width") for w in widths]
    if high <= low:
        raise DeidError(INVALID_PARAMETER_VALUE, f"high ({high}) must be greater than low ({low})",
                        hint="The bands cover [low, high): e.g. low => 0, high => 120.")
    for a, b in zip([None] + ws, ws):
        if b <= 0 or (a is not None and (b <= a or b % a != 0)):
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"widths {[str(w) for w in ws]} do not nest",
                            hint="Each width must be positive and a multiple of the one before, "
                                 "e.g. {5,10,20}, so every band lies inside one wider band.")
    return low, high, ws


def _fmt(d):
    d = d.normalize()
    return format(d, "f") if d == d.to_integral() else str(d)


def interval_label(value, low, width):
    """The band of `value` (Decimal-compatible) of the given width, aligned at low: '[15,20)'."""
    v = Decimal(str(value))
    start = low + ((v - low) // width) * width
    return f"[{_fmt(start)},{_fmt(start + width)})"


def interval_chain(value, low, high, widths):
    """Labels of `value` at levels 1..top ('*' last); None if outside [low, high)."""
    v = Decimal(str(value))
    if v < low or v >= high:
        return None
    return [interval_label(v, low, w) for w in widths] + [TOP]


@dataclass
class Hierarchy:
    """A generalization hierarchy as loaded from the catalog (002 Tables 6-7): member
    hierarchies map each value of level i to its parent at level i+1 (``members[i]``);
    interval hierarchies are bands of ``widths`` over [low, high). Every walk over a member
    hierarchy is one of these methods."""
    name: str
    kind: str                 # 'member' | 'interval'
    levels: int               # including level 0 (the values) and the top ('*')
    info_loss: list
    members: list = None      # members[level] = {value: parent}
    low: float = None
    high: float = None
    widths: list = None

    @property
    def leaves(self):
        """The level-0 values, sorted."""
        return sorted(self.members[0])

    def ancestors(self, value):
        """value's parent, grandparent, ... as far as the hierarchy knows them."""
        out = []
        for level in range(len(self.members) - 1):
            value = self.members[level].get(value)
            if value is None:
                break
            out.append(value)
        return out

    def chain(self, value, unknown):
        """value and one generalization per level up to the top: a parent the hierarchy lacks
        is `unknown` below the top level and '*' at it."""
        out = [value]
        for level in range(self.levels - 1):
            value = self.members[level].get(value, unknown if level < self.levels - 2 else "*")
            out.append(value)
        return out

    def rank(self, labels):
        """Rank of each label in hierarchy order: sorted by their chain of ancestors from the
        top down, so that siblings are adjacent."""
        def key(i):
            return tuple(reversed([labels[i]] + self.ancestors(labels[i])))
        return sorted(range(len(labels)), key=key)

    def common_ancestor(self, values):
        """The lowest generalization shared by all `values` (None when they share none below
        the levels the hierarchy has)."""
        level_values = set(values)
        for level in range(len(self.members) - 1):
            level_values = {self.members[level].get(v) for v in level_values}
            if len(level_values) == 1:
                return next(iter(level_values)), True
        return None, False

    def level_of(self, value):
        """The lowest level holding `value`, or None."""
        return next((i for i, members in enumerate(self.members) if value in members), None)

    def leaves_under(self, value):
        """Leaves below a generalized value (None for a leaf or an unknown value)."""
        if value in self.members[0]:
            return None
        frontier = {value}
        for level in range(self.levels - 2, -1, -1):
            below = {v for v, p in self.members[level].items() if p in frontier}
            if level == 0:
                return sorted(below) if below else None
            frontier = below | ({value} if value in self.members[level] else set())
        return None
