"""Catalog: column roles, hierarchies, release log (real server)."""
import psycopg
import pytest

from conftest import hint_of, sqlstate_of


def err(conn, sql, params=None):
    with pytest.raises(psycopg.Error) as e:
        conn.execute(sql, params)
    return e


def test_extension_objects(admin):
    schemas = {r[0] for r in admin.execute("SELECT nspname FROM pg_namespace")}
    assert {"deid", "release"} <= schemas
    tables = {r[0] for r in admin.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = 'deid'::regnamespace AND relkind = 'r'")}
    assert {"column_role", "hierarchy", "hierarchy_level", "hierarchy_member", "policy",
            "release", "rid_set", "equivalence_class"} <= tables


def test_set_role_and_read_back(admin):
    admin.execute("SELECT deid.set_role('registry.patients', 'sex', 'quasi_identifier', source => 'north')")
    admin.execute("SELECT deid.set_role('registry.patients', 'diagnosis', 'sensitive')")
    rows = admin.execute("SELECT column_name, role, source, data_type FROM deid.roles"
                         " WHERE relation = 'registry.patients'::regclass ORDER BY 1").fetchall()
    assert ("diagnosis", "sensitive", None, "text") in rows
    assert ("sex", "quasi_identifier", "north", "text") in rows
    # setting again updates in place
    admin.execute("SELECT deid.set_role('registry.patients', 'sex', 'quasi_identifier')")
    assert admin.execute("SELECT source FROM deid.roles WHERE column_name = 'sex'"
                         " AND relation = 'registry.patients'::regclass").fetchone() == (None,)


@pytest.mark.parametrize("sql, state", [
    ("SELECT deid.set_role('registry.patients', 'nope', 'sensitive')", "42703"),
    ("SELECT deid.set_role('registry.patients', 'sex', 'secret')", "22023"),
    ("SELECT deid.set_role('registry.patients', 'sex', NULL)", "22004"),
    ("SELECT deid.set_role(NULL, 'sex', 'sensitive')", "22004"),
    ("SELECT deid.set_role('registry.nope', 'sex', 'sensitive')", "42P01"),
    ("SELECT deid.set_role('registry.patients', 'sex', 'sensitive', hierarchy => 'missing')", "42704"),
])
def test_set_role_errors(admin, sql, state):
    e = err(admin, sql)
    assert sqlstate_of(e) == state
    if state != "42P01":            # 42P01 is raised by PostgreSQL's regclass cast itself
        assert hint_of(e)


def test_member_hierarchy_roundtrip(admin):
    admin.execute("SELECT deid.load_hierarchy('t_pt', %s, '{0,0.3,0.6,1}')",
                  ["1a;1;[1-2];*\n1b;1;[1-2];*\n1c;1;[1-2];*\n1mic;1;[1-2];*\n2a;2;[1-2];*\n"
                   "2b;2;[1-2];*\n3;3;[3-4];*\n4;4;[3-4];*\n"])
    row = admin.execute("SELECT kind, levels, info_loss, leaf_values FROM deid.hierarchies"
                        " WHERE name = 't_pt'").fetchone()
    assert row == ("member", 4, [0, 0.3, 0.6, 1], 8)
    parents = dict(admin.execute("SELECT value, parent FROM deid.hierarchy_member"
                                 " WHERE hierarchy = 't_pt' AND level = 1").fetchall())
    assert parents == {"1": "[1-2]", "2": "[1-2]", "3": "[3-4]", "4": "[3-4]"}
    # binding checks every value of the column is in the hierarchy
    admin.execute("SELECT deid.set_role('registry.patients', 'pt', 'quasi_identifier', 't_pt')")


def test_even_info_loss_default(admin):
    admin.execute("SELECT deid.load_hierarchy('t_even', 'a;x;*\nb;x;*\nc;y;*')")
    assert admin.execute("SELECT info_loss FROM deid.hierarchies WHERE name = 't_even'"
                         ).fetchone() == ([0, 0.5, 1],)


@pytest.mark.parametrize("rows, loss, fragment", [
    ("a;x;*\na;y;*", None, "two parents"),
    ("a;x;*\nb;*", None, "levels"),
    ("a;;*", None, "skips a level"),
    ("a;*;*", None, "below the top"),
    ("a;x;*", "{0,1}", "info_loss"),
    ("a;x;*", "{0,0.7,0.5}", "never decrease"),
    ("", None, "must not be NULL or empty"),
])
def test_member_hierarchy_rejects(admin, rows, loss, fragment):
    e = err(admin, "SELECT deid.load_hierarchy('t_bad', %s, %s)", [rows, loss])
    assert fragment in str(e.value)
    assert sqlstate_of(e) in ("22023", "22004")
    assert not admin.execute("SELECT 1 FROM deid.hierarchy WHERE name = 't_bad'").fetchone()


def test_hierarchy_binding_rejects_unknown_value(admin):
    admin.execute("SELECT deid.load_hierarchy('t_sex_partial', 'F;*')")
    e = err(admin, "SELECT deid.set_role('registry.patients', 'sex', 'quasi_identifier', 't_sex_partial')")
    assert sqlstate_of(e) == "22023"
    assert "'M'" in str(e.value) and "not in hierarchy" in str(e.value)


def test_duplicate_hierarchy(admin):
    admin.execute("SELECT deid.load_hierarchy('t_dup', 'a;*')")
    e = err(admin, "SELECT deid.load_hierarchy('t_dup', 'a;*')")
    assert sqlstate_of(e) == "42710" and "drop_hierarchy" in hint_of(e)
    admin.execute("SELECT deid.drop_hierarchy('t_dup')")


def test_interval_hierarchy(admin):
    admin.execute("SELECT deid.interval_hierarchy('t_age', 0, 120, '{5,10,20}')")
    row = admin.execute("SELECT kind, levels, info_loss FROM deid.hierarchies WHERE name = 't_age'").fetchone()
    assert row == ("interval", 5, [0, 0.25, 0.5, 0.75, 1])
    admin.execute("SELECT deid.set_role('registry.patients', 'age', 'quasi_identifier', 't_age')")
    e = err(admin, "SELECT deid.interval_hierarchy('t_bad_w', 0, 120, '{5,7}')")
    assert sqlstate_of(e) == "22023" and "nest" in str(e.value)
    admin.execute("SELECT deid.interval_hierarchy('t_age_narrow', 30, 60, '{10}')")
    e = err(admin, "SELECT deid.set_role('registry.patients', 'age', 'quasi_identifier', 't_age_narrow')")
    assert sqlstate_of(e) == "22023" and "outside" in str(e.value)


def test_release_log_is_append_only(admin):
    admin.execute("INSERT INTO deid.release (name, method, source_name, requested_by, started_at,"
                  " status) VALUES ('t_log', 'test', 'x', current_user, now(), 'committed')")
    e = err(admin, "UPDATE deid.release SET method = 'changed' WHERE name = 't_log'")
    assert sqlstate_of(e) == "42501"
    e = err(admin, "DELETE FROM deid.release WHERE name = 't_log'")
    assert sqlstate_of(e) == "42501"


def test_usage(admin):
    text = admin.execute("SELECT deid.usage()").fetchone()[0]
    for fn in ("k_anonymity", "equivalence_classes", "l_diversity", "set_role",
               "load_hierarchy", "interval_hierarchy", "allow_requests"):
        assert fn in text
        assert admin.execute("SELECT deid.usage(%s)", [fn]).fetchone()[0].startswith("deid." + fn)
