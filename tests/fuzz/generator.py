"""Random requests for deid.anonymize_request: plausible ones for each method (the columns,
k, l and options a user would pass) mixed with hostile ones (SQL injection attempts, unknown
columns, functions, subqueries, casts, comments, huge literals, unicode, type mismatches,
enum/date/numeric comparisons, bad options, bad k). Deterministic for a random.Random.

A request is sent by one of three roles: the superuser, an analyst with SELECT on the table,
or a researcher with only a policy (deid.allow_requests) -- the "policy" variant, whose
refusals must carry no value and no count below k.
"""
import json
from dataclasses import dataclass, field

import importlib
import pkgutil

from . import methods as _methods

# every method's part (tests/fuzz/methods/<method>.py), in the order of the methods' papers
PARTS = {m.name: importlib.import_module(f"{_methods.__name__}.{m.name}")
         for m in pkgutil.iter_modules(_methods.__path__)}
METHODS = tuple(sorted(PARTS, key=lambda m: PARTS[m].PAPER))


@dataclass
class Request:
    method: str
    relation: str
    k: object
    l: object = None
    columns: object = None
    selection: object = None
    options: object = field(default_factory=dict)   # dict, or raw text (a hostile option)
    release: str = None
    role: str = "analyst"                            # admin | analyst | researcher
    hostile: str = None                              # the kind of bad input, if any

    def options_text(self):
        return self.options if isinstance(self.options, str) else json.dumps(self.options)

    def as_dict(self):
        return {"method": self.method, "relation": self.relation, "k": self.k, "l": self.l,
                "columns": self.columns, "selection": self.selection,
                "options": self.options_text(), "release": self.release, "role": self.role,
                "hostile": self.hostile}


def _literal(rng, col, t):
    """A literal of the column's own type, drawn from its values (or near them)."""
    present = [v for v in col.values if v is not None]
    if not present or rng.random() < 0.15:
        return {"int": "42", "numeric": "17.25", "date": "'2020-01-15'", "text": "'zqzx0'",
                "enum": "'mid'", "bool": "true", "codes": "'{c1}'"}[col.kind]
    v = rng.choice(present)
    if col.kind in ("int", "numeric"):
        return str(v)
    if col.kind == "bool":
        return "true" if v else "false"
    return "'" + str(v).replace("'", "''") + "'"


def _atom(rng, cols, t):
    c = rng.choice(cols)
    lit = _literal(rng, c, t)
    r = rng.random()
    if r < 0.45:
        return f"{c.name} {rng.choice(('=', '<>', '<', '>', '<=', '>='))} {lit}"
    if r < 0.6:
        return f"{c.name} IN ({', '.join(_literal(rng, c, t) for _ in range(rng.randint(1, 4)))})"
    if r < 0.72:
        a, b = sorted((_literal(rng, c, t), _literal(rng, c, t)))
        return f"{c.name} BETWEEN {a} AND {b}"
    if r < 0.82:
        return f"{c.name} IS {rng.choice(('', 'NOT '))}NULL"
    if r < 0.9:
        return f'"{c.name}" = {lit}'
    return f"NOT ({c.name} = {lit})"


def selection(rng, cols, t, depth=0):
    """A selection of deid's grammar over cols (columns of t), or None."""
    cols = [c for c in cols if c.kind != "codes"]
    if not cols:
        return None
    if depth == 0 and rng.random() < 0.3:
        return None
    r = rng.random()
    if depth < 2 and r < 0.3:
        op = rng.choice((" AND ", " OR "))
        return "(" + selection(rng, cols, t, depth + 1) + op + selection(rng, cols, t, depth + 1) + ")"
    return _atom(rng, cols, t)


HOSTILE_SELECTIONS = (
    "age = 1; DROP TABLE {t}", "age = 1 -- comment", "age = 1 /* c */", "age = 1 OR 1=1 --",
    "lower(zip) = 'zqzx1'", "age IN (SELECT 1)", "(SELECT count(*) FROM pg_authid) > 0",
    "EXISTS (SELECT 1)", "age = pg_sleep(1)", "age::text = '1'", "CAST(age AS text) = '1'",
    "nope = 1", "\"Age\" = 1", "age = 'abc'", "seen = 5", "seen > 'notadate'", "bmi = 'x'",
    "stage = 'nope'", "stage = 'mid'", "stage > 'lo'", "stage IN ('lo', 'hi')", "zip = 1",
    "age = 99999999999999999999999999", "age = " + "9" * 5000, "zip = '" + "x" * 20000 + "'",
    "zip = 'ü名\u202e'", "zip = E'\\x41'", "zip = $$x$$", "zip = 'a'' OR ''1''=''1'",
    "age = $1", "age = @1", "age > ALL (ARRAY[1])", "age = ANY ('{1,2}')", "codes @> '{c1}'",
    "id = 1", "name = 'zqpx0'", "dx = 'zqdx1'", "note LIKE 'zq%'", "zip ~ 'x'", "age + 1 = 2",
    "age", "TRUE", "NULL", "", "   ", "(", "age = (1", "age IS DISTINCT FROM 1",
    "(((((((((((age = 1)))))))))))", "age = 1 UNION SELECT 1", "age = current_user",
    "age IN (" + ", ".join(str(i) for i in range(3000)) + ")", "zip COLLATE \"C\" = 'a'",
    "sex = 'zqsx0' AND age BETWEEN 0 AND 200", "alive = 1", "seen BETWEEN '2020-01-01' AND '2020-02-01'",
    "bmi BETWEEN 15 AND 20.5", "stage IS NOT NULL", "ROW(age, 1) = ROW(1, 1)",
)

