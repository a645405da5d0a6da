"""Backup and restore: pg_dump -Fc of a database holding roles, hierarchies, a policy
and one release of every registered method, restored into a fresh database as the superuser.
Then the catalog and the releases are identical, the verifier accepts every restored release,
a new request succeeds (the release-id sequence went along), and the policy still works."""
import subprocess

import psycopg
import pytest

from conftest import sqlstate_of
from deid.methods import registry
from sample_catalog import db_url as _db_url, fill, pg_bin as _bin, recreate as _recreate, rows as _rows

SRC, DST = "deid_t_dump_src", "deid_t_dump_dst"


@pytest.fixture(scope="module")
def dumped(url, admin, tmp_path_factory):
    """(source connection, restored connection, url of the restored database)."""
    _recreate(admin, SRC)
    src = psycopg.connect(_db_url(url, SRC), autocommit=True)
    src.execute("CREATE EXTENSION deid CASCADE")
    methods = sorted(registry.METHODS)     # a new method needs its columns in sample_catalog
    fill(src, url, methods, "dump")

    path = tmp_path_factory.mktemp("dump") / "deid.dump"
    subprocess.run([_bin("pg_dump"), "-Fc", "-f", str(path), "-d", _db_url(url, SRC)], check=True,
                   capture_output=True, text=True)
    _recreate(admin, DST)
    restore = subprocess.run([_bin("pg_restore"), "--exit-on-error", "-d", _db_url(url, DST),
                              str(path)], capture_output=True, text=True)
    assert restore.returncode == 0, restore.stderr
    dst = psycopg.connect(_db_url(url, DST), autocommit=True)
    yield src, dst, _db_url(url, DST), methods
    src.close()
    dst.close()
    for db in (SRC, DST):
        admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


# Tables whose rows only carry row locks (docs/security.md, "How concurrent requests serialize"):
# request_lock's rows are made on demand, run_slot's by the install script; a dump keeps neither.
# deid.composition_state is a cache of the composition rule's cells (rebuilt from the release
# log when it does not cover exactly the releases a request reads): a dump leaves it out.
LOCK_TABLES = ("deid.request_lock", "deid.run_slot", "deid.composition_state")


def test_catalog_is_identical(dumped):
    src, dst, _, _ = dumped
    tables = [r[0] for r in src.execute(
        "SELECT c.oid::regclass::text FROM pg_class c WHERE c.relnamespace = 'deid'::regnamespace"
        " AND c.relkind = 'r' ORDER BY 1") if r[0] not in LOCK_TABLES]
    assert {"deid.column_role", "deid.policy", "deid.release", "deid.rid_set"} <= set(tables)
    for t in tables:
        sql = f"SELECT x::text FROM {t} x"
        assert _rows(dst, sql) == _rows(src, sql), t
    assert _rows(dst, "SELECT count(*)::text FROM deid.column_role") == ["6"]
    seq = "SELECT last_value::text FROM deid.release_release_id_seq"
    assert _rows(dst, seq) == _rows(src, seq)


def test_every_table_and_sequence_is_configuration(dumped):
    src, dst, _, _ = dumped
    missing = _rows(dst, "SELECT c.oid::regclass::text FROM pg_class c"
                         " WHERE c.relnamespace = 'deid'::regnamespace AND c.relkind IN ('r', 'S')"
                         "   AND NOT c.oid = ANY ((SELECT extconfig FROM pg_extension"
                         "                         WHERE extname = 'deid')::oid[])")
    assert [t for t in missing if t not in LOCK_TABLES] == []
    slots = "SELECT count(*)::text FROM deid.run_slot"
    assert _rows(dst, slots) == _rows(src, slots) != ["0"]


def test_releases_and_their_privileges_are_identical(dumped):
    src, dst, _, methods = dumped
    rels = _rows(src, "SELECT unnest(relations) FROM deid.release WHERE status = 'committed'")
    assert len(rels) >= 4 and len(methods) >= 2
    for view in rels:
        table = "deid_release." + view.split(".", 1)[1]
        for rel in (view, table):
            sql = f"SELECT x::text FROM {rel} x"
            assert _rows(dst, sql) == _rows(src, sql), rel
            acl = f"SELECT coalesce(relacl::text, '') FROM pg_class WHERE oid = '{rel}'::regclass"
            assert _rows(dst, acl) == _rows(src, acl), rel
    sql = "SELECT x::text FROM analytics.dx x"
    assert _rows(dst, sql) == _rows(src, sql) and _rows(dst, sql)


