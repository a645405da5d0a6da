"""Read: chosen columns of a relation -> numpy arrays (a Frame), in one pass.

Reading runs ONE aggregate query whose result holds every row's fields packed
as big-endian binary, row after row (``string_agg(int8send(...) || ...)``): a normal
SELECT, so the selection predicate's literals stay bound parameters, and no
row is ever converted to a Python object. Without a selection, a large plain table's
pass is a UNION ALL of ctid ranges that PostgreSQL may run in parallel workers
(parallel_pass.run).

Encodings (docs/dev/architecture.md, "Data path"):
  int      smallint/integer/bigint           -> int64 values
  date     date                              -> int64 days since 1970-01-01
  float    real/double/numeric               -> float64
  time     timestamp/timestamptz             -> float64 seconds since epoch
  category anything else (text, bool, ...)   -> int64 codes 0..D-1 in sort order,
                                                the dictionary of D labels;
                                                NULL gets the code D (read()
                                                says how the one pass gets them)
NULLs: values are 0 (codes D) and ``null`` marks them.
"""
import secrets
from dataclasses import dataclass
import numpy as np

from . import parallel_pass
from .frame import EncodedColumn, Frame, value_dictionary  # noqa: F401 (re-exported)
from ..errors import DeidError, NULL_VALUE_NOT_ALLOWED, SERIALIZATION_FAILURE
from ..segments import ranges
from .hashcodes import codes_from_hashes, distinct_hashes, low_16_bits
from ..sqltext import quote_ident


FLAG_BITS = 62                 # NULL flags per int8 word (no sign bit, no surprises)
_INT = {"int2", "int4", "int8"}
_FLOAT = {"float4", "float8", "numeric"}
_TIME = {"timestamp", "timestamptz"}


def column_kind(base_type):
    if base_type in _INT:
        return "int"
    if base_type == "date":
        return "date"
    if base_type in _FLOAT:
        return "float"
    if base_type in _TIME:
        return "time"
    return "category"


def _value_expr(kind, base_type, col):
    """(send function, SQL value, its default for NULL) packing one value in its native width,
    and the numpy dtype to read it."""
    if kind == "int":
        if base_type == "int8":
            return ("int8send", col, "0"), ">i8"
        return ("int4send", f"{col}::int4", "0"), ">i4"
    if kind == "date":
        return ("int4send", f"{col} - DATE '1970-01-01'", "0"), ">i4"
    if kind == "float":
        return ("float8send", f"{col}::float8", "0"), ">f8"
    if kind == "time":
        return ("float8send", f"extract(epoch FROM {col})::float8", "0"), ">f8"
    raise AssertionError(kind)


def _dictionaries(db, src, where, params, cols, seed=None):
    """Distinct non-NULL text values of every categorical column, in sort
    order, with their hashtext() (with `seed`: hashtextextended(v, seed)) -- from ONE
    scan (GROUPING SETS) per 31 columns (GROUPING() takes at most 31 arguments)."""
    if not cols:
        return {}
    if len(cols) > 31:
        out = {}
        for i in range(0, len(cols), 31):
            out.update(_dictionaries(db, src, where, params, cols[i:i + 31], seed))
        return out
    m = len(cols)
    vs = [f"v{i}" for i in range(m)]
    inner = ", ".join(f"(t.{quote_ident(c.name)})::text AS v{i}" for i, c in enumerate(cols))
    types = ["text"] * len(params) + ([] if seed is None else ["bigint"])
    hash_of = (lambda v: f"hashtext({v})") if seed is None else \
        (lambda v: f"hashtextextended({v}, ${len(types)})")
    rows = db.query(
        f"SELECT GROUPING({', '.join(vs)}) AS g, {', '.join(f'{v}, {hash_of(v)} AS h{v}' for v in vs)}"
        f" FROM (SELECT {inner} FROM {src} t WHERE {where}) s"
        f" GROUP BY GROUPING SETS ({', '.join(f'({v})' for v in vs)}) ORDER BY 1, {', '.join(vs)}",
        list(params) + ([] if seed is None else [seed]), types)
    out = {c.name: ([], []) for c in cols}
    for r in rows:
        i = next(i for i in range(m) if not (r["g"] >> (m - 1 - i)) & 1)
        if r[f"v{i}"] is not None:
            out[cols[i].name][0].append(r[f"v{i}"])
            out[cols[i].name][1].append(r[f"hv{i}"])
    return out


