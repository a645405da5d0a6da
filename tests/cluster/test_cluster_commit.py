"""One release, all or nothing, over nodes that fail: a node down at the start, a node killed
(kill -9) mid-release, the coordinator killed between the nodes' parts and its own log row, a
part tampered before the coordinator's check. The failures mid-release are placed with the
coordinator's test pause (deid.distributed_test_pause): every part stored, none checked, nothing
logged, the request waiting on an advisory lock this test holds (seen in pg_stat_activity)."""
import os
import signal
import threading
import time

import psycopg
import pytest

from .conftest import MEMBERS, member_url, orphan_runs, shard, wait_ready

ANATOMY = ("SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 10, l => 2,"
           " columns => '{age,sex,race,zip,diagnosis}', options => '{\"seed\": 5}', release => %s)")
PAUSE_KEY = 17


def superuser(who):
    return psycopg.connect(member_url(who), autocommit=True)


def stored(name):
    """Where release `name` has a live part or log row: [(member, what)]."""
    found = []
    for m in MEMBERS:
        with superuser(m) as c:
            if c.execute("SELECT 1 FROM deid.release WHERE name = %s AND status = 'committed'",
                         [name]).fetchone():
                found.append((m, "part"))
            if c.execute("SELECT 1 FROM deid.distributed_release WHERE name = %s", [name]).fetchone():
                found.append((m, "log"))
            if c.execute("SELECT 1 FROM pg_class WHERE relname LIKE %s AND relnamespace IN"
                         " ('release'::regnamespace, 'deid_release'::regnamespace)",
                         [name + "%"]).fetchone():
                found.append((m, "relation"))
    return found


def kill_node(who, timeout=60):
    """kill -9 the member's postmaster; return once the process is gone (reaped), so that the
    member can be started again."""
    pid = int(shard("pid", who))
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"postmaster {pid} of {who} is still there")


