"""Attack: a class grown by a few records at a small k, then held whole by a release at a
larger k (disassociation's AA model).

Found by the composition fuzzer (tests/fuzz/sequences.py, seed 7, sequence 836 of
disassociation). The first release (k = 5) covers records 1-10, two of them without a code;
the second (k = 3, all twenty) puts four more code-less records with them (a remainder of 4,
allowed at its k of 3); six more code-less records arrive, and the third release (k = 6, all
records) keeps the second's class and adds the six. The four records the second release added
are a set the first two single out between them, and the third release, at k = 6, holds
them: its promise of 6 is broken by what it publishes together with the first two. It must be
refused (uniformly: a policy requester).
"""
import re

import psycopg
import pytest
from psycopg import sql

from test_composition_aa_remainder import (ANALYST, READER, RESEARCHER, aa_release,
                                          code_table, codeless)

TABLE = "cmp_aa_held"
HIERARCHY = "cmp_aa_held_icd"
# ids 1-10: 2 without a code, 8 with c0; ids 11-20: 4 and 6; appended 21-32: 6 and 6
CODES = [[]] * 2 + [["c0"]] * 8 + [[]] * 4 + [["c0"]] * 6
APPENDED = [[]] * 6 + [["c0"]] * 6
NAMES = ("cmp_aa_held_1", "cmp_aa_held_2", "cmp_aa_held_3")


@pytest.fixture
def source(admin):
    yield from code_table(admin, TABLE, HIERARCHY, CODES)


def release(conn, name, k, selection=None):
    return aa_release(conn, TABLE, HIERARCHY, name, k, selection)


def test_a_cell_two_releases_single_out_is_not_held_at_a_larger_k(source, admin, connect):
    analyst, researcher, reader = connect(ANALYST), connect(RESEARCHER), connect(READER)
    assert release(analyst, NAMES[0], 5, "id <= 10")
    assert release(analyst, NAMES[1], 3)
    grown = codeless(reader, NAMES[1]) - codeless(reader, NAMES[0])
    assert 0 < grown < 6                                 # four patients, singled out at k = 3
    for i, codes in enumerate(APPENDED, len(CODES) + 1):
        admin.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(source), [i, codes])
    with pytest.raises(psycopg.Error) as e:
        release(researcher, NAMES[2], 6)
    d = e.value.diag
    assert d.sqlstate == "DE001" and not re.search(r"\d", d.message_primary), d.message_primary
    assert not re.search(r"\d", d.message_hint or "") and not d.message_detail
    assert not admin.execute("SELECT 1 FROM deid.release WHERE name = %s", [NAMES[2]]).fetchone()
