"""Upgrade: the previous released version, taken from git (tag v<version>, else the
commit that extension/versions.txt records), built and installed beside the current one into the
same PostgreSQL; a database created at that version and filled as a DBA's would be
(tests/sample_catalog.py); ALTER EXTENSION deid UPDATE. Then:

- the catalog's structure equals a fresh install of the current version (tables, columns,
  constraints, indexes, triggers, views, functions with signatures, owners, security, settings,
  bodies and ACLs, event triggers, comments, the dumped configuration, extension membership);
- every row of the catalog and of every release is still there;
- deid.verify_release accepts every old release, a new request of each method succeeds, the
  policy still works for its role;
- the backend that ran the update had imported the old version's package: its next call runs
  the new version's code, with no module of the old one left.

A catalog change in sql/*.sql without its fragment in sql/upgrade/<version>/ fails
test_catalog_equals_a_fresh_install."""
import os
import re
import subprocess

import psycopg
import pytest
from psycopg import sql

from sample_catalog import COLUMNS, ROOT, db_url, fill, recreate, request, rows

OLD_DB, NEW_DB = "deid_t_upd_old", "deid_t_upd_new"
METHODS = sorted(COLUMNS)          # the four methods of 1.0.0


def _current_version():
    return re.search(r"default_version = '([^']+)'", (ROOT / "extension/deid.control").read_text())[1]


