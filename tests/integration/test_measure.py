"""k_anonymity, equivalence_classes, l_diversity against SQL ground truth."""
import psycopg
import pytest

from conftest import hint_of, sqlstate_of


def test_k_anonymity_matches_group_by(admin):
    truth = admin.execute("SELECT min(c) FROM (SELECT count(*) c FROM registry.patients"
                          " GROUP BY sex, race) s").fetchone()[0]
    got = admin.execute("SELECT deid.k_anonymity('registry.patients', '{sex,race}')").fetchone()[0]
    assert got == truth


def test_k_anonymity_uses_roles(admin):
    admin.execute("CREATE TABLE IF NOT EXISTS public.t_roles AS SELECT * FROM registry.patients")
    admin.execute("SELECT deid.set_role('t_roles', 'sex', 'quasi_identifier')")
    admin.execute("SELECT deid.set_role('t_roles', 'race', 'quasi_identifier')")
    truth = admin.execute("SELECT min(c) FROM (SELECT count(*) c FROM t_roles GROUP BY sex, race) s"
                          ).fetchone()[0]
    assert admin.execute("SELECT deid.k_anonymity('t_roles')").fetchone()[0] == truth


def test_equivalence_classes(admin):
    rows = admin.execute("SELECT class_id, size, qi_values FROM"
                         " deid.equivalence_classes('registry.patients', '{sex,race}')").fetchall()
    assert sum(r[1] for r in rows) == 3000
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    assert rows[0][1] == min(r[1] for r in rows)
    assert set(rows[0][2]) == {"sex", "race"}
    n = admin.execute("SELECT count(DISTINCT (sex, race)) FROM registry.patients").fetchone()[0]
    assert len(rows) == n


def test_unique_rows(admin):
    uniques = admin.execute("SELECT count(*) FROM deid.equivalence_classes("
                            "'registry.patients', '{birth_date,zip}') WHERE size = 1").fetchone()[0]
    truth = admin.execute("SELECT count(*) FROM (SELECT 1 FROM registry.patients GROUP BY birth_date, zip"
                          " HAVING count(*) = 1) s").fetchone()[0]
    assert uniques == truth > 0


def test_l_diversity_single_attribute_is_distinct_count(admin):
    rows = admin.execute("SELECT size, l FROM deid.l_diversity('registry.patients', '{sex,race}',"
                         " '{diagnosis}') ORDER BY class_id").fetchall()
    truth = admin.execute("SELECT count(*), count(DISTINCT diagnosis) FROM registry.patients"
                          " GROUP BY sex, race ORDER BY 1, 2").fetchall()
    assert sorted(rows) == sorted(truth)


def test_l_diversity_several_attributes_bound_vs_exact(admin):
    rows = admin.execute("SELECT size, l, exact_l FROM deid.l_diversity('registry.patients',"
                         " '{birth_date}', '{diagnosis,treatment}', exact => true)").fetchall()
    small = [r for r in rows if r[2] is not None]
    assert small, "some classes are small enough for the exact search"
    for size, l, exact in small:
        assert 1 <= l <= exact <= size       # the greedy certificate is a sound lower bound
    assert all(r[2] is None for r in rows if r[0] > 40)


@pytest.mark.parametrize("sql, state", [
    ("SELECT deid.k_anonymity(NULL)", "22004"),
    ("SELECT deid.k_anonymity('registry.patients', '{}')", "22004"),
    ("SELECT deid.k_anonymity('registry.patients', '{nope}')", "42703"),
    ("SELECT deid.k_anonymity('registry.patients', '{sex,sex}')", "22023"),
    ("SELECT deid.k_anonymity('registry.nope')", "42P01"),
    ("SELECT * FROM deid.equivalence_classes('registry.patients', '{diagnosis}')", "22023"),
    ("SELECT * FROM deid.l_diversity('registry.patients', '{sex}', '{sex}')", "22023"),
    ("SELECT * FROM deid.l_diversity('registry.patients', '{diagnosis}', '{treatment}')", "22023"),
])
def test_measure_errors(admin, sql, state):
    admin.execute("SELECT deid.set_role('registry.patients', 'diagnosis', 'sensitive')")
    admin.execute("SELECT deid.set_role('registry.patients', 'sex', 'quasi_identifier')")
    with pytest.raises(psycopg.Error) as e:
        admin.execute(sql).fetchall()
    assert sqlstate_of(e) == state
    if state != "42P01":
        assert hint_of(e) or state == "22023"


def test_no_roles_no_columns(admin):
    admin.execute("CREATE TABLE IF NOT EXISTS public.t_bare (id int primary key, a int)")
    with pytest.raises(psycopg.Error) as e:
        admin.execute("SELECT deid.k_anonymity('t_bare')")
    assert sqlstate_of(e) == "22023" and "set_role" in hint_of(e)


def test_datapath_encodings(admin):
    admin.execute("DROP TABLE IF EXISTS t_enc")
    admin.execute("CREATE TABLE t_enc (id bigint primary key, n numeric, d date, txt text, b bool,"
                  " i smallint, f real)")
    admin.execute("INSERT INTO t_enc VALUES (1, 1.5, '2020-01-02', 'b', true, 3, 0.5),"
                  " (2, NULL, NULL, NULL, NULL, NULL, NULL), (3, -2, '1969-12-31', 'a', false, -1, 2)")
    out = admin.execute("SELECT deid._datapath_probe('t_enc'::regclass,"
                        " '{n,d,txt,b,i,f}')").fetchone()[0]
    assert out["rows"] == 3 and out["written"] == 3 and out["rid_first"] == [1, 2, 3]
    c = out["columns"]
    assert c["n"]["kind"] == "float" and c["n"]["first"] == [1.5, 0.0, -2.0]
    assert c["d"]["kind"] == "date" and c["d"]["first"] == [18263, 0, -1]
    assert c["txt"]["dictionary"] == ["a", "b"] and c["txt"]["first"] == [1, 2, 0]
    assert c["txt"]["labels"] == ["b", None, "a"]
    assert c["b"]["dictionary"] == ["false", "true"]
    assert c["i"]["first"] == [3, 0, -1] and c["f"]["first"] == [0.5, 0.0, 2.0]
    assert all(col["nulls"] == 1 for col in c.values())


def test_datapath_empty_relation(admin):
    admin.execute("DROP TABLE IF EXISTS t_empty")
    admin.execute("CREATE TABLE t_empty (id int primary key, a text)")
    out = admin.execute("SELECT deid._datapath_probe('t_empty'::regclass, '{a}')").fetchone()[0]
    assert out["rows"] == 0 and out["written"] == 0
    assert admin.execute("SELECT deid.k_anonymity('t_empty', '{a}')").fetchone()[0] is None
