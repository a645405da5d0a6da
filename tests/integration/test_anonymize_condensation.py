"""method => 'condensation' (004) through SQL: a release by a role with SELECT and by a
policy-only role, what readers see, the catalog's cluster membership, the seed, every refusal
(SQLSTATE, HINT, nothing left behind, no leak to the policy role) and a tampered stored table
that the verifier refuses."""
import os
import re

import psycopg
import pytest
from psycopg import sql

from dbfixtures import hint_of, sqlstate_of

TABLE = "public.t_cond"
ROWS = 613                       # an unusual size: must not show up in a policy role's errors
DEAD = 247                       # rows with vital = 1
SECRET = "zz_secret_stage"
ANALYST, RESEARCHER, READER = "deid_t_analyst", "deid_t_researcher", "deid_t_reader"
COLUMNS = "{age,bmi,lab,dx_date,sex,smoker,stage,surv_months,vital}"
SURVIVAL = '"survival": {"time": "surv_months", "status": "vital"}'


@pytest.fixture(scope="module")
def cond(admin):
    admin.execute(f"DROP TABLE IF EXISTS {TABLE} CASCADE")
    admin.execute(f"""CREATE TABLE {TABLE} (
        id bigint PRIMARY KEY, name text, age int NOT NULL, bmi float8, lab numeric(6,2),
        dx_date date, sex text, smoker boolean, stage text, surv_months int, vital int,
        status3 int, seen timestamptz, tag text, weight float8)""")
    admin.execute(f"""INSERT INTO {TABLE}
        SELECT i, 'Person ' || i, 30 + (i * 7919) % 50, 18 + ((i * 104729) % 1000) / 50.0,
               ((i * 31) % 500) / 10.0, DATE '2015-01-01' + (i * 37) % 2000,
               CASE WHEN i % 3 = 0 THEN 'F' ELSE 'M' END, i % 4 = 0,
               CASE WHEN i = 77 THEN '{SECRET}' ELSE (ARRAY['I','II','III','IV'])[1 + i % 4] END,
               1 + (i * 13) % 120, CASE WHEN i <= {DEAD} THEN 1 ELSE 0 END, i % 3, now(),
               CASE WHEN i % 10 = 0 THEN NULL ELSE 't' || (i % 2) END,
               CASE WHEN i % 50 = 0 THEN NULL ELSE i % 7 END
          FROM generate_series(1, {ROWS}) i""")
    admin.execute("SELECT deid.set_role(%s, 'name', 'identifier')", [TABLE])
    for c in ("age", "bmi", "lab", "dx_date", "sex", "smoker", "stage", "tag", "seen"):
        admin.execute("SELECT deid.set_role(%s, %s, 'quasi_identifier')", [TABLE, c])
    for c in ("surv_months", "vital", "status3", "weight"):
        admin.execute("SELECT deid.set_role(%s, %s, 'sensitive')", [TABLE, c])
    admin.execute(f"GRANT SELECT ON {TABLE} TO {ANALYST}")
    admin.execute(f"SELECT deid.allow_requests('{RESEARCHER}', '{TABLE}', 5)")
    yield admin
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 't_cond%'")
    admin.execute(f"DELETE FROM deid.policy WHERE relation = '{TABLE}'::regclass")
    admin.execute(f"DELETE FROM deid.column_role WHERE relation = '{TABLE}'::regclass")


def request(conn, k=10, columns=COLUMNS, options=None, release="t_cond_rel", selection=None):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'condensation', k => %s, columns => %s,"
        " selection => %s, options => %s, release => %s)",
        [TABLE, k, columns, selection, options or "{" + SURVIVAL + ', "seed": 7}', release]
    ).fetchall()


def state(admin):
    tmp = os.path.join(admin.execute("SHOW data_directory").fetchone()[0], "base", "pgsql_tmp")
    files = sorted(f for f in os.listdir(tmp) if f.startswith("pgsql_tmpdeid")) \
        if os.path.isdir(tmp) else []
    return (admin.execute("SELECT count(*) FROM pg_class WHERE relnamespace IN"
                          " ('release'::regnamespace, 'deid_release'::regnamespace)").fetchone(),
            admin.execute("SELECT count(*), max(release_id) FROM deid.release").fetchone(),
            admin.execute("SELECT count(*) FROM deid.cluster_member").fetchone(), files)


