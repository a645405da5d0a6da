"""The four demo releases, made with fixed seeds, are bit-identical to the ones recorded in
tests/golden/fingerprints/demo_releases.json: a refactoring of the request's path (the pipeline,
the distributed path beside it, the request's value, the methods' long functions) must not
change one stored byte of a release.

The test runs scripts/demo.sql (the Makefile's DEMO_RELEASES: anatomy, generalization,
condensation, disassociation, each with seed 7 over the demo's generated sample) in a database
of its own, then fingerprints every relation of each committed release: its row count and an
md5 over its rows as text, sorted; and its log row (seed, parameters, metrics). Timings and
randomly salted digests are not part of a fingerprint.

After a change meant to alter releases, record them again with DEID_GOLDEN_UPDATE=1 (and say
why in the commit).
"""
import hashlib
import json
import os
import subprocess

import psycopg
import pytest

from dbfixtures import ROOT

EXPECTED = ROOT / "tests" / "golden" / "fingerprints" / "demo_releases.json"
DEMO_RELEASES = ("demo_anatomy", "demo_generalized", "demo_synthetic", "demo_dx")
DATABASE = "deid_fingerprints"


def _release_names_of_makefile():
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("DEMO_RELEASES"):
            return tuple(line.split("=", 1)[1].split())
    raise AssertionError("the Makefile names no DEMO_RELEASES")


@pytest.fixture(scope="module")
def demo_url(url, admin):
    admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    admin.execute(f"CREATE DATABASE {DATABASE}")
    demo = url.rsplit("/", 1)[0] + "/" + DATABASE
    try:
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", demo, "-f", "scripts/demo.sql"],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        yield demo
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


# what a clock measured, and the verifier's stored digest (a sum of row hashes salted with a
# random seed of its own, so that no one can forge a table with the same sum)
_UNREPRODUCIBLE = ("seconds", "stored_digest")


def _reproducible(value):
    """The metrics without the keys of _UNREPRODUCIBLE."""
    if isinstance(value, dict):
        return {k: _reproducible(v) for k, v in value.items()
                if not any(u in k for u in _UNREPRODUCIBLE)}
    if isinstance(value, list):
        return [_reproducible(v) for v in value]
    return value


def fingerprint(conn, name):
    """{relation: [rows, md5 of its rows as text, sorted]} of the committed release `name`,
    and under "log" an md5 of its log row's seed, parameters and reproducible metrics."""
    relations, seed, parameters, metrics = conn.execute(
        "SELECT relations, seed, parameters, metrics FROM deid.release WHERE name = %s "
        "AND status = 'committed'", [name]).fetchone()
    log = json.dumps([seed, parameters, _reproducible(metrics)], sort_keys=True)
    out = {"log": hashlib.md5(log.encode()).hexdigest()}
    for rel in relations:
        rows, digest = conn.execute(
            f"SELECT count(*), md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) "
            f"FROM {rel} t").fetchone()
        out[rel] = [rows, digest]
    return out


def test_the_demo_names_the_four_releases():
    assert _release_names_of_makefile() == DEMO_RELEASES


def test_demo_releases_are_bit_identical(demo_url):
    with psycopg.connect(demo_url, autocommit=True) as conn:
        got = {name: fingerprint(conn, name) for name in DEMO_RELEASES}
    if os.environ.get("DEID_GOLDEN_UPDATE"):
        EXPECTED.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    expected = json.loads(EXPECTED.read_text())
    for name in DEMO_RELEASES:
        assert got[name] == expected[name], f"release {name} changed"
