"""The catalog follows DDL: a dropped table or column loses its roles and policies,
a renamed column or table keeps them, a re-created table starts unclassified, unrelated DDL is
untouched, and deid.unset_role / deid.clear_roles unclassify. Real server, real login roles."""
import psycopg
import pytest

from conftest import hint_of, sqlstate_of


def roles(conn, rel):
    return dict(conn.execute("SELECT column_name::text, role FROM deid.column_role"
                             " WHERE relation::oid = to_regclass(%s)::oid", [rel]).fetchall())


@pytest.fixture
def ddl(admin):
    admin.execute("DROP SCHEMA IF EXISTS ddl_t CASCADE")
    admin.execute("CREATE SCHEMA ddl_t")
    admin.execute("CREATE TABLE ddl_t.p (id int PRIMARY KEY, name text, age int, zip text, dx text)")
    admin.execute("INSERT INTO ddl_t.p SELECT i, 'n' || i, 20 + i % 40, (1000 + i % 3)::text,"
                  " 'd' || i % 4 FROM generate_series(1, 60) i")
    for col, role in (("name", "identifier"), ("age", "quasi_identifier"),
                      ("zip", "quasi_identifier"), ("dx", "sensitive")):
        admin.execute("SELECT deid.set_role('ddl_t.p', %s, %s)", [col, role])
    yield admin
    admin.execute("DROP SCHEMA IF EXISTS ddl_t CASCADE")
    admin.execute("DROP ROLE IF EXISTS deid_t_ddl_grantee")


def test_drop_table_removes_roles_and_policies(ddl):
    ddl.execute("CREATE ROLE deid_t_ddl_grantee")
    ddl.execute("SELECT deid.allow_requests('deid_t_ddl_grantee', 'ddl_t.p', 5)")
    oid = ddl.execute("SELECT 'ddl_t.p'::regclass::oid").fetchone()[0]
    notices = []
    handler = (lambda d: notices.append(d.message_primary))
    ddl.add_notice_handler(handler)
    try:
        ddl.execute("DROP TABLE ddl_t.p")
    finally:
        ddl.remove_notice_handler(handler)
    assert ddl.execute("SELECT count(*) FROM deid.column_role WHERE relation::oid = %s",
                       [oid]).fetchone() == (0,)
    assert ddl.execute("SELECT count(*) FROM deid.policy WHERE relation::oid = %s",
                       [oid]).fetchone() == (0,)
    assert any("ddl_t.p dropped: removed 4 column role(s) and 1 policy" in n for n in notices)
    # deid.roles offers nothing stale: no row names a dead OID
    assert ddl.execute("SELECT count(*) FROM deid.roles r WHERE NOT EXISTS"
                       " (SELECT 1 FROM pg_class c WHERE c.oid = r.relation)").fetchone() == (0,)


def test_recreated_table_starts_unclassified(ddl):
    ddl.execute("DROP TABLE ddl_t.p")
    ddl.execute("CREATE TABLE ddl_t.p (id int PRIMARY KEY, name text, age int)")
    assert roles(ddl, "ddl_t.p") == {}
    with pytest.raises(psycopg.Error) as e:
        ddl.execute("SELECT * FROM deid.anonymize_request('ddl_t.p', 'anatomy', k => 2)")
    assert sqlstate_of(e) == "22023" and "set_role" in hint_of(e)


def test_drop_column_removes_its_role_only(ddl):
    ddl.execute("ALTER TABLE ddl_t.p DROP COLUMN zip")
    assert roles(ddl, "ddl_t.p") == {"name": "identifier", "age": "quasi_identifier",
                                     "dx": "sensitive"}
    ddl.execute("ALTER TABLE ddl_t.p ADD COLUMN zip text")
    assert "zip" not in roles(ddl, "ddl_t.p")


def test_rename_column_and_table_keep_roles(ddl):
    ddl.execute("ALTER TABLE ddl_t.p RENAME COLUMN age TO age_years")
    ddl.execute("ALTER TABLE ddl_t.p RENAME TO patients")
    ddl.execute("ALTER TABLE ddl_t.patients RENAME dx TO diagnosis")   # COLUMN is optional
    assert roles(ddl, "ddl_t.patients") == {"name": "identifier", "age_years": "quasi_identifier",
                                            "zip": "quasi_identifier", "diagnosis": "sensitive"}
    ddl.execute("ALTER SCHEMA ddl_t RENAME TO ddl_t2")
    try:
        assert len(roles(ddl, "ddl_t2.patients")) == 4
        r = ddl.execute("SELECT relations, rows FROM deid.anonymize_request('ddl_t2.patients',"
                        " 'anatomy', k => 3, l => 2, release => 'ddl_t_renamed')").fetchone()
        assert r[1] == 60
        ddl.execute("SELECT deid.drop_release('ddl_t_renamed')")
    finally:
        ddl.execute("ALTER SCHEMA ddl_t2 RENAME TO ddl_t")


def test_rename_of_unclassified_column_changes_nothing(ddl):
    ddl.execute("ALTER TABLE ddl_t.p ADD COLUMN note text")
    ddl.execute("ALTER TABLE ddl_t.p RENAME COLUMN note TO remark")
    assert roles(ddl, "ddl_t.p") == {"name": "identifier", "age": "quasi_identifier",
                                     "zip": "quasi_identifier", "dx": "sensitive"}


