"""Attack: three k^m generalizations (disassociation's AA model) of one table; the third, at a
larger k, keeps a class that an earlier release with a smaller k grew by a few records.

Found by the composition fuzzer (tests/fuzz/sequences.py, seed 7, sequence 400 of
disassociation; the per-group and crowd attacks of tests/fuzz/check_composition.py). An AA
release publishes each record's generalized codes; the records sharing a released set form
a class, and a class's size is public. The first release (k = 4) covers ten records, three
of them without a code; the second (k = 2) covers all twenty and puts the two code-less
records of the other ten in the same class (a remainder of 2, allowed at its k = 2); the
third (k = 8) publishes the same classes. Read with the first alone, the third's class of
code-less records minus the first's is two patients among the ten the first did not select:
a set of fewer than the third release's k singled out. The third release must be refused
(uniformly: a policy requester), or leave no such difference.
"""
import re

import psycopg
import pytest
from psycopg import sql

ANALYST, RESEARCHER, READER = "deid_t_analyst", "deid_t_researcher", "deid_t_reader"
TABLE = "cmp_aa_rem"
HIERARCHY = "cmp_aa_rem_icd"
# ids 1-10 (the first release's selection): 3 without a code, 7 with c0; ids 11-20: 2 and 8
CODES = [[]] * 3 + [["c0"]] * 7 + [[]] * 2 + [["c0"]] * 8
NAMES = ("cmp_aa_rem_1", "cmp_aa_rem_2", "cmp_aa_rem_3")


def code_table(admin, table, hierarchy, codes):
    """public.<table> of records (id, codes), readable by the analyst, a policy (k >= 2) for
    the researcher, and the code hierarchy; yields, then drops the releases `table`_1.._3."""
    ident = sql.Identifier("public", table)
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))
    admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, codes text[])").format(ident))
    for i, record in enumerate(codes, 1):
        admin.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(ident), [i, record])
    admin.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(ident, sql.Identifier(ANALYST)))
    if not admin.execute("SELECT 1 FROM deid.hierarchies WHERE name = %s", [hierarchy]).fetchone():
        admin.execute("SELECT deid.load_hierarchy(%s, %s)", [hierarchy, "c0;g0;*\nc1;g0;*"])
    admin.execute("SELECT deid.allow_requests(%s, %s, 2)", [RESEARCHER, f"public.{table}"])
    yield ident
    for name in (f"{table}_{n}" for n in (1, 2, 3)):
        if admin.execute("SELECT 1 FROM deid.release WHERE name = %s AND status = 'committed'",
                         [name]).fetchone():
            admin.execute("SELECT deid.drop_release(%s)", [name])
    admin.execute("DELETE FROM deid.policy WHERE relation = %s::regclass", [f"public.{table}"])


def aa_release(conn, table, hierarchy, name, k, selection=None):
    """A k^m generalization (m = 1, seed 7) of public.<table>'s codes."""
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'disassociation', k => %s, columns => '{codes}',"
        " selection => %s, options => %s, release => %s)",
        [f"public.{table}", k, selection,
         '{"model": "generalization", "hierarchy": "%s", "m": 1, "seed": 7}' % hierarchy,
         name]).fetchone()


@pytest.fixture
def source(admin):
    yield from code_table(admin, TABLE, HIERARCHY, CODES)


def release(conn, name, k, selection=None):
    return aa_release(conn, TABLE, HIERARCHY, name, k, selection)


def codeless(reader, name):
    """How many released records hold no code, as a reader counts them."""
    return reader.execute(sql.SQL("SELECT count(*) FROM {} WHERE cardinality(codes) = 0"
                                  " OR codes IS NULL").format(
        sql.Identifier("release", name + "_generalized"))).fetchone()[0]


def test_a_class_grown_below_a_later_k_is_refused(source, connect):
    analyst, researcher, reader = connect(ANALYST), connect(RESEARCHER), connect(READER)
    assert release(analyst, NAMES[0], 4, "id <= 10")
    assert release(analyst, NAMES[1], 2)
    first = codeless(reader, NAMES[0])
    assert first == 3
    try:
        release(researcher, NAMES[2], 8)
    except psycopg.Error as e:                                    # refused: the promise holds
        d = e.diag
        assert d.sqlstate == "DE001" and not re.search(r"\d", d.message_primary), d.message_primary
        assert not re.search(r"\d", d.message_hint or "") and not d.message_detail
        return
    diff = codeless(reader, NAMES[2]) - first
    assert not 0 < diff < 8, f"the third release minus the first: {diff} code-less patients"
