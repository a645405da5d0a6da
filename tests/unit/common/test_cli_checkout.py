"""`deid` inside a checkout finds the private cluster of `make start` (client/deid_cli/checkout.py)
when nothing names a server, from any folder below the checkout; whatever names a server (-h,
-p, PGHOST, PGPORT, PGSERVICE, a URL or conninfo) wins, and outside a checkout nothing changes."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "client"))
from deid_cli import checkout  # noqa: E402


@pytest.fixture
def tree(tmp_path):
    run = tmp_path / "repo" / ".pgdata" / "run"
    run.mkdir(parents=True)
    (run / ".s.PGSQL.54329").touch()
    (run / ".s.PGSQL.54329.lock").touch()
    (tmp_path / "repo" / "docs" / "methods").mkdir(parents=True)
    return tmp_path


def test_found_from_a_folder_below_the_checkout(tree):
    kw = checkout.defaults(None, None, "", env={}, cwd=tree / "repo" / "docs" / "methods")
    assert kw == {"host": str((tree / "repo" / ".pgdata" / "run").resolve()), "port": "54329",
                  "user": "postgres", "dbname": "deid"}


def test_the_callers_database_and_role_are_kept(tree):
    kw = checkout.defaults(None, None, "deid_test", env={"PGUSER": "alice"}, cwd=tree / "repo")
    assert "user" not in kw and "dbname" not in kw and kw["port"] == "54329"
    kw = checkout.defaults(None, None, "", env={"PGDATABASE": "other"}, cwd=tree / "repo")
    assert "dbname" not in kw and kw["user"] == "postgres"


@pytest.mark.parametrize("host, port, dbname, env", [
    ("db.example", None, "", {}),
    (None, "5432", "", {}),
    (None, None, "postgresql://db/x", {}),
    (None, None, "host=db dbname=x", {}),
    (None, None, "", {"PGHOST": "db"}),
    (None, None, "", {"PGPORT": "5432"}),
    (None, None, "", {"PGSERVICE": "prod"}),
])
def test_a_named_server_wins(tree, host, port, dbname, env):
    assert checkout.defaults(host, port, dbname, env=env, cwd=tree / "repo") == {}


def test_nothing_outside_a_checkout_or_without_a_running_server(tree):
    assert checkout.defaults(None, None, "", env={}, cwd=tree) == {}
    for sock in (tree / "repo" / ".pgdata" / "run").iterdir():
        sock.unlink()
    assert checkout.defaults(None, None, "", env={}, cwd=tree / "repo") == {}
