"""datapath.read on a real server: text columns in the one pass (64-bit hashes, the dictionary
from one row per distinct hash), and row ids that must not be NULL."""
import datetime
import hashlib
import json

import numpy as np
import psycopg
import pytest
from psycopg import sql

from conftest import sqlstate_of


def probe(conn, table, columns, rid=None):
    out = conn.execute("SELECT deid._datapath_probe(%s::regclass, %s, %s)",
                       [table, columns, rid]).fetchone()[0]
    return json.loads(out) if isinstance(out, str) else out


def test_text_codes_from_the_one_pass(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_dp")
    admin.execute("CREATE TABLE public.t_dp (id int PRIMARY KEY, a text, b text COLLATE \"C\","
                  " n int)")
    admin.execute("INSERT INTO t_dp SELECT i, CASE WHEN i % 7 = 0 THEN NULL ELSE"
                  " (ARRAY['b', 'Ä', 'a', 'B'])[1 + i % 4] END, (ARRAY['b', 'a', 'B'])[1 + i % 3],"
                  " i FROM generate_series(1, 500) i")
    out = probe(admin, "t_dp", ["a", "b", "n"])
    for col in ("a", "b"):
        expected = [r[0] for r in admin.execute(
            f"SELECT DISTINCT {col} FROM t_dp WHERE {col} IS NOT NULL ORDER BY 1").fetchall()]
        assert out["columns"][col]["dictionary"] == expected          # the column's collation
        first = [r[0] for r in admin.execute(f"SELECT {col} FROM t_dp ORDER BY id LIMIT 3")]
        assert out["columns"][col]["labels"] == first
    assert out["columns"]["a"]["nulls"] == 500 // 7
    assert out["columns"]["b"]["dictionary"] == ["B", "a", "b"]


def test_null_row_ids_are_refused(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_dp_null")
    admin.execute("CREATE TABLE public.t_dp_null (k int UNIQUE, a text)")
    admin.execute("INSERT INTO t_dp_null SELECT CASE WHEN i = 3 THEN NULL ELSE i END, 'x'"
                  " FROM generate_series(1, 10) i")
    with pytest.raises(psycopg.Error) as e:
        probe(admin, "t_dp_null", ["a"], "k")
    assert sqlstate_of(e) == "22004"
    assert "NULL" in e.value.diag.message_primary and e.value.diag.message_hint


@pytest.mark.parametrize("with_nulls", [False, True])
def test_four_byte_fields_sent_in_pairs_read_back_exactly(admin, with_nulls):
    """The packed read sends two 4-byte fields as one int8 ((a << 32) | (b & 0xffffffff)): the
    same bytes as the two int4s. Extremes of int4 and int2, dates either side of 1970, an odd
    number of 4-byte fields among 8-byte ones, both passes (without and with NULLs)."""
    admin.execute("DROP TABLE IF EXISTS public.t_dp_pairs")
    admin.execute("CREATE TABLE public.t_dp_pairs (id int PRIMARY KEY, a int, big bigint, b int,"
                  " d date, s smallint, f float8)")
    admin.execute("INSERT INTO t_dp_pairs VALUES"
                  " (1, -2147483648, -9223372036854775808, 2147483647, '1900-02-28', -32768, -0.5),"
                  " (2, -1, 9223372036854775807, 0, '2100-12-31', 32767, 12345.25),"
                  " (3, 2147483647, 0, -2147483648, '1970-01-01', -1, 0),"
                  " (4, 0, 1, -1, '1969-12-31', 0, 2)")
    if with_nulls:
        admin.execute("INSERT INTO t_dp_pairs VALUES (5, NULL, NULL, 7, NULL, 3, NULL),"
                      " (6, 8, 9, NULL, '2000-01-01', NULL, 1)")
    out = probe(admin, "t_dp_pairs", ["a", "big", "b", "d", "s", "f"], "id")
    cols = out["columns"]
    assert out["rid_first"] == [1, 2, 3]
    assert cols["a"]["first"] == [-2147483648, -1, 2147483647]
    assert cols["big"]["first"] == [-9223372036854775808, 9223372036854775807, 0]
    assert cols["b"]["first"] == [2147483647, 0, -2147483648]
    days = [r[0] for r in admin.execute("SELECT d - DATE '1970-01-01' FROM t_dp_pairs ORDER BY id"
                                        " LIMIT 3")]
    assert cols["d"]["first"] == days
    assert cols["s"]["first"] == [-32768, 32767, -1]
    assert cols["f"]["first"] == [-0.5, 12345.25, 0]
    assert out["rows"] == (6 if with_nulls else 4)
    assert [cols[c]["nulls"] for c in ("a", "big", "b", "d", "s", "f")] == \
        ([1, 1, 1, 1, 1, 1] if with_nulls else [0] * 6)


def _frame_md5(admin, table, rid, columns):
    """The probe's md5 computed from a plain SELECT in ctid order (the order of one sequential
    scan): row ids, then per column its values as int64 (ints; dates as days since 1970;
    text as its code in the column's sort order, NULL = the dictionary's length) or float64,
    NULL values 0, and the NULL flags."""
    rows = admin.execute(sql.SQL("SELECT {}, {} FROM {} ORDER BY ctid").format(
        sql.Identifier(rid), sql.SQL(", ").join(sql.Identifier(c) for c, _ in columns),
        sql.Identifier(table))).fetchall()
    digest = hashlib.md5(np.array([r[0] for r in rows], "<i8").tobytes())
    for j, (name, kind) in enumerate(columns, start=1):
        vals = [r[j] for r in rows]
        null = np.array([v is None for v in vals], np.uint8)
        if kind == "text":
            labels = [r[0] for r in admin.execute(
                sql.SQL("SELECT DISTINCT {0} FROM {1} WHERE {0} IS NOT NULL ORDER BY 1").format(
                    sql.Identifier(name), sql.Identifier(table)))]
            code = {v: i for i, v in enumerate(labels)}
            arr = np.array([len(labels) if v is None else code[v] for v in vals], "<i8")
        elif kind == "date":
            epoch = datetime.date(1970, 1, 1)
            arr = np.array([0 if v is None else (v - epoch).days for v in vals], "<i8")
        elif kind == "float":
            arr = np.array([0.0 if v is None else v for v in vals], "<f8")
        else:
            arr = np.array([0 if v is None else v for v in vals], "<i8")
        digest.update(arr.tobytes())
        digest.update(null.tobytes())
    return digest.hexdigest()


@pytest.mark.parametrize("with_nulls", [False, True])
def test_large_table_read_in_parallel_parts_is_the_one_pass(admin, with_nulls):
    """A plain table of >= readpass.PARALLEL_MIN_PAGES pages is read as four ctid ranges in one
    UNION ALL (parallel workers when PostgreSQL grants them): the frame is exactly the one a
    single sequential pass reads -- every row once, in page order, text codes from the
    inlined seed's hashes, both passes (a NULL makes the second one run) -- with workers and
    without (max_parallel_workers_per_gather = 0)."""
    admin.execute("DROP TABLE IF EXISTS public.t_dp_par")
    admin.execute("CREATE TABLE public.t_dp_par (id bigint PRIMARY KEY, a int, b bigint, d date,"
                  " f float8, c text) WITH (fillfactor = 10)")
    null = "CASE WHEN i % 101 = 0 THEN NULL ELSE {} END" if with_nulls else "{}"
    admin.execute("INSERT INTO t_dp_par SELECT i * 7 % 30011, " + null.format("i % 97 - 40")
                  + ", i::bigint * 1000003, " + null.format("DATE '1960-01-01' + i % 4000")
                  + ", " + null.format("i / 8.0") + ", " + null.format("'v' || (i % 37)")
                  + " FROM generate_series(1, 30000) i")
    admin.execute("DELETE FROM t_dp_par WHERE id % 1000 = 0")     # holes in some pages
    admin.execute("VACUUM ANALYZE t_dp_par")
    columns = [("a", "int"), ("b", "int"), ("d", "date"), ("f", "float"), ("c", "text")]
    expected = _frame_md5(admin, "t_dp_par", "id", columns)
    out = probe(admin, "t_dp_par", [c for c, _ in columns], "id")
    assert out["parts"] == 4
    assert out["rows"] == admin.execute("SELECT count(*) FROM t_dp_par").fetchone()[0]
    assert out["md5"] == expected
    assert out["columns"]["c"]["nulls"] == admin.execute(
        "SELECT count(*) FROM t_dp_par WHERE c IS NULL").fetchone()[0]
    assert (out["columns"]["c"]["nulls"] > 0) == with_nulls
    admin.execute("SET max_parallel_workers_per_gather = 0")
    try:
        assert probe(admin, "t_dp_par", [c for c, _ in columns], "id")["md5"] == expected
    finally:
        admin.execute("RESET max_parallel_workers_per_gather")
    admin.execute("DROP TABLE t_dp_par")


def test_small_table_read_in_one_pass(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_dp_small")
    admin.execute("CREATE TABLE public.t_dp_small (id int PRIMARY KEY, a int)")
    admin.execute("INSERT INTO t_dp_small SELECT i, i % 5 FROM generate_series(1, 1000) i")
    out = probe(admin, "t_dp_small", ["a"], "id")
    assert out["parts"] == 1
    assert out["md5"] == _frame_md5(admin, "t_dp_small", "id", [("a", "int")])
    admin.execute("DROP TABLE t_dp_small")
