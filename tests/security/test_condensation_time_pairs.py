"""Condensation's default survival times ('recode') promise that every released (time, status)
pair is shared by at least k source rows: a time held by fewer rows identifies them.

Attacks, with real login roles:

* the method (a bug, or a patched module in the request's backend) releases one row at a
  time of its own -- a whole month no source row has, inside the observed range, so no range
  check and no rare-record check sees it -- and stores exactly that: the stored rows match
  what the method computed, so only the (time, status) check can refuse it (on 9ffb970 the
  release committed, verified);
* a stored release tampered afterwards so that one row's time stands alone: deid.verify_release
  refuses it by re-counting the stored pairs.
"""
import psycopg
from psycopg import sql
import pytest

from dbfixtures import sqlstate_of

ANALYST = "deid_t_analyst"
TABLE = "public.t_time_pairs"
K = 10
OPTIONS = '{"survival": {"time": "surv_months", "status": "vital"}, "seed": 5}'

# In the request's own backend: after the method's rare-record moves, one released row's time
# becomes an odd month that no released row of its status holds (every source month is even:
# no source row holds it either) -- in the
# release's rows, the verifier's evidence and the stored table alike.
PATCH = """
DO $patch$
from deid.methods.condensation import plugin
original = getattr(plugin, "_unpatched_avoid_copies", plugin.avoid_copies)
plugin._unpatched_avoid_copies = original
def patched(req, res, X, kinds, grains, split):
    original(req, res, X, kinds, grains, split)
    status, time_col = split
    dead = res.synthetic[:, status] == 1
    times = set(res.synthetic[dead, time_col].tolist())
    lo, hi = int(res.synthetic[dead, time_col].min()), int(res.synthetic[dead, time_col].max())
    free = next((t for t in range(lo | 1, hi, 2) if t not in times), hi + 1)
    res.synthetic[int(dead.nonzero()[0][0]), time_col] = free
plugin.avoid_copies = patched
$patch$ LANGUAGE plpython3u
"""


@pytest.fixture(scope="module")
def pairs(admin):
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
        sql.Identifier(*TABLE.split("."))))
    admin.execute(f"""CREATE TABLE {TABLE} (id bigint PRIMARY KEY, age int NOT NULL,
                      stage text NOT NULL, surv_months int NOT NULL, vital int NOT NULL)""")
    admin.execute(f"""INSERT INTO {TABLE}
        SELECT i, 40 + (i * 7919) % 45, (ARRAY['I','II','III','IV'])[1 + i % 4],
               2 * (1 + (i * 13) % 60), CASE WHEN i % 3 = 0 THEN 0 ELSE 1 END
          FROM generate_series(1, 500) i""")
    for c in ("age", "stage"):
        admin.execute("SELECT deid.set_role(%s, %s, 'quasi_identifier')", [TABLE, c])
    for c in ("surv_months", "vital"):
        admin.execute("SELECT deid.set_role(%s, %s, 'sensitive')", [TABLE, c])
    admin.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(
        sql.Identifier(*TABLE.split(".")), sql.Identifier(ANALYST)))
    yield admin
    admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE status = 'committed'"
                  " AND name LIKE 't_time_pairs%'")
    admin.execute("DELETE FROM deid.column_role WHERE relation = %s::regclass", [TABLE])


def request(conn, name):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'condensation', k => %s,"
        " columns => '{age,stage,surv_months,vital}', options => %s, release => %s)",
        [TABLE, K, OPTIONS, name]).fetchall()


def test_a_release_with_a_time_of_its_own_is_refused(pairs, url):
    with psycopg.connect(url, autocommit=True) as patched:
        patched.execute("SELECT deid.usage()")               # loads deid into this backend
        patched.execute(PATCH)
        with pytest.raises(psycopg.Error) as e:
            request(patched, "t_time_pairs_patched")
    assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
    assert "(survival time, vital status) pair" in e.value.diag.message_primary
    assert e.value.diag.message_hint
    assert not pairs.execute("SELECT 1 FROM deid.release WHERE name = 't_time_pairs_patched'"
                             ).fetchone()


def test_verify_release_refuses_a_stored_time_of_its_own(pairs, connect):
    name = "t_time_pairs_stored"
    [row] = request(connect(ANALYST), name)
    assert row[5]
    assert pairs.execute("SELECT deid.verify_release(%s)", [name]).fetchone()[0]["verified"]
    rel = sql.Identifier("deid_release", name)
    with pairs.transaction():
        pairs.execute(sql.SQL("UPDATE {t} SET surv_months = surv_months + 1"
                              " WHERE ctid = (SELECT min(ctid) FROM {t})").format(t=rel))
        with pytest.raises(psycopg.Error) as e:
            pairs.execute("SELECT deid.verify_release(%s)", [name])
        raise psycopg.Rollback()
    assert sqlstate_of(e) == "DE002", e.value.diag.message_primary
    assert "pair" in e.value.diag.message_primary
