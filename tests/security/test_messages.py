"""Messages in PostgreSQL's style: a cancel is a cancel (57014), with no Python traceback,
and leaves nothing behind."""
import psycopg
import pytest


@pytest.mark.parametrize("timeout_ms", [5, 30, 120])
def test_a_cancel_shows_no_traceback(admin, connect, timeout_ms):
    for col, role in [("age", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("diagnosis", "sensitive")]:
        admin.execute("SELECT deid.set_role('registry.patients', %s, %s)", [col, role])
    conn = connect("deid_t_analyst")
    conn.execute(f"SET statement_timeout = '{timeout_ms}ms'")
    try:
        conn.execute("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 5,"
                     " columns => '{age,sex,diagnosis}', release => 't_cancel')").fetchall()
    except psycopg.errors.QueryCanceled as e:
        d = e.diag
        assert d.sqlstate == "57014"
        for text in (d.message_primary, d.context or "", d.message_hint or ""):
            assert "Traceback" not in text and "plpy." not in text and "spiexceptions" not in text, text
    else:
        admin.execute("SELECT deid.drop_release('t_cancel')")     # finished before the timeout
    assert not admin.execute("SELECT 1 FROM deid.release WHERE name = 't_cancel'"
                             " AND status = 'committed'").fetchone()
    assert not admin.execute("SELECT to_regclass('deid_release.t_cancel_qit')").fetchone()[0]