def test_verifier_accepts_every_restored_release(dumped):
    _, dst, _, methods = dumped
    names = _rows(dst, "SELECT name FROM deid.release WHERE status = 'committed'")
    assert names == sorted([f"dump_{m[:3]}" for m in methods] + ["dump_pol"])
    seen = set()
    for name in names:
        report = dst.execute("SELECT deid.verify_release(%s)", [name]).fetchone()[0]
        assert report["verified"] is True and report["release"] == name
        seen.add(report["method"])
    assert seen == set(methods)


def test_class_catalog_keeps_its_sources(dumped):
    """deid.equivalence_class after restore: a generalization release's per-source classes
    (source = the source system), anatomy's joint groups (source NULL)."""
    _, dst, _, _ = dumped
    sources = dict(dst.execute(
        "SELECT r.name, array_agg(DISTINCT coalesce(e.source, '<joint>')) FROM deid.equivalence_class e"
        " JOIN deid.release r USING (release_id) WHERE r.name IN ('dump_gen', 'dump_ana')"
        " GROUP BY r.name").fetchall())
    assert sources == {"dump_gen": ["registry"], "dump_ana": ["<joint>"]}


def test_verify_release_catches_a_tampered_release(dumped):
    _, dst, _, _ = dumped
    dst.execute("BEGIN")
    try:
        dst.execute("DELETE FROM deid_release.dump_ana_qit WHERE group_id ="
                    " (SELECT min(group_id) FROM deid_release.dump_ana_qit)")
        with pytest.raises(psycopg.Error) as e:
            dst.execute("SELECT deid.verify_release('dump_ana')")
        assert sqlstate_of(e) == "DE002"
    finally:
        dst.execute("ROLLBACK")


def test_new_request_after_restore(dumped):
    src, dst, url, _ = dumped
    last = src.execute("SELECT max(release_id) FROM deid.release").fetchone()[0]
    analyst = psycopg.connect(url, user="deid_t_analyst", autocommit=True)
    try:
        rid, *_, verified = analyst.execute(
            "SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 20, l => 2,"
            " columns => '{age,sex,diagnosis}', options => '{\"seed\": 1}',"
            " release => 'dump_after')").fetchone()      # the policy release's grouping again
    finally:
        analyst.close()
    assert verified and rid > last


def test_policy_and_readers_work_after_restore(dumped):
    """The policy works after restore, and the composition history went along: the policy's
    same release again (its seed) is allowed."""
    _, dst, url, _ = dumped
    owner = dst.execute("SELECT p.proowner::regrole::text FROM pg_proc p"
                        " WHERE p.oid = deid._grantor_reader('deid_t_admin')").fetchone()
    assert owner == ("deid_t_admin",)
    researcher = psycopg.connect(url, user="deid_t_researcher", autocommit=True)
    reader = psycopg.connect(url, user="deid_t_reader", autocommit=True)
    try:
        *_, verified = researcher.execute(
            "SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 20, l => 2,"
            " columns => '{age,sex,diagnosis}', options => '{\"seed\": 1}',"
            " release => 'dump_pol_after')").fetchone()
        assert verified
        with pytest.raises(psycopg.Error) as e:
            researcher.execute("SELECT deid.anonymize_request('registry.patients', 'anatomy',"
                               " k => 5, columns => '{age,sex,diagnosis}')")
        assert sqlstate_of(e) == "42501"
        assert reader.execute("SELECT count(*) FROM release.dump_pol_qit").fetchone()[0] == 1200
        assert reader.execute("SELECT count(*) FROM release.dump_pol_after_qit").fetchone()[0] == 1200
    finally:
        researcher.close()
        reader.close()


def test_verify_release_needs_deid_admin(dumped):
    _, _, url, _ = dumped
    analyst = psycopg.connect(url, user="deid_t_analyst", autocommit=True)
    try:
        with pytest.raises(psycopg.Error) as e:
            analyst.execute("SELECT deid.verify_release('dump_ana')")
        assert sqlstate_of(e) == "42501" and "GRANT deid_admin" in e.value.diag.message_hint
    finally:
        analyst.close()
    admin = psycopg.connect(url, user="deid_t_rogue_admin", autocommit=True)
    try:
        assert admin.execute("SELECT deid.verify_release('dump_gen')").fetchone()[0]["verified"]
    finally:
        admin.close()
