"""Make the pure modules importable for unit tests (no server needed), and share the
database fixtures (tests/dbfixtures.py) with the integration and security suites."""
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python_udfs"))
sys.path.insert(0, str(HERE))

from dbfixtures import admin, connect, own_history, own_test_history, url  # noqa: E402,F401  (pytest fixtures)
