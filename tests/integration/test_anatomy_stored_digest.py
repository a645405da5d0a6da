"""An anatomy request's verifier checks the RID sets in memory and proves with server-side
digests that the stored deid.rid_set rows are exactly them (verify/rid_set_digest.py): a stored
row tampered with between the write and the verification fails the request (DE002) and
leaves nothing behind."""
import struct

import psycopg
from psycopg import sql
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
from deid.log import release_log as catalog_log
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
        conn.execute(sql.SQL("SET client_encoding = {}").format(sql.Literal(encoding)))
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


def i4(col, i):
    """SQL: element i (0-based) of a packed int4 column of deid.rid_set."""
    return f"('x' || encode(substring({col} from {4 * i + 1} for 4), 'hex'))::bit(32)::int"


def i8(col, i):
    """SQL: element i (0-based) of the packed int8 column rids."""
    return f"('x' || encode(substring({col} from {8 * i + 1} for 8), 'hex'))::bit(64)::bigint"


def put4(col, i, expr):
    return f"overlay({col} placing int4send({expr}) from {4 * i + 1} for 4)"


def put8(col, i, expr):
    return f"overlay({col} placing int8send({expr}) from {8 * i + 1} for 8)"


SWAP = ("UPDATE deid.rid_set r SET group_ids = o.group_ids, value_list = o.value_list,"
        " rid_counts = o.rid_counts, rids = o.rids FROM deid.rid_set o"
        " WHERE r.release_id = $1 AND o.release_id = $1 AND r.attribute = 'diagnosis'"
        " AND o.attribute = 'diagnosis' AND r.chunk IN (1, 2) AND o.chunk = 3 - r.chunk")


@pytest.mark.parametrize("tamper", [
    f"UPDATE deid.rid_set SET rids = {put8('rids', 2, i8('rids', 2) + ' + 1000000')} {ONE}",  # a changed RID
    f"UPDATE deid.rid_set SET rids = {put8('rids', 1, i8('rids', 2))} {ONE}",        # a RID twice
    f"UPDATE deid.rid_set SET rids = {put8(put8('rids', 1, i8('rids', 2)), 2, i8('rids', 1))}"
    f" {ONE}",                                                                      # two RIDs swapped
    f"UPDATE deid.rid_set SET rids = set_byte(rids, 23, get_byte(rids, 23) # 1) {ONE}",  # a bit
    f"UPDATE deid.rid_set SET rid_counts = {put4(put4('rid_counts', 0, i4('rid_counts', 0) + ' - 1'), 1, i4('rid_counts', 1) + ' + 1')}"
    f" {ONE}",                                                                      # a RID moved on
    f"UPDATE deid.rid_set SET rid_counts = {put4('rid_counts', 0, i4('rid_counts', 0) + ' + 1')}"
    f" {ONE}",                                                                      # a changed count
    f"UPDATE deid.rid_set SET value_list[1] = value_list[2] {ONE}",                # a changed value
    f"UPDATE deid.rid_set SET group_ids = {put4('group_ids', 0, i4('group_ids', 0) + ' + 1')}"
    f" {ONE}",                                                                      # a changed group
    f"UPDATE deid.rid_set SET rids = substring(rids from 1 for length(rids) - 8) {ONE}",  # truncated
    f"UPDATE deid.rid_set SET rids = rids || int8send(1) {ONE}",                   # a RID more
    f"UPDATE deid.rid_set SET group_ids = substring(group_ids from 5), rid_counts ="  # an entry
    f" substring(rid_counts from 5), value_list = value_list[2:] {ONE}",           # cut off
    SWAP,                                                                          # chunks swapped
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


def test_rid_set_is_packed_and_the_view_decodes_it(url, classified):
    """group_ids, rid_counts and rids are packed big-endian bytea (int4, int4, int8 per
    element); deid.rid_sets shows one row per entry, its RIDs decoded from them -- the same as
    an independent decoding of the stored bytes, and every RID holds its value in the source."""
    types = dict(classified.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid ="
        " 'deid.rid_set'::regclass AND attname IN ('group_ids', 'value_list', 'rid_counts', 'rids')"))
    assert types == {"group_ids": "bytea", "value_list": "text[]", "rid_counts": "bytea", "rids": "bytea"}
    rid = run_tampered(url, classified, None)[0]
    want = []
    for attribute, group_ids, values, counts, rids in classified.execute(
            "SELECT attribute, group_ids, value_list, rid_counts, rids FROM deid.rid_set"
            " WHERE release_id = %s ORDER BY attribute, chunk", [rid]):
        n = len(values)
        assert len(group_ids) == len(counts) == 4 * n and len(rids) % 8 == 0
        sizes = struct.unpack(f">{n}i", counts)
        flat = struct.unpack(f">{len(rids) // 8}q", rids)
        assert sum(sizes) == len(flat)
        stop = 0
        for group, value, size in zip(struct.unpack(f">{n}i", group_ids), values, sizes):
            want.append((group, attribute, value, list(flat[stop:stop + size])))
            stop += size
    got = classified.execute("SELECT group_id, attribute, value, rids FROM deid.rid_sets"
                             " WHERE release_id = %s", [rid]).fetchall()
    assert len(want) > 10 and sorted(got) == sorted(want)
    assert sum(len(r) for *_, r in want) == 2 * classified.execute(
        "SELECT count(*) FROM registry.patients").fetchone()[0]
    for attribute in ("diagnosis", "treatment"):
        assert classified.execute(
            f"SELECT count(*) FROM deid.rid_sets r, unnest(r.rids) u(id) JOIN registry.patients p"
            f" ON p.patient_id = u.id WHERE r.release_id = %s AND r.attribute = %s"
            f" AND p.{attribute} IS DISTINCT FROM r.value", [rid, attribute]).fetchone()[0] == 0
    classified.execute("SELECT deid.drop_release('t_digest')")


@pytest.mark.parametrize("tamper", [
    "rids = rids || '\\x00'::bytea",                                 # not a whole RID
    "rids = substring(rids from 2)",
    "group_ids = substring(group_ids from 5)",                       # fewer groups than values
    "rid_counts = rid_counts || int4send(1)",                        # more counts than values
    "value_list = value_list || NULL::text",                         # more values than groups
])
def test_catalog_refuses_malformed_chunks(url, classified, tamper):
    rid = run_tampered(url, classified, None)[0]
    with pytest.raises(psycopg.Error) as e:
        classified.execute(sql.SQL("UPDATE deid.rid_set SET {} WHERE release_id = %s").format(sql.SQL(tamper)), [rid])
    assert sqlstate_of(e) == "23514"
    classified.execute("SELECT deid.drop_release('t_digest')")


def test_view_refuses_a_chunk_whose_counts_disagree(url, classified):
    """A chunk the CHECKs let through but whose counts do not add up to its RIDs is an error
    in deid.rid_sets, never a shortened or padded RID set."""
    rid = run_tampered(url, classified, None)[0]
    with classified.transaction():
        classified.execute(sql.SQL("UPDATE deid.rid_set SET rid_counts = {} WHERE release_id = %s AND"
                                   " attribute = 'diagnosis' AND chunk = 0").format(
                                       sql.SQL(put4('rid_counts', 0, i4('rid_counts', 0) + ' + 1'))), [rid])
        with pytest.raises(psycopg.Error) as e:
            classified.execute("SELECT * FROM deid.rid_sets WHERE release_id = %s", [rid])
        assert sqlstate_of(e) == "XX001"
        raise psycopg.Rollback()
    classified.execute("SELECT deid.drop_release('t_digest')")