def test_release_by_a_role_with_select(cond, connect):
    analyst = connect(ANALYST)
    [(rid, relations, rows, groups, disc, verified)] = request(analyst, release="t_cond_a")
    assert verified and relations == ["release.t_cond_a"] and rows == ROWS and disc >= 10
    shape = cond.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid ="
        " 'deid_release.t_cond_a'::regclass AND attnum > 0 ORDER BY attnum").fetchall()
    assert shape == [("age", "integer"), ("bmi", "double precision"), ("lab", "numeric(6,2)"),
                     ("dx_date", "date"), ("sex", "text"), ("smoker", "boolean"),
                     ("stage", "text"), ("surv_months", "integer"), ("vital", "integer")]
    got = analyst.execute(
        "SELECT count(*), sum(vital), count(*) FILTER (WHERE sex = 'F'),"
        " count(*) FILTER (WHERE smoker), min(age) >= 30 AND max(age) <= 79,"
        " min(dx_date) >= DATE '2015-01-01', sum(age)::float8 / count(*) FROM release.t_cond_a"
    ).fetchone()
    want = cond.execute(f"SELECT count(*), sum(vital), count(*) FILTER (WHERE sex = 'F'),"
                        f" count(*) FILTER (WHERE smoker), true, true, avg(age)::float8"
                        f" FROM {TABLE}").fetchone()
    assert got[:6] == want[:6] and abs(got[6] - want[6]) < 0.5
    # catalog: every source row in exactly one cluster, every cluster >= k (deid_admin reads it)
    members = cond.execute("SELECT count(*), count(DISTINCT r), min(r) > 0 FROM"
                           " deid.cluster_member, unnest(rids) r WHERE release_id = %s",
                           [rid]).fetchone()
    assert members == (ROWS, ROWS, True)
    assert cond.execute("SELECT min(cardinality(rids)) FROM deid.cluster_member"
                        " WHERE release_id = %s", [rid]).fetchone()[0] >= 10
    assert cond.execute("SELECT count(*) FROM deid.cluster_member WHERE release_id = %s",
                        [rid]).fetchone()[0] == groups
    log = cond.execute("SELECT seed, metrics->'verification', metrics->'cluster_sizes',"
                       " metrics->>'algorithm', metrics->>'survival_times' FROM deid.release"
                       " WHERE release_id = %s", [rid]).fetchone()
    assert log[0] == 7 and log[1]["stored_rows_match"] and log[1]["max_cov_error"] <= 1
    assert log[2]["min"] >= 10 and log[3] == "improved" and log[4] == "recode"


def test_recoded_times_by_default_every_pair_shared_by_k_rows(cond, connect):
    """The default survival times: every released (time, status) pair is held by >= k rows,
    a month that k source rows of a status share is released as itself, the choice is in the
    log's parameters and the verifier's report, and deid.verify_release re-counts the pairs."""
    analyst = connect(ANALYST)
    request(analyst, release="t_cond_rec")
    smallest = analyst.execute("SELECT min(n) FROM (SELECT count(*) AS n FROM release.t_cond_rec"
                               " GROUP BY surv_months, vital) p").fetchone()[0]
    assert smallest >= 10
    dense = cond.execute(f"SELECT surv_months, vital, count(*) FROM {TABLE} GROUP BY 1, 2"
                         " HAVING count(*) >= 10").fetchall()
    released = dict(((t, v), n) for t, v, n in analyst.execute(
        "SELECT surv_months, vital, count(*) FROM release.t_cond_rec GROUP BY 1, 2"))
    assert all(released.get((t, v), 0) >= n for t, v, n in dense)   # kept at its own grain
    params, report = cond.execute(
        "SELECT parameters->'options'->>'survival_times', metrics->'verification'->"
        "'time_status_pairs' FROM deid.release WHERE name = 't_cond_rec'").fetchone()
    assert params == "recode" and report["smallest_pair_rows"] >= 10
    assert report["time"] == "surv_months" and report["status"] == "vital"
    again = cond.execute("SELECT deid.verify_release('t_cond_rec')").fetchone()[0]
    assert again["verified"] is True


