"""Option schemas of anonymize_request: every option has a type, a range or a set of choices
and a help text. The schema produces the errors (SQLSTATE 22023 with a HINT) and the usage
text; nothing downstream re-checks a type. Pure (no plpy, no SQL)."""
import json
from dataclasses import dataclass, fields, make_dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import DeidError, INVALID_PARAMETER_VALUE

INT64_MAX = 2 ** 63 - 1


@dataclass(frozen=True)
class Option:
    name: str
    kind: str                 # bool | int | number | string | choice | map_int | map_number |
    #                           object (choices: its required keys, each a non-empty string)
    help: str
    choices: Tuple[str, ...] = ()
    low: Optional[float] = None
    high: Optional[float] = None
    example: str = ""

    def describe(self) -> str:
        if self.kind == "choice":
            return " | ".join(repr(c) for c in self.choices)
        if self.kind == "object":
            return "an object {" + ", ".join(f'"{c}": column' for c in self.choices) + "}"
        rng = ""
        if self.low is not None or self.high is not None:
            rng = f" in [{self.low if self.low is not None else '-inf'}, " \
                  f"{self.high if self.high is not None else 'inf'}]"
        what = {"bool": "true or false", "int": "an integer", "number": "a number",
                "string": "a string", "map_int": "an object of column -> integer",
                "map_number": "an object of column -> number",
                "code_lists": "an array of arrays of codes (strings)"}[self.kind]
        return what + rng

    def check(self, value: Any) -> Any:
        def bad(got: Optional[str] = None) -> DeidError:
            hint = f"options.{self.name} is {self.describe()}: {self.help}"
            if self.example:
                hint += f" e.g. {self.example}"
            return DeidError(INVALID_PARAMETER_VALUE,
                             f"options.{self.name} must be {self.describe()}"
                             + (f", not {got}" if got else ""), hint=hint)

        if self.kind == "bool":
            if not isinstance(value, bool):
                raise bad(_json_type(value))
        elif self.kind in ("int", "number"):
            self._check_number(value, bad)
        elif self.kind == "string":
            if not isinstance(value, str) or not value:
                raise bad(_json_type(value))
        elif self.kind == "code_lists":
            if not isinstance(value, list) or not all(
                    isinstance(x, list) and x and all(isinstance(c, str) for c in x) for x in value):
                raise bad(_json_type(value) if not isinstance(value, list) else "an array of that shape")
        elif self.kind == "choice":
            if not isinstance(value, str) or value not in self.choices:
                raise bad(json.dumps(value)[:40] if isinstance(value, (str, int, float)) else _json_type(value))
        elif self.kind == "object":
            if not isinstance(value, dict):
                raise bad(_json_type(value))
            if sorted(value) != sorted(self.choices):
                raise bad("an object with other keys")
            if not all(isinstance(v, str) and v for v in value.values()):
                raise bad("an object with a value that is not a column name")
        else:
            if not isinstance(value, dict):
                raise bad(_json_type(value))
            inner = Option(self.name, "int" if self.kind == "map_int" else "number", self.help,
                           low=self.low, high=self.high, example=self.example)
            for v in value.values():
                inner._check_number(v, bad)
        return value

    def _check_number(self, value: Any, bad: Callable[[Optional[str]], DeidError]) -> None:
        whole = self.kind in ("int", "map_int")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad(_json_type(value))
        if whole and not isinstance(value, int):
            raise bad("a fraction")
        if value != value or (self.low is not None and value < self.low) or \
                (self.high is not None and value > self.high):
            raise bad("a value out of range")


def _json_type(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "an object", type(None): "null"}.get(type(value), "that")


COMMON = (
    Option("seed", "int", "the seed of every random step; recorded in the release log.",
           low=0, high=INT64_MAX, example='{"seed": 7}'),
    Option("replace", "bool", "replace your own release of the same name (deid_admin: any).",
           example='{"replace": true}'),
    Option("row_id", "string", "a unique integer column whose values identify rows "
           "(default: the single-column primary key).", example='{"row_id": "patient_id"}'),
    Option("nulls", "choice", "'error' refuses NULL quasi-identifiers; 'value' treats NULL as a "
           "value of its own.", choices=("error", "value"), example='{"nulls": "value"}'),
    Option("allow_overlap", "bool", "release even when, read together with the earlier "
           "releases of the source, it would single out fewer than k rows (composition rule); "
           "only with SELECT on the source; recorded in the release log with a warning.",
           example='{"allow_overlap": true}'),
    Option("audience", "string", "the role that may read the release besides you (default "
           "deid_reader, or a role you are a member of); the composition rule compares "
           "it only with releases some role reads together with it.",
           example='{"audience": "study_a"}'),
    Option("regroup", "bool", "group the rows afresh instead of keeping the groups of the "
           "latest earlier release of the source by the same method and columns (the "
           "composition rule judges the new grouping).", example='{"regroup": true}'),
)


def parse(text: Any) -> Dict[str, Any]:
    """The options argument (JSON text) as a dict."""
    if text is None:
        return {}
    try:
        out = json.loads(text) if isinstance(text, str) else dict(text)
    except ValueError as e:
        why = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
        raise DeidError(INVALID_PARAMETER_VALUE, f"options is not valid JSON: {why}",
                        hint='options is a JSON object, e.g. \'{"seed": 7}\'.')
    if not isinstance(out, dict):
        raise DeidError(INVALID_PARAMETER_VALUE, "options must be a JSON object",
                        hint='e.g. \'{"seed": 7}\'')
    return out


def validate(options: Dict[str, Any], schema: Tuple[Option, ...], method: str) -> Dict[str, Any]:
    """Check `options` against `schema` (a tuple of Option); unknown names are refused."""
    by_name = {o.name: o for o in schema}
    for name in sorted(options):
        if name not in by_name:
            raise DeidError(INVALID_PARAMETER_VALUE, f"unknown option {name!r} for method {method}",
                            hint=f"Options of {method}: " + ", ".join(sorted(by_name)) + ".")
        by_name[name].check(options[name])
    return options


def usage(schema: Tuple[Option, ...]) -> str:
    return "\n".join(f"    {o.name}: {o.describe()} -- {o.help}" for o in schema)


# the Python type of an option's value, by its kind
PY_TYPES: Dict[str, Any] = {
    "bool": bool, "int": int, "number": float, "string": str, "choice": str,
    "map_int": Dict[str, int], "map_number": Dict[str, float], "object": Dict[str, str],
    "code_lists": List[List[str]]}


def option_class(name: str, schema: Tuple[Option, ...]) -> type:
    """A frozen class with one typed attribute per option of ``schema`` (None: not given), the
    plug-ins' view of a request's options: a misspelt option is an AttributeError, not a
    silent None. Derived from the schema, so an option is declared once."""
    return make_dataclass(name, [(o.name, Optional[PY_TYPES[o.kind]], None) for o in schema],
                          frozen=True)


def typed(cls: type, options: Dict[str, Any]) -> Any:
    """The options (validated against the schema ``cls`` was derived from) as a ``cls``."""
    return cls(**{f.name: options.get(f.name) for f in fields(cls)})
