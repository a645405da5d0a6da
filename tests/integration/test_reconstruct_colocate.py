"""deid.reconstruct(..., colocate => p): a reconstruction that follows the release's utility
policy (releases/constrained_assignment.py).  Every draw is consistent with the release's
STORED chunks (tests/reconstruction_check.py, read back through the release views), the
split constraint's item code joins a record of its constraint, the draw is logged with its
seed and colocate, and the access rules of deid.reconstruct hold for the option: a role
without SELECT reconstructs only its own release, from nothing but that release."""
import json

import psycopg
import pytest
from psycopg import sql

from conftest import hint_of, sqlstate_of
from reconstruction_check import inconsistencies

# one cluster of 6 records (k = 3, maxClusterSize 6): 250.00 on three records (record chunk),
# 250.01 on one of them (item chunk), one utility constraint; 401.9 on every record
SPLIT = [["250.00", "250.01", "401.9"], ["250.00", "401.9"], ["250.00", "401.9"], ["401.9"],
         ["401.9"], ["401.9"]]
OPTS = {"m": 2, "max_cluster_size": 6, "record": "patient_id", "item": "icd9", "seed": 3,
        "utility": [["250.00", "250.01"], ["401.9"]]}
REQ = ("SELECT release_id FROM deid.anonymize_request('dxc.diagnoses', 'disassociation',"
       " k => 3, options => %s, release => %s)")
RECON = "SELECT deid.reconstruct(%s, %s, %s, colocate => %s)"


@pytest.fixture(scope="module")
def dxc(admin):
    admin.execute("DROP SCHEMA IF EXISTS dxc CASCADE")
    admin.execute("CREATE SCHEMA dxc")
    admin.execute("CREATE TABLE dxc.diagnoses (patient_id int, icd9 text)")
    for i, r in enumerate(SPLIT, start=1):
        for c in r:
            admin.execute("INSERT INTO dxc.diagnoses VALUES (%s, %s)", [i, c])
    admin.execute("GRANT USAGE ON SCHEMA dxc TO PUBLIC")
    admin.execute("GRANT SELECT ON dxc.diagnoses TO deid_t_analyst")
    admin.execute("SELECT deid.allow_requests('deid_t_researcher', 'dxc.diagnoses', 3)")
    yield admin
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 'dxc\\_%'")
    admin.execute("SELECT deid.revoke_requests('deid_t_researcher', 'dxc.diagnoses')")
    admin.execute("DROP SCHEMA dxc CASCADE")


def rel(name, part):
    return sql.Identifier("release", f"{name}_{part}")


def stored_release(conn, name):
    """The release as tests/reconstruction_check.py reads it, from its views."""
    sizes = [s for (s,) in conn.execute(sql.SQL("SELECT size FROM {} ORDER BY cluster_id")
                                        .format(rel(name, "cluster")))]
    chunks = {}
    for c, j, codes in conn.execute(sql.SQL("SELECT cluster_id, chunk_id, codes FROM {}")
                                    .format(rel(name, "record_chunk"))):
        chunks.setdefault((c - 1, j), []).append(codes)
    shared = {}
    for s, ids, codes in conn.execute(sql.SQL("SELECT shared_id, cluster_ids, codes FROM {}")
                                      .format(rel(name, "shared_chunk"))):
        shared.setdefault(s, ([i - 1 for i in ids], []))[1].append(codes)
    items = {}
    for c, code in conn.execute(sql.SQL("SELECT cluster_id, code FROM {}")
                                .format(rel(name, "item_chunk"))):
        items.setdefault(c - 1, []).append(code)
    return {"sizes": sizes,
            "chunks": [(c, sorted({x for s in subs for x in s}), subs)
                       for (c, _), subs in sorted(chunks.items())],
            "shared": [(ids, sorted({x for s in subs for x in s}), subs)
                       for ids, subs in shared.values()],
            "items": items}


def drawn(conn, target):
    return [set(codes) for (codes,) in conn.execute(
        sql.SQL("SELECT codes FROM {} ORDER BY record_id").format(
            sql.Identifier("release", target)))]


def bad(conn, query, params):
    with pytest.raises(psycopg.Error) as e:
        conn.execute(query, params).fetchall()
    return e


