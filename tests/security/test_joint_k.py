"""Attack: k per source is not k. A generalization release that is k-anonymous in
every source system separately (002 sec. 2) can be unique over all its quasi-identifiers
together: on this table every region and every occupation is held by 20 rows, but every
(region, occupation) pair by one.

A requester without SELECT (a policy) must get the policy's minimum over ALL released
quasi-identifiers jointly, unless the policy itself allows per-source k; a SELECT holder keeps
per-source k as asked; the log states the joint k of every release; a stored release tampered
so that its joint classes fall below the requirement fails deid.verify_release.
"""
import json

import psycopg
import pytest
from psycopg import sql

from dbfixtures import sqlstate_of

RESEARCHER = "deid_t_researcher"      # a policy, no SELECT
ANALYST = "deid_t_analyst"            # SELECT on the source
ADMIN = "deid_t_admin"                # deid_admin: may run deid.verify_release
TABLE = "public.t_joint"
VALUES = 20                           # regions x occupations, each pair once
MIN_K = 10


@pytest.fixture(scope="module")
def joint(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_joint")
    admin.execute("CREATE TABLE public.t_joint (id int PRIMARY KEY, region text, occupation text,"
                  " dx text)")
    admin.execute("INSERT INTO public.t_joint SELECT i, 'r' || (i / %s), 'o' || (i %% %s),"
                  " 'dx' || (i %% 7) FROM generate_series(0, %s) i",
                  [VALUES, VALUES, VALUES * VALUES - 1])
    for name in ("t_joint_region", "t_joint_occupation"):
        admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchy WHERE name = %s", [name])
    for name, prefix in (("t_joint_region", "r"), ("t_joint_occupation", "o")):
        rows = "\n".join(f"{prefix}{i};{prefix.upper()}{i // 4};*" for i in range(VALUES))
        admin.execute("SELECT deid.load_hierarchy(%s, %s)", [name, rows])
    admin.execute("SELECT deid.set_role(%s, 'region', 'quasi_identifier', 't_joint_region',"
                  " source => 'census')", [TABLE])
    admin.execute("SELECT deid.set_role(%s, 'occupation', 'quasi_identifier', 't_joint_occupation',"
                  " source => 'survey')", [TABLE])
    admin.execute("SELECT deid.set_role(%s, 'dx', 'sensitive')", [TABLE])
    admin.execute("SELECT deid.set_role(%s, 'id', 'identifier')", [TABLE])
    admin.execute(f"GRANT SELECT ON {TABLE} TO {ANALYST}")
    admin.execute("SELECT deid.allow_requests(%s, %s, %s)", [RESEARCHER, TABLE, MIN_K])
    yield admin
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 't_joint%'")
    admin.execute("DELETE FROM deid.policy WHERE relation = 'public.t_joint'::regclass")
    admin.execute("DELETE FROM deid.column_role WHERE relation = 'public.t_joint'::regclass")


def request(conn, name, k=MIN_K, options=None):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'generalization', k => %s,"
        " columns => '{region,occupation,dx}', options => %s, release => %s)",
        [TABLE, k, json.dumps(options or {}), name]).fetchone()


def class_sizes(conn, name, cols):
    """Cardinalities of the release grouped by `cols` (SQL GROUP BY, not deid's code)."""
    return [r[0] for r in conn.execute(
        sql.SQL("SELECT count(*) FROM {} GROUP BY {}").format(
            sql.Identifier("release", name), sql.SQL(", ").join(map(sql.Identifier, cols))))]


def logged(conn, name):
    return conn.execute("SELECT metrics, parameters FROM deid.release WHERE name = %s"
                        " AND status = 'committed'", [name]).fetchone()


def test_the_table_is_k_per_source_but_unique_jointly(joint, connect):
    """The premise, on a SELECT holder's release: per-source k as asked, joint k = 1 -- and
    the log says so."""
    conn = connect(ANALYST)
    assert request(conn, "t_joint_select")[5] is True
    assert min(class_sizes(joint, "t_joint_select", ["region"])) >= MIN_K
    assert min(class_sizes(joint, "t_joint_select", ["occupation"])) >= MIN_K
    both = class_sizes(joint, "t_joint_select", ["region", "occupation"])
    assert min(both) == 1 and len(both) == VALUES * VALUES
    metrics, params = logged(joint, "t_joint_select")
    assert metrics["joint_k"] == 1 and metrics["joint_classes"] == VALUES * VALUES
    assert metrics["joint_k_required"] is None and "joint" not in metrics["verification"]
    assert params["authorized_via"]["via"] == "select"


