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
