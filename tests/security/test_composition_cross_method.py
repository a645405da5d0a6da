"""Attack: an anatomy release and a generalization release of the same patients, their
groups crossed by subtraction.

Found by the composition fuzzer (tests/fuzz/sequences.py, seed 1; the per-group attack of
tests/fuzz/check_composition.py). Both publish exact counts of a sensitive column per group:
anatomy per QIT group, generalization per class (its rows carry the raw value). The rule
crossed the selections of all releases, and the groupings of releases by the same method
only; across methods, an anatomy group minus a generalization class inside it can be a set of
fewer than k patients whose values are then read off. Rule (c) of log/composition.py now
refuses a second method's release of the same sensitive column over shared rows.

Here: twelve patients, ages in three decades of four. Anatomy (k = 4, l = 2) of the six
youngest: one group. Generalization (k = 4) of all twelve, ages in decades: three classes.
The anatomy group minus the first class is the two patients aged 35 and 36: their diagnoses
are the difference of the two releases' counts. The second release must be refused, or the
difference must not be about fewer than k patients.
"""
import re
from collections import Counter

import psycopg
import pytest
from psycopg import sql

RESEARCHER, READER = "deid_t_researcher", "deid_t_reader"
K = 4
AGES = [21, 22, 23, 24, 35, 36, 37, 38, 41, 42, 43, 44]
DX = ["flu", "cold", "flu", "cold", "HIV", "TB", "flu", "cold", "flu", "cold", "flu", "cold"]
TABLE = "public.cmp_cross"


@pytest.fixture
def source(admin):
    ident = sql.Identifier("public", "cmp_cross")
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))
    admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, age int, dx text)").format(ident))
    for i, (age, dx) in enumerate(zip(AGES, DX), 1):
        admin.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(ident), [i, age, dx])
    admin.execute("SELECT deid.interval_hierarchy('cmp_cross_age', 0, 100, '{10}')")
    admin.execute("SELECT deid.set_role(%s, 'age', 'quasi_identifier', 'cmp_cross_age')", [TABLE])
    admin.execute("SELECT deid.set_role(%s, 'dx', 'sensitive')", [TABLE])
    admin.execute("SELECT deid.allow_requests(%s, %s, %s)", [RESEARCHER, TABLE, K])
    yield
    for name in ("cmp_cross_a", "cmp_cross_g"):
        if admin.execute("SELECT 1 FROM deid.release WHERE name = %s AND status = 'committed'",
                         [name]).fetchone():
            admin.execute("SELECT deid.drop_release(%s)", [name])
    admin.execute("DELETE FROM deid.policy WHERE relation = %s::regclass", [TABLE])


def test_anatomy_group_minus_generalization_class_is_refused(source, connect):
    researcher, reader = connect(RESEARCHER), connect(READER)
    assert researcher.execute(
        "SELECT verified FROM deid.anonymize_request(%s, 'anatomy', k => %s, l => 2,"
        " columns => '{age,dx}', selection => 'age < 37', options => '{\"seed\": 1}',"
        " release => 'cmp_cross_a')", [TABLE, K]).fetchone()[0]
    try:
        researcher.execute(
            "SELECT verified FROM deid.anonymize_request(%s, 'generalization', k => %s,"
            " columns => '{age,dx}', release => 'cmp_cross_g')", [TABLE, K])
    except psycopg.Error as e:                                     # refused: the promise holds
        assert e.diag.sqlstate == "DE001" and not re.search(r"\d", e.diag.message_primary)
        return
    group = Counter(dict(reader.execute(
        "SELECT dx, sum(count) FROM release.cmp_cross_a_dx GROUP BY dx").fetchall()))
    classes = {}
    for age, dx in reader.execute("SELECT age::text, dx FROM release.cmp_cross_g"):
        classes.setdefault(age, Counter())[dx] += 1
    for label, counts in classes.items():
        lo, hi = map(int, re.findall(r"\d+", label))
        members = [a for a in AGES if lo <= a < hi]
        if all(a < 37 for a in members):          # a class inside the anatomy selection
            left = +(group - counts)
            if 0 < sum(left.values()) < K:
                pytest.fail(f"the anatomy group minus class {label} leaves {dict(left)}: "
                            f"{sum(left.values())} patients < k = {K}")
