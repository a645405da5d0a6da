"""Attacks: releases of one source read together.

Every release is readable by every deid_reader, a role without SELECT on the source. Each
release alone is verified; read together they must still keep every promise:

- a tracker in three requests: ``age < 40 OR (one patient's exact quasi-identifiers)``, all
  rows, ``age >= 40``. Every pair differs by 0 or at least k rows, yet R1 + R3 - R2 over the
  count tables is that one patient's diagnosis. deid refuses the request that would make a
  cell of the partition the selections induce (rows selected by exactly the same releases)
  hold fewer than k rows;
- the intersection of two anatomy releases of the same rows grouped over two
  quasi-identifier sets: a reader who knows a patient's quasi-identifiers finds the group
  of each release, and the diagnoses both allow leave fewer than L candidates. deid refuses
  a release whose groups, crossed with the earlier releases' groups of the same rows, leave
  a cell of fewer than K rows or fewer than L values.

The attacks are the reader's own arithmetic on the released tables (no code of deid).
A requester with SELECT may override (options.allow_overlap, logged and shown as a warning);
then the attack goes through, which is what the refusal prevents.
"""
import re
from collections import defaultdict

import psycopg
import pytest
from psycopg import sql

from dbfixtures import hint_of, sqlstate_of

RESEARCHER = "deid_t_researcher"      # a policy, no SELECT
ANALYST = "deid_t_analyst"            # SELECT on the source
READER = "deid_t_reader"
REFUSED = "DE001"
K, L = 5, 2
SECRET = "SECRET_DX"
TARGET = {"age": 61, "sex": "M", "zip": 10133}     # the tracked patient's quasi-identifiers


@pytest.fixture
def source(admin, request):
    """A fresh table: 200 patients with age, sex, zip (quasi-identifiers) and dx (sensitive);
    patient 7, the only (61, M, 10133), holds SECRET. The researcher may ask k >= 5."""
    table = "cmp_" + re.sub(r"[^a-z0-9]", "", request.node.name.lower())[-30:]
    ident = sql.Identifier("public", table)
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))
    admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, age int NOT NULL,"
                          " sex text NOT NULL, zip int NOT NULL, dx text NOT NULL)").format(ident))
    admin.execute(sql.SQL(
        "INSERT INTO {} SELECT i, CASE WHEN i = 7 THEN 61 ELSE 20 + (i * 37) % 60 END,"
        " CASE WHEN i = 7 THEN 'M' WHEN i % 2 = 0 THEN 'M' ELSE 'F' END,"
        " CASE WHEN i = 7 THEN 10133 ELSE 10100 + (i * 53) % 30 END,"
        " CASE WHEN i = 7 THEN {} ELSE 'D' || ((i * 7919) % 5) END"
        " FROM generate_series(1, 200) i").format(ident, sql.Literal(SECRET)))
    admin.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(ident, sql.Identifier(ANALYST)))
    qualified = f"public.{table}"
    for col in ("age", "sex", "zip"):
        admin.execute("SELECT deid.set_role(%s, %s, 'quasi_identifier')", [qualified, col])
    admin.execute("SELECT deid.set_role(%s, 'dx', 'sensitive')", [qualified])
    admin.execute("SELECT deid.allow_requests(%s, %s, 5)", [RESEARCHER, qualified])
    yield qualified, table
    admin.execute("DELETE FROM deid.policy WHERE relation = %s::regclass", [qualified])


def anatomy(conn, source, release, columns="{age,sex,zip,dx}", selection=None, options=None):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'anatomy', k => %s, l => %s, columns => %s,"
        " selection => %s, options => %s, release => %s)",
        [source, K, L, columns, selection, options, release]).fetchone()


def refused(conn, *args, **kw):
    with pytest.raises(psycopg.Error) as e:
        anatomy(conn, *args, **kw)
    return e


def assert_uniform(e):
    """The policy requester's refusal: a SQLSTATE, a HINT, no number, no release named."""
    d = e.value.diag
    assert d.sqlstate == REFUSED and d.message_hint
    assert not re.search(r"\d", d.message_primary + " " + d.message_hint)
    assert d.message_detail is None


def nothing_left(admin, release):
    assert admin.execute("SELECT count(*) FROM deid.release WHERE name = %s",
                         [release]).fetchone()[0] == 0
    assert admin.execute("SELECT count(*) FROM pg_class WHERE relname LIKE %s",
                         [release + "%"]).fetchone()[0] == 0


TRACKER = (f"age < 40 OR (age = {TARGET['age']} AND sex = '{TARGET['sex']}'"
           f" AND zip = {TARGET['zip']})", None, "age >= 40")


def tracked(reader, names):
    """R1 + R3 - R2 of the three releases' diagnosis totals: what is left over."""
    q = sql.SQL("SELECT dx, sum(count) FROM {} GROUP BY dx")
    totals = [dict(reader.execute(q.format(sql.Identifier("release", n + "_dx"))).fetchall())
              for n in names]
    left = {dx: totals[0].get(dx, 0) + totals[2].get(dx, 0) - totals[1].get(dx, 0)
            for dx in totals[1]}
    return {dx: n for dx, n in left.items() if n}


