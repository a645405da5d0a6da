"""deid.anonymize_request(method => 'generalization') on a real server: the
paper's use case (002 sec. 5, Tables 6-9) end to end, selection rules, the
predicate whitelist and k per source system."""
import importlib.util
import json
import pathlib

import psycopg
import pytest

from conftest import hint_of, sqlstate_of

_spec = importlib.util.spec_from_file_location(
    "use_case_data", pathlib.Path(__file__).resolve().parents[1] / "unit" / "test_generalize.py")
uc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uc)
SELECTION = "localisation='Mamma' AND pt='1' AND g='1'"


@pytest.fixture(scope="module")
def mamma(admin):
    admin.execute("DROP TABLE IF EXISTS public.mamma")
    admin.execute("CREATE TABLE public.mamma (id int PRIMARY KEY, localisation text, pt text, pn text,"
                  " pm text, g text, r text)")
    with admin.cursor() as cur:
        cur.executemany("INSERT INTO mamma VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [(i + 1, *row) for i, row in enumerate(uc.SHARED_TABLE)])
    for a in uc.ORDER:
        admin.execute("SELECT deid.drop_hierarchy(%s) FROM deid.hierarchy WHERE name = %s",
                      ["m_" + a, "m_" + a])
        admin.execute("SELECT deid.load_hierarchy(%s, %s, %s)",
                      ["m_" + a, "\n".join(";".join(r) for r in uc.LEVELS[a]), [float(x) for x in uc.LOSS[a]]])
        admin.execute("SELECT deid.set_role('mamma', %s, 'quasi_identifier', %s, source => 'findings')",
                      [a, "m_" + a])
    return admin


def gen(conn, release, k=2, selection=SELECTION, options=None, table="mamma", columns=None):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'generalization', k => %s, columns => %s,"
        " selection => %s, options => %s, release => %s)",
        [table, k, columns, selection, json.dumps(options or {}), release]).fetchone()


def metrics(conn, release):
    return conn.execute("SELECT metrics FROM deid.release WHERE name = %s AND status = 'committed'",
                        [release]).fetchone()[0]


def test_table8_steps_r_then_pt(mamma):
    rid, relations, rows, groups, _, verified = gen(
        mamma, "m_t8", options={"priorities": {"r": 0.20, "pm": 0.40, "pn": 0.60, "pt": 0.80}})
    assert verified and relations == ["release.m_t8"] and rows == 42 and groups == 16
    m = metrics(mamma, "m_t8")
    assert [(s["attribute"], s["from"], s["to"]) for s in m["steps"]] == [("r", 0, 1), ("pt", 0, 1)]
    assert [round(s["cost"], 6) for s in m["steps"]] == [0.2, 0.24]
    assert m["suppressed"] == ["r"]
    released = mamma.execute("SELECT DISTINCT pt, r, localisation, g FROM release.m_t8").fetchall()
    assert released == [("1", "*", "Mamma", "1")]
    assert mamma.execute("SELECT min(c) FROM (SELECT count(*) c FROM release.m_t8"
                         " GROUP BY localisation, pt, pn, pm, g, r) s").fetchone()[0] >= 2
    assert mamma.execute("SELECT count(*) FROM deid.equivalence_class WHERE release_id = %s",
                         [rid]).fetchone()[0] == 16


def test_table9_pn_and_pt_nothing_suppressed(mamma):
    _, _, rows, groups, _, verified = gen(
        mamma, "m_t9", options={"priorities": {"pn": 0.80, "r": 0.60, "pm": 0.40, "pt": 0.20},
                                "limits": {"pm": 0, "pt": 1}})
    m = metrics(mamma, "m_t9")
    assert [s["attribute"] for s in m["steps"]] == ["pt", "pn"]
    assert m["suppressed"] == [] and groups == 20 and verified
    assert mamma.execute("SELECT count(*) FROM release.m_t9 WHERE pn IN ('1mi', '1a', '1b')"
                         ).fetchone()[0] == 0          # PN shown at level 1


def test_selection_pins_and_caps(mamma):
    gen(mamma, "m_pins", options={"priorities": {"r": 0.2, "pt": 0.8}})
    m = metrics(mamma, "m_pins")
    assert m["limits"]["localisation"] == 0 and m["limits"]["g"] == 0 and m["limits"]["pt"] == 1
    # k = 43 > the 42 selected rows: refused, naming the blocking limits (pt capped at 1 by the
    # selection), nothing released
    with pytest.raises(psycopg.Error) as e:
        gen(mamma, "m_blocked", k=43)
    assert sqlstate_of(e) == "DE001"
    assert "pt" in str(e.value) and hint_of(e)
    assert not mamma.execute("SELECT 1 FROM pg_class WHERE relname = 'm_blocked'").fetchone()