@pytest.mark.parametrize("search", ["greedy", "optimal"])
def test_a_policy_release_holds_the_minimum_jointly(joint, connect, search):
    conn = connect(RESEARCHER)
    name = f"t_joint_policy_{search}"
    assert request(conn, name, options={"search": search})[5] is True
    both = class_sizes(joint, name, ["region", "occupation"])
    assert min(both) >= MIN_K and sum(both) == VALUES * VALUES
    metrics, params = logged(joint, name)
    assert metrics["joint_k_required"] == MIN_K and metrics["joint_k"] == min(both)
    assert metrics["joint_classes"] == len(both)
    assert metrics["verification"]["joint"] == {"classes": len(both), "min_size": min(both),
                                                "required": MIN_K}
    assert params["authorized_via"]["via"] == "policy"
    # a release the requester can read: the view over the stored table
    assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
        sql.Identifier("release", name))).fetchone()[0] == VALUES * VALUES


def test_a_policy_request_that_cannot_reach_joint_k_is_refused(joint, connect):
    """Limits that keep a joint class below the minimum: the method's refusal, with a hint and
    no detail for the policy requester; nothing is written. The SELECT holder's same request
    (per-source k) is released."""
    options = {"limits": {"region": 0, "occupation": 0}}
    with pytest.raises(psycopg.Error) as e:
        request(connect(RESEARCHER), "t_joint_limited", options=options)
    assert sqlstate_of(e) == "DE001"
    assert e.value.diag.message_hint and not e.value.diag.message_detail
    assert not joint.execute("SELECT 1 FROM pg_class WHERE relname = 't_joint_limited'").fetchone()
    assert request(connect(ANALYST), "t_joint_limited", options=options)[5] is True
    joint.execute("SELECT deid.drop_release('t_joint_limited')")


def test_a_policy_that_allows_per_source_k(joint, connect):
    joint.execute("SELECT deid.allow_requests(%s, %s, %s, per_source_k => true)",
                  [RESEARCHER, TABLE, MIN_K])
    try:
        assert request(connect(RESEARCHER), "t_joint_per_source")[5] is True
        assert min(class_sizes(joint, "t_joint_per_source", ["region"])) >= MIN_K
        assert min(class_sizes(joint, "t_joint_per_source", ["occupation"])) >= MIN_K
        assert min(class_sizes(joint, "t_joint_per_source", ["region", "occupation"])) == 1
        metrics, params = logged(joint, "t_joint_per_source")
        assert params["authorized_via"]["per_source_k"] is True
        assert metrics["joint_k_required"] is None and metrics["joint_k"] == 1
    finally:
        joint.execute("SELECT deid.allow_requests(%s, %s, %s)", [RESEARCHER, TABLE, MIN_K])


def test_tampering_that_breaks_joint_k_fails_verification(joint, connect):
    """Swap occupations between two joint classes of a stored policy release: every region and
    every occupation keeps its rows (the per-source classes, and their catalog, are unchanged),
    but one joint class shrinks to a single row. deid.verify_release re-checks joint k."""
    name = "t_joint_tamper"
    assert request(connect(RESEARCHER), name)[5] is True
    admin = connect(ADMIN)
    assert admin.execute("SELECT deid.verify_release(%s)", [name]).fetchone()[0]["verified"]
    (a1, b1, c1), (a2, b2, c2) = joint.execute(sql.SQL(
        "SELECT region, occupation, count(*) FROM {} GROUP BY 1, 2 ORDER BY 1, 2").format(
            sql.Identifier("deid_release", name))).fetchall()[::VALUES // 4 + 1][:2]
    assert a1 != a2 and b1 != b2
    moved = min(c1, c2) - 1
    stored = sql.Identifier("deid_release", name)
    for (a, b), to in (((a1, b1), b2), ((a2, b2), b1)):
        joint.execute(sql.SQL(
            "UPDATE {t} SET occupation = {to} WHERE ctid IN (SELECT ctid FROM {t}"
            " WHERE region = {a} AND occupation = {b} LIMIT {n})").format(
                t=stored, to=sql.Literal(to), a=sql.Literal(a), b=sql.Literal(b),
                n=sql.Literal(moved)))
    assert min(class_sizes(joint, name, ["region", "occupation"])) == 1
    assert min(class_sizes(joint, name, ["region"])) >= MIN_K
    with pytest.raises(psycopg.Error) as e:             # the digest of the stored table
        admin.execute("SELECT deid.verify_release(%s)", [name])
    assert sqlstate_of(e) == "DE002" and e.value.diag.message_hint
    # and the re-derivation alone (a release logged without digests) checks joint k
    with pytest.raises(psycopg.Error) as e, joint.transaction():
        joint.execute("ALTER TABLE deid.release DISABLE TRIGGER release_append_only")
        joint.execute("UPDATE deid.release SET metrics = metrics - 'digests' WHERE name = %s",
                      [name])
        joint.execute("ALTER TABLE deid.release ENABLE TRIGGER release_append_only")
        joint.execute("SELECT deid.verify_release(%s)", [name])
    assert sqlstate_of(e) == "DE002" and "jointly" in str(e.value), str(e.value)
    assert e.value.diag.message_hint
