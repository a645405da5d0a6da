"""deid._copy_in, the one function that reads server files (as deid_loader): it loads only deid's
own temporary files into deid's own tables -- in binary COPY format, or in COPY's text format
when the file's name ends in ".text" (deid's images of dictionary text, copytext). The format
is one of two fixed words chosen by that suffix, never text taken from the path, and every
other file name is refused before a byte is read."""
import os
import shutil
import tempfile
import threading

import numpy as np
import psycopg
import pytest

from dbfixtures import sqlstate_of
from deid.write import copybin, copytext

SPECIAL = ["plain", "tab\there", "back\\slash", "", None, "new\nline", "\\N", "cr\r", "\\.", "Zürich"]


@pytest.fixture
def target(admin):
    admin.execute("DROP TABLE IF EXISTS deid_release.t_copy_in")
    admin.execute("CREATE TABLE deid_release.t_copy_in (a text, b text)")
    admin.execute("ALTER TABLE deid_release.t_copy_in OWNER TO deid_owner")
    yield "deid_release.t_copy_in"
    admin.execute("RESET ROLE")
    admin.execute("DROP TABLE IF EXISTS deid_release.t_copy_in")


def tmp_dir(admin):
    data = admin.execute("SHOW data_directory").fetchone()[0]
    path = os.path.join(data, "base", "pgsql_tmp")
    if not os.path.isdir(path):
        os.makedirs(path, mode=0o700)
        st = os.stat(data)
        os.chown(path, st.st_uid, st.st_gid)
    return path


def private_file(admin, name, data):
    path = os.path.join(tmp_dir(admin), name)
    with open(path, "wb") as f:
        f.write(data)
    st = os.stat(os.path.dirname(path))
    os.chown(path, st.st_uid, st.st_gid)
    os.chmod(path, 0o600)
    return path


def copy_in(admin, target, path, columns=("a", "b")):
    admin.execute("SET ROLE deid_owner")
    try:
        return admin.execute("SELECT deid._copy_in(%s::regclass, %s, %s)",
                             [target, list(columns), path]).fetchone()[0]
    finally:
        admin.execute("RESET ROLE")


def test_text_image_roundtrip(admin, target):
    rng = np.random.default_rng(3)
    fields = [copybin.Text(rng.integers(0, len(SPECIAL) + 1, 400), SPECIAL),
              copybin.Text(rng.integers(0, 3, 400), ["x", "\t", "\\"])]
    path = private_file(admin, f"pgsql_tmpdeid{os.getpid()}.7.text", copytext.records(fields))
    try:
        assert copy_in(admin, target, path) == 400
    finally:
        os.unlink(path)
    stored = admin.execute("SELECT a, b FROM deid_release.t_copy_in").fetchall()
    want = [tuple((f.dictionary + [None])[min(c, len(f.dictionary))] for f, c in zip(fields, row))
            for row in zip(*[f.codes for f in fields])]
    assert sorted(stored, key=repr) == sorted(want, key=repr)


def test_binary_image_still_loads(admin, target):
    fields = [copybin.Text(np.array([0, 1, 2]), ["a", "b\tc"]), copybin.Text(np.array([0, 0, 0]), ["z"])]
    path = private_file(admin, f"pgsql_tmpdeid{os.getpid()}.8", copybin.records(fields))
    try:
        assert copy_in(admin, target, path) == 3
    finally:
        os.unlink(path)
    assert sorted(admin.execute("SELECT a, b FROM deid_release.t_copy_in").fetchall(), key=repr) == \
        sorted([("a", "z"), ("b\tc", "z"), (None, "z")], key=repr)


@pytest.mark.parametrize("suffix", [".csv", ".txt", ".TEXT", ".textx", ".text;", ".text.text",
                                    " .text", ".text\n", ".text' PROGRAM 'id", ".binary",
                                    ".text/../../../../etc/passwd"])
def test_other_file_names_are_refused(admin, target, suffix):
    """A name that is not deid's (binary or ".text") is refused before any file is opened."""
    path = os.path.join(tmp_dir(admin), f"pgsql_tmpdeid{os.getpid()}.9{suffix}")
    with pytest.raises(psycopg.Error) as e:
        copy_in(admin, target, path)
    assert sqlstate_of(e) == "42501"


@pytest.mark.parametrize("path", ["/etc/passwd.text", "/tmp/pgsql_tmpdeid1.2.text",
                                  "{tmp}/../../../../tmp/base/pgsql_tmp/pgsql_tmpdeid1.2.text"])
def test_text_files_outside_deid_s_directory_are_refused(admin, target, path):
    with pytest.raises(psycopg.Error) as e:
        copy_in(admin, target, path.format(tmp=tmp_dir(admin)))
    assert sqlstate_of(e) == "42501"