def test_three_request_tracker_is_refused(source, connect, admin):
    """The tracker cannot be completed: the second request (all rows, regrouped) or the
    third (a partition cell of one row) is refused with the uniform refusal, and nothing of
    it is left."""
    rel, table = source
    researcher = connect(RESEARCHER)
    names = [f"{table}_{i}" for i in (1, 2, 3)]
    assert anatomy(researcher, rel, names[0], selection=TRACKER[0])[5]
    refusals = 0
    for name, selection in zip(names[1:], TRACKER[1:]):
        try:
            assert anatomy(researcher, rel, name, selection=selection)[5]
        except psycopg.Error as e:
            assert_uniform(_Info(e))
            nothing_left(admin, name)
            refusals += 1
    assert refusals >= 1


class _Info:
    """An error as pytest.raises gives it (value.diag)."""
    def __init__(self, e):
        self.value = e


def test_three_request_tracker_with_override_gives_the_diagnosis(source, connect, admin):
    """With SELECT and the logged override the three are released, and a deid_reader's
    R1 + R3 - R2 is the patient's diagnosis: the attack the refusal stops."""
    rel, table = source
    analyst = connect(ANALYST)
    names = [f"{table}_{i}" for i in (1, 2, 3)]
    anatomy(analyst, rel, names[0], selection=TRACKER[0])
    e = refused(analyst, rel, names[2], selection=TRACKER[2])
    assert sqlstate_of(e) == REFUSED and "allow_overlap" in hint_of(e)
    for name, selection in zip(names[1:], TRACKER[1:]):
        assert anatomy(analyst, rel, name, selection=selection,
                       options='{"allow_overlap": true}')[5]
    assert tracked(connect(READER), names) == {SECRET: 1}
    warned = admin.execute("SELECT metrics->'warnings' FROM deid.release WHERE name = %s",
                           [names[2]]).fetchone()[0]
    assert warned and any("composition" in w for w in warned)


def candidates(reader, release, qis):
    """Per quasi-identifier combination: the diagnoses the release allows a patient with it
    (every group whose quasi-identifier table lists that combination)."""
    groups = defaultdict(set)
    q = sql.SQL("SELECT {}, group_id FROM {}").format(
        sql.SQL(", ").join(map(sql.Identifier, qis)), sql.Identifier("release", release + "_qit"))
    for row in reader.execute(q).fetchall():
        groups[tuple(row[:-1])].add(row[-1])
    values = defaultdict(set)
    q = sql.SQL("SELECT group_id, dx FROM {} WHERE count > 0").format(
        sql.Identifier("release", release + "_dx"))
    for g, dx in reader.execute(q).fetchall():
        values[g].add(dx)
    return {key: set().union(*(values[g] for g in gs)) for key, gs in groups.items()}


def below_l(admin, reader, table, releases):
    """Patients (the attacker knows their quasi-identifiers) left with fewer than L
    candidate diagnoses once the releases' candidates are intersected."""
    allowed = [(qis, candidates(reader, name, qis)) for name, qis in releases]
    q = sql.SQL("SELECT age, sex, zip FROM {}").format(sql.Identifier("public", table))
    found = 0
    for age, sex, zip_ in admin.execute(q).fetchall():
        known = {"age": age, "sex": sex, "zip": zip_}
        sets = [a.get(tuple(known[c] for c in qis), set()) for qis, a in allowed]
        found += len(set.intersection(*sets)) < L
    return found


def test_intersection_of_two_anatomy_groupings_is_refused(source, connect, admin):
    """The same rows grouped over (age, sex), then over (zip): the second is refused."""
    rel, table = source
    researcher = connect(RESEARCHER)
    assert anatomy(researcher, rel, f"{table}_a", columns="{age,sex,dx}")[5]
    e = refused(researcher, rel, f"{table}_b", columns="{zip,dx}")
    assert_uniform(e)
    nothing_left(admin, f"{table}_b")


def test_intersection_with_override_leaves_patients_below_l(source, connect, admin):
    """With the override both are released; the reader's intersection pins patients."""
    rel, table = source
    analyst = connect(ANALYST)
    anatomy(analyst, rel, f"{table}_a", columns="{age,sex,dx}")
    assert anatomy(analyst, rel, f"{table}_b", columns="{zip,dx}",
                   options='{"allow_overlap": true}')[5]
    found = below_l(admin, connect(READER), table,
                    [(f"{table}_a", ("age", "sex")), (f"{table}_b", ("zip",))])
    assert found > 0


def test_the_same_grouping_again_is_allowed(source, connect):
    """Several studies on one cohort, same method and columns: the same groups, allowed."""
    rel, table = source
    researcher = connect(RESEARCHER)
    for i in range(3):
        assert anatomy(researcher, rel, f"{table}_s{i}", columns="{age,sex,dx}",
                       options='{"seed": 3}')[5]


def test_only_a_superuser_resets_the_history(source, connect, admin):
    """The history a refusal rests on is deid's: no role but a superuser writes a reset, and
    deid_admin reads who reset it and when."""
    rel, _ = source
    for role in (RESEARCHER, ANALYST, READER, "deid_t_admin"):
        with pytest.raises(psycopg.Error) as e:
            connect(role).execute("INSERT INTO deid.composition_reset (source, after_release)"
                                  " VALUES (%s::regclass, 1000000)", [rel])
        assert sqlstate_of(e) == "42501"
    assert connect("deid_t_admin").execute(
        "SELECT count(*) >= 0 FROM deid.composition_reset").fetchone()[0]
