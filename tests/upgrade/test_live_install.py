"""An install under a live server breaks no request.

Packages are installed and upgraded under running servers (`make install`, PGXN, a package
manager). Several sessions ask for small releases in a loop (some open a new backend for every
request, so that each imports deid afresh; others keep one backend and turn through the methods,
so that modules are imported lazily while the files change) while `make install` runs five times:
twice the current version over itself, then a test version (the current tree with its version
raised, built like tests/upgrade builds a version) with ALTER EXTENSION deid UPDATE in the middle of
the load, then that test version twice more over itself. Every request must succeed: a version's
files appear at once, and a backend keeps working on the build it loaded.

Afterwards the test version's files are removed and the current control file put back, so the
rest of the suite runs on the current version."""
import os
import pathlib
import re
import shutil
import subprocess
import threading
import time

import psycopg
import pytest

from sample_catalog import ROOT, db_url, recreate

DB = "deid_t_live_install"
WORKERS_FRESH = 2        # a new backend for every request
WORKERS_KEPT = 2         # one backend, the methods in turn
REQUESTS = {
    "generalization": "SELECT release_id FROM deid.anonymize_request('registry.patients',"
                      " 'generalization', k => 5, columns => '{age,sex}', release => %s)",
    "anatomy": "SELECT release_id FROM deid.anonymize_request('registry.patients', 'anatomy',"
               " k => 5, l => 2, columns => '{age,sex,diagnosis}', release => %s)",
}


def _pg_config():
    bindir = os.environ.get("PG_BINDIR") or subprocess.check_output(
        ["pg_config", "--bindir"], text=True).strip()
    return os.path.join(bindir, "pg_config")


def _sharedir():
    return pathlib.Path(subprocess.check_output([_pg_config(), "--sharedir"], text=True).strip())


def _current_version():
    return re.search(r"default_version = '([^']+)'", (ROOT / "extension/deid.control").read_text())[1]


def _test_version(current):
    major, minor, patch = current.split(".")
    return f"{major}.{minor}.{int(patch) + 90}"


