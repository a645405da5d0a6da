"""method => 'disassociation' (paper 003) through SQL: both request forms (an array column; a
long (record, item) table), a role with SELECT and a policy-only role, the worked example of
003 (Figs. 1, 3b, 4, 10, 11; k=3, m=2, maxClusterSize 6) as sets, the stored verifier refusing
a tampered chunk, reproducible seeds, errors that leave nothing behind, and deid.reconstruct
(Fig. 5)."""
import json

import psycopg
import pytest

from conftest import REVERIFY_SETS, hint_of, sqlstate_of
from fixtures.paper003 import FIG1, FIG3B

OPTS = {"m": 2, "max_cluster_size": 6, "utility": FIG3B, "seed": 3}
ARRAY_REQ = ("SELECT * FROM deid.anonymize_request('dx.patients', 'disassociation', k => %s,"
             " columns => '{codes}', options => %s, release => %s)")
LONG_REQ = ("SELECT * FROM deid.anonymize_request('dx.diagnoses', 'disassociation', k => %s,"
            " options => %s, release => %s)")


@pytest.fixture(scope="module")
def dx(admin):
    admin.execute("DROP SCHEMA IF EXISTS dx CASCADE")
    admin.execute("CREATE SCHEMA dx")
    admin.execute("CREATE TABLE dx.patients (id int PRIMARY KEY, name text, codes text[])")
    admin.execute("CREATE TABLE dx.diagnoses (patient_id int, icd9 text)")
    for i, r in enumerate(FIG1, start=1):
        admin.execute("INSERT INTO dx.patients VALUES (%s, %s, %s)", [i, f"Patient {i}", r])
        for c in r:
            admin.execute("INSERT INTO dx.diagnoses VALUES (%s, %s)", [i, c])
    admin.execute("GRANT USAGE ON SCHEMA dx TO PUBLIC")
    admin.execute("GRANT SELECT ON dx.patients, dx.diagnoses TO deid_t_analyst")
    admin.execute("SELECT deid.set_role('dx.patients', 'name', 'identifier')")
    admin.execute("SELECT deid.allow_requests('deid_t_researcher', 'dx.diagnoses', 3)")
    yield admin
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 'dis\\_%'")
    admin.execute("DROP SCHEMA dx CASCADE")


def release_sets(conn, name):
    """The release as sets, clusters named by their records (via the audit membership)."""
    return {
        "clusters": conn.execute(f"SELECT cluster_id, size FROM release.{name}_cluster"
                                 " ORDER BY 1").fetchall(),
        "domains": {(c, j): set(d) for c, j, d in conn.execute(
            f"SELECT cluster_id, chunk_id, array_agg(DISTINCT e) FROM release.{name}_record_chunk,"
            " unnest(codes) e GROUP BY 1, 2").fetchall()},
        "items": {c: set(v) for c, v in conn.execute(
            f"SELECT cluster_id, array_agg(code) FROM release.{name}_item_chunk GROUP BY 1")},
        "shared": [(sorted(ids), set(d)) for ids, d in conn.execute(
            f"SELECT min(cluster_ids), array_agg(DISTINCT e) FROM release.{name}_shared_chunk,"
            " unnest(codes) e GROUP BY shared_id").fetchall()],
        "subrecords": conn.execute(f"SELECT count(*) FROM release.{name}_record_chunk").fetchone()[0],
    }


def check_worked_example(admin, conn, name, rid):
    got = release_sets(conn, name)
    member = dict(admin.execute("SELECT r, cluster_id FROM deid.cluster_member, unnest(rids) r"
                                " WHERE release_id = %s", [rid]).fetchall())
    p1, p2 = member[1], member[6]
    assert {member[i] for i in range(1, 6)} == {p1} and {member[i] for i in range(6, 11)} == {p2}
    assert got["clusters"] == [(1, 5), (2, 5)]
    assert sorted(map(sorted, (d for (c, _), d in got["domains"].items() if c == p1))) == [
        ["296.00", "296.01", "296.02"], ["692.71", "695.10"]]
    assert [d for (c, _), d in got["domains"].items() if c == p2] == [{"294.10", "295.04", "296.03"}]
    assert got["items"] == {p1: {"401.0"}, p2: {"404.00", "480.1"}}
    assert got["shared"] == [([1, 2], {"834.0", "944.01"})]
    assert got["subrecords"] == 15             # 3 record chunks x 5 records, empty ones included


