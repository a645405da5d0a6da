"""Which sources are sharded, over which PL/Proxy cluster, by which key (deid.distributed_source).

register_source(db, relid, cluster, key_column, caller) is deid.register_distributed_source:
only an owner of the source (its owning role or a member of it) or a deid_admin registers it,
as for deid.allow_requests; the cluster must be a foreign server of the plproxy wrapper whose
options name a power of 2 of partitions; the key column must exist. Registering again replaces
the row (a new cluster or key).
"""
import re

from ..errors import (DeidError, INSUFFICIENT_PRIVILEGE, INVALID_PARAMETER_VALUE,
                      NULL_VALUE_NOT_ALLOWED, UNDEFINED_COLUMN, UNDEFINED_OBJECT)
from ..request import access

_PARTITION = re.compile(r"^(?:p|partition_)(\d+)=")


def register_source(db, relid, cluster, key_column, caller):
    access.caller_role(db, caller)
    if relid is None or cluster is None or key_column is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "source, cluster and key_column must not be NULL",
                        hint="deid.register_distributed_source('registry.patients', 'deid_shards',"
                             " 'patient_id')")
    rel = db.query("SELECT c.oid::regclass::text AS name, c.relowner::regrole::text AS owner"
                   " FROM pg_catalog.pg_class c WHERE c.oid = $1", [relid], ["oid"])[0]
    if not (db.value("SELECT pg_catalog.pg_has_role($1, $2::regrole, 'MEMBER')",
                     [caller, rel["owner"]], ["name", "text"]) or access.is_admin(db, caller)):
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"only an owner of {rel['name']} or a deid_admin may register it as distributed",
                        hint="Ask the relation's owner or a deid_admin to register it.")
    if not db.value("SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = $1 AND attname = $2"
                    " AND attnum > 0 AND NOT attisdropped", [relid, key_column], ["oid", "name"]):
        raise DeidError(UNDEFINED_COLUMN, f'column "{key_column}" of {rel["name"]} does not exist',
                        hint="Name the column the nodes are sharded by (the patient or record id).")
    partitions(db, cluster)
    db.execute("INSERT INTO deid.distributed_source (source, source_name, cluster, key_column,"
               " registered_by) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (source) DO UPDATE SET"
               " source_name = EXCLUDED.source_name, cluster = EXCLUDED.cluster, key_column ="
               " EXCLUDED.key_column, registered_by = EXCLUDED.registered_by, registered_at = now()",
               [relid, _qualified(db, relid), cluster, key_column, caller],
               ["oid", "text", "name", "name", "name"])
    return f"{rel['name']} is distributed over cluster {cluster} by {key_column}"


def source_of(db, relid):
    """The registration of `relid` ({source_name, cluster, key_column}) or None."""
    rows = db.query("SELECT source_name, cluster::text AS cluster, key_column::text AS key_column"
                    " FROM deid.distributed_source WHERE source = $1", [relid], ["oid"])
    return rows[0] if rows else None


def partitions(db, cluster):
    """The number of partitions of the PL/Proxy cluster `cluster` (a plproxy foreign server)."""
    rows = db.query("SELECT s.srvoptions FROM pg_catalog.pg_foreign_server s"
                    " JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid = s.srvfdw"
                    " WHERE s.srvname = $1 AND w.fdwname = 'plproxy'", [cluster], ["name"])
    if not rows:
        raise DeidError(UNDEFINED_OBJECT, f'PL/Proxy cluster "{cluster}" does not exist',
                        hint="A superuser defines it: CREATE SERVER <cluster> FOREIGN DATA WRAPPER"
                             " plproxy OPTIONS (p0 'dbname=... host=...', p1 '...'); (docs/sharding.md)")
    n = sum(1 for o in rows[0]["srvoptions"] or [] if _PARTITION.match(o))
    if n < 1 or n & (n - 1):
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f'PL/Proxy cluster "{cluster}" has {n} partitions, not a power of 2',
                        hint="Name p0 .. p(2^n - 1) in the server's options.")
    return n


def _qualified(db, relid):
    """The relation's schema-qualified, quoted name (the name every node resolves)."""
    return db.value("SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident("
                    "c.relname) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON"
                    " n.oid = c.relnamespace WHERE c.oid = $1", [relid], ["oid"])