def read(db, rel, columns, rid_column=None, selection=None):
    """Read `columns` (names of rel's columns) of the rows of `rel` that match
    `selection` ((sql, params) from request.Selection.render, or None).

    Categorical columns: with a row id, ONE pass reads every row's
    hashtextextended(value, seed) (64 bits, a random seed per read) beside the other
    values; the dictionary is then the text of one row per distinct hash, fetched by row id
    (_dictionary_by_rows), or -- for a column with very many distinct values -- one GROUPING
    SETS scan. Without a row id the dictionaries come first (one scan) and the pass reads
    hashtext() (32 bits), joining a dictionary where two of its values share one."""
    where, params = selection if selection else ("TRUE", [])
    params = list(params)
    types = ["text"] * len(params)
    src = rel.qualified
    cols = [rel.column(c) for c in columns]
    categories = [c for c in cols if column_kind(c.base_type) == "category"]
    # Without bound parameters the pass may run as parallel parts (parallel_pass.run); the read's
    # own seed is then written into the statement as an integer literal.
    cuts = [] if params else parallel_pass.parallel_cuts(db, rel)
    seed = secrets.randbits(62) if rid_column and categories else None
    seed_sql = None
    if seed is not None:
        params.append(seed)
        types.append("bigint")
        seed_sql = f"{int(seed)}::int8" if cuts else f"${len(params)}"
    dictionaries = {} if seed is not None else _dictionaries(db, src, where, params, categories)
    f = _fields(cols, rid_column, seed_sql, dictionaries, params, types)
    if f.joins:                 # they bind dictionaries as parameters: one serial pass
        cuts = []
    row = _packed_pass(db, f, (f"{src} t{''.join(f.joins)}", where), (params, types), cuts,
                       rid_column)
    n = int(row["n"])
    if row.get("null_rids"):
        raise DeidError(NULL_VALUE_NOT_ALLOWED, f'the row id "{rid_column}" is NULL in some rows',
                        hint=f'Every row needs an id: filter the NULLs out with selection => '
                             f'\'"{rid_column}" IS NOT NULL\', or choose another row_id.',
                        data_dependent=True)
    layout = parallel_pass.layout(f.dtypes)
    packed = np.frombuffer(row["c"], layout)
    if len(packed) != n:
        raise DeidError(SERIALIZATION_FAILURE, f"the rows of {rel.display} changed while the request"
                        " read them", hint="Run the request again.")
    hashed64 = {c.name for c in categories} if seed is not None else set()
    arrays, slots = _unpacked(packed, f, hashed64)
    del packed
    flag_words = {int(k[6:]): arrays.pop(k) for k in [k for k in arrays if k.startswith("__null")]}
    out = {}
    for j, c in enumerate(cols):
        word = flag_words.get(j // FLAG_BITS)
        null = ((word >> (j % FLAG_BITS)) & 1).astype(bool) if word is not None else np.zeros(n, bool)
        values = arrays[c.name]
        if seed is not None and c.name not in dictionaries and column_kind(c.base_type) == "category":
            dictionaries[c.name], values = _dictionary_by_rows(
                db, src, where, params, rid_column, c, arrays["__rid"], values, null, seed,
                low_16_bits(row["c"], layout, slots[c.name], n))
        elif c.name in f.hashed:
            values = codes_from_hashes(c.name, values, dictionaries[c.name][1], null)
        dictionary = dictionaries[c.name][0] if c.name in dictionaries else None
        out[c.name] = EncodedColumn(c.name, column_kind(c.base_type), values, null, dictionary)
    return Frame(n, arrays.get("__rid"), out)


class _Fields:
    """What one pass of read() selects: per field its (send function, expression, NULL
    default), binary dtype and name; the dictionaries it joins; its NULL flag terms (flag word,
    term); the columns read as 32-bit hashtext()."""

    def __init__(self):
        self.select, self.joins, self.dtypes, self.names = [], [], [], []
        self.null_terms, self.hashed = [], set()


def _fields(cols, rid_column, seed_sql, dictionaries, params, types):
    """The fields of read()'s pass (``seed_sql``: the 64-bit hash seed's SQL, or None when the
    dictionaries came first); a joined dictionary is bound as a parameter (appended to
    ``params`` and ``types``)."""
    f = _Fields()
    if rid_column:
        f.select.append(("int8send", f"t.{quote_ident(rid_column)}::int8", None))
        f.dtypes.append(">i8")
        f.names.append("__rid")
    for j, c in enumerate(cols):
        q = "t." + quote_ident(c.name)
        kind = column_kind(c.base_type)
        if kind == "category" and seed_sql is not None:
            f.select.append(("int8send", f"hashtextextended(({q})::text, {seed_sql})", "0"))
            f.dtypes.append(">i8")
        elif kind == "category":
            dictionary, hashes = dictionaries[c.name]
            if len(set(hashes)) == len(hashes):      # codes from hashtext(): no join
                f.select.append(("int4send", f"hashtext(({q})::text)", "0"))
                f.hashed.add(c.name)
            else:                                    # a hash collision: join the dictionary
                params.append(dictionary)
                types.append("text[]")
                alias = f"d{j}"
                f.joins.append(f" LEFT JOIN unnest(${len(params)}::text[]) WITH ORDINALITY"
                               f" AS {alias}(__deid_v, __deid_o) ON {alias}.__deid_v = ({q})::text")
                f.select.append(("int4send", f"{alias}.__deid_o::int4 - 1", str(len(dictionary))))
            f.dtypes.append(">i4")
        else:
            expr, dt = _value_expr(kind, c.base_type, q)
            f.select.append(expr)
            f.dtypes.append(dt)
        f.names.append(c.name)
        if not c.not_null:      # NULL flags: bit j % 62 of flag word j // 62
            f.null_terms.append((j // FLAG_BITS,
                                 f"((({q}) IS NULL)::int::int8 << {j % FLAG_BITS})"))
    f.select, f.dtypes, f.names = parallel_pass.int4_last(f.select, f.dtypes, f.names)
    return f


def _packed_pass(db, f, base, bound, cuts, rid_column):
    """The row of read()'s pass over ``base`` (from, where) with ``bound`` (params, types):
    ``c``, every row's fields packed back to back, and ``n``, the rows counted.

    One aggregate packs every row's fields (one transition per row, not one per column). A
    NULL field makes its row's pack NULL, which string_agg skips: most reads have no NULL at
    all, so the first pass packs the values as they are and counts the rows; if fewer rows
    were packed than counted (a NULL value, or a NULL row id), the second pass packs NULLs as
    defaults with their flags (fields __null<word> added to ``f``), and counts the NULL row
    ids (``null_rids``)."""
    params, types = bound
    row = parallel_pass.run(db, f"{parallel_pass.packed(f.select, nulls=False)}, count(*) AS n",
                            base, params, types, cuts)
    if len(row["c"]) == int(row["n"]) * parallel_pass.layout(f.dtypes).itemsize:
        return row
    for word in sorted({w for w, _ in f.null_terms}):    # flags beside the values they mark
        f.select.append(("int8send", " | ".join(t for w, t in f.null_terms if w == word), None))
        f.dtypes.append(">i8")
        f.names.append(f"__null{word}")
    extra = f", count(*) FILTER (WHERE t.{quote_ident(rid_column)} IS NULL) AS null_rids" \
        if rid_column else ""
    return parallel_pass.run(db, f"{parallel_pass.packed(f.select, nulls=True)}, count(*) AS n{extra}",
                             base, params, types, cuts)


def _unpacked(packed, f, hashed64):
    """The pass's fields as arrays ({name: array}) and, for the columns of 64-bit hashes
    (``hashed64``), their field index ({name: i})."""
    arrays, slots = {}, {}
    for i, (name, dt) in enumerate(zip(f.names, f.dtypes)):
        if name in hashed64:
            # 64-bit hashes become dictionary codes: read in place (big-endian), their
            # low 16 bits (what distinct_hashes tables them by) straight from the buffer
            arrays[name], slots[name] = packed[f"f{i}"], i
            continue
        # hashtext() values stay int32 until they become dictionary codes
        wide = np.float64 if dt[1] == "f" else np.int32 if name in f.hashed else np.int64
        arrays[name] = packed[f"f{i}"].astype(wide)
    return arrays, slots


REPRESENTATIVES_MAX = 1 << 15    # distinct values of a column fetched by row id; more: GROUP BY


def _dictionary_by_rows(db, src, where, params, rid_column, col, rid, hashes, null, seed,
                        slot=None):
    """((labels in sort order, their hashes), every row's code) of a categorical column whose
    rows' hashtextextended(v, seed) were read (`hashes`: int64, or the read's big-endian
    field; `slot`: their low 16 bits, if at hand): the text of one row per distinct hash,
    fetched by row id (or, for more than REPRESENTATIVES_MAX distinct hashes, a GROUPING SETS
    scan of the column). Two values with one 64-bit hash (a random seed per read makes that
    about D^2 / 2^65 likely) or a row changed since the pass raise SERIALIZATION_FAILURE: the
    request is run again."""
    q = "t." + quote_ident(col.name)
    present = np.flatnonzero(~null) if null.any() else None
    if present is None:
        distinct, first, index = distinct_hashes(hashes, slot=slot)
    else:
        distinct, first, index = distinct_hashes(hashes[present],
                                                 slot=None if slot is None else slot[present])
    if len(distinct) > REPRESENTATIVES_MAX:
        labels, label_hashes = _dictionaries(db, src, where, params[:-1], [col], seed)[col.name]
        label_hashes = np.asarray(label_hashes, np.int64)
    else:
        rows = first if present is None else present[first]
        found = db.query(f"SELECT DISTINCT ({q})::text AS v, hashtextextended(({q})::text, $2) AS h"
                         f" FROM {src} t WHERE t.{quote_ident(rid_column)} = ANY($1::int8[])"
                         f" AND ({q}) IS NOT NULL ORDER BY 1", [rid[rows].tolist(), seed],
                         ["int8[]", "bigint"])
        label_hashes = np.array([r["h"] for r in found], np.int64)
        keep = np.isin(label_hashes, distinct)       # (a duplicated row id may bring others)
        labels = [r["v"] for r, k in zip(found, keep.tolist()) if k]
        label_hashes = label_hashes[keep]
    order = np.argsort(label_hashes, kind="stable")
    pos = np.minimum(np.searchsorted(label_hashes[order], distinct), max(len(order) - 1, 0))
    code_of = order[pos] if len(order) else np.zeros(len(distinct), np.int64)
    if len(np.unique(label_hashes)) != len(label_hashes) or len(label_hashes) != len(distinct) \
            or not np.array_equal(label_hashes[code_of], distinct):
        raise DeidError(SERIALIZATION_FAILURE, f'the values of "{col.name}" could not be read'
                        " consistently", hint="Run the request again (the source was written to"
                        " concurrently, or two values shared a hash).")
    code_of = code_of.astype(np.int64, copy=False)
    if present is None:
        return (labels, label_hashes), index.take(code_of)
    codes = np.full(len(hashes), len(labels), np.int64)
    codes[present] = index.take(code_of)
    return (labels, label_hashes), codes


def read_spec(db, spec):
    """Read what a plan.ReadSpec (columns) or plan.SetReadSpec (sets, 003) names, as the role
    now current."""
    if getattr(spec, "record", None) is not None:
        return read_sets(db, spec.rel, spec.record, spec.item, long=spec.long,
                         selection=spec.selection)
    frame = read(db, spec.rel, spec.names, rid_column=spec.rid, selection=spec.selection)
    return frame.sorted_by_rid() if spec.by_rid else frame


# ------------------------------------------------------------------ writing


# ------------------------------------------------------------ staging frames


# ------------------------------------------------------------ set-valued columns
@dataclass
class SetColumn:
    """A set-valued column (e.g. the diagnosis codes of a record) as CSR arrays: record i holds
    codes[offsets[i]:offsets[i + 1]], codes into `dictionary` (its distinct items, sorted),
    de-duplicated and ascending within a record; `rid` the records' ids, ascending."""
    rid: np.ndarray
    offsets: np.ndarray
    codes: np.ndarray
    dictionary: list

    @property
    def n(self):
        return len(self.offsets) - 1


def read_sets(db, rel, rid_column, item_column, long=False, selection=None):
    """Read a set-valued column: an array column `item_column` of rows identified by
    `rid_column` (long=False), or a long table with one row per (record `rid_column`, item
    `item_column`) (long=True). One packed read of the record ids and the items' hashtext()
    (one scan, no sort: records are ordered in numpy), one for the sorted dictionary; NULL
    items and NULL record ids are refused. Every record with no item (an empty or NULL array)
    is kept, with no codes."""
    where, params = selection if selection else ("TRUE", [])
    src, rid_q, item_q = rel.qualified, "t." + quote_ident(rid_column), "t." + quote_ident(item_column)
    types = ["text"] * len(params)
    if long:
        items = f"SELECT {rid_q}::int8 AS r, {item_q}::text AS e FROM {src} t WHERE {where}"
        # one aggregate of 12-byte (record, hash) pairs: a second string_agg per row cost
        # more than the concatenation (a NULL drops its pair: refused below before use)
        packed = db.query(
            "SELECT string_agg(int8send(s.r) || int4send(hashtext(s.e)), ''::bytea) AS rh,"
            " count(*) FILTER (WHERE s.e IS NULL) AS nulls,"
            f" count(*) FILTER (WHERE s.r IS NULL) AS null_records FROM ({items}) s",
            list(params), types)[0]
        distinct = f"SELECT DISTINCT s.e AS v FROM ({items}) s WHERE s.e IS NOT NULL"
    else:
        rows = f"SELECT {rid_q}::int8 AS r, {item_q} AS a FROM {src} t WHERE {where}"
        packed = db.query(
            "SELECT string_agg(int8send(s.r), ''::bytea) AS rid,"
            " string_agg(int4send(coalesce(cardinality(s.a), 0)), ''::bytea) AS len,"
            " string_agg((SELECT string_agg(int4send(hashtext(e::text)), ''::bytea) FROM unnest(s.a) e),"
            "            ''::bytea) AS h,"
            " sum((SELECT count(*) FROM unnest(s.a) e WHERE e IS NULL)) AS nulls,"
            f" count(*) FILTER (WHERE s.r IS NULL) AS null_records FROM ({rows}) s",
            list(params), types)[0]
        distinct = f"SELECT DISTINCT e::text AS v FROM ({rows}) s, unnest(s.a) e"
    if packed["null_records"]:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, f'"{rid_column}" is NULL in some rows',
                        hint=f'Every record needs an id: filter the NULLs out with selection => '
                             f'\'"{rid_column}" IS NOT NULL\', or in a view over {rel.display}.',
                        data_dependent=True)
    if packed["nulls"]:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, f'"{item_column}" holds NULL items',
                        hint=f"Filter them out in a view over {rel.display}, or in the selection.",
                        data_dependent=True)
    dictionary = db.query(f"SELECT v, hashtext(v) AS h FROM ({distinct}) d ORDER BY v",
                          list(params), types)
    labels, label_hashes = [r["v"] for r in dictionary], [r["h"] for r in dictionary]
    if long:
        pairs = np.frombuffer(packed["rh"] or b"", [("r", ">i8"), ("h", ">i4")])
        packed = {"rid": pairs["r"], "h": pairs["h"]}
    rid, lengths, take = _records_by_id(packed, long)
    n = len(rid)
    if len(set(label_hashes)) == len(label_hashes):
        hashes = np.frombuffer(packed["h"] or b"", ">i4") if not long else packed["h"]
        hashes = hashes.astype(np.int32)[take]
        codes = codes_from_hashes(item_column, hashes, label_hashes, np.zeros(len(hashes), bool))
    else:           # two items share a hashtext(): codes from a join on the dictionary
        k = len(params) + 1
        expr = ("(SELECT d.o::int4 - 1 FROM unnest(${k}::text[]) WITH ORDINALITY d(v, o)"
                " WHERE d.v = {x})")
        if long:
            sql = (f"SELECT string_agg(int4send({expr.format(k=k, x='s.e')}), ''::bytea) AS c"
                   f" FROM ({items}) s")
        else:
            sql = (f"SELECT string_agg((SELECT string_agg(int4send({expr.format(k=k, x='e::text')}),"
                   f" ''::bytea) FROM unnest(s.a) e), ''::bytea) AS c FROM ({rows}) s")
        joined = db.query(sql, list(params) + [labels], types + ["text[]"])[0]
        codes = np.frombuffer(joined["c"] or b"", ">i4").astype(np.int64)
        if len(codes) != len(take):
            raise DeidError(SERIALIZATION_FAILURE, f'the values of "{item_column}" changed while '
                            "the request read them",
                            hint="Run the request again (the source was written to concurrently).")
        codes = codes[take]
    offsets, codes = _sorted_sets(codes, lengths)
    return SetColumn(rid, offsets, codes, labels)


