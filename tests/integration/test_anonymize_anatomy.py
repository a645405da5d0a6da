"""deid.anonymize_request(method => 'anatomy') on a real server (paper 001)."""
import psycopg
from psycopg import sql
import pytest

from conftest import hint_of, sqlstate_of
from dbfixtures import server_python_dir

COLS = "{age,sex,race,zip,diagnosis,treatment}"


@pytest.fixture(scope="module")
def classified(admin):
    for col, role in [("name", "identifier"), ("age", "quasi_identifier"), ("sex", "quasi_identifier"),
                      ("race", "quasi_identifier"), ("zip", "quasi_identifier"),
                      ("diagnosis", "sensitive"), ("treatment", "sensitive"),
                      ("vital_status", "insensitive")]:
        admin.execute("SELECT deid.set_role('registry.patients', %s, %s)", [col, role])
    return admin


def request(conn, release, k=10, l=3, columns=COLS, selection=None, options='{"seed": 1}'):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => %s, l => %s,"
        " columns => %s, selection => %s, options => %s, release => %s)",
        [k, l, columns, selection, options, release]).fetchone()


def objects_named(conn, prefix):
    return conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE %s",
                        [prefix + "%"]).fetchone()[0]


def test_anatomy_release(classified):
    rid, relations, rows, groups, disc, verified = request(classified, "t_an")
    assert verified and rows == 3000 and groups >= 1 and disc >= 10
    assert relations == ["release.t_an_qit", "release.t_an_diagnosis", "release.t_an_treatment"]
    qit = classified.execute("SELECT group_id, count(*) FROM release.t_an_qit GROUP BY 1").fetchall()
    assert len(qit) == groups and min(c for _, c in qit) >= 10 and sum(c for _, c in qit) == 3000
    cols = [r[0] for r in classified.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'release.t_an_qit'::regclass AND attnum > 0"
        " ORDER BY attnum")]
    assert cols == ["group_id", "age", "sex", "race", "zip", "vital_status"][:len(cols)]
    assert "name" not in cols and "patient_id" not in cols and "diagnosis" not in cols
    # the sensitive table counts every row of every group once
    per_group = classified.execute(
        "SELECT group_id, sum(count), count(*) FROM release.t_an_diagnosis GROUP BY 1 ORDER BY 1").fetchall()
    assert [r[1] for r in per_group] == [c for _, c in sorted(qit)]
    assert min(r[2] for r in per_group) >= 3          # L = 3 distinct diagnoses at least
    # catalog: RID sets and classes, log row
    n_rids = classified.execute("SELECT sum(length(rids) / 8) FROM deid.rid_set WHERE release_id = %s"
                                " AND attribute = 'diagnosis'", [rid]).fetchone()[0]
    assert n_rids == 3000
    for attr in ("diagnosis", "treatment"):      # every stored RID really holds its value
        wrong = classified.execute(
            f"SELECT count(*) FROM deid.rid_sets r CROSS JOIN LATERAL unnest(r.rids) AS u(rid)"
            f" JOIN registry.patients p ON p.patient_id = u.rid WHERE r.release_id = %s"
            f" AND r.attribute = %s AND p.{attr} IS DISTINCT FROM r.value", [rid, attr]).fetchone()[0]
        assert wrong == 0
    # chunks of entries; the view has one row per entry (group, value)
    shape = classified.execute(
        "SELECT count(*), sum(cardinality(value_list)), count(DISTINCT (attribute, chunk)),"
        " bool_and(length(group_ids) = length(rid_counts)"
        "          AND 4 * cardinality(value_list) = length(rid_counts)),"
        " bool_and((SELECT sum(('x' || encode(substring(rid_counts from 4 * i + 1 for 4), 'hex'))"
        "                      ::bit(32)::int) FROM generate_series(0, length(rid_counts) / 4 - 1) i)"
        "          = length(rids) / 8)"
        " FROM deid.rid_set WHERE release_id = %s", [rid]).fetchone()
    assert shape[0] == shape[2] and shape[3] and shape[4]
    entries = classified.execute(
        "SELECT count(*), count(DISTINCT (group_id, attribute, value)), sum(cardinality(rids)),"
        " count(DISTINCT group_id) FROM deid.rid_sets WHERE release_id = %s", [rid]).fetchone()
    assert entries == (shape[1], shape[1], 6000, groups)
    # the QIT holds exactly the source's quasi-identifier tuples, the count tables its values
    assert classified.execute(
        "SELECT count(*) FROM ((SELECT age, sex, race, zip FROM release.t_an_qit EXCEPT ALL"
        " SELECT age, sex, race, zip FROM registry.patients) UNION ALL (SELECT age, sex, race, zip"
        " FROM registry.patients EXCEPT ALL SELECT age, sex, race, zip FROM release.t_an_qit)) d"
        ).fetchone()[0] == 0
    assert classified.execute(
        "SELECT array_agg((diagnosis, n) ORDER BY diagnosis)::text FROM (SELECT diagnosis, sum(count) n"
        " FROM release.t_an_diagnosis GROUP BY 1) s").fetchone() == classified.execute(
        "SELECT array_agg((diagnosis, n) ORDER BY diagnosis)::text FROM (SELECT diagnosis, count(*)::numeric n"
        " FROM registry.patients GROUP BY 1) s").fetchone()
    assert classified.execute("SELECT count(*) FROM deid.equivalence_class WHERE release_id = %s",
                              [rid]).fetchone()[0] == groups
    # each class: its size and generalized QIs (the age range and sex set of its QIT rows)
    wrong = classified.execute(
        "SELECT count(*) FROM deid.equivalence_class e JOIN (SELECT group_id, count(*) n,"
        " CASE WHEN min(age) = max(age) THEN min(age)::text ELSE '[' || min(age) || '-' || max(age) || ']' END a,"
        " CASE WHEN min(sex) = max(sex) THEN min(sex) ELSE '{' || min(sex) || ',' || max(sex) || '}' END s"
        " FROM release.t_an_qit GROUP BY 1) q ON q.group_id = e.class_id WHERE e.release_id = %s"
        " AND (e.cardinality <> q.n OR e.generalized->>'age' <> q.a OR e.generalized->>'sex' <> q.s"
        "      OR NOT e.generalized ?& array['age', 'sex', 'race', 'zip'])", [rid]).fetchone()[0]
    assert wrong == 0
    log = classified.execute("SELECT method, status, seed, parameters->>'k', relations, metrics->'verification'"
                             " FROM deid.release WHERE release_id = %s", [rid]).fetchone()
    assert log[:4] == ("anatomy", "committed", 1, "10") and log[4] == relations
    assert log[5]["kl"]["min_size"] >= 10 and log[5]["kl"]["min_certified_l"] >= 3


