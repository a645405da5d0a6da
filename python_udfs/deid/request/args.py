"""The arguments of one deid.anonymize_request call, as one frozen value: built once where SQL
hands them to Python, then passed whole (to the pipeline, the pending-snapshot store, the
coordinator and its nodes' steps) instead of eight positional values. Nothing here checks
them: pending.begin and the coordinator's begin validate, as deid_owner.

Each SQL function keeps its own signature; RequestArgs.params() and TYPES are the eight
values and their types in the order every one of them takes (deid._request_begin,
deid._dist_begin, deid._dist_eligibility_begin, ...)."""
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

# the SQL types of params(), for a prepared statement
TYPES = ("oid", "text", "int", "int", "text[]", "text", "text", "text")


@dataclass(frozen=True)
class RequestArgs:
    relid: Optional[int]                   # the source's oid (None: refused by begin)
    method: Optional[str]
    k: Optional[int]
    l: Optional[int]                       # noqa: E741  (the papers' name)
    columns: Optional[Tuple[str, ...]]     # the projection; None: every classified column
    selection: Optional[str]               # the WHERE text, parsed by request/selection.py
    options: Optional[str]                 # the options, as JSON text
    name: Optional[str]                    # the release name; None: a generated one

    @classmethod
    def of_call(cls, relid: Optional[int], method: Optional[str], k: Optional[int],
                l: Optional[int], columns: Optional[Sequence[str]],  # noqa: E741
                selection: Optional[str], options: Optional[str],
                name: Optional[str]) -> "RequestArgs":
        """The value of a SQL call's eight arguments (columns as given: a list or None)."""
        return cls(relid, method, k, l, None if columns is None else tuple(columns),
                   selection, options, name)

    @property
    def column_list(self) -> Optional[list]:
        """The projection as a list (a text[] parameter), or None."""
        return None if self.columns is None else list(self.columns)

    def params(self) -> list:
        """The eight values, in the order and of the TYPES of the SQL functions."""
        return [self.relid, self.method, self.k, self.l, self.column_list, self.selection,
                self.options, self.name]

