"""Make the pure modules importable for unit tests (no server needed), and share the
database fixtures (tests/dbfixtures.py) with the integration and security suites."""
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python_udfs"))
sys.path.insert(0, str(HERE))

from dbfixtures import admin, connect, own_history, own_test_history, url  # noqa: E402,F401  (pytest fixtures)


def pytest_collection_modifyitems(session, config, items):
    """The crash test runs after every other test of the run, whichever folders were named and
    in whatever order: the crash closes every connection the session-wide fixtures hold."""
    items.sort(key=lambda item: item.module.__name__.endswith("test_zz_durability"))
