"""A database filled as a DBA's would be: roles, hierarchies, a policy granted by an admin who is
no superuser but owns the table (its reader is owned by that admin), one release of each
method, a dropped release and an analyst's own view over a release. Shared by the dump/restore test
(tests/integration/test_dump_restore.py) and the upgrade test (tests/upgrade/test_update.py)."""
import json
import os
import pathlib
import subprocess

import psycopg

ROOT = pathlib.Path(__file__).resolve().parents[1]
# the columns each method releases (a new method needs an entry here)
COLUMNS = {"anatomy": "{age,sex,zip,diagnosis,treatment}", "generalization": "{age,sex,diagnosis}",
           "condensation": "{age,sex}", "disassociation": None}   # long form: record + item
OPTIONS = {"disassociation": {"m": 2, "record": "patient_id", "item": "diagnosis"}}
ROWS = 1200


def pg_bin(tool):
    """A tool of the server under test (PG_BINDIR, exported by the Makefile)."""
    bindir = os.environ.get("PG_BINDIR")
    if not bindir:
        bindir = subprocess.check_output(["pg_config", "--bindir"], text=True).strip()
    return str(pathlib.Path(bindir) / tool)


def db_url(url, db):
    return url.rsplit("/", 1)[0] + "/" + db


def recreate(admin, db):
    admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    admin.execute(f"CREATE DATABASE {db}")


def rows(conn, sql):
    return sorted(r[0] for r in conn.execute(sql).fetchall())


def request(conn, method, release, k=10, override=False):
    """One release of METHOD by the connection's role; returns its result row. `override`:
    pass the composition rule's override (a version that has it; the sample holds several
    groupings of one table on purpose)."""
    options = dict(OPTIONS.get(method, {}), seed=5)
    if override:
        options["allow_overlap"] = True
    return conn.execute(
        "SELECT * FROM deid.anonymize_request('registry.patients', %s, k => %s, l => %s,"
        " columns => %s, options => %s, release => %s)",
        [method, k, 2 if method == "anatomy" else None, COLUMNS[method],
         json.dumps(options), release]).fetchone()


def fill(conn, url, methods, prefix):
    """Fill the database of superuser connection CONN (deid already created) at URL:
    releases <prefix>_<method[:3]> of every method in METHODS, <prefix>_pol by the policy's
    grantee, a dropped <prefix>_gone, and the view analytics.dx over <prefix>_ana."""
    conn.execute((ROOT / "scripts" / "sample_patients.sql").read_text())
    conn.execute(f"SELECT registry.generate_patients({ROWS}, 0.3)")
    conn.execute("GRANT USAGE ON SCHEMA registry TO PUBLIC")
    conn.execute("GRANT SELECT ON registry.patients TO deid_t_analyst, deid_t_admin")
    conn.execute("SELECT deid.interval_hierarchy('age_10y', 0, 120, '{10,20,40}')")
    conn.execute("SELECT deid.load_hierarchy('sex', E'F;*\\nM;*')")
    conn.execute("SELECT deid.set_role('registry.patients', 'name', 'identifier')")
    conn.execute("SELECT deid.set_role('registry.patients', 'age', 'quasi_identifier', 'age_10y',"
                 " source => 'registry')")
    conn.execute("SELECT deid.set_role('registry.patients', 'sex', 'quasi_identifier', 'sex',"
                 " source => 'registry')")
    conn.execute("SELECT deid.set_role('registry.patients', 'zip', 'quasi_identifier')")
    conn.execute("SELECT deid.set_role('registry.patients', c, 'sensitive')"
                 " FROM unnest('{diagnosis,treatment}'::text[]) c")
    composes = conn.execute("SELECT to_regclass('deid.composition_reset') IS NOT NULL"
                            ).fetchone()[0]       # a version with the composition rule
    with psycopg.connect(db_url(url, conn.info.dbname), user="deid_t_analyst",
                         autocommit=True) as analyst:
        for m in methods:
            request(analyst, m, f"{prefix}_{m[:3]}", override=composes)
        analyst.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy',"
                        " k => 10, columns => '{age,sex,diagnosis}', options => %s,"
                        " release => %s)",
                        ['{"allow_overlap": true}' if composes else None, f"{prefix}_gone"])
        analyst.execute("SELECT deid.drop_release(%s)", [f"{prefix}_gone"])
    # a policy granted by an admin that is no superuser: its reader is owned by that admin
    # (only an owner of the relation grants a policy: the admin owns the table)
    conn.execute("ALTER TABLE registry.patients OWNER TO deid_t_admin")
    with psycopg.connect(db_url(url, conn.info.dbname), user="deid_t_admin",
                         autocommit=True) as grantor:
        grantor.execute("SELECT deid.allow_requests('deid_t_researcher', 'registry.patients', 20, 2)")
    if composes:        # the policy's study is one of its own (as tests/dbfixtures.py own_history)
        conn.execute("INSERT INTO deid.composition_reset (after_release)"
                     " SELECT coalesce(max(release_id), 0) FROM deid.release")
    with psycopg.connect(db_url(url, conn.info.dbname), user="deid_t_researcher",
                         autocommit=True) as researcher:
        researcher.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy',"
                           " k => 20, l => 2, columns => '{age,sex,diagnosis}', options => %s,"
                           " release => %s)", ['{"seed": 1}', f"{prefix}_pol"])
    # an analyst's own view over a release
    conn.execute("CREATE SCHEMA analytics")
    conn.execute("CREATE VIEW analytics.dx AS SELECT diagnosis, sum(count) AS n"
                 f" FROM release.{prefix}_ana_diagnosis GROUP BY 1")