def test_worked_example_array_column(dx, connect):
    conn = connect("deid_t_analyst")
    rid, relations, rows, groups, _, verified = conn.execute(
        ARRAY_REQ, [3, json.dumps(OPTS), "dis_fig4"]).fetchone()
    assert verified and rows == 10 and groups == 2
    assert relations == [f"release.dis_fig4_{t}" for t in
                         ("cluster", "record_chunk", "item_chunk", "shared_chunk")]
    check_worked_example(dx, conn, "dis_fig4", rid)
    log = dx.execute("SELECT seed, metrics->'verification'->>'min_itemset_support',"
                     " parameters->'columns' FROM deid.release WHERE release_id = %s", [rid]).fetchone()
    assert log[0] == 3 and int(log[1]) >= 3 and log[2] == ["codes"]
    # readers see the release and nothing else; the membership is the admins'
    reader = connect("deid_t_reader")
    assert reader.execute("SELECT count(*) FROM release.dis_fig4_record_chunk").fetchone()[0] == 15
    for sql in ("SELECT * FROM deid.cluster_member", "SELECT * FROM dx.patients",
                "SELECT * FROM deid_release.dis_fig4_cluster"):
        with pytest.raises(psycopg.Error) as e:
            reader.execute(sql)
        assert sqlstate_of(e) == "42501"
    assert connect("deid_t_admin").execute(
        "SELECT sum(cardinality(rids)) FROM deid.cluster_member WHERE release_id = %s",
        [rid]).fetchone()[0] == 10


def test_worked_example_long_table_by_policy(dx, connect):
    conn = connect("deid_t_researcher")
    opts = dict(OPTS, record="patient_id", item="icd9")
    rid, relations, rows, groups, _, verified = conn.execute(
        LONG_REQ, [3, json.dumps(opts), "dis_long"]).fetchone()
    assert verified and rows == 10 and groups == 2
    check_worked_example(dx, conn, "dis_long", rid)
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM dx.diagnoses")
    assert sqlstate_of(e) == "42501"
    via = dx.execute("SELECT parameters->'authorized_via'->>'via' FROM deid.release"
                     " WHERE release_id = %s", [rid]).fetchone()[0]
    assert via == "policy"


def test_policy_role_without_policy_on_the_array_table(dx, connect):
    with pytest.raises(psycopg.Error) as e:
        connect("deid_t_researcher").execute(ARRAY_REQ, [3, json.dumps(OPTS), "dis_nopol"])
    assert sqlstate_of(e) == "42501"


def test_seed_reproduces_the_release(dx, connect):
    conn = connect("deid_t_analyst")
    opts = {"m": 2, "seed": 11}
    for name in ("dis_seed_a", "dis_seed_b"):
        conn.execute(ARRAY_REQ, [2, json.dumps(opts), name]).fetchone()
    a, b = (dx.execute(f"SELECT array_agg(cluster_id || ':' || chunk_id || ':' || codes::text"
                       f" ORDER BY ctid) FROM deid_release.{n}_record_chunk").fetchone()[0]
            for n in ("dis_seed_a", "dis_seed_b"))
    assert a == b


def bad(conn, sql, params):
    with pytest.raises(psycopg.Error) as e:
        conn.execute(sql, params).fetchall()
    return e


@pytest.mark.parametrize("sql, k, opts, state", [
    (ARRAY_REQ, 1, {"m": 2}, "22023"),
    (ARRAY_REQ, 3, {"m": 0}, "22023"),
    (ARRAY_REQ.replace("{codes}", "{id}"), 3, {"m": 2}, "22023"),          # not an array
    (ARRAY_REQ, 3, {"utility": [["296.00", "834.0"], ["834.0"]]}, "22023"),  # overlap
    (ARRAY_REQ, 11, {"m": 2}, "DE001"),                                     # fewer than k
    (LONG_REQ, 3, {"record": "patient_id"}, "22023"),                       # item missing
    (LONG_REQ, 3, {"record": "icd9", "item": "icd9"}, "22023"),             # record not integer
])
def test_errors_leave_nothing_and_carry_a_hint(dx, connect, sql, k, opts, state):
    e = bad(connect("deid_t_analyst"), sql, [k, json.dumps(opts), "dis_bad"])
    assert sqlstate_of(e) == state and hint_of(e)
    assert not dx.execute("SELECT 1 FROM pg_class WHERE relname LIKE 'dis_bad%'").fetchone()
    assert not dx.execute("SELECT 1 FROM deid.release WHERE name = 'dis_bad'").fetchone()