def test_release_is_a_snapshot(classified):
    request(classified, "t_snap", k=20, l=None)
    before = classified.execute("SELECT count(*) FROM release.t_snap_qit").fetchone()[0]
    classified.execute("UPDATE registry.patients SET age = age + 1 WHERE patient_id <= 10")
    classified.execute("UPDATE registry.patients SET age = age - 1 WHERE patient_id <= 10")
    assert classified.execute("SELECT count(*) FROM release.t_snap_qit").fetchone()[0] == before
    assert classified.execute("SELECT relkind FROM pg_class WHERE oid = 'deid_release.t_snap_qit'::regclass"
                              ).fetchone()[0] == "r"


def test_seed_makes_it_reproducible(classified):
    a = request(classified, "t_seed_a", options='{"seed": 5}')
    b = request(classified, "t_seed_b", options='{"seed": 5}')
    assert a[2:5] == b[2:5]
    assert classified.execute("SELECT (SELECT array_agg(x ORDER BY x) FROM (SELECT (group_id, age, zip)::text x"
                              " FROM release.t_seed_a_qit) s) = (SELECT array_agg(x ORDER BY x) FROM"
                              " (SELECT (group_id, age, zip)::text x FROM release.t_seed_b_qit) s)").fetchone()[0]


def test_selection_filters_rows(classified):
    _, _, rows, *_ = request(classified, "t_sel", k=10, l=2, selection="sex = 'F' AND age >= 40")
    truth = classified.execute("SELECT count(*) FROM registry.patients WHERE sex = 'F' AND age >= 40").fetchone()[0]
    assert rows == truth
    assert classified.execute("SELECT count(*) FROM release.t_sel_qit WHERE sex <> 'F' OR age < 40").fetchone()[0] == 0


def test_column_wise_and_exponential_l(classified):
    r = request(classified, "t_cw", k=30, l=4, options='{"column_l": {"treatment": 2}, "seed": 1}')
    assert r[5]
    e = request(classified, "t_exp", k=30, l=3, options='{"model": "exponential_l", "seed": 1}')
    assert e[5] and e[3] <= r[3]          # the baseline yields fewer, larger groups


def test_generalized_output(classified):
    _, relations, rows, groups, _, _ = request(classified, "t_gen", k=25, l=2,
                                               options='{"output": "generalized", "seed": 1}')
    assert relations == ["release.t_gen"]
    sample = classified.execute("SELECT age, sex, zip, diagnosis FROM release.t_gen LIMIT 50").fetchall()
    assert all(isinstance(a, str) for a, *_ in sample)
    per = classified.execute("SELECT group_id, count(DISTINCT (age, sex, race, zip)), count(*)"
                             " FROM release.t_gen GROUP BY 1").fetchall()
    assert all(d == 1 and c >= 25 for _, d, c in per)      # one generalized tuple per group


