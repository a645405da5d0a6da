"""Removal: DROP EXTENSION deid refuses while committed releases exist, with a hint;
once they are dropped it goes; with SET deid.drop_with_releases = on, DROP EXTENSION deid CASCADE
removes them and says what it removes (PostgreSQL's NOTICE lists every dependent view, the
analysts' own included). Other DROP EXTENSION statements are untouched. Own database."""
import pathlib

import psycopg
import pytest

from conftest import hint_of, sqlstate_of

ROOT = pathlib.Path(__file__).resolve().parents[2]
DB = "deid_t_dropext"


@pytest.fixture
def db(url, admin):
    admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin.execute(f"CREATE DATABASE {DB}")
    conn = psycopg.connect(url.rsplit("/", 1)[0] + "/" + DB, autocommit=True)
    conn.execute("CREATE EXTENSION deid CASCADE")
    conn.execute("CREATE TABLE public.p (id int PRIMARY KEY, age int, dx text)")
    conn.execute("INSERT INTO p SELECT i, 20 + i % 30, 'd' || i % 3 FROM generate_series(1, 60) i")
    conn.execute("SELECT deid.set_role('p', 'age', 'quasi_identifier')")
    conn.execute("SELECT deid.set_role('p', 'dx', 'sensitive')")
    conn.execute("SELECT * FROM deid.anonymize_request('p', 'anatomy', k => 5, release => 'rel_a')")
    conn.execute("CREATE SCHEMA analytics")
    conn.execute("CREATE VIEW analytics.dx AS SELECT dx, sum(count) n FROM release.rel_a_dx GROUP BY 1")
    yield conn
    conn.close()
    admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")


def installed(conn):
    return conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'deid'").fetchone()[0]


@pytest.mark.parametrize("sql", ["DROP EXTENSION deid", "DROP EXTENSION deid CASCADE",
                                 "drop extension if exists \"deid\" cascade",
                                 "DROP EXTENSION plpython3u, deid CASCADE"])
def test_refuses_while_releases_exist(db, sql):
    with pytest.raises(psycopg.Error) as e:
        db.execute(sql)
    assert sqlstate_of(e) == "2BP01"
    assert "1 committed release(s) (rel_a)" in str(e.value)
    assert "deid.drop_release" in hint_of(e) and "drop_with_releases" in hint_of(e)
    assert installed(db) == 1
    assert db.execute("SELECT count(*) FROM analytics.dx").fetchone()[0] == 3


def test_other_drop_extension_statements_pass(db):
    db.execute("DROP EXTENSION IF EXISTS deidx")
    db.execute("DROP EXTENSION IF EXISTS deid_other CASCADE")
    assert installed(db) == 1


def test_drops_once_releases_are_dropped(db):
    db.execute("DROP VIEW analytics.dx")
    db.execute("SELECT deid.drop_release('rel_a')")
    db.execute("DROP EXTENSION deid")
    assert installed(db) == 0
    db.execute("CREATE EXTENSION deid CASCADE")   # and comes back clean


def test_drop_with_releases_says_what_it_removes(db):
    notices = []
    handler = (lambda d: notices.append((d.message_primary or "") + "\n" + (d.message_detail or "")))
    db.add_notice_handler(handler)
    db.execute("SET deid.drop_with_releases = on")
    try:
        db.execute("DROP EXTENSION deid CASCADE")
    finally:
        db.remove_notice_handler(handler)
    assert installed(db) == 0
    said = "\n".join(notices)
    assert "view analytics.dx" in said and "table deid_release.rel_a_qit" in said
    assert db.execute("SELECT to_regclass('analytics.dx')").fetchone() == (None,)
