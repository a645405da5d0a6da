"""Integration tests: psycopg against the private cluster (fixtures in tests/dbfixtures.py)."""
from dbfixtures import hint_of, sqlstate_of  # noqa: F401  (imported by the test modules)
