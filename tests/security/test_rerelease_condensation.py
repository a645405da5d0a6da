"""Condensation of a growing table: a kept cluster whose member changed since.

A re-release keeps the earlier clusters (methods/kept_groups.py). Condensation publishes
each cluster's exact moments (its synthetic rows keep them), so a kept cluster whose member's
value changed would publish moments that differ from the earlier ones by that patient's
change alone. Real login roles: a policy requester without SELECT, an analyst with SELECT,
a reader who compares the two releases; an admin changes the source.
"""
import re
import zlib

import psycopg
import pytest
from psycopg import sql

from test_rerelease import (ANALYST, FIRST, MONTHLY, READER, RESEARCHER,  # noqa: F401
                            registry, release)


def total(reader, source, name, column):
    tag = f"{zlib.crc32(source.encode()):x}"
    return reader.execute(sql.SQL("SELECT sum({})::float8 FROM {}").format(
        sql.Identifier(column), sql.Identifier("release", f"{name}_{tag}"))).fetchone()[0]


@pytest.mark.parametrize("who", [RESEARCHER, ANALYST])
def test_changed_value_of_a_kept_cluster_is_refused(registry, connect, admin, who):
    """One patient's bmi raised by 5, the same rows released again: the difference of the two
    releases' bmi totals (their clusters' exact moments) would be that change. Refused:
    uniformly for the policy requester, with a hint for the analyst."""
    source, _ = registry
    conn = connect(who)
    tag = "p" if who == RESEARCHER else "s"
    release(conn, source, f"rc_{tag}_0", "condensation")
    admin.execute(sql.SQL("UPDATE {} SET bmi = bmi + 5 WHERE id = 7").format(
        sql.Identifier(*source.split("."))))
    try:
        release(conn, source, f"rc_{tag}_1", "condensation")
    except psycopg.Error as e:
        d = e.diag
        assert d.sqlstate == "DE001" and d.message_hint
        if who == RESEARCHER:
            assert d.message_detail is None
            assert not re.search(r"\d", d.message_primary + " " + d.message_hint)
        return
    reader = connect(READER)
    diff = (total(reader, source, f"rc_{tag}_1", "bmi")
            - total(reader, source, f"rc_{tag}_0", "bmi"))
    pytest.fail(f"released: the reader's difference of the two bmi totals is {diff:.6f}, "
                "the patient's change (5)")


def test_changed_value_of_a_grown_table_is_refused(registry, connect, admin):
    """The same with new rows: the kept clusters are checked, the new ones judged as any."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, "rc_g_0", "condensation")
    admin.execute(sql.SQL("UPDATE {} SET age = age + 1 WHERE id = 7").format(
        sql.Identifier(*source.split("."))))
    grow(FIRST + MONTHLY)
    with pytest.raises(psycopg.Error) as e:
        release(researcher, source, "rc_g_1", "condensation")
    assert e.value.diag.sqlstate == "DE001" and e.value.diag.message_detail is None


def test_unchanged_rows_are_released_again(registry, connect, admin):
    """An update that changes no released value (another column) keeps the clusters."""
    source, grow = registry
    researcher = connect(RESEARCHER)
    release(researcher, source, "rc_u_0", "condensation")
    admin.execute(sql.SQL("UPDATE {} SET dx = 'CHANGED' WHERE id = 7").format(
        sql.Identifier(*source.split("."))))
    grow(FIRST + MONTHLY)
    assert release(researcher, source, "rc_u_1", "condensation")[5]