def test_every_draw_is_consistent_with_the_stored_release(dxc, connect):
    owner = connect("deid_t_analyst")
    rid = owner.execute(REQ, [json.dumps(OPTS), "dxc_rel"]).fetchone()[0]
    release = stored_release(owner, "dxc_rel")
    assert release["sizes"] == [6] and release["items"] == {0: ["250.01"]}
    apart = 0
    for seed in range(6):
        for colocate, target in ((1.0, f"dxc_rel_c{seed}"), (0.5, f"dxc_rel_h{seed}"),
                                 (0.0, f"dxc_rel_r{seed}")):
            assert owner.execute(RECON, ["dxc_rel", target, seed, colocate]).fetchone()[0] == 6
            d = drawn(owner, target)
            assert inconsistencies(release, d, 3) == [], (seed, colocate)
            together = all("250.00" in r for r in d if "250.01" in r)
            if colocate == 1.0:
                assert together, seed       # the split constraint's item code joins it
            apart += colocate == 0.0 and not together
    assert apart > 0                        # the random deal splits them for some seed
    # the same seed and colocate draw the same data set; colocate 0 is deid.reconstruct's
    owner.execute("SELECT deid.reconstruct('dxc_rel', 'dxc_rel_again', 4, colocate => 1)")
    assert drawn(owner, "dxc_rel_again") == drawn(owner, "dxc_rel_c4")
    owner.execute("SELECT deid.reconstruct('dxc_rel', 'dxc_rel_plain', 4)")
    assert drawn(owner, "dxc_rel_plain") == drawn(owner, "dxc_rel_r4")
    logged = dict(dxc.execute("SELECT relation, colocate FROM deid.reconstruction"
                              " WHERE release_id = %s AND seed = 4", [rid]).fetchall())
    assert logged["release.dxc_rel_c4"] == 1.0 and logged["release.dxc_rel_h4"] == 0.5
    assert logged["release.dxc_rel_plain"] == 0.0


def test_bad_colocate_and_a_release_without_policy(dxc, connect):
    owner = connect("deid_t_analyst")
    owner.execute(REQ, [json.dumps(OPTS), "dxc_bad"])
    for value, state in ((-0.5, "22023"), (1.5, "22023"), (float("nan"), "22023"),
                         (None, "22023")):
        e = bad(owner, RECON, ["dxc_bad", "dxc_bad_x", 1, value])
        assert sqlstate_of(e) == state and hint_of(e)
    plain = {k: v for k, v in OPTS.items() if k != "utility"}
    owner.execute(REQ, [json.dumps(plain), "dxc_nopol"])
    e = bad(owner, RECON, ["dxc_nopol", "dxc_nopol_x", 1, 1.0])
    assert sqlstate_of(e) == "22023" and "colocate => 0" in hint_of(e)
    assert owner.execute(RECON, ["dxc_nopol", "dxc_nopol_r", 1, 0.0]).fetchone()[0] == 6
    assert not dxc.execute("SELECT 1 FROM pg_class WHERE relname IN ('dxc_bad_x', 'dxc_nopol_x')"
                           ).fetchone()


def test_colocate_keeps_the_access_rules(dxc, connect):
    """A policy requester (no SELECT) reconstructs its own release with the option, from the
    release only; no other role may, and its refusals name no code."""
    researcher = connect("deid_t_researcher")
    researcher.execute(REQ, [json.dumps(OPTS), "dxc_pol"])
    assert researcher.execute(RECON, ["dxc_pol", "dxc_pol_c1", 1, 1.0]).fetchone()[0] == 6
    assert inconsistencies(stored_release(researcher, "dxc_pol"),
                           drawn(researcher, "dxc_pol_c1"), 3) == []
    for role in ("deid_t_attacker", "deid_t_analyst", "deid_t_reader"):
        e = bad(connect(role), RECON, ["dxc_pol", f"dxc_pol_{role[7:]}", 1, 1.0])
        assert sqlstate_of(e) == "42501" and hint_of(e)
        text = f"{e.value} {hint_of(e)} {getattr(e.value.diag, 'message_detail', '')}"
        assert not any(code in text for code in ("250.0", "401.9"))
    # the source stays out of reach of the policy requester
    e = bad(researcher, "SELECT count(*) FROM dxc.diagnoses", [])
    assert sqlstate_of(e) == "42501"
    assert not dxc.execute("SELECT 1 FROM pg_class WHERE relname LIKE 'dxc\\_pol\\_%'"
                           " AND relname <> 'dxc_pol_c1' AND relname NOT LIKE 'dxc_pol_%chunk'"
                           " AND relname <> 'dxc_pol_cluster'").fetchone()
