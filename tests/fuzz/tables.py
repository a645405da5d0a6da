"""Random source tables for the fuzzer: tiny (5-200 rows), tie-heavy, skewed, unique,
constant or NULL-laden columns of many types, classified with deid.set_role and, where a
column can have one, a hierarchy. Each batch of requests gets a fresh table, so that releases
of earlier batches (and deid's overlap control between releases of one source) do not bear
on it.

Text values carry a distinctive shape (``zq<col>x<n>``) so that a leak of a cell value into a
message can be found by a plain substring search. Deterministic for a given random.Random.
"""
import datetime
import decimal
from dataclasses import dataclass, field

from psycopg import sql

SHAPES = ("ties", "skewed", "unique", "constant", "nulls", "mixed")
SIZES = (5, 6, 8, 10, 12, 16, 20, 30, 40, 60, 80, 120, 200)
SIZE_WEIGHTS = (3, 2, 3, 3, 3, 3, 4, 3, 3, 2, 2, 1, 1)
CODE_POOL = 14                 # diagnosis codes c0 .. c13


@dataclass
class Column:
    name: str
    kind: str                  # int | numeric | date | text | enum | bool | codes
    role: str = None           # quasi_identifier | sensitive | insensitive | identifier | None
    hierarchy: str = None
    source: str = None
    values: list = field(default_factory=list)

    def texts(self):
        """Every distinct non-NULL text value (for leak searches)."""
        if self.kind == "codes":
            return sorted({c for v in self.values if v for c in v if c})
        return sorted({str(v) for v in self.values
                       if v is not None and v != "NULL" and self.kind in ("text", "enum")})


@dataclass
class Table:
    name: str                  # schema-qualified, e.g. fuzz.t0_12
    rows: int
    shape: str
    columns: list
    enum_type: str
    hierarchies: list
    min_k: int                 # the policy minimum of the researcher
    ids: list = field(default_factory=list)

    @property
    def long_name(self):
        """The same codes as a long table of (record, code) rows (003's other source form)."""
        return self.name + "_dx"

    @property
    def code_hierarchy(self):
        return self.hierarchies[-1]

    def col(self, name):
        return next((c for c in self.columns if c.name == name), None)

    def of_role(self, role):
        return [c for c in self.columns if c.role == role]


def _ints(rng, n, shape, lo=0, hi=100):
    if shape == "constant":
        return [rng.randint(lo, hi)] * n
    if shape == "unique":
        vals = rng.sample(range(lo, lo + 3 * n + 3), n)
        return vals
    span = range(lo, hi + 1)
    if shape == "ties":
        pool = rng.sample(span, min(len(span), rng.randint(1, 3)))
        return [rng.choice(pool) for _ in range(n)]
    if shape == "skewed":
        pool = rng.sample(span, min(len(span), 8))
        return rng.choices(pool, weights=[64, 16, 8, 4, 2, 1, 1, 1][:len(pool)], k=n)
    return [rng.randint(lo, hi) for _ in range(n)]


def _with_nulls(rng, vals, shape, p=None):
    p = p if p is not None else (0.3 if shape == "nulls" else (0.04 if shape == "mixed" else 0.0))
    return [None if rng.random() < p else v for v in vals]


def _text_values(rng, n, shape, tag, alphabet):
    idx = _ints(rng, n, shape, 0, alphabet - 1)
    return [f"zq{tag}x{i % alphabet}" for i in idx]


def _codes(rng, n, shape):
    out = []
    for _ in range(n):
        r = rng.random()
        if shape == "nulls" and r < 0.15:
            out.append(None)
            continue
        size = 0 if r < 0.08 else rng.choice((1, 1, 2, 2, 3, 4, 6))
        if shape == "constant":
            codes = ["c0", "c1"][:size]
        elif shape == "ties":
            codes = [rng.choice(("c0", "c1", "c2")) for _ in range(size)]      # duplicates too
        else:
            codes = rng.choices([f"c{j}" for j in range(CODE_POOL)],
                                weights=[2 ** max(0, 8 - j) for j in range(CODE_POOL)], k=size)
        if shape == "nulls" and codes and rng.random() < 0.1:
            codes[0] = None
        out.append(codes)
    return out