def test_seed_reproduces_the_release(cond, connect):
    analyst = connect(ANALYST)
    sql = "SELECT * FROM deid_release.{} ORDER BY ctid"      # the stored order is the release's
    # another seed regroups the same rows: the composition rule's override (logged)
    for name, seed, more in (("t_cond_s1", 11, ""), ("t_cond_s2", 11, ""),
                             ("t_cond_s3", 12, ', "allow_overlap": true')):
        request(analyst, options="{" + SURVIVAL + f', "seed": {seed}{more}}}', release=name)
    one, two, three = (cond.execute(sql.format(n)).fetchall()
                       for n in ("t_cond_s1", "t_cond_s2", "t_cond_s3"))
    assert one == two and one != three
    clusters = [cond.execute("SELECT array_agg(rids::text ORDER BY cluster_id) FROM deid.cluster_member"
                             " m JOIN deid.release r USING (release_id) WHERE r.name = %s",
                             [n]).fetchone()[0] for n in ("t_cond_s1", "t_cond_s2")]
    assert clusters[0] == clusters[1]


def test_fewer_lloyd_rounds_are_logged_and_verified(cond, connect):
    """options.lloyd_rounds (004 Alg. 2 step 2a's k-means rounds; default 5) is a logged
    request option, and a release with 1 round is verified like any other; out of range it is
    refused."""
    analyst = connect(ANALYST)
    request(analyst, options="{" + SURVIVAL + ', "seed": 21, "allow_overlap": true,'
            ' "lloyd_rounds": 1}', release="t_cond_r1")
    assert cond.execute("SELECT parameters->'options'->>'lloyd_rounds' FROM deid.release"
                        " WHERE name = 't_cond_r1'").fetchone()[0] == "1"
    assert cond.execute("SELECT deid.verify_release('t_cond_r1')").fetchone()[0]["verified"]
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        request(analyst, options="{" + SURVIVAL + ', "lloyd_rounds": 0}', release="t_cond_r0")


def test_original_algorithm_and_original_times(cond, connect):
    analyst = connect(ANALYST)
    request(analyst, options='{"algorithm": "original", "seed": 3}', release="t_cond_o")
    request(analyst, options="{" + SURVIVAL + ', "survival_times": "original", "seed": 3,'
            ' "allow_overlap": true}', release="t_cond_t")          # another clustering
    times = analyst.execute("SELECT array_agg(surv_months ORDER BY surv_months)"
                            " FROM release.t_cond_t").fetchone()[0]
    assert times == cond.execute(f"SELECT array_agg(surv_months ORDER BY surv_months)"
                                 f" FROM {TABLE}").fetchone()[0]


def test_coarsened_times_move_every_time_within_bins(cond, connect):
    analyst = connect(ANALYST)
    request(analyst, options="{" + SURVIVAL + ', "survival_times": "coarsened", "seed": 5}',
            release="t_cond_c")
    released = sorted(r[0] for r in analyst.execute("SELECT surv_months FROM release.t_cond_c"))
    source = sorted(r[0] for r in cond.execute(f"SELECT surv_months FROM {TABLE}"))
    assert len(released) == len(source) and released != source
    assert min(released) >= min(source) and max(released) <= max(source)
    # bins hold >= k = 10 source rows: the released distribution stays close to the source's
    assert abs(sum(released) / len(released) - sum(source) / len(source)) < 5
    assert cond.execute("SELECT metrics->>'survival_times' FROM deid.release"
                        " WHERE name = 't_cond_c'").fetchone()[0] == "coarsened"