def test_text_image_into_a_table_not_deid_s_is_refused(admin, target):
    """The target rules are the same for both formats: a caller's table (here one whose column
    type is not built in) is refused whatever the file."""
    admin.execute("DROP TABLE IF EXISTS deid_release.t_copy_in_domain")
    admin.execute("DROP DOMAIN IF EXISTS public.t_copy_in_d")
    admin.execute("CREATE DOMAIN public.t_copy_in_d AS text CHECK (VALUE <> 'x')")
    admin.execute("CREATE TABLE deid_release.t_copy_in_domain (a public.t_copy_in_d, b text)")
    admin.execute("ALTER TABLE deid_release.t_copy_in_domain OWNER TO deid_owner")
    fields = [copybin.Text(np.array([0]), ["x"]), copybin.Text(np.array([0]), ["y"])]
    path = private_file(admin, f"pgsql_tmpdeid{os.getpid()}.10.text", copytext.records(fields))
    try:
        with pytest.raises(psycopg.Error) as e:
            copy_in(admin, "deid_release.t_copy_in_domain", path)
        assert sqlstate_of(e) == "42501"
    finally:
        os.unlink(path)
        admin.execute("RESET ROLE")
        admin.execute("DROP TABLE deid_release.t_copy_in_domain")
        admin.execute("DROP DOMAIN public.t_copy_in_d")


# ------------------------------------------------------------------ the file must be deid's own
@pytest.fixture
def outside(admin):
    """A file outside the server's temporary directory, readable by the server, in COPY's text
    format (so that a COPY of it would succeed)."""
    d = tempfile.mkdtemp(prefix="deid_copy_in_", dir="/tmp")
    path = os.path.join(d, "secret.text")
    with open(path, "wb") as f:
        f.write(b"outside\tsecret\n")
    st = os.stat(tmp_dir(admin))
    for p in (d, path):
        os.chown(p, st.st_uid, st.st_gid)
    os.chmod(d, 0o755)
    os.chmod(path, 0o644)
    yield path
    shutil.rmtree(d)


def refused(admin, target, path):
    with pytest.raises(psycopg.Error) as e:
        copy_in(admin, target, path)
    assert sqlstate_of(e) == "42501", str(e.value)
    assert "deid._copy_in refuses" in e.value.diag.message_primary, str(e.value)
    assert e.value.diag.message_hint
    assert admin.execute("SELECT count(*) FROM deid_release.t_copy_in").fetchone()[0] == 0


@pytest.mark.parametrize("to", ["outside", "/etc/passwd"])
def test_a_symbolic_link_is_refused(admin, target, outside, to):
    """The attack: a link with deid's file name in deid's directory, to any file."""
    link = os.path.join(tmp_dir(admin), f"pgsql_tmpdeid{os.getpid()}.11.text")
    os.symlink(outside if to == "outside" else to, link)
    try:
        refused(admin, target, link)
    finally:
        os.unlink(link)


def test_a_hard_link_is_refused(admin, target, outside):
    link = os.path.join(tmp_dir(admin), f"pgsql_tmpdeid{os.getpid()}.12.text")
    os.link(outside, link)
    try:
        refused(admin, target, link)
    finally:
        os.unlink(link)


def test_a_file_of_deid_s_name_outside_the_server_s_directory_is_refused(admin, target, outside):
    """A path that ends like deid's own (".../base/pgsql_tmp/pgsql_tmpdeid<n>.<n>.text")."""
    d = os.path.join(os.path.dirname(outside), "base", "pgsql_tmp")
    os.makedirs(d)
    path = os.path.join(d, "pgsql_tmpdeid1.2.text")
    os.rename(outside, path)
    st = os.stat(tmp_dir(admin))
    for p in (os.path.dirname(d), d, path):
        os.chown(p, st.st_uid, st.st_gid)
        os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
    refused(admin, target, path)


def test_a_path_through_a_linked_directory_is_refused(admin, target, outside):
    """A directory link named like the server's temporary directory, to another directory."""
    root = os.path.join(os.path.dirname(outside), "data")
    os.makedirs(os.path.join(root, "base"))
    os.symlink(os.path.dirname(outside), os.path.join(root, "base", "pgsql_tmp"))
    os.rename(outside, os.path.join(os.path.dirname(outside), "pgsql_tmpdeid1.3.text"))
    refused(admin, target, os.path.join(root, "base", "pgsql_tmp", "pgsql_tmpdeid1.3.text"))


def test_a_dot_dot_path_is_refused_even_back_into_the_directory(admin, target):
    fields = [copybin.Text(np.array([0]), ["x"]), copybin.Text(np.array([0]), ["y"])]
    path = private_file(admin, f"pgsql_tmpdeid{os.getpid()}.13.text", copytext.records(fields))
    try:
        refused(admin, target, os.path.join(tmp_dir(admin), "..", "pgsql_tmp", os.path.basename(path)))
        refused(admin, target, os.path.join(tmp_dir(admin), ".", os.path.basename(path)))
        refused(admin, target, tmp_dir(admin) + "//" + os.path.basename(path))
    finally:
        os.unlink(path)


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_only_a_regular_file_is_read(admin, target, kind):
    """A FIFO would hold the COPY (and the request) until someone writes to it."""
    path = os.path.join(tmp_dir(admin), f"pgsql_tmpdeid{os.getpid()}.14.text")
    (os.mkfifo if kind == "fifo" else os.mkdir)(path)
    st = os.stat(tmp_dir(admin))
    os.chown(path, st.st_uid, st.st_gid)
    done = threading.Event()

    def unblock():                  # a COPY waiting on the FIFO gets a row and its end
        while not done.wait(3):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue            # nobody reads it
            os.write(fd, b"fifo\tdata\n")
            os.close(fd)
    if kind == "fifo":
        threading.Thread(target=unblock, daemon=True).start()
    try:
        refused(admin, target, path)
    finally:
        done.set()
        (os.unlink if kind == "fifo" else os.rmdir)(path)