def generate(rng, schema, tag):
    """A Table (data in memory, nothing created yet)."""
    n = rng.choices(SIZES, weights=SIZE_WEIGHTS)[0]
    shape = rng.choice(SHAPES)
    col_shape = (lambda: rng.choice(SHAPES)) if shape == "mixed" else (lambda: shape)
    name = f"{schema}.t{tag}"
    enum_type = f"{schema}.e{tag}"
    cols = [
        Column("age", "int", values=_with_nulls(rng, _ints(rng, n, col_shape(), 0, 99), shape)),
        Column("zip", "text", values=_with_nulls(rng, _text_values(rng, n, col_shape(), "z", 6), shape)),
        Column("sex", "text", values=_with_nulls(rng, _text_values(rng, n, col_shape(), "s", 2), shape)),
        Column("stage", "enum", values=_with_nulls(
            rng, [("lo", "mid", "hi")[i % 3] for i in _ints(rng, n, col_shape(), 0, 2)], shape)),
        Column("seen", "date", values=_with_nulls(rng, [datetime.date(2020, 1, 1) + datetime.timedelta(days=d)
                                                        for d in _ints(rng, n, col_shape(), 0, 60)], shape)),
        Column("bmi", "numeric", values=_with_nulls(rng, [decimal.Decimal(v) / 4 + 15
                                                          for v in _ints(rng, n, col_shape(), 0, 80)], shape)),
        Column("alive", "int", values=[rng.randint(0, 1) for _ in range(n)]),
        Column("months", "int", values=_ints(rng, n, col_shape(), 0, 120)),
        Column("dx", "text", values=_with_nulls(rng, _text_values(rng, n, col_shape(), "d", 7), shape, 0.05)),
        Column("tr", "text", values=_with_nulls(rng, _text_values(rng, n, col_shape(), "t", 3), shape, 0.05)),
        Column("note", "text", values=[f"zqnx{i}" for i in range(n)]),
        Column("name", "text", values=[f"zqpx{i}" for i in range(n)]),
        Column("codes", "codes", values=_codes(rng, n, shape)),
    ]
    if rng.random() < 0.04:     # the text 'NULL' as a real value of a quasi-identifier
        zip_ = next(c for c in cols if c.name == "zip")
        zip_.values[rng.randrange(n)] = "NULL"
    if rng.random() < 0.1:      # unicode and quotes in a sensitive value
        dx = next(c for c in cols if c.name == "dx")
        dx.values = [v if v is None or rng.random() < 0.7 else v + "'ü名" for v in dx.values]
    roles = {"age": "quasi_identifier", "zip": "quasi_identifier", "sex": "quasi_identifier",
             "stage": rng.choice(("quasi_identifier", None)), "seen": rng.choice(("quasi_identifier", None)),
             "bmi": rng.choice(("quasi_identifier", "insensitive")), "alive": "insensitive",
             "months": "insensitive",
             "dx": "sensitive", "tr": "sensitive", "note": "insensitive", "name": "identifier"}
    hierarchies = []
    for c in cols:
        c.role = roles.get(c.name)
        if c.role == "quasi_identifier":
            c.source = rng.choice(("s1", "s1", "s2", None))
            if c.kind in ("int", "numeric", "text") and rng.random() < 0.9:
                c.hierarchy = f"fz{tag}_{c.name}"
                hierarchies.append(c.hierarchy)
    hierarchies.append(f"fz{tag}_icd")                 # the codes' member hierarchy (AA, model generalization)
    return Table(name, n, shape, cols, enum_type, hierarchies, min_k=rng.choice((2, 3, 4)))


def _member_rows(values):
    """ARX rows value;group;* with groups of about three values."""
    vals = sorted(set(values))
    return "\n".join(f"{v};g{i // 3};*" for i, v in enumerate(vals))


def create(conn, t, rng, researcher, analyst):
    """Create, fill and classify t as the (superuser) conn; grant the analyst SELECT and the
    researcher a policy. Returns nothing; raises on a setup error (a fuzzer bug)."""
    ident = sql.SQL(t.name)
    conn.execute(sql.SQL("CREATE TYPE {} AS ENUM ('lo', 'mid', 'hi')").format(sql.SQL(t.enum_type)))
    types = {"int": "int", "numeric": "numeric(6,2)", "date": "date", "text": "text",
             "enum": t.enum_type, "bool": "boolean", "codes": "text[]"}
    coldefs = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(types[c.kind]))
                                 for c in t.columns)
    conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, {})").format(ident, coldefs))
    ids = rng.sample(range(1, 10 * t.rows + 10), t.rows)
    with conn.cursor() as cur:
        with cur.copy(sql.SQL("COPY {} (id, {}) FROM STDIN").format(
                ident, sql.SQL(", ").join(sql.Identifier(c.name) for c in t.columns))) as cp:
            for i, rid in enumerate(ids):
                cp.write_row([rid] + [c.values[i] for c in t.columns])
    t.ids = ids
    conn.execute(sql.SQL("CREATE TABLE {} (rid serial PRIMARY KEY, pid int NOT NULL, icd text)").format(
        sql.SQL(t.long_name)))
    conn.execute(sql.SQL("INSERT INTO {} (pid, icd) SELECT id, c FROM {}, unnest(codes) c").format(
        sql.SQL(t.long_name), ident))
    conn.execute("SELECT deid.load_hierarchy(%s, %s)", [t.code_hierarchy, "\n".join(
        f"c{j};g{j // 4};*" for j in range(CODE_POOL))])
    for c in t.columns:
        if not c.hierarchy:
            continue
        present = [v for v in c.values if v is not None]
        if c.kind == "text":
            conn.execute("SELECT deid.load_hierarchy(%s, %s)", [c.hierarchy, _member_rows(present or ["zqnone"])])
        else:
            hi = int(max(present, default=0)) + 1
            conn.execute("SELECT deid.interval_hierarchy(%s, 0, %s, %s)",
                         [c.hierarchy, max(hi, 40), rng.choice(([5, 20], [10], [2, 10, 40]))])
    for c in t.columns:
        if c.role:
            conn.execute("SELECT deid.set_role(%s, %s, %s, %s, source => %s)",
                         [t.name, c.name, c.role, c.hierarchy, c.source])
    zip_col = t.col("zip")
    if zip_col.hierarchy and rng.random() < 0.08:     # a value outside the hierarchy, after binding
        conn.execute(sql.SQL("UPDATE {} SET zip = 'zqzxout' WHERE id = %s").format(ident), [ids[0]])
        zip_col.values[0] = "zqzxout"
    for rel in (t.name, t.long_name):
        conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(sql.SQL(rel), sql.Identifier(analyst)))
        conn.execute("SELECT deid.allow_requests(%s, %s, %s)", [researcher, rel, t.min_k])


def drop(conn, t):
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}, {} CASCADE").format(sql.SQL(t.name), sql.SQL(t.long_name)))
    conn.execute(sql.SQL("DROP TYPE IF EXISTS {} CASCADE").format(sql.SQL(t.enum_type)))
    for h in t.hierarchies:
        try:
            conn.execute("SELECT deid.drop_hierarchy(%s) FROM deid.hierarchy WHERE name = %s", [h, h])
        except Exception:       # a committed release still names it: it stays
            pass