def _previous_version():
    """(version, git revision) of the last released version before the current one."""
    current = _current_version()
    released = [line.split() for line in (ROOT / "extension/versions.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    version, sha = [v for v in released if v[0] != current][-1]
    for rev in (f"v{version}", sha):
        if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", f"{rev}^{{commit}}"],
                          capture_output=True).returncode == 0:
            return version, rev
    pytest.fail(f"deid {version} is not in this clone's history: neither tag v{version} nor commit"
                f" {sha} (extension/versions.txt) was found. Fetch them (git fetch --tags origin)"
                " to run the upgrade test.")


def _make_install(extension_dir):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "DESTDIR", "EXTVERSION")}
    pg_config = os.path.join(os.environ.get("PG_BINDIR") or subprocess.check_output(
        ["pg_config", "--bindir"], text=True).strip(), "pg_config")
    out = subprocess.run(["make", "-s", "-C", str(extension_dir), "install", f"PG_CONFIG={pg_config}"],
                         env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    """Install the previous version from git beside the current one; yields its version."""
    version, rev = _previous_version()
    tree = tmp_path_factory.mktemp(f"deid-{version}")
    archive = subprocess.run(f"git -C '{ROOT}' archive '{rev}' | tar -x -C '{tree}'", shell=True,
                             capture_output=True, text=True)
    assert archive.returncode == 0, archive.stderr
    try:
        _make_install(tree / "extension")      # its own Makefile: deid--<old>.sql, python-<old>
    finally:
        _make_install(ROOT / "extension")      # the current control file (default_version) again
    return version


# -- the catalog's structure, normalized (no OIDs; order-insensitive where PostgreSQL's order
# depends on the order of statements, e.g. ACL items, or appended columns)
ACL = "(SELECT array_agg(a::text ORDER BY a::text) FROM unnest({}) a)"
STRUCTURE = {
    "schemas": f"""
        SELECT n.nspname, pg_get_userbyid(n.nspowner), {ACL.format('n.nspacl')},
               obj_description(n.oid, 'pg_namespace')
          FROM pg_namespace n WHERE n.nspname IN ('deid', 'release', 'deid_release')""",
    "relations": f"""
        SELECT c.relname, c.relkind, pg_get_userbyid(c.relowner), {ACL.format('c.relacl')},
               c.reloptions, c.relpersistence, c.relrowsecurity, obj_description(c.oid, 'pg_class')
          FROM pg_class c WHERE c.relnamespace = 'deid'::regnamespace""",
    "columns": """
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attstorage, a.attidentity, a.attgenerated,
               a.attcollation::regcollation::text, col_description(c.oid, a.attnum)
          FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
          LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
         WHERE c.relnamespace = 'deid'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped""",
    "constraints": """
        SELECT c.conrelid::regclass::text, c.conname, c.contype, pg_get_constraintdef(c.oid)
          FROM pg_constraint c WHERE c.connamespace = 'deid'::regnamespace""",
    "indexes": """
        SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
         WHERE c.relnamespace = 'deid'::regnamespace""",
    "sequences": """
        SELECT s.seqrelid::regclass::text, s.seqtypid::regtype::text, s.seqstart, s.seqincrement,
               s.seqmin, s.seqmax, s.seqcache, s.seqcycle
          FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid
         WHERE c.relnamespace = 'deid'::regnamespace""",
    "views": """
        SELECT c.relname, pg_get_viewdef(c.oid) FROM pg_class c
         WHERE c.relnamespace = 'deid'::regnamespace AND c.relkind IN ('v', 'm')""",
    "triggers": """
        SELECT pg_get_triggerdef(t.oid), t.tgenabled FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE c.relnamespace = 'deid'::regnamespace AND NOT t.tgisinternal""",
    "row security": """
        SELECT p.polrelid::regclass::text, p.polname, p.polcmd, p.polpermissive, p.polroles::regrole[]::text,
               pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)
          FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
         WHERE c.relnamespace = 'deid'::regnamespace""",
    "functions": f"""
        SELECT p.oid::regprocedure::text, pg_get_function_arguments(p.oid),
               pg_get_function_result(p.oid), pg_get_userbyid(p.proowner), l.lanname, p.prokind,
               p.prosecdef, p.provolatile, p.proisstrict, p.proleakproof, p.proparallel,
               p.proconfig, {ACL.format('p.proacl')}, md5(p.prosrc), obj_description(p.oid, 'pg_proc')
          FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
         WHERE p.pronamespace = 'deid'::regnamespace
           AND p.proname !~ '^_reader_[0-9a-f]{{16}}$'     -- a policy's reader (deid.allow_requests)""",
    "event triggers": """
        SELECT e.evtname, e.evtevent, e.evtfoid::regprocedure::text, e.evtenabled, e.evttags,
               pg_get_userbyid(e.evtowner)
          FROM pg_event_trigger e WHERE e.evtname LIKE 'deid%'""",
    "dumped configuration": """
        SELECT c.oid::regclass::text, x.cond
          FROM pg_extension e, unnest(e.extconfig, e.extcondition) x(oid, cond)
          JOIN pg_class c ON c.oid = x.oid WHERE e.extname = 'deid'""",
    "extension": """
        SELECT e.extversion, e.extrelocatable, e.extnamespace::regnamespace::text,
               pg_get_userbyid(e.extowner) FROM pg_extension e WHERE e.extname = 'deid'""",
    "extension members": """
        SELECT pg_describe_object(d.classid, d.objid, d.objsubid) FROM pg_depend d
         WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
           AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'deid')""",
}


def structure(conn):
    return {what: sorted(str(r) for r in conn.execute(query).fetchall())
            for what, query in STRUCTURE.items()}


def contents(conn):
    """{relation: (columns, sorted rows)} of every table of the catalog and every release
    relation (deid_release tables and release views)."""
    rels = [r[0] for r in conn.execute(
        "SELECT c.oid::regclass::text FROM pg_class c"
        " WHERE (c.relnamespace = 'deid'::regnamespace AND c.relkind IN ('r', 'S'))"
        "    OR (c.relnamespace IN ('deid_release'::regnamespace, 'release'::regnamespace)"
        "        AND c.relkind IN ('r', 'v'))")]
    out = {}
    for rel in rels:
        cols = [r[0] for r in conn.execute(
            "SELECT quote_ident(attname) FROM pg_attribute WHERE attrelid = %s::regclass"
            " AND attnum > 0 AND NOT attisdropped ORDER BY attnum", [rel])]
        out[rel] = (cols, rows(conn, f"SELECT row({', '.join(cols)})::text FROM {rel}"))
    return out


def _unpacked(col, width):
    """SQL: a packed column of deid.rid_set (big-endian int4 or int8 per element) as the array
    1.0.0 stored (int[] or bigint[]), decoded independently of deid's own code."""
    cast = "bit(32)::int" if width == 4 else "bit(64)::bigint"
    return (f"ARRAY(SELECT ('x' || encode(substring({col} from {width} * i + 1 for {width}), 'hex'))"
            f"::{cast} FROM generate_series(0, length({col}) / {width} - 1) i ORDER BY i)")


# Data an update moves: for each relation of the previous version, the rows it becomes, read
# in the current version in the previous one's columns (sorted text of row(...)); the rows of
# the releases up to {last}.
MOVED = {
    # 1.1.0 (sql/upgrade/1.1.0/60_rid_set_packed.sql): the numeric arrays of deid.rid_set packed
    "deid.rid_set":
        f"SELECT row(r.release_id, r.attribute, r.chunk, {_unpacked('r.group_ids', 4)}, r.value_list,"
        f" {_unpacked('r.rid_counts', 4)}, {_unpacked('r.rids', 8)})::text FROM deid.rid_set r"
        " WHERE r.release_id <= {last}",
    # 1.1.0 (sql/upgrade/1.1.0/50_one_membership_catalog.sql): one membership catalog
    "deid.disassociation_member":
        "SELECT row(m.release_id, r, m.cluster_id)::text FROM deid.cluster_member m, unnest(m.rids) r"
        " WHERE m.release_id <= {last} AND m.release_id IN"
        "       (SELECT release_id FROM deid.release WHERE method = 'disassociation')",
    "deid.cluster_member":
        "SELECT row(m.release_id, m.cluster_id, m.rids)::text FROM deid.cluster_member m"
        " WHERE m.release_id <= {last} AND m.release_id IN"
        "       (SELECT release_id FROM deid.release WHERE method <> 'disassociation')",
}


def contents_of(conn, before, last_release):
    """The same relations and columns as BEFORE, read from CONN (columns added by an update
    are not compared; MOVED data where it went), of the releases up to LAST_RELEASE."""
    out = {}
    for rel, (cols, _) in before.items():
        if rel in MOVED:
            out[rel] = (cols, rows(conn, MOVED[rel].format(last=int(last_release))))
            continue
        where = f" WHERE release_id <= {int(last_release)}" if "release_id" in cols else ""
        out[rel] = (cols, rows(conn, f"SELECT row({', '.join(cols)})::text FROM {rel}{where}"))
    return out


RID_SETS = "SELECT row(release_id, group_id, attribute, value, rids)::text FROM deid.rid_sets"


def loaded_versions(conn):
    """The deid package directories whose modules this backend has loaded."""
    return conn.execute("SELECT upd_probe.loaded()").fetchone()[0]


@pytest.fixture(scope="module")
def updated(url, admin, previous):
    """The old database after the update, with what was observed on the way."""
    recreate(admin, OLD_DB)
    su = psycopg.connect(db_url(url, OLD_DB), autocommit=True)
    su.execute(sql.SQL("CREATE EXTENSION deid VERSION {} CASCADE").format(sql.Literal(previous)))
    assert su.execute("SELECT extversion FROM pg_extension WHERE extname = 'deid'").fetchone() == (previous,)
    fill(su, url, METHODS, "upd")
    # rows keyed by dead OIDs, as a database where the DDL triggers did not fire holds them
    su.execute("CREATE TABLE registry.etl AS SELECT * FROM registry.patients LIMIT 300")
    su.execute("ALTER TABLE registry.etl ADD PRIMARY KEY (patient_id)")
    su.execute("GRANT SELECT ON registry.etl TO deid_t_admin")
    su.execute("SELECT deid.set_role('registry.etl', 'age', 'quasi_identifier', 'age_10y')")
    su.execute("SELECT deid.set_role('registry.etl', 'diagnosis', 'sensitive')")
    su.execute("SELECT * FROM deid.anonymize_request('registry.etl', 'anatomy', k => 5, l => 2,"
               " columns => '{age,diagnosis}', release => 'upd_etl')")
    with psycopg.connect(db_url(url, OLD_DB), user="deid_t_admin", autocommit=True) as grantor:
        grantor.execute("SELECT deid.allow_requests('deid_t_researcher', 'registry.etl', 5)")
    etl = su.execute("SELECT 'registry.etl'::regclass::oid::text").fetchone()[0]
    su.execute("SET session_replication_role = replica")       # event triggers do not fire
    su.execute("DROP TABLE registry.etl")
    su.execute("RESET session_replication_role")
    dead = {"roles": rows(su, "SELECT count(*)::text FROM deid.column_role r"
                              " WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = r.relation)"),
            "policies": rows(su, "SELECT count(*)::text FROM deid.policy p"
                                 " WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = p.relation)"),
            "sources": rows(su, "SELECT name FROM deid.release r WHERE source IS NOT NULL"
                                " AND NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = r.source)")}
    assert dead == {"roles": ["2"], "policies": ["1"], "sources": ["upd_etl"]}

    # this backend loads the old version's package, then updates
    su.execute("CREATE SCHEMA upd_probe")
    su.execute("""CREATE FUNCTION upd_probe.loaded() RETURNS text[] LANGUAGE plpython3u AS $$
import sys, re
return sorted({m.group(1) for m in (re.search(r'/deid/(python[^/]*)/', getattr(v, '__file__', None) or '')
                                    for v in list(sys.modules.values())) if m})
$$""")
    request(su, "anatomy", "upd_su_old")
    before_loaded = loaded_versions(su)
    before = contents(su)
    last_release = su.execute("SELECT max(release_id) FROM deid.release").fetchone()[0]
    rid_sets = rows(su, RID_SETS)
    log = rows(su, "SELECT row(" + ", ".join(c for c in before["deid.release"][0] if c != "source")
               + ")::text FROM deid.release")
    su.execute("ALTER EXTENSION deid UPDATE")
    version = su.execute("SELECT extversion FROM pg_extension WHERE extname = 'deid'").fetchone()[0]
    rid_sets_after = rows(su, RID_SETS + f" WHERE release_id <= {int(last_release)}")
    # override: the sample's anatomy releases publish diagnosis for the same patients (one
    # method per sensitive column, docs/security.md); the sample holds both on purpose
    same_session = request(su, "generalization", "upd_su_new", override=True)
    after_loaded = loaded_versions(su)
    su.execute("DROP SCHEMA upd_probe CASCADE")
    yield {"conn": su, "url": db_url(url, OLD_DB), "before": before, "version": version, "etl": etl,
           "last_release": last_release, "log": log,
           "loaded": (before_loaded, after_loaded), "same_session": same_session,
           "rid_sets": (rid_sets, rid_sets_after)}
    su.close()
    admin.execute(f"DROP DATABASE IF EXISTS {OLD_DB} WITH (FORCE)")


@pytest.fixture(scope="module")
def fresh(url, admin, updated):
    recreate(admin, NEW_DB)
    conn = psycopg.connect(db_url(url, NEW_DB), autocommit=True)
    conn.execute("CREATE EXTENSION deid CASCADE")
    yield conn
    conn.close()
    admin.execute(f"DROP DATABASE IF EXISTS {NEW_DB} WITH (FORCE)")


def test_update_reaches_the_current_version(updated, previous):
    assert previous != _current_version()
    assert updated["version"] == _current_version()


def test_catalog_equals_a_fresh_install(updated, fresh):
    got, want = structure(updated["conn"]), structure(fresh)
    for what in STRUCTURE:
        missing = sorted(set(want[what]) - set(got[what]))
        extra = sorted(set(got[what]) - set(want[what]))
        assert not missing and not extra, (
            f"{what} after ALTER EXTENSION UPDATE differ from a fresh install:\n"
            f"  only in a fresh install: {missing}\n  only after the update: {extra}\n"
            "A catalog change in sql/*.sql needs its fragment in sql/upgrade/<version>/"
            " (sql/upgrade/README.md).")
    assert got == want


def test_every_function_runs_the_current_package(updated):
    version = _current_version()
    stale = rows(updated["conn"], "SELECT p.oid::regprocedure::text FROM pg_proc p"
                                  " WHERE p.pronamespace = 'deid'::regnamespace"
                                  f" AND p.prosrc ~ '/deid/python' AND p.prosrc !~ '/deid/python-{version}(/|'')'")
    assert stale == []


def test_data_is_all_still_there(updated):
    before, conn = updated["before"], updated["conn"]
    after = contents_of(conn, before, updated["last_release"])
    for rel, (cols, old_rows) in before.items():
        if rel == "deid.release":
            continue
        if rel.endswith("_seq"):        # the session that updated made one release since
            assert after[rel][1] > old_rows, rel
            continue
        want = old_rows
        if rel in ("deid.column_role", "deid.policy"):     # the dead OID's rows went
            want = [r for r in old_rows if f",{updated['etl']}," not in "," + r[1:-1] + ","]
        assert after[rel][1] == want, rel
    assert len(before["deid.column_role"][1]) == 8 and len(after["deid.column_role"][1]) == 6
    assert len(before["deid.policy"][1]) == 2 and len(after["deid.policy"][1]) == 1
    # the release log: every row kept; only the dropped source's release lost its source
    cols = [c for c in before["deid.release"][0] if c != "source"]
    kept = f"SELECT row({', '.join(cols)})::text FROM deid.release"
    assert rows(conn, kept + f" WHERE release_id <= {updated['last_release']}") == updated["log"]
    log = ("SELECT name, status, source::text, source_name FROM deid.release"
           f" WHERE release_id <= {updated['last_release']} ORDER BY release_id")
    rows_after = conn.execute(log).fetchall()
    assert len(rows_after) == len(before["deid.release"][1])
    assert [r for r in rows_after if r[0] == "upd_etl"] == [("upd_etl", "committed", None, "registry.etl")]
    assert all(r[2] == "registry.patients" for r in rows_after if r[0] != "upd_etl")


def test_no_dead_oids_remain(updated):
    conn = updated["conn"]
    assert rows(conn, "SELECT relation::text FROM deid.column_role r"
                      " WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = r.relation)") == []
    assert rows(conn, "SELECT relation::text FROM deid.policy p"
                      " WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = p.relation)") == []


def test_verifier_accepts_every_old_release(updated):
    conn = updated["conn"]
    names = rows(conn, "SELECT name FROM deid.release WHERE status = 'committed'")
    assert set(names) >= {f"upd_{m[:3]}" for m in METHODS} | {"upd_pol", "upd_etl", "upd_su_old"}
    seen = set()
    for name in names:
        report = conn.execute("SELECT deid.verify_release(%s)", [name]).fetchone()[0]
        assert report["verified"] is True and report["release"] == name, report
        seen.add(report["method"])
    assert seen == set(METHODS)


def _reset_history(url):
    """The releases made before the update regroup each other (1.0.0 had no composition
    rule): a later release holding their rows is refused. A superuser's reset (logged)
    makes the new requests a study of their own."""
    with psycopg.connect(url, autocommit=True) as su:
        su.execute("INSERT INTO deid.composition_reset (after_release)"
                   " SELECT max(release_id) FROM deid.release")


def test_old_releases_bear_on_new_ones(updated):
    """Without a reset, the rebuilt selections and groups of the old releases constrain a new
    release: another anatomy grouping of the same rows is refused."""
    with psycopg.connect(updated["url"], user="deid_t_analyst", autocommit=True) as analyst:
        with pytest.raises(psycopg.Error) as e:
            analyst.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy',"
                            " k => 7, columns => '{age,sex,diagnosis}', release => 'upd_regroup')")
        assert e.value.diag.sqlstate == "DE001"


