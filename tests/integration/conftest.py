"""Integration tests: psycopg against the private cluster (fixtures in tests/dbfixtures.py)."""
from dbfixtures import hint_of, sqlstate_of  # noqa: F401  (imported by the test modules)


# The disassociation verifier (both models) run again on a stored release, inside the test's
# session: "ok" or "<sqlstate> <message>" (tamper tests).
REVERIFY_SETS = """
CREATE OR REPLACE FUNCTION pg_temp.reverify(rel oid, rid bigint, k int, tabs text[],
                                            opts text DEFAULT '{"m": 2}') RETURNS text
LANGUAGE plpython3u AS $$
import json, types
from deid.catalog import relations as catalog
from deid.read import snapshot
from deid.write import copy_files
from deid.errors import DeidError
from deid.pg import Database
from deid.verify import disassociation
db = Database()
frame = snapshot.read_sets(db, catalog.relation(db, rel), 'id', 'codes')
req = types.SimpleNamespace(release_id=rid, k=k, options=json.loads(opts))
try:
    disassociation.verify(db, req, frame, tabs)
except DeidError as e:
    return e.sqlstate + " " + e.message
return "ok"
$$"""
