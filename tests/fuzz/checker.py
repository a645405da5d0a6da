"""The fuzzer's independent checker (with check_sets.py, check_refusal.py and stored.py). It
imports nothing of deid (python_udfs/deid): it reads only what a request stored -- the release's row in deid.release (method, source, parameters),
its tables (schema deid_release), the catalog rows deid keeps for it (deid.rid_set,
deid.cluster_member) -- and, as an oracle, the source rows the selection picks (read by a role
with SELECT, in a read-only transaction). From those it checks the privacy model of each
method, as the papers state it: each method's checks are its part, tests/fuzz/checkers/<method>.py
(one module per method, named as the method; the cluster membership that two of them share is
check_sets.py's), and every method's release holds exactly the rows the selection picks from
the source.

Refusals: check_refusal.py. Every finding is (kind, text); the runner tallies them.
"""
from collections import Counter

from psycopg import sql

from . import checkers
from .check_refusal import RefusalChecks
from .check_sets import SetChecks
from .stored import Finding, rel

# Findings of checks whose protection is not yet built: reported, not failures.
PENDING = set()      # findings that belong to open work (none: each is a failure)


class Checker(SetChecks, RefusalChecks):
    """conn: a superuser connection (the catalog and the release tables); oracle: a connection
    of a role with SELECT on the sources (the selection is run as that role, read-only)."""

    def __init__(self, conn, oracle, stats=None):
        self.conn, self.oracle = conn, oracle
        self.stats = stats if stats is not None else Counter()     # what was checked, by kind

    # ---------------------------------------------------------------- successes
    def check_release(self, release_id, result_rows):
        """Findings (list of (kind, text)) for a committed release."""
        row = self.conn.execute(
            "SELECT name, method, source::oid, source::text, parameters, relations, status"
            " FROM deid.release WHERE release_id = %s", [release_id]).fetchone()
        if row is None:
            return [("no_log_row", f"release {release_id} has no deid.release row")]
        name, method, src_oid, src, params, relations, status = row
        if status != "committed":
            return [("status", f"release {name} is {status}")]
        out = []
        self.stats[f"{method}_releases_checked"] += 1
        try:
            rids = self._oracle(src, src_oid, params, method)
            check = checkers.check_for(self, method)
            check(name, src, params, relations, rids, out)
            if result_rows is not None and checkers.result_rows_are_selected_rows(method) \
                    and result_rows != len(rids):
                out.append(("rows", f"{name}: result says {result_rows} rows, selection has {len(rids)}"))
        except Finding as f:
            out.append(tuple(f.args))
        return out

    def _oracle(self, src, src_oid, params, method):
        """The record ids the selection picks (row ids; records for a long table)."""
        opts = params.get("options") or {}
        rid = opts.get("record") or opts.get("row_id") or self._primary_key(src_oid)
        return self._select(src, sql.Identifier(rid), params.get("selection"))

    def _rid_column(self, src, params):
        return (params.get("options") or {}).get("row_id") or self._primary_key(
            self.conn.execute("SELECT %s::regclass::oid", [src]).fetchone()[0])

    def _select(self, src, what, where):
        """The distinct values of `what` over the source rows the selection picks, read by the
        oracle role in a read-only transaction, with the selection's text as written."""
        q = sql.SQL("SELECT DISTINCT {} FROM {}").format(what, sql.SQL(src))
        if where:
            q = q + sql.SQL(" WHERE (") + sql.SQL(where) + sql.SQL(")")
        try:
            with self.oracle.transaction():
                self.oracle.execute("SET TRANSACTION READ ONLY")
                self.oracle.execute("SET LOCAL statement_timeout = '5s'")
                return {r[0] for r in self.oracle.execute(q)}
        except Exception as e:
            raise Finding("oracle_error", f"the accepted selection {where!r} fails in PostgreSQL: {e}")

    def _primary_key(self, oid):
        row = self.conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = i.indkey[0] WHERE i.indrelid = %s AND i.indisprimary"
            " AND i.indnatts = 1", [oid]).fetchone()
        if not row:
            raise Finding("oracle_error", "the source has no single-column primary key")
        return row[0]

    def _groups(self, table, cols):
        q = sql.SQL("SELECT count(*) FROM {} GROUP BY {}").format(
            rel(table), sql.SQL(", ").join(sql.Identifier(c) for c in cols))
        return [r[0] for r in self.conn.execute(q)]

    def _count(self, table):
        return self.conn.execute(sql.SQL("SELECT count(*) FROM {}").format(rel(table))).fetchone()[0]

    def _source_values(self, src, params, cols, rids):
        rid = self._rid_column(src, params)
        q = sql.SQL("SELECT {}, {} FROM {} WHERE {} = ANY(%s)").format(
            sql.Identifier(rid), sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols),
            sql.SQL(src), sql.Identifier(rid))
        return {r[0]: dict(zip(cols, r[1:])) for r in self.conn.execute(q, [list(rids)])}