@pytest.mark.parametrize("kwargs, state, fragment", [
    (dict(k=1), "22023", "K must be at least 2"),
    (dict(l=0), "22023", "L must be at least 1"),
    (dict(l=1000), "22023", None),
    (dict(k=100000, l=None), "DE001", None),
    (dict(columns="{age,sex,nope}"), "42703", None),
    (dict(columns="{name,age,diagnosis}"), "22023", "identifier"),
    (dict(options='{"bogus": 1}'), "22023", "unknown option"),
    (dict(options='{"column_l": {"zip": 1}}'), "22023", "not a projected sensitive"),
    (dict(selection="age > 1; DROP TABLE registry.patients"), "42601", None),
    (dict(selection="age > (SELECT 1)"), "0A000", None),
])
def test_errors_leave_nothing_behind(classified, kwargs, state, fragment):
    logs = classified.execute("SELECT count(*) FROM deid.release").fetchone()[0]
    rids = classified.execute("SELECT count(*) FROM deid.rid_set").fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        request(classified, "t_fail", **kwargs)
    assert sqlstate_of(e) == state, str(e.value)
    assert hint_of(e)
    if fragment:
        assert fragment in str(e.value)
    assert objects_named(classified, "t_fail") == 0
    assert objects_named(classified, "_stage_") == 0
    assert classified.execute("SELECT count(*) FROM deid.release").fetchone()[0] == logs
    assert classified.execute("SELECT count(*) FROM deid.rid_set").fetchone()[0] == rids


def test_null_quasi_identifiers(classified):
    classified.execute("DROP TABLE IF EXISTS public.t_nulls")
    classified.execute("CREATE TABLE public.t_nulls AS SELECT patient_id, CASE WHEN patient_id % 10 = 0"
                       " THEN NULL ELSE age END AS age, diagnosis FROM registry.patients")
    classified.execute("ALTER TABLE t_nulls ADD PRIMARY KEY (patient_id)")
    classified.execute("SELECT deid.set_role('t_nulls', 'age', 'quasi_identifier')")
    classified.execute("SELECT deid.set_role('t_nulls', 'diagnosis', 'sensitive')")
    q = "SELECT * FROM deid.anonymize_request('t_nulls', 'anatomy', k => 20, l => 2, options => %s)"
    with pytest.raises(psycopg.Error) as e:
        classified.execute(q, ['{"seed": 1}'])
    assert sqlstate_of(e) == "22004" and "nulls" in hint_of(e)
    r = classified.execute(q, ['{"seed": 1, "nulls": "value"}']).fetchone()
    assert r[5] and r[2] == 3000


def test_duplicate_release_name_and_replace(classified):
    request(classified, "t_dup")
    with pytest.raises(psycopg.Error) as e:
        request(classified, "t_dup")
    assert sqlstate_of(e) == "42P07" and "replace" in hint_of(e)
    rid = request(classified, "t_dup", options='{"seed": 2, "replace": true}')[0]
    statuses = classified.execute("SELECT status FROM deid.release WHERE name = 't_dup' ORDER BY release_id"
                                  ).fetchall()
    assert statuses == [("replaced",), ("committed",)]
    classified.execute("SELECT deid.drop_release('t_dup')")
    assert objects_named(classified, "t_dup") == 0
    assert classified.execute("SELECT status FROM deid.release WHERE release_id = %s", [rid]).fetchone() == ("dropped",)


def test_no_single_column_key(classified):
    classified.execute("DROP TABLE IF EXISTS public.t_nokey")
    classified.execute("CREATE TABLE public.t_nokey AS SELECT patient_id, age, diagnosis FROM registry.patients")
    classified.execute("SELECT deid.set_role('t_nokey', 'age', 'quasi_identifier')")
    classified.execute("SELECT deid.set_role('t_nokey', 'diagnosis', 'sensitive')")
    with pytest.raises(psycopg.Error) as e:
        classified.execute("SELECT * FROM deid.anonymize_request('t_nokey', 'anatomy', k => 20)")
    assert sqlstate_of(e) == "22023" and "row_id" in hint_of(e)
    classified.execute("CREATE UNIQUE INDEX ON t_nokey (patient_id)")
    r = classified.execute("SELECT * FROM deid.anonymize_request('t_nokey', 'anatomy', k => 20,"
                           " options => '{\"row_id\": \"patient_id\"}')").fetchone()
    assert r[5]


