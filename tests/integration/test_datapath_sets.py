"""The data path reads set-valued columns (an array column, or a long (record, item) table)
as offsets plus codes, and reads more than 62 columns (NULL flags in several words)."""
import json

import pytest

READ_SETS = """
CREATE OR REPLACE FUNCTION pg_temp.read_sets(rel oid, rid text, item text, long boolean)
RETURNS text LANGUAGE plpython3u AS $$
import json
from deid.catalog import relations as catalog
from deid.read import snapshot
from deid.write import copy_files
from deid.pg import Database
db = Database()
s = snapshot.read_sets(db, catalog.relation(db, rel), rid, item, long)
return json.dumps({"rid": s.rid.tolist(), "offsets": s.offsets.tolist(), "codes": s.codes.tolist(),
                   "dictionary": s.dictionary})
$$"""


def decoded(result):
    r = json.loads(result)
    return {rid: [r["dictionary"][c] for c in r["codes"][r["offsets"][i]:r["offsets"][i + 1]]]
            for i, rid in enumerate(r["rid"])}


@pytest.fixture
def sets(admin):
    admin.execute("SELECT deid.usage()")
    admin.execute(READ_SETS)
    admin.execute("DROP TABLE IF EXISTS public.t_sets, public.t_long")
    admin.execute("CREATE TABLE public.t_sets (id int PRIMARY KEY, codes text[])")
    admin.execute("INSERT INTO public.t_sets VALUES (3, '{b,a,b}'), (1, '{c}'), (2, '{}'), (4, NULL),"
                  " (5, '{a,c,d}')")
    admin.execute("CREATE TABLE public.t_long (patient int, icd9 text)")
    admin.execute("INSERT INTO public.t_long VALUES (7, 'x'), (3, 'y'), (7, 'z'), (7, 'x'), (9, 'y')")
    yield admin
    admin.execute("DROP TABLE public.t_sets, public.t_long")


def test_array_column(sets):
    got = decoded(sets.execute("SELECT pg_temp.read_sets('public.t_sets'::regclass, 'id', 'codes', false)").fetchone()[0])
    assert got == {1: ["c"], 2: [], 3: ["a", "b"], 4: [], 5: ["a", "c", "d"]}


def test_long_table(sets):
    got = decoded(sets.execute("SELECT pg_temp.read_sets('public.t_long'::regclass, 'patient', 'icd9', true)").fetchone()[0])
    assert got == {3: ["y"], 7: ["x", "z"], 9: ["y"]}


def test_null_items_are_refused(sets):
    import psycopg
    sets.execute("INSERT INTO public.t_sets VALUES (6, '{a,NULL}')")
    with pytest.raises(psycopg.Error) as e:
        sets.execute("SELECT pg_temp.read_sets('public.t_sets'::regclass, 'id', 'codes', false)")
    # called outside deid's entry(), the DeidError arrives as PL/Python's 38000
    assert '"codes" holds NULL items' in str(e.value)


def test_more_than_62_columns(admin):
    cols = ", ".join(f"c{i} int" for i in range(70))
    admin.execute("DROP TABLE IF EXISTS public.t_wide")
    admin.execute(f"CREATE TABLE public.t_wide (id int PRIMARY KEY, {cols})")
    admin.execute("INSERT INTO public.t_wide (id, c0, c63, c69) VALUES (1, 5, NULL, 9), (2, NULL, 7, NULL)")
    out = (admin.execute(
        "SELECT deid._datapath_probe('public.t_wide'::regclass, %s, 'id', false)",
        [[f"c{i}" for i in range(70)]]).fetchone()[0])
    assert out["rows"] == 2
    assert out["columns"]["c0"]["nulls"] == 1 and out["columns"]["c63"]["nulls"] == 1
    assert out["columns"]["c69"]["nulls"] == 1 and out["columns"]["c5"]["nulls"] == 2
    admin.execute("DROP TABLE public.t_wide")


def test_items_sharing_a_hashtext(sets):
    """hashtext('x60568') = hashtext('x224631'): codes then come from a join on the dictionary,
    for both forms, in record order."""
    sets.execute("INSERT INTO public.t_sets VALUES (6, '{x224631,x60568,a}'), (0, '{x60568}')")
    sets.execute("INSERT INTO public.t_long VALUES (8, 'x60568'), (1, 'x224631'), (8, 'y')")
    got = decoded(sets.execute("SELECT pg_temp.read_sets('public.t_sets'::regclass, 'id', 'codes', false)").fetchone()[0])
    assert got == {0: ["x60568"], 1: ["c"], 2: [], 3: ["a", "b"], 4: [], 5: ["a", "c", "d"],
                   6: ["a", "x224631", "x60568"]}
    got = decoded(sets.execute("SELECT pg_temp.read_sets('public.t_long'::regclass, 'patient', 'icd9', true)").fetchone()[0])
    assert got == {1: ["x224631"], 3: ["y"], 7: ["x", "z"], 8: ["x60568", "y"], 9: ["y"]}
