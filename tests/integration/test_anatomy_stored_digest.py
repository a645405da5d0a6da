"""An anatomy request's verifier checks the RID sets in memory and proves with server-side
digests that the stored deid.rid_set rows are exactly them (verify/rid_set_digest.py): a stored
row tampered with between the write and the verification fails the request (DE002) and
leaves nothing behind."""
import psycopg
import pytest

from conftest import sqlstate_of
from dbfixtures import server_python_dir

COLS = "{age,sex,race,zip,diagnosis,treatment}"
ONE = "WHERE release_id = $1 AND attribute = 'diagnosis' AND chunk = 1"

# In the request's own backend: the writer stores the RID sets in chunks of about 64 RIDs
# (several chunks per attribute), then runs the tampering statement ($1: the release id).
PATCH = """
DO $patch$
import sys
sys.path.insert(0, PYTHON_DIR)
from deid import catalog_log
chunks, write = catalog_log.rid_chunks, catalog_log.write_artefacts
catalog_log.rid_chunks = lambda counts, limit=64: chunks(counts, 64)
def tampered(db, release_id, plan):
    write(db, release_id, plan)
    if TAMPER:
        plpy.execute(plpy.prepare(TAMPER, ["bigint"]), [release_id])
catalog_log.write_artefacts = tampered
$patch$ LANGUAGE plpython3u
"""


@pytest.fixture(scope="module")
def classified(admin):
    for col, role in [("age", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("race", "quasi_identifier"), ("zip", "quasi_identifier"),
                      ("diagnosis", "sensitive"), ("treatment", "sensitive")]:
        admin.execute("SELECT deid.set_role('registry.patients', %s, %s)", [col, role])
    return admin


def run_tampered(url, admin, tamper, encoding="UTF8"):
    python_dir = server_python_dir(admin)
    with psycopg.connect(url, autocommit=True) as conn:        # its own backend, patched
        conn.execute(PATCH.replace("PYTHON_DIR", repr(python_dir)).replace("TAMPER", repr(tamper)))
        conn.execute(f"SET client_encoding = {encoding}")
        return conn.execute(
            "SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 10, l => 3,"
            " columns => %s, options => '{\"seed\": 1}', release => 't_digest')", [COLS]).fetchone()


@pytest.mark.parametrize("encoding", ["UTF8", "LATIN1"])     # LATIN1: values digested by convert_to
def test_untampered_chunks_verify(url, classified, encoding):
    row = run_tampered(url, classified, None, encoding)
    report = classified.execute("SELECT metrics->'verification'->'stored' FROM deid.release"
                                " WHERE release_id = %s", [row[0]]).fetchone()[0]
    assert report["chunks"] > 2 * 2 and report["rids"] == 2 * row[2]      # several per attribute
    assert classified.execute("SELECT deid.verify_release('t_digest')").fetchone()[0]
    classified.execute("SELECT deid.drop_release('t_digest')")


@pytest.mark.parametrize("tamper", [
    f"UPDATE deid.rid_set SET rids[3] = rids[3] + 1000000 {ONE}",                 # a changed RID
    f"UPDATE deid.rid_set SET rids[2] = rids[3] {ONE}",                            # a RID twice
    f"UPDATE deid.rid_set SET rid_counts[1] = rid_counts[1] - 1,"                  # a RID moved
    f" rid_counts[2] = rid_counts[2] + 1 {ONE}",                                   # to the next
    f"UPDATE deid.rid_set SET rid_counts[1] = rid_counts[1] + 1 {ONE}",            # a changed count
    f"UPDATE deid.rid_set SET value_list[1] = value_list[2] {ONE}",                # a changed value
    f"UPDATE deid.rid_set SET group_ids[1] = group_ids[1] + 1 {ONE}",              # a changed group
    f"DELETE FROM deid.rid_set {ONE}",                                             # a dropped row
    "INSERT INTO deid.rid_set SELECT release_id, attribute, 1000, group_ids, value_list,"  # a row
    " rid_counts, rids FROM deid.rid_set WHERE release_id = $1 AND chunk = 0"      # twice
    " AND attribute = 'treatment'",
    f"UPDATE deid.rid_set SET chunk = 1000 {ONE}",                                 # renumbered
    "DELETE FROM deid.rid_set WHERE release_id = $1 AND attribute = 'treatment'",  # an attribute
])
@pytest.mark.parametrize("encoding", ["UTF8", "LATIN1"])
def test_tampered_chunks_fail(url, classified, tamper, encoding):
    rids = classified.execute("SELECT count(*) FROM deid.rid_set").fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        run_tampered(url, classified, tamper, encoding)
    assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
    assert "deid.rid_set" in e.value.diag.message_primary
    assert classified.execute("SELECT count(*) FROM deid.rid_set").fetchone()[0] == rids
    assert classified.execute("SELECT count(*) FROM deid.release WHERE name = 't_digest'"
                              " AND status = 'committed'").fetchone()[0] == 0


def test_non_ascii_and_null_values(classified):
    """Values outside ASCII and NULL values are digested as stored (UTF-8 text, NULL flags)."""
    classified.execute("DROP TABLE IF EXISTS public.t_utf")
    classified.execute("CREATE TABLE public.t_utf AS SELECT patient_id, sex, race,"
                       " CASE WHEN patient_id % 5 = 0 THEN NULL ELSE 'Ökö-' || (age % 6) || ' ✓' END"
                       " AS note FROM registry.patients")
    classified.execute("ALTER TABLE t_utf ADD PRIMARY KEY (patient_id)")
    for col, role in [("sex", "quasi_identifier"), ("race", "quasi_identifier"), ("note", "sensitive")]:
        classified.execute("SELECT deid.set_role('t_utf', %s, %s)", [col, role])
    r = classified.execute("SELECT * FROM deid.anonymize_request('t_utf', 'anatomy', k => 40, l => 3,"
                           " release => 't_utf')").fetchone()
    assert r[5]
    report = classified.execute("SELECT metrics->'verification'->'stored' FROM deid.release"
                                " WHERE release_id = %s", [r[0]]).fetchone()[0]
    assert report["rids"] == r[2]
    assert classified.execute("SELECT count(*) FROM deid.rid_sets WHERE release_id = %s"
                              " AND value LIKE 'Ökö-%% ✓'", [r[0]]).fetchone()[0] > 0
    classified.execute("SELECT deid.drop_release('t_utf')")


def test_rid_sets_are_never_pglz_compressed(url, classified):
    """pglz takes seconds on sequential RIDs: the catalog stores them lz4-compressed where the
    server has lz4, else uncompressed (STORAGE EXTERNAL)."""
    lz4 = classified.execute("SELECT 'lz4' = ANY (enumvals) FROM pg_settings"
                             " WHERE name = 'default_toast_compression'").fetchone()[0]
    for storage, compression in classified.execute(
            "SELECT attstorage, attcompression FROM pg_attribute WHERE attrelid ="
            " 'deid.rid_set'::regclass AND attname IN ('group_ids', 'value_list', 'rid_counts',"
            " 'rids')").fetchall():
        assert (storage, compression) == (("x", "l") if lz4 else ("e", ""))
    run_tampered(url, classified, None)
    assert classified.execute("SELECT count(*) FROM deid.rid_set WHERE"
                              " pg_column_compression(rids) = 'pglz'").fetchone()[0] == 0
    classified.execute("SELECT deid.drop_release('t_digest')")
