"""Write: result arrays -> a new table. The arrays are packed into a PostgreSQL binary
COPY file (copybin; text format where it is smaller: copytext) in a private temporary file
of the server, and ``COPY ... FROM`` it runs through deid._copy_in (the only holder of
pg_read_server_files).
"""
import itertools
import os
import numpy as np

from . import copybin, copytext
from ..read.frame import encoded_array
from ..sqltext import quote_ident


_SQL_TYPES = {np.dtype("int64"): ("bigint", ">i8"), np.dtype("int32"): ("integer", ">i4"),
              np.dtype("float64"): ("double precision", ">f8")}
_counter = itertools.count()


def _temp_path(db, suffix=""):
    # A backend's working directory is the cluster's data directory (deid_owner may not
    # read the data_directory setting).
    base = os.path.join(os.getcwd(), "base", "pgsql_tmp")
    os.makedirs(base, mode=0o700, exist_ok=True)
    # The pgsql_tmp prefix makes the server remove leftovers at restart.
    return os.path.join(base, f"pgsql_tmpdeid{os.getpid()}.{next(_counter)}{suffix}")


def copy_fields(db, table, column_names, fields):
    """COPY copybin fields into an existing table of deid's (`table` already quoted)
    through a private server-side file (mode 0600, removed in finally). The COPY runs in
    deid._copy_in, the one function that holds pg_read_server_files; it refuses any table
    where a caller's code could run (sql/06_privileged.sql). Fields that are all dictionary
    text go as COPY's text format (copytext: cheaper for the server to load), the file's name
    ending in ".text", which is how deid._copy_in tells the format; all others as binary."""
    if not fields or len(fields[0]) == 0:
        return 0
    text = copytext.accepts(fields)
    if not text:
        order = copybin.field_order(fields)
        fields = [fields[i] for i in order]
        column_names = [column_names[i] for i in order]
    path = _temp_path(db, ".text" if text else "")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            (copytext if text else copybin).write(f, fields)
        return db.value("SELECT deid._copy_in($1::regclass, $2, $3)",
                        [table, list(column_names), path], ["text", "text[]", "text"])
    finally:
        os.unlink(path)


def copy_into(db, table, column_names, arrays):
    """Append NULL-free numeric arrays to an existing table."""
    fields = [copybin.Fixed(np.ascontiguousarray(a), _SQL_TYPES[a.dtype][1]) for a in arrays]
    return copy_fields(db, table, column_names, fields)


def write_table(db, table, columns, temporary=False):
    """Create `table` (already quoted) with columns [(name, ndarray)] and fill it."""
    defs = ", ".join(f"{quote_ident(name)} {_SQL_TYPES[a.dtype][0]} NOT NULL" for name, a in columns)
    db.execute(f"CREATE {'TEMPORARY ' if temporary else ''}TABLE {table} ({defs})")
    return copy_into(db, table, [c for c, _ in columns], [a for _, a in columns])


_BINARY_TEXT = {"text", "varchar", "bpchar", "name"}
_BINARY_NUMBER = {"int2": ">i2", "int4": ">i4", "int8": ">i8", "float4": ">f4", "float8": ">f8"}


def binary_field(col, column, order=None):
    """A copybin field writing `col` back in the source column's own type, its records the
    rows `order` (None: as they are; gathered as the image is laid out), or None when that
    type has no direct binary form here (numeric, timestamps, non-text categories): then use
    stage() + decode_expr()."""
    null = col.null if col.null.any() else None
    if col.kind == "category":
        return copybin.Text(col.values, col.dictionary, order) if column.base_type in _BINARY_TEXT \
            else None
    if col.kind == "date":
        return copybin.Fixed.date(col.values, null, order)
    if column.base_type in _BINARY_NUMBER:
        return copybin.Fixed(col.values, _BINARY_NUMBER[column.base_type], null, order)
    return None


def dictionary_field(col, column, codes, dictionary, row_codes):
    """A copybin field writing dictionary `codes` back in the column's own type,
    or None when that type has no direct binary form. `row_codes` are every
    row's codes (value_dictionary), which give each code its value in O(n)."""
    null = codes >= len(dictionary)
    if col.kind == "category":
        return copybin.Text(codes, dictionary) if column.base_type in _BINARY_TEXT else None
    value_of = np.zeros(len(dictionary) + 1, dtype=col.values.dtype)
    value_of[row_codes] = col.values            # every row of a code holds the same value
    values = value_of[codes]
    if col.kind == "date":
        return copybin.Fixed.date(values, null)
    if column.base_type in _BINARY_NUMBER:
        return copybin.Fixed(values, _BINARY_NUMBER[column.base_type], null)
    return None


# ------------------------------------------------------------ staging frames
def stage(db, table, frame, extra, columns):
    """Write rid, `extra` [(name, int array)] and the encoded `columns` of
    `frame` to a new table (already quoted). Encoded columns are named c0, c1,
    ... in the order of `columns`; NULL flags n0, n1, ... where any."""
    arrays = [("rid", frame.rid)] + list(extra)
    for j, name in enumerate(columns):
        col = frame.columns[name]
        arrays.append((f"c{j}", encoded_array(col)))
        if col.null.any():
            arrays.append((f"n{j}", col.null.astype(np.int32)))
    write_table(db, table, arrays)
    db.execute(f"ANALYZE {table}")


def decode_expr(j, col, column, params):
    """SQL expression rebuilding column `j` of a staging table (alias s) in the
    source's own type; category dictionaries become bound parameters appended
    to `params`."""
    c = f"s.c{j}"
    if col.kind == "category":
        params.append(list(col.dictionary))
        expr = f"(${len(params)}::text[])[{c} + 1]::{column.type}"
    elif col.kind == "date":
        expr = f"(DATE '1970-01-01' + {c}::int)::{column.type}"
    elif col.kind == "time":
        expr = f"to_timestamp({c})::{column.type}"
    else:
        expr = f"{c}::{column.type}"
    if col.null.any() and col.kind != "category":
        expr = f"CASE WHEN s.n{j} = 1 THEN NULL ELSE {expr} END"
    return expr


