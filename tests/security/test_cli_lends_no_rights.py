"""Every `deid` command, run by a superuser on the releases of a hostile administrator's views,
lends that administrator nothing.

A deid_admin who is not a superuser (eva) owns a view whose WHERE clause calls a function of
hers; the function makes eva a superuser, or grants eva the caller's role, whenever it runs as
anyone but eva. eva classifies the view's columns and releases it herself: the server's read
runs as eva, so the function gains nothing there. A client that then counted or compared the
view's rows, as the superuser running `deid report` (or any other command), would run her
function with the superuser's rights. The client reads only what deid made (the release log,
the release tables) and asks the server for anything derived from a source; the server reads a
source only after the walk of the code that read would run (code_trust), which refuses eva's
function for a reader who is not eva. Each command here runs as a real process, as the
superuser, and afterwards no role has gained anything: eva is no superuser, she is a member of
no new role, and her function never ran as another role."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
from psycopg import sql

ROOT = pathlib.Path(__file__).resolve().parents[2]

EVA = "deid_t_eva"
SCHEMA = EVA
RELEASES = {"eva_an": "anatomy", "eva_cond": "condensation", "eva_gen": "generalization",
            "eva_dx": "disassociation"}
# a side effect that only a caller with more rights than eva makes: superuser for eva, or the
# caller's own role granted to eva, and a row in eva's log of who ran it
TRAP = f"""CREATE FUNCTION {SCHEMA}.f() RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
  IF current_user <> '{EVA}' THEN
    INSERT INTO {SCHEMA}.seen (who) VALUES (current_user);
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
      EXECUTE 'ALTER ROLE {EVA} SUPERUSER';
    END IF;
    BEGIN
      EXECUTE format('GRANT %I TO {EVA}', current_user);
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END IF;
  RETURN true;
END $f$"""
SETUP = [
    f"CREATE TABLE {SCHEMA}.seen (who name, at timestamptz DEFAULT now())",
    f"GRANT INSERT ON {SCHEMA}.seen TO PUBLIC",
    f"GRANT USAGE ON SCHEMA {SCHEMA} TO PUBLIC",
    TRAP,
    f"""CREATE TABLE {SCHEMA}.t AS SELECT i AS id, 20 + i % 50 AS age,
          (ARRAY['F','M'])[1 + i % 2] AS sex, (10000 + i % 7)::text AS zip, 'D' || (i % 5) AS dx,
          (i * 37 % 101)::float8 AS bmi, 1 + i * 13 % 60 AS months FROM generate_series(1, 600) i""",
    f"CREATE VIEW {SCHEMA}.v AS SELECT * FROM {SCHEMA}.t WHERE {SCHEMA}.f()",
    f"""CREATE TABLE {SCHEMA}.dx AS SELECT i AS id, i / 3 AS patient_id,
          (ARRAY['250','401','428','414','272','V58','530'])[1 + (i * 7 + i / 3) % 7] AS icd9
          FROM generate_series(1, 900) i""",
    f"CREATE VIEW {SCHEMA}.dv AS SELECT * FROM {SCHEMA}.dx WHERE {SCHEMA}.f()",
    "SELECT deid.interval_hierarchy('eva_age', 0, 120, '{5,10,20}')",
    "SELECT deid.load_hierarchy('eva_sex', 'F;*\nM;*')",
]
ROLES = [("age", "quasi_identifier", "eva_age"), ("sex", "quasi_identifier", "eva_sex"),
         ("zip", "quasi_identifier", None), ("dx", "sensitive", None),
         ("bmi", "quasi_identifier", None), ("months", "sensitive", None)]
REQUESTS = {
    "eva_an": ("v", "anatomy", 5, 2, "{age,sex,zip,dx}", {}),
    "eva_cond": ("v", "condensation", 10, None, "{age,bmi,months}", {}),
    "eva_gen": ("v", "generalization", 5, None, "{age,sex}", {}),
    "eva_dx": ("dv", "disassociation", 3, None, None,
               {"record": "patient_id", "item": "icd9", "m": 2, "utility": [["250", "401"], ["428"]]}),
}


def deid(url, role, *argv):
    """`python -m deid_cli ARGV` as a real process, connected as `role`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "client"))
    for k in ("PGUSER", "PGDATABASE", "PGSERVICE"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-m", "deid_cli", *argv, "--dbname", url, "-U", role],
                          capture_output=True, text=True, env=env, timeout=300)


def _clean(admin):
    """eva's releases, schema and hierarchies gone; any role a failed run granted her revoked."""
    for (role,) in admin.execute("SELECT roleid::regrole::text FROM pg_auth_members m"
                                 " JOIN pg_roles r ON r.oid = m.member AND r.rolname = %s"
                                 " WHERE roleid <> 'deid_admin'::regrole", [EVA]).fetchall():
        admin.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(role), sql.Identifier(EVA)))
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name = ANY (%s)", [list(RELEASES)])
    admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchy"
                  " WHERE name IN ('eva_age', 'eva_sex')")


