"""Install deid's Python package for one version, switched to in one step.

    python3 install_python.py PYDIR SOURCE SQLGLOT_VERSION

A running server imports deid's modules lazily, so the files of the version it runs must never
be half there. Each install is a build of its own, written aside and then switched to with one
rename; nothing a backend may still import is deleted:

    PYDIR/builds/<id>/          deid/, the vendored sqlglot, their bytecode, .in-use
    PYDIR/current -> builds/<id>

The SQL of the version (the ``#@BOOT`` preamble, extension/build_sql.py) reads ``current``
once per backend and keeps that build for the backend's life, holding a shared lock on its
``.in-use``. An older build is removed only when an exclusive lock on its ``.in-use`` is
granted at once (no backend holds it); otherwise it stays until a later install finds it unused.

The vendored sqlglot is linked from another build that has the same version (this version's
current one, another version's, or a directory of the layout without builds) before it is
downloaded; the bytecode is compiled here, as the backend cannot write into these directories.
"""
import fcntl
import os
import secrets
import shutil
import subprocess
import sys
import time

LOCK = ".in-use"


def _link_or_copy(src, dst):
    """Builds are never changed once switched to (bytecode is replaced by rename), so a file
    may be shared between builds as a hard link."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _copy_tree(src, dst, link):
    """LINK: share the files (another build's, never the checkout's: an editor may write a
    source file in place)."""
    shutil.copytree(src, dst, copy_function=_link_or_copy if link else shutil.copy2,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _sqlglot_donors(pydir, version):
    """Directories that hold sqlglot VERSION, best first."""
    family = os.path.dirname(pydir.rstrip("/"))
    homes = [pydir] + sorted(os.path.join(family, d) for d in os.listdir(family)
                             if d.startswith("python") and os.path.join(family, d) != pydir)
    for home in homes:
        for place in (os.path.join(home, "current"), home):
            if os.path.isfile(os.path.join(place, f"sqlglot-{version}.dist-info", "METADATA")) \
                    and os.path.isdir(os.path.join(place, "sqlglot")):
                yield os.path.realpath(place)


def _vendor_sqlglot(pydir, stage, version):
    for donor in _sqlglot_donors(pydir, version):
        for part in ("sqlglot", f"sqlglot-{version}.dist-info"):
            _copy_tree(os.path.join(donor, part), os.path.join(stage, part), link=True)
        print(f"sqlglot {version} linked from {donor}")
        return
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-deps", "--no-compile", "--upgrade", "--break-system-packages",
                    "--root-user-action=ignore", "--target", stage, f"sqlglot=={version}"], check=True)


def _compile(stage, final):
    """Bytecode for the server's Python (checked-hash: used only if it matches its source),
    recorded under the build's final path."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode",
                    "checked-hash", "-s", stage, "-p", final, stage], check=True, stdout=subprocess.DEVNULL)


def _readable(top):
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if not os.path.islink(path):
                os.chmod(path, mode | 0o444 | (0o111 if mode & 0o100 or name in dirs else 0))
    os.chmod(top, 0o755)


def _switch(pydir, build_id):
    """Point PYDIR/current at builds/BUILD_ID in one rename (a relative link: DESTDIR-safe)."""
    tmp = os.path.join(pydir, f".current-{build_id}")
    os.symlink(os.path.join("builds", build_id), tmp)
    os.replace(tmp, os.path.join(pydir, "current"))


def _unused(build):
    """An open descriptor holding the exclusive lock of BUILD, or None if a backend uses it."""
    try:
        fd = os.open(os.path.join(build, LOCK), os.O_RDONLY)
    except FileNotFoundError:
        return None           # not a complete build: left alone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError:
        os.close(fd)
        return None


def _prune(builds, keep):
    """Remove the builds no backend holds (and what an interrupted install left behind)."""
    for name in sorted(os.listdir(builds)):
        path = os.path.join(builds, name)
        if name == keep:
            continue
        if name.startswith("."):                  # a stage or trash of an interrupted install
            shutil.rmtree(path, ignore_errors=True)
            continue
        fd = _unused(path)
        if fd is None:
            print(f"build {name} kept: a backend still uses it")
            continue
        try:
            trash = os.path.join(builds, f".trash-{name}")
            os.rename(path, trash)
            shutil.rmtree(trash, ignore_errors=True)
        finally:
            os.close(fd)


def install(pydir, source, sqlglot_version):
    builds = os.path.join(pydir, "builds")
    os.makedirs(builds, exist_ok=True)
    os.chmod(pydir, 0o755)
    os.chmod(builds, 0o755)
    with open(os.path.join(pydir, ".install-lock"), "a") as serial:
        fcntl.flock(serial, fcntl.LOCK_EX)       # one install of this version at a time
        build_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{secrets.token_hex(4)}"
        stage, final = os.path.join(builds, f".stage-{build_id}"), os.path.join(builds, build_id)
        _copy_tree(source, os.path.join(stage, "deid"), link=False)
        _vendor_sqlglot(pydir, stage, sqlglot_version)
        _compile(stage, final)
        open(os.path.join(stage, LOCK), "w").close()
        _readable(stage)
        os.rename(stage, final)
        _switch(pydir, build_id)
        _prune(builds, build_id)
    print(f"deid's Python installed in {final}")


if __name__ == "__main__":
    install(*sys.argv[1:4])
