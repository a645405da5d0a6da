"""Attack: make the composition rule judge a release against kept cells that are stale.

deid keeps, per source, the cells its releases induce (deid.composition_state), so a new
release is checked in time of the rows. Kept cells that miss a release would let through a
release that, read with that one, singles out a patient: here a SELECT requester's release
that overrode the rule (all patients but the one aged 99) is in no kept cells, and a policy
requester then asks for all patients again -- identical to the first release, so allowed
against it alone, while read with the override it isolates the patient aged 99. A history
cleared by a deid_admin must not leave its cells behind either (nor make the rule stricter).
The kept cells are read only when they cover exactly the releases the rule reads; the
refusal stays the uniform one.
"""
import psycopg
import pytest

from dbfixtures import sqlstate_of
from test_composition import (ANALYST, LAB, RESEARCHER, REFUSED, assert_count_free,  # noqa: F401
                              hierarchy, nothing_left, req, source)    # the fixtures too


def _covers(admin, kind, names):
    """The releases (by name) the kept cells of `kind` cover, for the sources of `names`."""
    row = admin.execute(
        "SELECT array(SELECT r.name FROM unnest(s.covers) c JOIN deid.release r"
        " ON r.release_id = c ORDER BY 1) FROM deid.composition_state s WHERE s.kind = %s"
        " AND s.covers && array(SELECT release_id FROM deid.release WHERE name = ANY(%s))",
        [kind, names]).fetchone()
    return sorted(row[0]) if row else None


def test_an_overridden_release_is_not_missed(source, connect, admin):
    """Only the selections' rule stands between the reader and the patient aged 99 here: the
    override is another method's study of another sensitive column (no grouping compared),
    the third release is the first one again (the same classes)."""
    analyst, researcher = connect(ANALYST), connect(RESEARCHER)
    assert req(analyst, source, "st_all")[5]
    assert _covers(admin, "selections", ["st_all"]) == ["st_all"]
    assert req(analyst, source, "st_no99", "anatomy", selection="age <> 99", columns=LAB,
               options='{"allow_overlap": true}')[5]
    # the override folds nothing in: the kept cells still cover the first release alone
    assert _covers(admin, "selections", ["st_all"]) == ["st_all"]
    with pytest.raises(psycopg.Error) as e:
        req(researcher, source, "st_again")
    assert sqlstate_of(e) == REFUSED
    assert_count_free(e)
    nothing_left(admin, "st_again")
    # read with the first release alone, it is allowed: the override is what refuses it
    connect("deid_t_admin").execute("SELECT deid.clear_source_history(%s)", [source])
    assert req(analyst, source, "st_all_2")[5]
    assert req(researcher, source, "st_again")[5]


def test_a_cleared_history_leaves_no_cells_behind(source, connect, admin):
    researcher = connect(RESEARCHER)
    assert req(researcher, source, "st_c_all")[5]
    with pytest.raises(psycopg.Error) as e:
        req(researcher, source, "st_c_no99", selection="age <> 99")
    assert sqlstate_of(e) == REFUSED
    connect("deid_t_admin").execute("SELECT deid.clear_source_history(%s)", [source])
    # the cleared release no longer bears on the next one: the kept cells of it are not read
    assert req(researcher, source, "st_c_no99", selection="age <> 99")[5]
    assert _covers(admin, "selections", ["st_c_no99"]) == ["st_c_no99"]
    # ... and the new history is kept and read: a one-row difference with it is refused
    with pytest.raises(psycopg.Error) as e:
        req(connect(ANALYST), source, "st_c_no1", selection="age <> 99 AND id <> 1")
    assert sqlstate_of(e) == REFUSED


def test_anatomy_keeps_groups_and_values_across_a_drop(source, connect, admin):
    """A re-release keeps its groups (allowed over the kept cells and values); a dropped
    release still counts: the kept cells, which cover it, refuse the difference by one."""
    researcher = connect(RESEARCHER)
    assert req(researcher, source, "st_a_1", "anatomy")[5]
    assert req(researcher, source, "st_a_2", "anatomy")[5]
    for kind in ("selections", "groups:anatomy", "values:anatomy"):
        assert _covers(admin, kind, ["st_a_1"]) == ["st_a_1", "st_a_2"], kind
    researcher.execute("SELECT deid.drop_release('st_a_1')")
    with pytest.raises(psycopg.Error) as e:
        req(researcher, source, "st_a_3", "anatomy", selection="age <> 99")
    assert sqlstate_of(e) == REFUSED
    assert_count_free(e)