def _make_install(extension_dir):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "DESTDIR", "EXTVERSION")}
    out = subprocess.run(["make", "-s", "-C", str(extension_dir), "install", f"PG_CONFIG={_pg_config()}"],
                         env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def _build_test_version(tree, current, test):
    """The working tree's extension, SQL and Python under TREE, as version TEST whose only
    released predecessor is CURRENT (so its install adds deid--CURRENT--TEST.sql and nothing
    else of the chain)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "deid--*.sql", "*.tmp")
    for part in ("extension", "sql", "python_udfs"):
        shutil.copytree(ROOT / part, tree / part, ignore=ignore)
    makefile = tree / "extension/Makefile"
    makefile.write_text(re.sub(r"^EXTVERSION = \S+$", f"EXTVERSION = {test}", makefile.read_text(), flags=re.M))
    control = tree / "extension/deid.control"
    control.write_text(control.read_text().replace(f"'{current}'", f"'{test}'"))
    (tree / "extension/versions.txt").write_text(f"{current} 0000000000000000000000000000000000000000\n")
    (tree / "sql/upgrade" / test).mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="module")
def live_db(url, admin):
    """A database of its own with the sample, classified; yields its URL."""
    recreate(admin, DB)
    u = db_url(url, DB)
    with psycopg.connect(u, autocommit=True) as su:
        su.execute("CREATE EXTENSION deid CASCADE")
        su.execute((ROOT / "scripts" / "sample_patients.sql").read_text())
        su.execute("SELECT registry.generate_patients(400, 0.5)")
        su.execute("SELECT deid.interval_hierarchy('age_10y', 0, 120, '{10,20,40}')")
        su.execute("SELECT deid.load_hierarchy('sex', E'F;*\\nM;*')")
        su.execute("SELECT deid.set_role('registry.patients', 'age', 'quasi_identifier', 'age_10y',"
                   " source => 'registry')")
        su.execute("SELECT deid.set_role('registry.patients', 'sex', 'quasi_identifier', 'sex',"
                   " source => 'registry')")
        su.execute("SELECT deid.set_role('registry.patients', 'diagnosis', 'sensitive')")
    yield u
    admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")


class Load:
    """Sessions that ask for releases until stopped; counts requests and keeps failures."""

    def __init__(self, url):
        self.url, self.stop, self.lock = url, threading.Event(), threading.Lock()
        self.done, self.failures, self.threads = 0, [], []
        # a worker holds its own lock during a request; quiet() takes them all
        self.busy = [threading.Lock() for _ in range(WORKERS_FRESH + WORKERS_KEPT)]

    def wait_for(self, n, timeout=120):
        """Until the sessions have finished n more requests: each install below happens while
        requests run, on a slow machine as on a fast one (a fixed pause could see none)."""
        with self.lock:
            target = self.done + n
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.done >= target:
                    return
            time.sleep(0.05)
        raise AssertionError(f"the sessions finished fewer than {n} requests in {timeout} s")

    def quiet(self):
        """A moment without a request in flight (the sessions stay open)."""
        for lock in self.busy:
            lock.acquire()
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for lock in self.busy:
            lock.release()

    def _one(self, conn, method, name, w):
        with self.busy[w]:
            self._request(conn, method, name)

    def _request(self, conn, method, name):
        try:
            conn.execute(REQUESTS[method], [name])
            conn.execute("SELECT deid.drop_release(%s)", [name])
            with self.lock:
                self.done += 1
        except psycopg.Error as e:
            with self.lock:
                self.done += 1
                self.failures.append((method, e.diag.sqlstate, e.diag.message_primary, e.diag.message_hint))

    def _fresh(self, w):
        i = 0
        while not self.stop.is_set():
            with psycopg.connect(self.url, autocommit=True) as conn:
                self._one(conn, "generalization", f"live_f{w}_{i}", w)
            i += 1

    def _kept(self, w):
        methods, i = sorted(REQUESTS), 0
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                self._one(conn, methods[i % len(methods)], f"live_k{w}_{i}", WORKERS_FRESH + w)
                i += 1

    def start(self):
        self.threads = ([threading.Thread(target=self._fresh, args=(w,)) for w in range(WORKERS_FRESH)]
                        + [threading.Thread(target=self._kept, args=(w,)) for w in range(WORKERS_KEPT)])
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)


def _update(url, version, load):
    """ALTER EXTENSION deid UPDATE between two requests (it is DDL: it re-asserts the owner of
    deid's tables, and would deadlock with a request in flight); every session stays open, so
    the backends that loaded the old version's build go on with the new one's functions."""
    with load.quiet(), psycopg.connect(url, autocommit=True) as su:
        su.execute(f"ALTER EXTENSION deid UPDATE TO '{version}'")


def test_installs_under_load_fail_no_request(live_db, tmp_path):
    current = _current_version()
    test = _test_version(current)
    tree = tmp_path / f"deid-{test}"
    _build_test_version(tree, current, test)
    share = _sharedir()
    load = Load(live_db)
    load.start()
    try:
        load.wait_for(WORKERS_FRESH + WORKERS_KEPT)
        for _ in range(2):
            _make_install(ROOT / "extension")
            load.wait_for(WORKERS_FRESH + WORKERS_KEPT)
        _make_install(tree / "extension")
        _update(live_db, test, load)
        load.wait_for(WORKERS_FRESH + WORKERS_KEPT)
        for _ in range(2):
            _make_install(tree / "extension")
            load.wait_for(WORKERS_FRESH + WORKERS_KEPT)
    finally:
        load.finish()
        shutil.copy(ROOT / "extension/deid.control", share / "extension/deid.control")
    with psycopg.connect(live_db, autocommit=True) as su:
        assert su.execute("SELECT extversion FROM pg_extension WHERE extname = 'deid'").fetchone() == (test,)
        su.execute("SET deid.drop_with_releases = on")
        su.execute("DROP EXTENSION deid CASCADE")
    for leftover in [share / f"extension/deid--{test}.sql", share / f"extension/deid--{current}--{test}.sql"]:
        leftover.unlink(missing_ok=True)
    shutil.rmtree(share / f"deid/python-{test}", ignore_errors=True)
    print(f"live install: {load.done} requests, {len(load.failures)} failed:"
          f" {sorted({f[1:3] for f in load.failures})}")
    assert load.done > 20, "the load made too few requests to tell"
    assert not load.failures, f"{len(load.failures)} of {load.done} requests failed: {load.failures[:5]}"