class Paused:
    """The analyst's request on the coordinator, run in a thread and held after every node
    stored its part (the test pause); .release() lets it go on, .join() its outcome."""

    def __init__(self, name):
        self.holder = superuser("coord")
        self.holder.execute("SELECT pg_advisory_lock(hashtext('deid.test'), %s)", [PAUSE_KEY])
        self.error, self.row, self.pid = None, None, None
        self.thread = threading.Thread(target=self._run, args=(name,))
        self.thread.start()
        try:
            self.pid = self._wait_paused()
        except BaseException:
            self.release()
            self.join()
            raise

    def _run(self, name):
        try:
            with psycopg.connect(member_url("coord"), user="deid_t_analyst", autocommit=True) as c:
                c.execute("SELECT set_config('deid.distributed_test_pause', %s, false)",
                          [str(PAUSE_KEY)])
                self.row = c.execute(ANATOMY, [name]).fetchone()
        except psycopg.Error as e:
            self.error = e

    def _wait_paused(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = self.holder.execute(
                "SELECT pid FROM pg_stat_activity WHERE usename = 'deid_t_analyst'"
                " AND wait_event_type = 'Lock' AND wait_event = 'advisory'").fetchone()
            if row:
                return row[0]
            if not self.thread.is_alive():
                raise AssertionError(f"the request ended before its pause: {self.error}")
            time.sleep(0.05)
        raise AssertionError("the request never reached its pause")

    def release(self):
        try:
            self.holder.execute("SELECT pg_advisory_unlock(hashtext('deid.test'), %s)", [PAUSE_KEY])
        except psycopg.Error:
            pass                      # the coordinator itself went down
        self.holder.close()

    def join(self):
        self.thread.join(timeout=300)
        assert not self.thread.is_alive()
        return self.error


def test_a_node_down_at_the_start_stores_nothing_anywhere(wh):
    shard("member", "node1", "stop")
    try:
        with pytest.raises(psycopg.Error) as e:
            wh.connect("coord", "deid_t_analyst").execute(ANATOMY, ["cm_down"])
        assert e.value.diag.sqlstate == "08006" and e.value.diag.message_hint
        assert "host=" not in e.value.diag.message_primary
    finally:
        shard("member", "node1", "start")
        wait_ready("node1")
    with superuser("node0") as c:         # not even a dropped part: nothing was stored at all
        assert not c.execute("SELECT 1 FROM deid.release WHERE name = 'cm_down'").fetchall()
    assert stored("cm_down") == []


def test_a_node_killed_mid_release_leaves_nothing_after_cleanup(wh):
    p = Paused("cm_kill")
    try:
        runs = orphan_runs()
        assert all(len(r) == 1 for r in runs.values()) and runs["node0"] == runs["node1"]
        kill_node("node1")
    finally:
        p.release()
    error = p.join()
    assert error is not None and error.diag.message_hint
    shard("member", "node1", "start")
    wait_ready("node1")
    assert orphan_runs()["node0"] == []            # the reachable node's part went at once
    assert orphan_runs()["node1"] == runs["node1"]  # the killed node's part is still pending ...
    analyst = wh.connect("coord", "deid_t_analyst")
    assert analyst.execute("SELECT deid.cleanup_distributed()").fetchone()[0] == 1
    assert orphan_runs() == {"node0": [], "node1": []}   # ... until the cleanup
    assert stored("cm_kill") == []


def test_the_coordinator_killed_before_its_log_row_is_cleaned_by_the_next_request(wh):
    p = Paused("cm_coord")
    runs = orphan_runs()
    assert all(len(r) == 1 for r in runs.values())
    os.kill(p.pid, signal.SIGKILL)         # the coordinator's backend: the server restarts
    p.release()
    assert p.join() is not None
    wait_ready("coord")
    assert orphan_runs() == runs          # parts of a run that neither committed nor runs
    with psycopg.connect(member_url("coord"), user="deid_t_analyst", autocommit=True) as c:
        row = c.execute(ANATOMY, ["cm_coord"]).fetchone()     # the next request cleans them
    assert row[-1] is True
    left = orphan_runs()
    assert not set(runs["node0"]) & set(left["node0"]) and not set(runs["node1"]) & set(left["node1"])
    assert sorted(stored("cm_coord")) == [("coord", "log"), ("coord", "relation"),
                                          ("node0", "part"), ("node0", "relation"),
                                          ("node1", "part"), ("node1", "relation")]


def tampered(name, *statements):
    """Run `name` paused before the coordinator's check, change its part on node0 as a
    superuser (each statement gets the part's release id as its parameters), then let it go:
    refused (DE002) and removed everywhere."""
    p = Paused(name)
    try:
        with superuser("node0") as c:
            rid = c.execute("SELECT release_id FROM deid.release WHERE name = %s"
                            " AND status = 'committed'", [name]).fetchone()[0]
            for statement in statements:
                c.execute(statement, [rid] * statement.count("%s"))
    finally:
        p.release()
    error = p.join()
    assert error is not None and error.diag.sqlstate == "DE002" and error.diag.message_hint
    assert orphan_runs() == {"node0": [], "node1": []}
    assert stored(name) == []


def test_a_part_tampered_before_the_coordinators_check_is_refused_and_removed(wh):
    tampered("cm_tamper", "UPDATE deid_release.cm_tamper_qit SET age = age + 1"
                          " WHERE ctid = (SELECT min(ctid) FROM deid_release.cm_tamper_qit)")


def test_a_parts_catalog_rows_tampered_before_the_coordinators_check_are_refused(wh):
    """The check compares digests only: they cover the part's rows in deid's artefact catalogs
    (its RID sets here), not only its tables."""
    tampered("cm_tamper_rids",
             "UPDATE deid.rid_set SET chunk = chunk + 1000000 WHERE release_id = %s"
             " AND ctid = (SELECT min(ctid) FROM deid.rid_set WHERE release_id = %s)")