def test_ranked_times_keep_the_order_of_all_times_and_release_no_source_time(cond, connect):
    analyst = connect(ANALYST)
    request(analyst, options="{" + SURVIVAL + ', "survival_times": "ranked", "seed": 4}',
            release="t_cond_r")
    released = [r for r in analyst.execute("SELECT surv_months, vital FROM release.t_cond_r"
                                           " ORDER BY surv_months")]
    source = cond.execute(sql.SQL("SELECT surv_months, vital FROM {} ORDER BY surv_months, vital DESC")
                          .format(sql.Identifier(*TABLE.split(".")))).fetchall()
    times = {t for t, _ in source}
    assert len(released) == len(source) and not any(t in times for t, _ in released)
    # the statuses in time order are the source's (ties: events first): the Cox risk sets
    assert [v for _, v in released] == [v for _, v in source]
    # the r-th released time lies below the r-th source time, above the previous source time
    distinct = sorted(times)
    below = dict(zip(distinct[1:], distinct[:-1]))
    assert all(below.get(s, s - 1) < t < s or (s == distinct[0] and s < t < distinct[1])
               for (t, _), (s, _) in zip(released, source))
    log = cond.execute("SELECT metrics->>'survival_times', metrics->'verification'->>"
                       "'times_checked' FROM deid.release WHERE name = 't_cond_r'").fetchone()
    assert log == ("ranked", "ranked")