HOSTILE_COLUMNS = (
    ["age", "nope"], ["age", "name"], ["age", "age"], [], ["age", "id"], ["AGE"], ["age; drop"],
    ["ü名"], ["age", None], ["x" * 200], ["age", "note", "dx"], ["codes", "age"],
    ["ctid"], ["xmin", "age"], ["age", "stage"], ["seen", "dx"], ["bmi", "tr"],
)

HOSTILE_OPTIONS = (
    "{bad", "[1]", "null", '"x"', '{"bogus": 1}', '{"seed": -1}', '{"seed": 1.5}', '{"seed": "7"}',
    '{"seed": 100000000000000000000}', '{"replace": "yes"}', '{"nulls": 3}', '{"row_id": "zip"}',
    '{"row_id": "nope"}', '{"row_id": "age"}', '{"m": 0}', '{"m": 99}', '{"max_cluster_size": 1}',
    '{"column_l": {"dx": 0}}', '{"column_l": 3}', '{"limits": {"age": -1}}', '{"limits": {"age": 99}}',
    '{"priorities": {"age": 2}}', '{"priorities": {"age": NaN}}', '{"search": "best"}',
    '{"model": "x"}', '{"output": "x"}', '{"algorithm": "x"}', '{"survival": {"time": "age"}}',
    '{"weights": {"age": 5}}', '{"utility": [["c1"], ["c1"]]}', '{"utility": "c1"}',
    '{"record": "id"}', '{"record": "id", "item": "nope"}', '{"model": "generalization"}',
    '{"survival_times": "original"}', '{"seed": 1, "seed": 2}', '{"hierarchy": "nope"}',
)
HOSTILE_K = (0, 1, -5, None, 2 ** 31 - 1, 100000)
HOSTILE_RELATIONS = ("no_such_table", "pg_authid", "deid.policy", "a.b.c.d", "fuzz.t; drop",
                     "pg_catalog.pg_class", "deid.release", "")


def _base(rng, method, t):
    """(columns, k, l, options) a user would plausibly pass for this method."""
    opts = {"seed": rng.randint(0, 2 ** 40)}       # always: deid would draw one, and the run must repeat
    if rng.random() < 0.2:
        opts["nulls"] = "value"
    k = rng.choices((2, 3, 4, 5, 6, 8, 12, 30), weights=(5, 6, 4, 4, 2, 2, 1, 1))[0]
    cols, k, l = PARTS[method].base(rng, t, k, opts)
    return [c.name for c in cols], cols, k, l, opts


def request(rng, method, t, release):
    """One Request for method over table t, named release."""
    names, cols, k, l, opts = _base(rng, method, t)
    role = rng.choices(("analyst", "researcher", "admin"), weights=(5, 3, 1))[0]
    req = Request(method, t.name, k, l, names, None, opts, release, role)
    vary = getattr(PARTS[method], "source", None)     # another form of the source, if any
    if vary is not None and vary(rng, req, t, role):
        return _maybe_hostile(rng, req, t, release)
    if role == "researcher":
        allowed = [c for c in cols if c.role == "quasi_identifier"]
        req.selection = selection(rng, allowed, t)
    else:
        req.selection = selection(rng, [c for c in t.columns if c.role or rng.random() < 0.3], t)
    return _maybe_hostile(rng, req, t, release)


def _maybe_hostile(rng, req, t, release):
    if rng.random() < 0.25:
        _make_hostile(rng, req, t, release)
    return req


def _make_hostile(rng, req, t, release):
    r = rng.random()
    if r < 0.45:
        req.selection = rng.choice(HOSTILE_SELECTIONS).replace("{t}", t.name)
        req.hostile = "selection"
    elif r < 0.6:
        req.columns = list(rng.choice(HOSTILE_COLUMNS))
        req.hostile = "columns"
    elif r < 0.78:
        req.options = rng.choice(HOSTILE_OPTIONS)
        req.hostile = "options"
    elif r < 0.88:
        req.k = rng.choice(HOSTILE_K)
        req.hostile = "k"
    elif r < 0.93:
        req.l = rng.choice((0, -1, 1000, 2))
        req.hostile = "l"
    elif r < 0.97:
        req.relation = rng.choice(HOSTILE_RELATIONS)
        req.hostile = "relation"
    else:
        req.release = rng.choice(("Bad-Name", "x" * 60, "a b", "ü", "1abc", "", release.upper(),
                                  release + "_qit"))
        req.hostile = "release"