def test_null_codes_are_refused_without_leak(dx, connect):
    dx.execute("INSERT INTO dx.diagnoses VALUES (11, NULL)")
    try:
        e = bad(connect("deid_t_researcher"), LONG_REQ,
                [3, json.dumps({"record": "patient_id", "item": "icd9"}), "dis_null"])
        # the one refusal of a requester without SELECT: no data-dependent reason
        assert sqlstate_of(e) == "DE001" and hint_of(e) and e.value.diag.message_detail is None
        assert not dx.execute("SELECT 1 FROM pg_class WHERE relname LIKE 'dis_null%'").fetchone()
    finally:
        dx.execute("DELETE FROM dx.diagnoses WHERE patient_id = 11")
    dx.execute("INSERT INTO dx.diagnoses VALUES (NULL, '401.0')")
    try:
        e = bad(connect("deid_t_analyst"), LONG_REQ,
                [3, json.dumps({"record": "patient_id", "item": "icd9"}), "dis_nullrec"])
        assert sqlstate_of(e) == "22004" and hint_of(e)
    finally:
        dx.execute("DELETE FROM dx.diagnoses WHERE patient_id IS NULL")
    e = bad(connect("deid_t_researcher"), LONG_REQ,
            [30, json.dumps({"record": "patient_id", "item": "icd9"}), "dis_few"])
    assert sqlstate_of(e) == "DE001" and e.value.diag.message_detail is None
    assert not any(ch.isdigit() for ch in e.value.diag.message_primary + hint_of(e))


def test_verifier_refuses_a_tampered_chunk(dx, connect):
    rid = connect("deid_t_analyst").execute(ARRAY_REQ, [3, json.dumps(OPTS), "dis_tamper"]).fetchone()[0]
    dx.execute(REVERIFY_SETS)
    tabs = [f"dis_tamper_{t}" for t in ("cluster", "record_chunk", "item_chunk", "shared_chunk")]
    check = "SELECT pg_temp.reverify('dx.patients'::regclass, %s, 3, %s)"
    assert dx.execute(check, [rid, tabs]).fetchone()[0] == "ok"
    # the verifier reads a chunk's rows joined to their codes: a NULL code, a code added to an
    # empty subrecord, a subrecord's codes moved to the next row are each caught
    first_empty = "(SELECT min(ctid) FROM {t} WHERE cardinality(codes) = 0)"
    for change in ("SET codes = codes || NULL::text WHERE ctid = (SELECT max(ctid) FROM {t})",
                   "SET codes = '{NULL}' WHERE ctid = " + first_empty,
                   "SET codes = '{296.00}' WHERE ctid = " + first_empty,
                   "SET codes = NULL WHERE ctid = (SELECT max(ctid) FROM {t})",
                   "SET chunk_id = NULL WHERE ctid = (SELECT min(ctid) FROM {t})",
                   "SET cluster_id = 2 WHERE ctid = (SELECT min(ctid) FROM {t}"
                   " WHERE cluster_id = 1 AND cardinality(codes) > 0)"):
        dx.execute("BEGIN")
        try:
            dx.execute("ALTER TABLE deid_release.dis_tamper_record_chunk"
                       " ALTER codes DROP NOT NULL, ALTER chunk_id DROP NOT NULL")
            dx.execute("UPDATE deid_release.dis_tamper_record_chunk "
                       + change.replace("{t}", "deid_release.dis_tamper_record_chunk"))
            assert dx.execute(check, [rid, tabs]).fetchone()[0].startswith("DE002"), change
        finally:
            dx.execute("ROLLBACK")
    dx.execute("UPDATE deid_release.dis_tamper_record_chunk SET codes = '{}' WHERE ctid ="
               " (SELECT ctid FROM deid_release.dis_tamper_record_chunk WHERE cardinality(codes) > 0"
               " LIMIT 1)")
    assert dx.execute(check, [rid, tabs]).fetchone()[0].startswith("DE002")
    # a shared chunk whose rows disagree on its joint cluster, or that moves to one cluster
    rid = connect("deid_t_analyst").execute(ARRAY_REQ, [3, json.dumps(OPTS), "dis_tamper2"]).fetchone()[0]
    tabs = [t.replace("dis_tamper_", "dis_tamper2_") for t in tabs]
    # or whose cluster list holds a NULL, is NULL or has two dimensions (the last pair: a row's
    # two NULL elements are as many bytes short as the other's extra dimension is over)
    first, last = "ctid = (SELECT min(ctid) FROM {t})", "ctid = (SELECT max(ctid) FROM {t})"
    for change in ("SET cluster_ids = '{1}' WHERE " + first,
                   "SET cluster_ids = '{1}'", "SET codes = codes || '{296.00}'::text[]",
                   "SET cluster_ids = cluster_ids || NULL::int WHERE " + first,
                   "SET cluster_ids = NULL WHERE " + first,
                   "SET cluster_ids = ARRAY[cluster_ids, cluster_ids] WHERE " + first,
                   "SET cluster_ids = CASE WHEN " + first + " THEN cluster_ids || NULL::int"
                   " || NULL::int ELSE ARRAY[cluster_ids, cluster_ids] END WHERE " + first
                   + " OR " + last):
        dx.execute("BEGIN")
        try:
            dx.execute("ALTER TABLE deid_release.dis_tamper2_shared_chunk"
                       " ALTER cluster_ids DROP NOT NULL")
            dx.execute("UPDATE deid_release.dis_tamper2_shared_chunk "
                       + change.replace("{t}", "deid_release.dis_tamper2_shared_chunk"))
            assert dx.execute(check, [rid, tabs]).fetchone()[0].startswith("DE002"), change
        finally:
            dx.execute("ROLLBACK")
    assert dx.execute(check, [rid, tabs]).fetchone()[0] == "ok"