def _records_by_id(packed, long):
    """(record ids ascending, each record's number of items, the order that takes the items
    record by record) of read_sets' packed read: a long table has one row per item (records
    are its distinct ids), an array column one row per record with its items back to back."""
    row_rid = (packed["rid"] if long else np.frombuffer(packed["rid"] or b"", ">i8")).astype(
        np.int64)
    order = np.argsort(row_rid, kind="stable")
    if long:                         # sorted already: the distinct ids without another sort
        ordered = row_rid[order]
        first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if ordered.size \
            else np.zeros(0, np.int64)
        return ordered[first], np.diff(np.r_[first, ordered.size]), order
    lengths = np.frombuffer(packed["len"] or b"", ">i4").astype(np.int64)
    take = ranges(np.cumsum(lengths)[order] - lengths[order], lengths[order])
    return row_rid[order], lengths[order], take


def _sorted_sets(codes, lengths):
    """CSR (offsets, codes) of records given by their items' ``codes`` back to back and
    ``lengths``: each record's codes ascending and de-duplicated."""
    n = len(lengths)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    record = np.repeat(np.arange(n), lengths)
    width = int(codes.max()) + 1 if len(codes) else 1
    if len(codes) and codes.min() >= 0 and float(max(n, 1)) * width < 2.0 ** 62:
        # one packed key, record after record: a stable sort merges the records' runs
        # (several times faster than the lexsort below; the same order of values)
        key = record * width + codes
        key.sort(kind="stable")
        record, codes = np.divmod(key, width)
        del key
    else:
        order = np.lexsort((codes, record))
        codes, record = codes[order], record[order]
    keep = np.ones(len(codes), bool)
    keep[1:] = (codes[1:] != codes[:-1]) | (record[1:] != record[:-1])
    codes, record = codes[keep], record[keep]
    np.cumsum(np.bincount(record, minlength=n), out=offsets[1:])
    return offsets, codes
