"""PGXN distribution: META.json agrees with the extension, and `make dist` packs the
committed tree as deid-<version>.zip (the PGXN convention: git archive with a versioned prefix)."""
import json
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
REQUIRED = ["name", "version", "abstract", "maintainer", "license", "provides", "meta-spec"]


def meta():
    return json.loads((ROOT / "META.json").read_text())


def extversion():
    return re.search(r"^EXTVERSION\s*=\s*(\S+)", (ROOT / "extension" / "Makefile").read_text(),
                     re.M).group(1)


def default_version():
    return re.search(r"^default_version\s*=\s*'([^']+)'",
                     (ROOT / "extension" / "deid.control").read_text(), re.M).group(1)


def test_meta_has_the_required_keys():
    m = meta()
    assert [k for k in REQUIRED if k not in m] == []
    assert m["name"] == "deid" and m["meta-spec"]["version"] == "1.0.0"
    assert m["release_status"] in ("stable", "testing", "unstable")
    assert m["prereqs"]["runtime"]["requires"]["PostgreSQL"] == "15.0.0"
    assert "plpython3u" in m["prereqs"]["runtime"]["requires"]


def test_meta_version_is_the_extensions():
    m = meta()
    assert m["version"] == extversion() == default_version()
    assert m["provides"]["deid"]["version"] == m["version"]
    client = (ROOT / "client" / "pyproject.toml").read_text()     # the `deid` command's package
    assert re.search(r'^version = "([^"]+)"', client, re.M).group(1) == m["version"]


def test_meta_provides_files_exist():
    for name, ext in meta()["provides"].items():
        assert (ROOT / ext["file"]).is_file(), (name, ext["file"])
        if "docfile" in ext:
            assert (ROOT / ext["docfile"]).is_file(), (name, ext["docfile"])


@pytest.mark.skipif(not shutil.which("git") or not shutil.which("make")
                    or not (ROOT / ".git").exists(), reason="needs git, make and a checkout")
def test_make_dist_names_the_zip():
    out = subprocess.run(["make", "-s", "-n", "dist", "PG_CONFIG=true"], cwd=ROOT, text=True,
                         capture_output=True, check=True).stdout
    v = extversion()
    assert f"git archive --format zip --prefix=deid-{v}/ -o deid-{v}.zip HEAD" in out