def test_a_new_request_of_each_method(updated):
    _reset_history(updated["url"])
    with psycopg.connect(updated["url"], user="deid_t_analyst", autocommit=True) as analyst:
        for m in METHODS:      # anatomy and generalization both publish diagnosis: override
            *_, verified = request(analyst, m, f"upd_new_{m[:3]}", override=True)
            assert verified, m


def test_policy_still_works_for_its_role(updated):
    _reset_history(updated["url"])
    with psycopg.connect(updated["url"], user="deid_t_researcher", autocommit=True) as researcher:
        *_, verified = researcher.execute(
            "SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 20, l => 2,"
            " columns => '{age,sex,diagnosis}', release => 'upd_pol_after')").fetchone()
        assert verified
        with pytest.raises(psycopg.Error) as e:
            researcher.execute("SELECT deid.anonymize_request('registry.patients', 'anatomy',"
                               " k => 5, columns => '{age,sex,diagnosis}')")
        assert e.value.diag.sqlstate == "42501"
    with psycopg.connect(updated["url"], user="deid_t_reader", autocommit=True) as reader:
        assert reader.execute("SELECT count(*) FROM release.upd_pol_after_qit").fetchone()[0] == 1200
        assert reader.execute("SELECT count(*) FROM release.upd_pol_qit").fetchone()[0] == 1200