@pytest.fixture(scope="module")
def hostile(admin, url):
    """eva's views and her four releases of them (one per method), made by eva."""
    import psycopg
    _clean(admin)
    if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [EVA]).fetchone():
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(EVA)))
    admin.execute(sql.SQL("ALTER ROLE {} NOSUPERUSER").format(sql.Identifier(EVA)))
    admin.execute(sql.SQL("GRANT deid_admin TO {}").format(sql.Identifier(EVA)))
    admin.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(SCHEMA),
                                                                     sql.Identifier(EVA)))
    with psycopg.connect(url, user=EVA, autocommit=True) as eva:
        for statement in SETUP:
            eva.execute(statement)
        for col, role, hierarchy in ROLES:
            eva.execute("SELECT deid.set_role(%s, %s, %s, %s)", [f"{SCHEMA}.v", col, role, hierarchy])
        for name, (view, method, k, l, columns, options) in REQUESTS.items():
            eva.execute("SELECT * FROM deid.anonymize_request(%s, %s, k => %s, l => %s,"
                        " columns => %s::text[], options => %s, release => %s)",
                        [f"{SCHEMA}.{view}", method, k, l, columns,
                         json.dumps(dict(options, seed=1, row_id="id")), name])
    assert not admin.execute(sql.SQL("SELECT count(*) FROM {}.seen").format(
        sql.Identifier(SCHEMA))).fetchone()[0]
    yield admin
    admin.execute(sql.SQL("ALTER ROLE {} NOSUPERUSER").format(sql.Identifier(EVA)))
    _clean(admin)


def gains(admin):
    """What eva holds beyond her own rights: her role attributes, the roles she is a member of,
    and who ran her function."""
    attrs = admin.execute("SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolreplication"
                          " FROM pg_roles WHERE rolname = %s", [EVA]).fetchone()
    member_of = admin.execute("SELECT array_agg(roleid::regrole::text ORDER BY 1) FROM pg_auth_members"
                              " WHERE member = %s::regrole", [EVA]).fetchone()[0]
    ran_as = admin.execute(sql.SQL("SELECT array_agg(DISTINCT who::text) FROM {}.seen").format(
        sql.Identifier(SCHEMA))).fetchone()[0]
    return {"attributes": attrs, "member of": member_of, "her function ran as": ran_as}


NOTHING = {"attributes": (False, False, False, False, False), "member of": ["deid_admin"],
           "her function ran as": None}
PLAN = f"""
[[role]]
relation = "{SCHEMA}.v"
[role.columns]
zip = "quasi_identifier"

[[request]]
name = "eva_by_superuser"
source = "{SCHEMA}.v"
method = "anatomy"
k = 5
l = 2
columns = ["age", "sex", "zip", "dx"]
options = {{ seed = 1, row_id = "id" }}
"""


def _commands(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    out = [["list"], ["list", "--all", "--json"], ["apply", str(plan)],
           ["release", f"{SCHEMA}.v", "--method", "anatomy", "--k", "5", "--l", "2",
            "--columns", "age,sex,zip,dx", "--options", '{"row_id": "id"}']]
    for name in RELEASES:
        out += [["verify", name], ["verify", name, "--json"],
                ["report", name, "--out", str(tmp_path)], ["report", name, "--json", "--out", str(tmp_path)]]
    return out


def test_the_trap_works_on_a_superuser_read(hostile):
    """The attack is real: the superuser reading eva's view directly runs her function (this
    is what a client command that reads the source would do). Undone at once."""
    with hostile.transaction(force_rollback=True):
        hostile.execute(sql.SQL("SELECT count(*) FROM {}.v").format(sql.Identifier(SCHEMA)))
        assert gains(hostile)["attributes"][0] is True
    assert gains(hostile) == NOTHING


def test_no_command_lends_the_superuser_rights(url, hostile, tmp_path):
    assert gains(hostile) == NOTHING
    for argv in _commands(tmp_path):
        r = deid(url, "postgres", *argv)
        assert r.returncode in (0, 1), (argv, r.stderr)
        assert gains(hostile) == NOTHING, (argv, r.stdout[-2000:], r.stderr[-2000:])


def test_the_report_says_why_source_figures_are_missing(url, hostile, tmp_path):
    """The superuser may SELECT eva's view, but reading it would run eva's code: the report is
    made (request, verification, privacy, release-side utility) with no source-derived number,
    and says why."""
    for name in RELEASES:
        r = deid(url, "postgres", "report", name, "--out", str(tmp_path))
        assert r.returncode == 0, r.stderr
        rep = json.loads((tmp_path / f"{name}.json").read_text())
        assert "rows" not in (rep.get("source") or {}), rep.get("source")
        assert "would run" in rep["source"]["why"] and EVA in rep["source"]["why"]
        assert rep["verification"]["fresh"]["verified"] is True
        assert rep["privacy"]["distributions"]
    assert gains(hostile) == NOTHING


def test_report_source_is_for_deid_admin(hostile, connect):
    """deid.report_source answers a deid_admin only: another role gets 42501 with a HINT,
    and learns neither the release nor its source."""
    import psycopg
    attacker = connect("deid_t_attacker")
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
        attacker.execute("SELECT deid.report_source('eva_an')")
    assert e.value.diag.message_hint and "deid_admin" in e.value.diag.message_hint
    assert "eva" not in (e.value.diag.message_primary or "")
    with pytest.raises(psycopg.errors.NullValueNotAllowed):
        connect("deid_t_admin").execute("SELECT deid.report_source(NULL)")
    assert gains(hostile) == NOTHING


def test_report_source_reads_as_eva_for_eva(hostile, url):
    """eva herself may read her view (her own code runs as her): her report has the source's
    row count, computed in the server after the walk, and her function ran as no one else."""
    import psycopg
    with psycopg.connect(url, user=EVA, autocommit=True) as eva:
        out = eva.execute("SELECT deid.report_source('eva_an')").fetchone()[0]
    assert out["source"]["rows"] == 600 and out["measures"]["are"] is not None
    assert gains(hostile) == NOTHING