def test_reconstruct(dx, connect):
    owner = connect("deid_t_analyst")
    owner.execute(ARRAY_REQ, [3, json.dumps(OPTS), "dis_rec"]).fetchone()
    assert owner.execute("SELECT deid.reconstruct('dis_rec', 'dis_rec_d1', 7)").fetchone()[0] == 10
    rows = owner.execute("SELECT record_id, codes FROM release.dis_rec_d1 ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == list(range(1, 11))
    # every source code occurrence shows up (item-chunk codes once per cluster at least)
    got = sorted(c for _, codes in rows for c in codes)
    assert set(got) == {c for r in FIG1 for c in r}
    reader = connect("deid_t_reader")
    assert reader.execute("SELECT count(*) FROM release.dis_rec_d1 WHERE codes @> '{296.00}'"
                          ).fetchone()[0] == 5
    # the same seed draws the same data set
    owner.execute("SELECT deid.reconstruct('dis_rec', 'dis_rec_d2', 7)")
    again = owner.execute("SELECT record_id, codes FROM release.dis_rec_d2 ORDER BY 1").fetchall()
    assert again == rows
    for role, args, state in [("deid_t_analyst", ("dis_rec", "dis_rec_d1", 1), "42P07"),
                              ("deid_t_analyst", ("dis_rec", "Bad Name", 1), "22023"),
                              ("deid_t_analyst", ("dis_nothing", "x_1", 1), "42704"),
                              ("deid_t_attacker", ("dis_rec", "dis_rec_x", 1), "42501")]:
        e = bad(connect(role), "SELECT deid.reconstruct(%s, %s, %s)", list(args))
        assert sqlstate_of(e) == state and hint_of(e)
    dx.execute("SELECT deid.drop_release('dis_rec')")
    assert not dx.execute("SELECT 1 FROM pg_class WHERE relname LIKE 'dis_rec%'").fetchone()


def test_replace_drops_the_old_releases_reconstructions(dx, connect):
    owner = connect("deid_t_analyst")
    owner.execute(ARRAY_REQ, [3, json.dumps(OPTS), "dis_repl"]).fetchone()
    owner.execute("SELECT deid.reconstruct('dis_repl', 'dis_repl_d1', 1)")
    old_id = dx.execute("SELECT release_id FROM deid.release WHERE name = 'dis_repl'"
                        " AND status = 'committed'").fetchone()[0]
    owner.execute(ARRAY_REQ, [3, json.dumps(dict(OPTS, replace=True, seed=4)), "dis_repl"])
    # D' of the replaced release described a release that is gone: it goes with it
    assert not dx.execute("SELECT 1 FROM pg_class WHERE relname = 'dis_repl_d1'").fetchone()
    assert dx.execute("SELECT status FROM deid.release WHERE release_id = %s",
                      [old_id]).fetchone()[0] == "replaced"
    # the name is free for a reconstruction of the new release
    assert owner.execute("SELECT deid.reconstruct('dis_repl', 'dis_repl_d1', 1)"
                         ).fetchone()[0] == 10
    dx.execute("SELECT deid.drop_release('dis_repl')")
    assert not dx.execute("SELECT 1 FROM pg_class WHERE relname LIKE 'dis_repl%'").fetchone()
