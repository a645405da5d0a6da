"""A committed, verified release survives a crash.

The private cluster keeps PostgreSQL's default durability. A release is committed; an
unrelated backend is then killed with SIGKILL, so the postmaster resets every backend and
recovers from the WAL; the release must still be in deid.release and in pg_class.

This module runs last of the suite (tests/conftest.py moves it there): the crash closes every
connection.
"""
import os
import signal
import time

import psycopg
import pytest


def test_private_cluster_is_durable(admin):
    for setting in ("fsync", "full_page_writes", "synchronous_commit"):
        assert admin.execute(f"SHOW {setting}").fetchone()[0] == "on", setting


def _wait_for_server(url, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return psycopg.connect(url, autocommit=True)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_release_survives_a_backend_crash(admin, url):
    for col, role in [("age", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("diagnosis", "sensitive")]:
        admin.execute("SELECT deid.set_role('registry.patients', %s, %s)", [col, role])
    admin.execute("SELECT deid.drop_release(name) FROM deid.release"
                  " WHERE name = 't_durable' AND status = 'committed'")
    with psycopg.connect(url, autocommit=True) as conn:
        rid, _, _, _, _, verified = conn.execute(
            "SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 10,"
            " columns => '{age,sex,diagnosis}', release => 't_durable')").fetchone()
    assert verified
    victim = psycopg.connect(url, autocommit=True)
    pid = victim.info.backend_pid
    os.kill(pid, signal.SIGKILL)           # an unrelated backend dies: crash recovery
    time.sleep(0.5)
    with _wait_for_server(url) as conn:
        assert conn.execute("SELECT status FROM deid.release WHERE release_id = %s",
                            [rid]).fetchone() == ("committed",)
        assert conn.execute("SELECT to_regclass('release.t_durable_qit') IS NOT NULL,"
                            " to_regclass('deid_release.t_durable_qit') IS NOT NULL").fetchone() \
            == (True, True)
        assert conn.execute("SELECT count(*) FROM release.t_durable_qit").fetchone()[0] == 3000
        conn.execute("SELECT deid.drop_release('t_durable')")
    with pytest.raises(psycopg.Error):
        victim.execute("SELECT 1")