def test_numeric_and_date_sensitive_attributes(classified):
    """Count tables and RID sets keep the sensitive attribute's own type."""
    classified.execute("DROP TABLE IF EXISTS public.t_numsa")
    classified.execute("CREATE TABLE public.t_numsa AS SELECT patient_id, sex, race,"
                       " (age % 9)::smallint AS stage_code, birth_date AS dx_date,"
                       " CASE WHEN patient_id % 7 = 0 THEN NULL ELSE age % 5 END AS grade FROM registry.patients")
    classified.execute("ALTER TABLE t_numsa ADD PRIMARY KEY (patient_id)")
    for col, role in [("sex", "quasi_identifier"), ("race", "quasi_identifier"),
                      ("stage_code", "sensitive"), ("dx_date", "sensitive"), ("grade", "sensitive")]:
        classified.execute("SELECT deid.set_role('t_numsa', %s, %s)", [col, role])
    r = classified.execute("SELECT * FROM deid.anonymize_request('t_numsa', 'anatomy', k => 40, l => 3,"
                           " release => 't_num')").fetchone()
    assert r[5]
    for col, typ in [("stage_code", "smallint"), ("dx_date", "date"), ("grade", "integer")]:
        assert classified.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE"
                                  " attrelid = %s::regclass AND attname = %s",
                                  [f"release.t_num_{col}", col]).fetchone()[0] == typ
        released = classified.execute(
            f"SELECT array_agg((v, n) ORDER BY v NULLS LAST)::text FROM (SELECT {col} v, sum(count) n"
            f" FROM release.t_num_{col} GROUP BY 1) s").fetchone()[0]
        source = classified.execute(
            f"SELECT array_agg((v, n) ORDER BY v NULLS LAST)::text FROM (SELECT {col} v, count(*)::numeric n"
            f" FROM t_numsa GROUP BY 1) s").fetchone()[0]
        assert released == source


VERIFY_STORED = """
DO $verify$
import sys
sys.path.insert(0, PYTHON_DIR)
from deid import verify
from deid.verify import anatomy as anatomy_release   # the stored-RID-set reader moved to the verifier
from deid.errors import DeidError
from deid.pg import Database
try:
    g, a, v, n, flat = anatomy_release.read_rid_sets(Database(), RELEASE_ID)
    verify.check_kl(g, a, v, flat, 10, 3, None, rid_counts=n)
except DeidError as e:
    plpy.error(e.message, sqlstate=e.sqlstate)
$verify$ LANGUAGE plpython3u
"""


FIRST_COUNT = "('x' || encode(substring(rid_counts from 1 for 4), 'hex'))::bit(32)::int"


@pytest.mark.parametrize("tamper", [
    None,
    f"rid_counts = overlay(rid_counts placing int4send({FIRST_COUNT} + 1) from 1 for 4)",  # counts
    "rids = overlay(rids placing substring(rids from 1 for 8) from 9 for 8)",  # a row twice, one missing
    "value_list = array_fill(value_list[1], ARRAY[cardinality(value_list)])",   # split RID sets
    "rids = substring(rids from 1 for length(rids) - 8)",              # the last RID cut off
    f"rid_counts = overlay(rid_counts placing int4send(-{FIRST_COUNT}) from 1 for 4)",  # negative
])
def test_verifier_reads_the_stored_chunks(classified, tamper):
    """The verifier's checks run on deid.rid_set as stored: a tampered chunk is refused (DE002)."""
    rid = request(classified, "t_tamper", options='{"seed": 1, "replace": true}')[0]
    python_dir = server_python_dir(classified)
    # a DO block takes no parameters: the server's own path and an integer, inlined
    block = VERIFY_STORED.replace("PYTHON_DIR", repr(python_dir)).replace("RELEASE_ID", str(int(rid)))
    with classified.transaction():
        if tamper:
            classified.execute(sql.SQL("UPDATE deid.rid_set SET {} WHERE release_id = %s AND attribute"
                                       " = 'diagnosis' AND chunk = 0").format(sql.SQL(tamper)), [rid])
        if tamper is None:
            classified.execute(block)
        else:
            with pytest.raises(psycopg.Error) as e:
                classified.execute(block)
            assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
        raise psycopg.Rollback()


@pytest.mark.parametrize("tamper", ["rid_counts = substring(rid_counts from 5)",
                                    "group_ids = group_ids || int4send(7)",
                                    "rids = substring(rids from 1 for length(rids) - 3)"])
def test_catalog_refuses_chunks_whose_lists_disagree(classified, tamper):
    rid = request(classified, "t_tamper", options='{"seed": 1, "replace": true}')[0]
    with pytest.raises(psycopg.Error) as e:
        classified.execute(sql.SQL("UPDATE deid.rid_set SET {} WHERE release_id = %s").format(sql.SQL(tamper)), [rid])
    assert sqlstate_of(e) == "23514"
