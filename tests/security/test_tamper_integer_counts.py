"""Count tables of integer sensitive attributes are checked by their values, not their text
(verify/shared/count_tables.py: INTEGER_TYPES): a count table changed between the write and
the verification -- a count raised, a value renamed to another or to one no RID set holds, a
value made NULL or a NULL made a value, a row dropped -- still fails the request (DE002)
and leaves nothing behind; so does such a change after commit, in deid.verify_release
without the digests (the checks re-derived from the stored RID sets alone)."""
import psycopg
import pytest

from dbfixtures import server_python_dir, sqlstate_of

# In the request's own backend: the count table is changed after the writer stored it and
# before the verifier reads it.
PATCH = """
DO $patch$
import sys
sys.path.insert(0, PYTHON_DIR)
from deid.log import release_log as catalog_log
write = catalog_log.write_artefacts
def tampered(db, release_id, plan):
    write(db, release_id, plan)
    if TAMPER:
        plpy.execute(TAMPER)
catalog_log.write_artefacts = tampered
$patch$ LANGUAGE plpython3u
"""

ONE = "WHERE ctid = (SELECT ctid FROM {t} WHERE {w} ORDER BY group_id, stage LIMIT 1)"
TAMPERS = {
    "raise a count": ("count = count + 1", "stage IS NOT NULL"),
    "a value no RID set holds": ("stage = 1000", "stage IS NOT NULL"),
    "a value renamed to another": ("stage = (stage + 1) % 7", "stage IS NOT NULL"),
    "a value made NULL": ("stage = NULL", "stage IS NOT NULL"),
    "a NULL made a value": ("stage = 0", "stage IS NULL"),
    "a row dropped": (None, "stage IS NOT NULL"),
}


def tamper_sql(table, case):
    change, where = TAMPERS[case]
    one = ONE.format(t=table, w=where)
    return f"DELETE FROM {table} {one}" if change is None else f"UPDATE {table} SET {change} {one}"


@pytest.fixture(scope="module")
def source(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_intsa")
    admin.execute("CREATE TABLE public.t_intsa AS SELECT patient_id, sex, race, zip,"
                  " CASE WHEN patient_id % 9 = 0 THEN NULL ELSE (age % 7)::integer END AS stage,"
                  " (age % 5)::smallint AS grade FROM registry.patients")
    admin.execute("ALTER TABLE public.t_intsa ADD PRIMARY KEY (patient_id)")
    for col, role in [("sex", "quasi_identifier"), ("race", "quasi_identifier"),
                      ("zip", "quasi_identifier"), ("stage", "sensitive"), ("grade", "sensitive")]:
        admin.execute("SELECT deid.set_role('t_intsa', %s, %s)", [col, role])
    return admin


def request(conn, release):
    return conn.execute("SELECT * FROM deid.anonymize_request('t_intsa', 'anatomy', k => 10,"
                        " l => 2, options => '{\"seed\": 1}', release => %s)", [release]).fetchone()


def test_integer_count_tables_verify(source):
    row = request(source, "t_int")
    assert row[5] is True
    assert source.execute("SELECT deid.verify_release('t_int')").fetchone()[0]
    assert source.execute("SELECT count(*) FROM deid_release.t_int_stage WHERE stage IS NULL"
                          ).fetchone()[0] > 0
    source.execute("SELECT deid.drop_release('t_int')")


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_tampered_integer_count_table_fails_the_request(url, source, case):
    python_dir = server_python_dir(source)
    tamper = tamper_sql("deid_release.t_req_stage", case)
    with psycopg.connect(url, autocommit=True) as conn:        # its own backend, patched
        conn.execute(PATCH.replace("PYTHON_DIR", repr(python_dir)).replace("TAMPER", repr(tamper)))
        with pytest.raises(psycopg.Error) as e:
            request(conn, "t_req")
    assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
    assert "t_req_stage" in e.value.diag.message_primary
    assert not source.execute("SELECT 1 FROM deid.release WHERE name = 't_req'").fetchone()


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_tampered_integer_count_table_fails_without_digests(source, case):
    rid = request(source, "t_old")[0]
    with source.transaction():
        source.execute("ALTER TABLE deid.release DISABLE TRIGGER release_append_only")
        source.execute("UPDATE deid.release SET metrics = metrics - 'digests'"
                       " WHERE release_id = %s", [rid])
        source.execute("ALTER TABLE deid.release ENABLE TRIGGER release_append_only")
        source.execute(tamper_sql("deid_release.t_old_stage", case))
        with pytest.raises(psycopg.Error) as e:
            with source.transaction():
                source.execute("SELECT deid.verify_release('t_old')")
        raise psycopg.Rollback()
    assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
    source.execute("SELECT deid.drop_release('t_old')")
