"""The one writer of release tables: a ReleasePlan's tables -> tables in the release storage
schema, as deid_owner.

A table whose every column has a direct binary form (numbers, dates, text) is written with one
binary COPY (copy_files.copy_fields, through deid._copy_in). Otherwise every column goes into one
staging table of numbers (codes, encoded values, NULL flags, the row's position) and an
INSERT ... SELECT decodes them into the column's own type, in plan order. Either way the table
is created first with the plan's column types, so both paths give the same table.
"""
import numpy as np

from . import copybin, copy_files
from ..read.frame import EncodedColumn, encoded_array
from ..plan import Fixed, IntArrays, Labels, SourceCodes, SourceValues, Synthetic, TextArrays
from ..sqltext import qualified, quote_ident

_SYNTHETIC_BINARY = {"int2": ">i2", "int4": ">i4", "int8": ">i8", "float4": ">f4", "float8": ">f8"}
_FIXED = {np.dtype("int32"): ("integer", ">i4"), np.dtype("int64"): ("bigint", ">i8"),
          np.dtype("float64"): ("double precision", ">f8")}


def column_def(c):
    if isinstance(c, Fixed):
        return f"{quote_ident(c.name)} {_FIXED[c.values.dtype][0]} NOT NULL"
    if isinstance(c, Labels):
        return f"{quote_ident(c.name)} text"
    if isinstance(c, Synthetic):
        return f"{quote_ident(c.name)} {c.column.type} NOT NULL"
    if isinstance(c, TextArrays):
        return f"{quote_ident(c.name)} text[] NOT NULL"
    if isinstance(c, IntArrays):
        return f"{quote_ident(c.name)} integer[] NOT NULL"
    return f"{quote_ident(c.name)} {c.column.type}"


def binary_field(c):
    """The copybin field of a plan column, or None when its type has no direct binary form."""
    if isinstance(c, Fixed):
        return copybin.Fixed(c.values, _FIXED[c.values.dtype][1])
    if isinstance(c, Labels):
        return copybin.Text(c.codes, c.labels)
    if isinstance(c, TextArrays):
        return copybin.Array(np.diff(c.offsets), copybin.Text(c.codes, c.labels), copybin.TEXTOID)
    if isinstance(c, IntArrays):
        return copybin.Array(np.diff(c.offsets), copybin.Fixed(np.asarray(c.values, np.int64), ">i4"),
                             copybin.INT4OID)
    if isinstance(c, SourceValues):
        return copy_files.binary_field(c.values, c.column, c.take)
    if isinstance(c, Synthetic):
        return synthetic_field(c)
    return copy_files.dictionary_field(c.values, c.column, c.codes, c.dictionary, c.row_codes)


def synthetic_field(c):
    """Synthetic numbers in the column's own binary form: integers (rounded, as they are
    whole already) and floats directly, dates as days; None for numeric (staged, cast)."""
    base = c.column.base_type
    if base == "date":
        return copybin.Fixed.date(np.rint(c.values).astype(np.int64))
    if base in _SYNTHETIC_BINARY:
        dt = _SYNTHETIC_BINARY[base]
        v = c.values if dt[1] == "f" else np.rint(c.values).astype(np.int64)
        return copybin.Fixed(v, dt)
    return None


def write_table(db, schema, table):
    """Create and fill one release table; returns its unqualified name."""
    target = qualified(schema, table.name)
    db.execute(f"CREATE TABLE {target} ({', '.join(column_def(c) for c in table.columns)})")
    fields = [binary_field(c) for c in table.columns]
    names = [c.name for c in table.columns]
    if all(f is not None for f in fields):
        copy_files.copy_fields(db, target, names, fields)
    else:
        _write_staged(db, schema, target, table)
    return table.name


def _write_staged(db, schema, target, table):
    stage = qualified(schema, f"_stage_{table.name}"[:63])
    arrays, params, exprs = [("__row", np.arange(table.rows, dtype=np.int64))], [], []
    for j, c in enumerate(table.columns):
        if isinstance(c, Fixed):
            arrays.append((f"c{j}", c.values))
            exprs.append(f"s.c{j}")
        elif isinstance(c, Synthetic):
            arrays.append((f"c{j}", np.asarray(c.values, dtype=np.float64)))
            exprs.append(f"(DATE '1970-01-01' + s.c{j}::int)" if c.column.base_type == "date"
                         else f"s.c{j}::{c.column.type}")
        elif isinstance(c, (Labels, SourceCodes)):
            labels = c.labels if isinstance(c, Labels) else c.dictionary
            arrays.append((f"c{j}", np.asarray(c.codes, dtype=np.int64)))
            params.append(list(labels))
            cast = "" if isinstance(c, Labels) else f"::{c.column.type}"
            exprs.append(f"(${len(params)}::text[])[s.c{j} + 1]{cast}")
        else:
            col = c.values if c.take is None else EncodedColumn(
                c.values.name, c.values.kind, c.values.values[c.take], c.values.null[c.take],
                c.values.dictionary)
            arrays.append((f"c{j}", encoded_array(col)))
            if col.null.any():
                arrays.append((f"n{j}", col.null.astype(np.int32)))
            exprs.append(copy_files.decode_expr(j, col, c.column, params))
    copy_files.write_table(db, stage, arrays)
    cols = ", ".join(quote_ident(c.name) for c in table.columns)
    db.execute(f"INSERT INTO {target} ({cols}) SELECT {', '.join(exprs)} FROM {stage} s"
               " ORDER BY s.__row", params, ["text[]"] * len(params))
    db.execute(f"DROP TABLE {stage}")
