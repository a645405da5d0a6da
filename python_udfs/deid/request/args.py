"""The arguments of one deid.anonymize_request call, as one frozen value: built once where SQL
hands them to Python, then passed whole (to the pipeline, the pending-snapshot store, the
coordinator and its nodes' steps) instead of eight positional values.

Across SQL the value is one ``jsonb`` whose keys are the fields below: the public wrapper
builds it (``jsonb_build_object``, sql/30_request.sql) and every begin function takes it
whole (``deid._request_begin(request jsonb, caller name)``, ``deid._dist_begin``,
``deid._dist_eligibility_begin``), so a new argument is one field here and one key in the
wrapper. ``of_json`` takes only these keys, each of its type (a forged value of another shape
is refused, 22023); what the values mean (the source, the method, k, the options) is checked
by pending.begin and the coordinator's begin, as deid_owner, as before."""
import json
from dataclasses import dataclass, fields
from typing import Any, List, Optional, Tuple

from ..errors import DeidError, INVALID_PARAMETER_VALUE

_HINT = "Call deid.anonymize_request(...): the begin functions take the request it builds."


@dataclass(frozen=True)
class RequestArgs:
    relid: Optional[int] = None                  # the source's oid (None: refused by begin)
    method: Optional[str] = None
    k: Optional[int] = None
    l: Optional[int] = None                      # noqa: E741  (the papers' name)
    columns: Optional[Tuple[str, ...]] = None    # the projection; None: every classified column
    selection: Optional[str] = None              # the WHERE text, parsed by request/selection.py
    options: Optional[str] = None                # the options, as JSON text
    name: Optional[str] = None                   # the release name; None: a generated one

    @classmethod
    def of_call(cls, relid: Optional[int], method: Optional[str], k: Optional[int],
                l: Optional[int], columns: Optional[List[str]],  # noqa: E741
                selection: Optional[str], options: Optional[str],
                name: Optional[str]) -> "RequestArgs":
        """The value of a call's eight arguments (columns as given: a list or None)."""
        return cls(relid, method, k, l, None if columns is None else tuple(columns),
                   selection, options, name)

    @classmethod
    def of_json(cls, text: Optional[str]) -> "RequestArgs":
        """The value of the jsonb a wrapper built (its text, as PL/Python hands it over):
        a JSON object of the fields' names, each null or of its field's type."""
        try:
            raw = json.loads(text) if text is not None else None
        except ValueError:
            raw = None
        if not isinstance(raw, dict):
            raise _refused("is not a JSON object")
        known = {f.name for f in fields(cls)}
        for key in sorted(raw):
            if key not in known:
                raise _refused(f"has no argument {key!r}")
        values = {f.name: _checked(f.name, raw.get(f.name)) for f in fields(cls)}
        return cls(**values)

    def to_json(self) -> str:
        """The jsonb text of_json reads back (columns as a JSON array)."""
        return json.dumps({f.name: _plain(getattr(self, f.name)) for f in fields(self)})

    @property
    def column_list(self) -> Optional[List[str]]:
        """The projection as a list (a text[] parameter), or None."""
        return None if self.columns is None else list(self.columns)


# the JSON shape of each field: ints are JSON numbers (not booleans), the projection an array
# of strings, everything else a string
_INTS = ("relid", "k", "l")


def _checked(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name in _INTS:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif name == "columns":
        ok = isinstance(value, list) and all(isinstance(c, str) for c in value)
        value = tuple(value) if ok else value
    else:
        ok = isinstance(value, str)
    if not ok:
        raise _refused(f"has a value of another type for {name!r}")
    return value


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _refused(why: str) -> DeidError:
    return DeidError(INVALID_PARAMETER_VALUE, f"the request's arguments {why}", hint=_HINT)

