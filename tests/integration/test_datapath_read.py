"""datapath.read on a real server: text columns in the one pass (64-bit hashes, the dictionary
from one row per distinct hash), and row ids that must not be NULL."""
import json

import psycopg
import pytest

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