def test_unrelated_ddl_is_untouched(ddl, connect):
    ddl.execute("CREATE TABLE ddl_t.other (a int, b text)")
    ddl.execute("ALTER TABLE ddl_t.other RENAME COLUMN a TO c")
    ddl.execute("ALTER TABLE ddl_t.other DROP COLUMN b")
    ddl.execute("CREATE VIEW ddl_t.v AS SELECT c FROM ddl_t.other")
    ddl.execute("DROP VIEW ddl_t.v")
    ddl.execute("DROP TABLE ddl_t.other")
    # a role that is no admin and owns nothing of deid's: its DDL runs as before
    att = connect("deid_t_attacker")
    att.execute("CREATE TEMP TABLE t (a int, b int)")
    att.execute("ALTER TABLE t RENAME COLUMN a TO c")
    att.execute("ALTER TABLE t DROP COLUMN b")
    att.execute("DROP TABLE t")
    assert len(roles(ddl, "ddl_t.p")) == 4


def test_event_trigger_functions_run_as_deid_owner_with_pinned_path(admin):
    rows = admin.execute(
        "SELECT e.evtname, p.proname, p.prosecdef, p.proowner::regrole::text, p.proconfig"
        "  FROM pg_event_trigger e JOIN pg_proc p ON p.oid = e.evtfoid"
        " WHERE p.pronamespace = 'deid'::regnamespace ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == ["deid_ddl_end", "deid_drop_extension", "deid_sql_drop"]
    for _, _, secdef, owner, config in rows:
        assert secdef and owner == "deid_owner"
        assert config == ["search_path=pg_catalog, pg_temp"]


def test_hierarchy_message_names_the_column_not_an_oid(ddl):
    ddl.execute("SELECT deid.interval_hierarchy('ddl_t_age', 0, 100, '{10}')")
    ddl.execute("SELECT deid.set_role('ddl_t.p', 'age', 'quasi_identifier', 'ddl_t_age')")
    with pytest.raises(psycopg.Error) as e:
        ddl.execute("SELECT deid.drop_hierarchy('ddl_t_age')")
    assert "is bound to ddl_t.p.age" in str(e.value)
    assert "deid.unset_role('ddl_t.p', 'age')" in hint_of(e)
    ddl.execute("DROP TABLE ddl_t.p")             # the binding goes with the table
    ddl.execute("SELECT deid.drop_hierarchy('ddl_t_age')")


def test_unset_role_and_clear_roles(ddl, connect):
    assert ddl.execute("SELECT deid.unset_role('ddl_t.p', 'zip')").fetchone() == \
        ("ddl_t.p.zip: unclassified",)
    assert "zip" not in roles(ddl, "ddl_t.p")
    with pytest.raises(psycopg.Error) as e:
        ddl.execute("SELECT deid.unset_role('ddl_t.p', 'zip')")
    assert sqlstate_of(e) == "42704" and "deid.roles" in hint_of(e)
    with pytest.raises(psycopg.Error) as e:
        ddl.execute("SELECT deid.unset_role('ddl_t.p', NULL)")
    assert sqlstate_of(e) == "22004" and hint_of(e)
    assert ddl.execute("SELECT deid.clear_roles('ddl_t.p')").fetchone() == \
        ("ddl_t.p: 3 column roles removed",)
    assert roles(ddl, "ddl_t.p") == {}
    assert ddl.execute("SELECT deid.clear_roles('ddl_t.p')").fetchone() == \
        ("ddl_t.p: 0 column roles removed",)


@pytest.mark.parametrize("sql", ["SELECT deid.unset_role('ddl_t.p', 'age')",
                                 "SELECT deid.clear_roles('ddl_t.p')"])
def test_unclassify_needs_deid_admin(ddl, connect, sql):
    ddl.execute("GRANT USAGE ON SCHEMA ddl_t TO deid_t_analyst, deid_t_rogue_admin")
    ddl.execute("GRANT SELECT ON ddl_t.p TO deid_t_analyst")
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_analyst").execute(sql)
    assert sqlstate_of(e) == "42501" and "GRANT deid_admin" in hint_of(e)
    assert len(roles(ddl, "ddl_t.p")) == 4
    # a deid_admin that is no superuser may (naming the relation needs USAGE on its schema)
    connect("deid_t_rogue_admin").execute(sql)
    assert "age" not in roles(ddl, "ddl_t.p")


def test_releases_of_a_dropped_source_stay_and_keep_no_dead_oid(ddl):
    ddl.execute("SELECT * FROM deid.anonymize_request('ddl_t.p', 'anatomy', k => 3, l => 2,"
                " release => 'ddl_t_snap')")
    try:
        ddl.execute("DROP TABLE ddl_t.p")
        row = ddl.execute("SELECT source, source_name, status FROM deid.release"
                          " WHERE name = 'ddl_t_snap'").fetchone()
        assert row == (None, "ddl_t.p", "committed")
        assert ddl.execute("SELECT count(*) FROM release.ddl_t_snap_qit").fetchone() == (60,)
        # the roles the request used are in its log: the verifier still runs without the source
        assert ddl.execute("SELECT deid.verify_release('ddl_t_snap')").fetchone()[0]["verified"]
        # the log stays append-only: the source cannot be set again, nor anything else changed
        with pytest.raises(psycopg.Error) as e:
            ddl.execute("UPDATE deid.release SET source = 'pg_class'::regclass"
                        " WHERE name = 'ddl_t_snap'")
        assert sqlstate_of(e) == "42501"
    finally:
        ddl.execute("SELECT deid.drop_release('ddl_t_snap')")