def test_nulls_value_makes_null_a_category(cond, connect):
    request(connect(ANALYST), columns="{age,sex,tag}", options='{"nulls": "value", "seed": 1}',
            release="t_cond_n")
    assert cond.execute("SELECT count(*) FILTER (WHERE tag IS NULL), count(*)"
                        " FROM release.t_cond_n").fetchone() == (ROWS // 10, ROWS)


def test_release_by_a_policy_role_and_what_readers_see(cond, connect):
    researcher = connect(RESEARCHER)
    with pytest.raises(psycopg.Error) as e:
        researcher.execute(f"SELECT * FROM {TABLE}")
    assert sqlstate_of(e) == "42501"
    [(rid, relations, rows, *_)] = request(researcher, release="t_cond_p")
    assert relations == ["release.t_cond_p"]
    assert researcher.execute("SELECT count(*) FROM release.t_cond_p").fetchone()[0] == ROWS
    reader = connect(READER)
    assert reader.execute("SELECT count(*) FROM release.t_cond_p").fetchone()[0] == ROWS
    for who in (researcher, reader):
        for rel in (TABLE, "deid.cluster_member", "deid_release.t_cond_p", "deid.release"):
            with pytest.raises(psycopg.Error) as e:
                who.execute(f"SELECT 1 FROM {rel} LIMIT 1")
            assert sqlstate_of(e) == "42501", rel
    # no row id, no name: the release holds only the projected columns
    cols = reader.execute("SELECT * FROM release.t_cond_p LIMIT 0").description
    assert [c.name for c in cols] == COLUMNS.strip("{}").split(",")


S = "{" + SURVIVAL
ERRORS = [
    ("k_two", dict(k=2), "22023"),
    ("l_given", dict(k=5, options=None), None),     # placeholder replaced below
    ("status_subset_below_k", dict(k=300), "DE001"),
    ("non_binary_status", dict(columns="{age,surv_months,status3}",
                               options='{"survival": {"time": "surv_months", "status": "status3"}}'),
     "22023"),
    ("survival_column_not_projected", dict(columns="{age,surv_months}"), "22023"),
    ("unsupported_type", dict(columns="{age,seen}", options='{"seed": 1}'), "0A000"),
    ("null_number", dict(columns="{age,weight}", options='{"seed": 1}'), "22004"),
    ("null_number_even_with_nulls_value", dict(columns="{age,weight}",
                                               options='{"nulls": "value"}'), "22004"),
    ("null_category", dict(columns="{age,tag}", options='{"seed": 1}'), "22004"),
    ("weight_above_one", dict(options=S + ', "weights": {"surv_months": 1.5}}'), "22023"),
    ("weight_negative", dict(options=S + ', "weights": {"age": -0.1}}'), "22023"),
    ("weight_unknown_column", dict(options=S + ', "weights": {"zip": 0.1}}'), "22023"),
    ("weights_sum_above_one", dict(options=S + ', "weights": {"age": 0.7, "bmi": 0.7}}'), "22023"),
    ("survival_not_object", dict(options='{"survival": "surv_months"}'), "22023"),
    ("survival_missing_key", dict(options='{"survival": {"time": "surv_months"}}'), "22023"),
    ("survival_times_unknown", dict(options=S + ', "survival_times": "exact"}'), "22023"),
    ("algorithm_unknown", dict(options='{"algorithm": "magic"}'), "22023"),
    ("identifier_column", dict(columns="{age,name}", options='{"seed": 1}'), "22023"),
]
ERRORS = [e for e in ERRORS if e[2]]
DATA_DEPENDENT = {"non_binary_status", "null_number", "null_number_even_with_nulls_value",
                  "null_category"}


@pytest.mark.parametrize("role", [ANALYST, RESEARCHER])
@pytest.mark.parametrize("case,kwargs,sqlstate", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_leave_nothing_and_leak_nothing(cond, connect, role, case, kwargs, sqlstate):
    if role == RESEARCHER and case in DATA_DEPENDENT:
        sqlstate = "DE001"          # the one refusal of a requester without SELECT: no data-dependent reason
    before = state(cond)
    conn = connect(role)
    with pytest.raises(psycopg.Error) as e:
        request(conn, release="t_cond_err", **kwargs)
    assert sqlstate_of(e) == sqlstate, (case, e.value.diag.message_primary)
    assert hint_of(e), case
    assert state(cond) == before, case
    d = e.value.diag
    text = " ".join(x for x in (d.message_primary, d.message_hint) if x)
    for n in (ROWS, DEAD, ROWS - DEAD, ROWS // 10, ROWS // 50):
        assert not re.search(rf"(?<![\w.]){n}(?![\w.])", text), (case, text)
    assert SECRET not in text and "Person" not in text
    if role == RESEARCHER:
        assert d.message_detail is None, (case, d.message_detail)


def test_l_is_refused(cond, connect):
    with pytest.raises(psycopg.Error) as e:
        connect(ANALYST).execute(
            "SELECT * FROM deid.anonymize_request(%s, 'condensation', k => 5, l => 2,"
            " columns => '{age,bmi}')", [TABLE]).fetchall()
    assert sqlstate_of(e) == "22023" and hint_of(e)


TAMPER = """
CREATE OR REPLACE FUNCTION pg_temp.tamper(how text) RETURNS text LANGUAGE plpython3u AS $$
from deid import pipeline
from deid.write import writer
original = getattr(writer, "_untampered_write_table", writer.write_table)
writer._untampered_write_table = original
def tampered(db, schema, table):
    name = original(db, schema, table)
    if how != "none":
        db.execute(f'UPDATE {schema}."{name}" SET ' + how
                   + f' WHERE ctid = (SELECT min(ctid) FROM {schema}."{name}")')
    return name
pipeline.writer.write_table = tampered if how != "none" else original
return how
$$"""


@pytest.mark.parametrize("how", ["age = age + 1", "lab = lab + 0.01", "sex = 'X'",
                                 "dx_date = dx_date + 1", "vital = 1 - vital"])
def test_verifier_refuses_a_tampered_stored_table(cond, url, how):
    conn = psycopg.connect(url, autocommit=True)
    try:
        conn.execute("SELECT deid.usage()")           # loads deid into this backend
        conn.execute(TAMPER)
        conn.execute("SELECT pg_temp.tamper(%s)", [how])
        before = state(cond)
        with pytest.raises(psycopg.Error) as e:
            request(conn, release="t_cond_tamper")
        assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
        assert "stored release table" in e.value.diag.message_primary
        assert state(cond) == before
        conn.execute("SELECT pg_temp.tamper('none')")
        assert request(conn, release="t_cond_tamper")[0][5]
        conn.execute("SELECT deid.drop_release('t_cond_tamper')")
    finally:
        conn.close()


TAMPER_SQL = """
CREATE OR REPLACE FUNCTION pg_temp.tamper_sql(how text) RETURNS text LANGUAGE plpython3u AS $$
from deid import pipeline
from deid.write import writer
original = getattr(writer, "_untampered_write_table", writer.write_table)
writer._untampered_write_table = original
def tampered(db, schema, table):
    name = original(db, schema, table)
    db.execute(how.replace("{t}", f'{schema}."{name}"'))
    return name
pipeline.writer.write_table = tampered if how != "none" else original
return how
$$"""
# no numeric column: the stored table is proven by the row-hash sum (verify/row_hash.py)
HASHED_COLUMNS = "{age,bmi,dx_date,sex,smoker,stage,tag,surv_months,vital}"
HASHED_OPTIONS = "{" + SURVIVAL + ', "nulls": "value", "seed": 7}'
FIRST = "(SELECT min(ctid) FROM {t})"


@pytest.mark.parametrize("how", [
    f"UPDATE {{t}} SET age = age + 1 WHERE ctid = {FIRST}",
    f"UPDATE {{t}} SET bmi = bmi * (1 + 1e-15) WHERE ctid = {FIRST}",
    f"UPDATE {{t}} SET dx_date = dx_date - 1 WHERE ctid = {FIRST}",
    f"UPDATE {{t}} SET smoker = NOT smoker WHERE ctid = {FIRST}",
    "UPDATE {t} SET tag = NULL WHERE ctid = (SELECT min(ctid) FROM {t} WHERE tag IS NOT NULL)",
    "UPDATE {t} SET tag = 'x' WHERE ctid = (SELECT min(ctid) FROM {t} WHERE tag IS NULL)",
    f"DELETE FROM {{t}} WHERE ctid = {FIRST}",
    f"INSERT INTO {{t}} SELECT * FROM {{t}} WHERE ctid = {FIRST}",
    # one row replaced by a copy of another: same count
    f"WITH d AS (DELETE FROM {{t}} WHERE ctid = {FIRST} RETURNING 1) INSERT INTO {{t}}"
    " SELECT * FROM {t} WHERE ctid = (SELECT max(ctid) FROM {t})",
    # two rows swap their ages: every column keeps its multiset of values, the rows do not
    "UPDATE {t} AS x SET age = CASE WHEN x.ctid = p.c1 THEN p.a2 ELSE p.a1 END"
    " FROM (SELECT a.ctid AS c1, a.age AS a1, b.ctid AS c2, b.age AS a2 FROM {t} a, {t} b"
    "       WHERE a.ctid = (SELECT min(ctid) FROM {t})"
    "         AND b.ctid = (SELECT min(y.ctid) FROM {t} y WHERE y.age <> a.age)) p"
    " WHERE x.ctid IN (p.c1, p.c2)",
])
def test_row_hash_refuses_a_tampered_stored_table(cond, url, how):
    conn = psycopg.connect(url, autocommit=True)
    try:
        conn.execute("SELECT deid.usage()")           # loads deid into this backend
        conn.execute(TAMPER_SQL)
        conn.execute("SELECT pg_temp.tamper_sql(%s)", [how])
        before = state(cond)
        with pytest.raises(psycopg.Error) as e:
            request(conn, columns=HASHED_COLUMNS, options=HASHED_OPTIONS, release="t_cond_tamper_h")
        assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
        assert "stored release table" in e.value.diag.message_primary
        assert state(cond) == before
        conn.execute("SELECT pg_temp.tamper_sql('none')")
        [row] = request(conn, columns=HASHED_COLUMNS, options=HASHED_OPTIONS,
                        release="t_cond_tamper_h")
        assert row[5]
        how_stored = cond.execute("SELECT metrics->'verification'->>'stored_rows_match',"
                                  " metrics->'verification'->'stored_membership'->>'digest'"
                                  " FROM deid.release WHERE release_id = %s", [row[0]]).fetchone()
        assert how_stored == ("row-hash sum", "sha256 per cluster")
        conn.execute("SELECT deid.drop_release('t_cond_tamper_h')")
    finally:
        conn.execute("SELECT pg_temp.tamper_sql('none')")
        conn.close()


def test_row_hash_is_the_servers(cond):
    """verify/row_hash.py computes hash_record_extended as the server does, type by type."""
    import numpy as np
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python_udfs"))
    from deid.verify.shared import row_hash as rh
    rng = np.random.default_rng(3)
    cases = {
        "int2": rng.integers(-2 ** 15, 2 ** 15, 40), "int4": np.r_[0, -1, 2 ** 31 - 1, -2 ** 31,
                                                                  rng.integers(-2 ** 31, 2 ** 31, 40)],
        "int8": np.r_[0, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 40 + 5, rng.integers(-2 ** 63, 2 ** 63 - 1, 40)],
        "float8": np.r_[0.0, -0.0, 5e-324, 1e300, rng.normal(0, 1e3, 40)],
        "float4": np.r_[0.0, -0.0, rng.normal(0, 1e3, 40)].astype(np.float32).astype(np.float64),
        "date": rng.integers(-20000, 40000, 40)}
    for seed in (0, 1, 2 ** 62 + 987654321):
        for t, v in cases.items():
            value = "DATE '1970-01-01' + x" if t == "date" else f"x::{t}"
            array = "int4" if t in ("date", "int2") else t
            got = [r[0] for r in cond.execute(
                f"SELECT hash_record_extended(ROW({value}), %s) FROM unnest(%s::{array}[])"
                " WITH ORDINALITY u(x, o) ORDER BY o", [seed, v.tolist()]).fetchall()]
            want = rh.column_hash(v, t, seed)
            assert np.array_equal(np.array(got, np.int64).view(np.uint64), want), (t, seed)
        labels = ["F", "M", "\u00fc"]
        lh = [r[0] for r in cond.execute(rh.label_hashes_sql("text").replace("$2", "%(s)s")
                                         .replace("$1", "%(l)s"), {"s": seed, "l": labels})]
        a, f, z = rng.integers(-9, 9, 30), rng.normal(size=30), rng.integers(0, 4, 30)
        got = [r[0] for r in cond.execute(
            "SELECT hash_record_extended(ROW(x, y, (%s::text[])[z + 1]), %s) FROM unnest(%s::int4[],"
            " %s::float8[], %s::int4[]) WITH ORDINALITY u(x, y, z, o) ORDER BY o",
            [labels, seed, a.tolist(), f.tolist(), z.tolist()]).fetchall()]
        cols = [rh.column_hash(a, "int4", seed), rh.column_hash(f, "float8", seed),
                rh.column_hash(z, "text", seed, lh)]
        got = [r[0] for r in cond.execute(
            "SELECT hash_record_extended(ROW(h, h >> 32), %s) FROM unnest(%s::int8[]) u(h)",
            [seed, got]).fetchall()]
        assert rh.row_hash_sum(cols, seed) == sum(int(x) for x in
                                                  np.array(got, np.int64).view(np.uint64)) % 2 ** 64


TAMPER_CATALOG = """
CREATE OR REPLACE FUNCTION pg_temp.tamper_catalog(how text) RETURNS text LANGUAGE plpython3u AS $$
from deid.log import release_log as catalog_log
from deid import pipeline
original = getattr(catalog_log, "_untampered_write_artefacts", catalog_log.write_artefacts)
catalog_log._untampered_write_artefacts = original
def tampered(db, release_id, plan):
    original(db, release_id, plan)
    for statement in how.split(";"):
        db.execute(statement.replace("$R", str(release_id)))
pipeline.catalog_log.write_artefacts = tampered if how != "none" else original
return how
$$"""


@pytest.mark.parametrize("how", [
    # a row in no cluster
    "UPDATE deid.cluster_member SET rids = rids[2:] WHERE release_id = $R AND cluster_id = 0",
    # a row moved to another cluster
    "UPDATE deid.cluster_member SET rids = rids || (SELECT rids[1] FROM deid.cluster_member"
    " WHERE release_id = $R AND cluster_id = 0) WHERE release_id = $R AND cluster_id = 1;"
    "UPDATE deid.cluster_member SET rids = rids[2:] WHERE release_id = $R AND cluster_id = 0",
    # a row that is not in the snapshot
    "UPDATE deid.cluster_member SET rids[1] = -5 WHERE release_id = $R AND cluster_id = 0",
    # a cluster gone
    "DELETE FROM deid.cluster_member WHERE release_id = $R AND cluster_id = 2",
])
def test_verifier_refuses_a_tampered_membership(cond, url, how):
    conn = psycopg.connect(url, autocommit=True)
    try:
        conn.execute("SELECT deid.usage()")
        conn.execute(TAMPER_CATALOG)
        conn.execute("SELECT pg_temp.tamper_catalog(%s)", [how])
        before = state(cond)
        with pytest.raises(psycopg.Error) as e:
            request(conn, release="t_cond_tamper_m")
        assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
        assert state(cond) == before
    finally:
        conn.execute("SELECT pg_temp.tamper_catalog('none')")
        conn.close()