def test_same_session_update_runs_the_new_code(updated, previous):
    before_loaded, after_loaded = updated["loaded"]
    assert before_loaded == [f"python-{previous}"]
    assert after_loaded == [f"python-{_current_version()}"]
    assert updated["same_session"][-1] is True


def test_converted_rid_sets_read_the_same(updated):
    """deid.rid_set's rows written by the previous version, converted by the update, show the
    same RID sets through deid.rid_sets as before it."""
    before, after = updated["rid_sets"]
    assert len(before) > 100 and after == before
    assert updated["conn"].execute("SELECT count(*) FROM deid.rid_set WHERE release_id <= %s",
                                   [updated["last_release"]]).fetchone()[0] > 0


def test_old_selections_are_rebuilt_for_the_overlap_control(updated):
    """sql/upgrade/1.1.0/72_release_selection.sql: every old release of the sample but the
    generalization one (1.0.0 stored no row ids) has its selection, all 1200 patients by
    patient_id, in the ids layout (78_release_selection_layout.sql: 'I', then int8)."""
    conn, last = updated["conn"], updated["last_release"]
    got = conn.execute(
        "SELECT r.name, s.row_id::text, s.n, s.rids = (SELECT '\\x49'::bytea"
        " || string_agg(int8send(p.patient_id), ''::bytea ORDER BY p.patient_id)"
        " FROM registry.patients p)"
        " FROM deid.release r LEFT JOIN deid.release_selection s USING (release_id)"
        " WHERE r.release_id <= %s AND r.source IS NOT NULL ORDER BY r.name", [last]).fetchall()
    want = {name: (None, None, None) if name == "upd_gen" else ("patient_id", 1200, True)
            for name, *_ in got}
    assert {name: tuple(rest) for name, *rest in got} == want
    assert {"upd_ana", "upd_con", "upd_dis", "upd_gone", "upd_pol"} <= set(want)