def test_user_limit_smaller_than_selection_limit_wins(mamma):
    with pytest.raises(psycopg.Error) as e:
        gen(mamma, "m_lim", options={"limits": {"pt": 0, "r": 0, "pn": 0, "pm": 0}})
    assert sqlstate_of(e) == "DE001"


@pytest.mark.parametrize("selection, state, part", [
    ("1=1; DROP TABLE mamma", "42601", ";"),
    ("pt IN (SELECT pt FROM mamma)", "0A000", "SELECT"),
    ("lower(pt) = '1'", "0A000", "lower"),
    ("nope = 1", "42703", "nope"),
    ("pt::int = 1", "0A000", "cast"),
    ("pt = '1' -- comment", "42601", "comment"),
])
def test_rejected_predicates_create_nothing(mamma, selection, state, part):
    before = mamma.execute("SELECT count(*) FROM pg_class").fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        gen(mamma, "m_bad", selection=selection)
    assert sqlstate_of(e) == state
    assert part.lower() in str(e.value).lower()
    assert mamma.execute("SELECT count(*) FROM pg_class").fetchone()[0] == before
    assert mamma.execute("SELECT count(*) FROM mamma").fetchone()[0] == len(uc.SHARED_TABLE)


def test_k_per_source_on_sample(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_src")
    admin.execute("CREATE TABLE public.t_src AS SELECT patient_id, age, sex, race, pt, diagnosis"
                  " FROM registry.patients")
    admin.execute("ALTER TABLE t_src ADD PRIMARY KEY (patient_id)")
    admin.execute("SELECT deid.interval_hierarchy('s_age', 0, 120, '{5,10,20,40}')"
                  " WHERE NOT EXISTS (SELECT 1 FROM deid.hierarchy WHERE name = 's_age')")
    for name, rows in [("s_sex", "F;*\nM;*"), ("s_race", "white;*\nblack;*\nasian;*\nother;*"),
                       ("s_pt", "1a;1;*\n1b;1;*\n1c;1;*\n1mic;1;*\n2a;2;*\n2b;2;*\n3;3;*\n4;4;*")]:
        admin.execute("SELECT deid.load_hierarchy(%s, %s) WHERE NOT EXISTS"
                      " (SELECT 1 FROM deid.hierarchy WHERE name = %s)", [name, rows, name])
    for col, h, src in [("age", "s_age", "registry"), ("sex", "s_sex", "registry"),
                        ("race", "s_race", "registry"), ("pt", "s_pt", "pathology")]:
        admin.execute("SELECT deid.set_role('t_src', %s, 'quasi_identifier', %s, source => %s)", [col, h, src])
    admin.execute("SELECT deid.set_role('t_src', 'diagnosis', 'sensitive')")
    for k in (5, 50):
        for search in ("greedy", "optimal"):
            name = f"t_src_{search}_{k}"
            r = gen(admin, name, k=k, selection=None, options={"search": search}, table="t_src")
            assert r[5] and r[2] == 3000
            for cols in ("age, sex, race", "pt"):
                assert admin.execute(f"SELECT min(c) FROM (SELECT count(*) c FROM release.{name}"
                                     f" GROUP BY {cols}) s").fetchone()[0] >= k
        g, o = metrics(admin, f"t_src_greedy_{k}"), metrics(admin, f"t_src_optimal_{k}")
        assert g["loss"] >= o["loss"] - 1e-9
    v = metrics(admin, "t_src_greedy_5")["verification"]
    assert set(v["sources"]) == {"registry", "pathology"}


def test_generalization_errors(mamma):
    for opts, state in [({"search": "best"}, "22023"), ({"priorities": {"pt": 2}}, "22023"),
                        ({"limits": {"zip": 1}}, "22023")]:
        with pytest.raises(psycopg.Error) as e:
            gen(mamma, "m_err", options=opts)
        assert sqlstate_of(e) == state and hint_of(e)
    with pytest.raises(psycopg.Error) as e:
        mamma.execute("SELECT * FROM deid.anonymize_request('mamma', 'generalization', k => 2, l => 2)")
    assert sqlstate_of(e) == "22023"
