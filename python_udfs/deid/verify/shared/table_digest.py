"""Digests of everything a release stored, recorded in its log row when it commits and compared
by deid.verify_release afterwards (a release tampered with after it was verified must not
verify again).

What is digested.  Every table the release stored under deid_release (its QIT and count tables,
its generalized table, its chunks, ...) and the release's rows in each artefact catalog
(:data:`CATALOGS`: deid.rid_set, deid.equivalence_class, deid.cluster_member -- recorded even
when the release has no row there, so rows added later are seen). For each, the server
computes in one pass (:func:`digests`; in parallel where the table is large)::

    rows   = the number of rows
    sums   = sum(h), sum(hashint8extended(h, 1)) over the rows (exact, as numeric)
    h      = hashtextextended(the row's text, 0)
    shape  = the text of a release table's column names and types, in order

a release table row's text is ``ROW(t.*)::text`` (every column in table order); a catalog
row's text is that of its columns other than release_id, the packed bytea of deid.rid_set
by their SHA-256 (:data:`CATALOGS`). The output settings a row's text depends on (dates,
intervals, floats, bytea, the time zone) are pinned around the statement (:data:`PINNED`,
restored afterwards), so the digest is of the stored values, not of the session's settings.

What it detects.  The sums do not depend on the rows' physical order (an UPDATE, a VACUUM FULL
or a restore moves rows) but on every row's text: a changed value, a row moved to another
group (its group_id is in its text), two rows swapping a value, an added, removed or
duplicated row changes ``rows`` or, but for a chance of about 2^-64 per change, the sums; a
renamed, retyped, added or dropped column changes ``shape``.

What it does NOT protect against.  These are checksums, not signatures: hashtextextended is
not a cryptographic hash, and anyone who may change a release's tables (deid's owner, a
superuser) may change its log row too (the append-only trigger of deid.release stops DML, not
a superuser who disables it) and record new digests. They detect a release that changed after
it was verified -- by hand, by a faulty restore, by a bug -- not a forger with the rights of
deid's owner. The text is the database encoding's: a release restored into a database of
another encoding, with values outside ASCII, is reported as changed.
"""
import json

from ...sqltext import qualified, quote_ident
from .failures import _fail

STORE_SCHEMA = "deid_release"
ALGORITHM = "count, sum(h), sum(hashint8extended(h, 1)); h = hashtextextended(row text, 0)"

# (setting, value) pinned while digesting: the text of dates, intervals, floats, bytea,
# timestamptz and money does not depend on the session's choices; and a large table is
# digested in parallel (built-in code only: a scan of deid's own table, record_out of
# built-in or superuser-made types, hashing, sum).
PINNED = (("DateStyle", "ISO, YMD"), ("IntervalStyle", "postgres"), ("extra_float_digits", "1"),
          ("bytea_output", "hex"), ("TimeZone", "UTC"), ("lc_monetary", "C"),
          ("parallel_setup_cost", "0"), ("parallel_tuple_cost", "0"),
          ("min_parallel_table_scan_size", "8MB"))

# catalog -> the text of one of a release's rows (alias c)
CATALOGS = {
    "deid.rid_set": "ROW(c.attribute, c.chunk, c.value_list, sha256(c.group_ids),"
                    " sha256(c.rid_counts), sha256(c.rids))::text",
    "deid.equivalence_class": "ROW(c.class_id, c.cardinality, c.generalized, c.source)::text",
    "deid.cluster_member": "ROW(c.cluster_id, c.rids)::text",
    "deid.release_selection": "ROW(c.row_id, c.n, sha256(c.rids))::text",
}

HINT = ("The release changed after it was verified: restore it (its tables and deid's catalog) "
        "from a backup taken after it was made, or drop it and request it again.")


ROW_TEXT = "ROW(c.*)::text"         # a release table row's text (alias c)
# Ends the subquery that computes h: it is not pulled up into the aggregates, each of which
# would compute the row's text and its hash again (twice the time); the scan (in parallel
# workers, where the table is large) computes h once, the aggregates sum it. The same sums.
ONCE = "OFFSET 0"


def row_hash(text):
    """The SQL of a row's h (see the module docstring) for the SQL of its `text`."""
    return f"hashtextextended({text}, 0)"


# The aggregates of the digest over rows with a column h (row_hash): a verifier that reads a
# stored table anyway takes them in the same pass (PARTIAL_SUMS, then combine), instead of
# the pass of digests() of its own; per group, summed in Python (the sums are exact).
PARTIAL_SUMS = ("count(*) AS digest_n, sum(h)::text AS digest_1,"
                " sum(hashint8extended(h, 1))::text AS digest_2")


def _digest_sql(rows_from, text):
    """One statement: (rows, sums) of the rows `rows_from` (alias c) by their `text`."""
    return ("SELECT count(*) AS n, sum(h)::text || ' ' || sum(hashint8extended(h, 1))::text AS s"
            f" FROM (SELECT {row_hash(text)} AS h FROM {rows_from} {ONCE}) d")


def partial_sums_sql(rows_from, text):
    """One statement: the PARTIAL_SUMS of the rows `rows_from` (alias c) by their `text`."""
    return (f"SELECT {PARTIAL_SUMS} FROM (SELECT {row_hash(text)} AS h FROM {rows_from} {ONCE}) d")


def combine(parts):
    """{"rows", "sums"} of a table from the PARTIAL_SUMS of disjoint parts of its rows (dicts
    with digest_n, digest_1, digest_2; a part without rows has NULL sums): the digest that
    digests() takes of all of them in one statement, the same text."""
    n = s1 = s2 = 0
    seen = False
    for p in parts:
        n += int(p["digest_n"])
        if p["digest_1"] is not None:
            seen = True
            s1 += int(p["digest_1"])
            s2 += int(p["digest_2"])
    return {"rows": n, "sums": f"{s1} {s2}" if seen else None}


def _shape(db, table):
    """The text of the stored table's column names and types, in order."""
    return db.value("SELECT string_agg(quote_ident(attname) || ' ' || format_type(atttypid,"
                    " atttypmod), ', ' ORDER BY attnum) FROM pg_catalog.pg_attribute"
                    " WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped",
                    [qualified(STORE_SCHEMA, table)], ["text"])


def digests(db, release_id, tables, known=None):
    """{"algorithm", "tables": {name: {"rows", "sums"[, "shape"]}}} of the release's stored
    tables (deid_release.<name>, unqualified names) and of its rows in every catalog of
    CATALOGS. ``known``: {name: {"rows", "sums"}} a verifier took, in this transaction, in a
    pass of its own over what was stored (PARTIAL_SUMS, with PINNED set): not taken again."""
    out, known = {}, known or {}
    with pinned(db):
        for t in tables:
            if t in known:
                row = {"n": known[t]["rows"], "s": known[t]["sums"]}
            else:
                row = db.query(_digest_sql(f"{qualified(STORE_SCHEMA, t)} c", ROW_TEXT))[0]
            out[t] = {"rows": int(row["n"]), "sums": row["s"], "shape": _shape(db, t)}
        for catalog, text in CATALOGS.items():
            if catalog in known:
                out[catalog] = dict(known[catalog])
                continue
            schema, name = catalog.split(".")
            row = db.query(_digest_sql(f"{quote_ident(schema)}.{quote_ident(name)} c"
                                       " WHERE c.release_id = $1", text), [release_id], ["bigint"])[0]
            out[catalog] = {"rows": int(row["n"]), "sums": row["s"]}
    return {"algorithm": ALGORITHM, "tables": out}


def check(db, release_id, tables, recorded):
    """Compare what is stored now with the digests `recorded` when the release committed.
    Raises DE002 naming the first table that differs; returns the report's "digests" part."""
    if recorded.get("algorithm") != ALGORITHM:
        _fail("the release's digests were recorded by another algorithm",
              detail=f"recorded {recorded.get('algorithm')!r}", hint=HINT)
    now = digests(db, release_id, tables)["tables"]
    was = recorded.get("tables") or {}
    if sorted(was) != sorted(now):
        _fail("the release's stored tables are not those recorded when it was verified",
              detail=f"recorded {sorted(was)}, stored {sorted(now)}", hint=HINT)
    for name in sorted(now):
        if now[name] != was[name]:
            what = ("columns" if now[name].get("shape") != was[name].get("shape") else
                    "rows" if now[name]["rows"] != was[name]["rows"] else "rows' contents")
            _fail(f"the stored table {name} differs from its digest recorded when the release "
                  f"was verified (its {what})", detail=f"recorded {was[name]['rows']} rows, "
                  f"stored {now[name]['rows']}", hint=HINT)
    return {"recorded": True, "tables": sorted(now)}


class pinned:
    """Context manager: PINNED set for this transaction while it runs, then set back."""

    def __init__(self, db, settings=PINNED):
        self.db, self.names, self.values = db, [n for n, _ in settings], [v for _, v in settings]

    def __enter__(self):
        self.old = self.db.value("SELECT array_agg(current_setting(n) ORDER BY o) FROM"
                                 " unnest($1::text[]) WITH ORDINALITY AS s(n, o)",
                                 [self.names], ["text[]"])
        self._set(self.values)
        return self

    def __exit__(self, *exc):
        self._set(self.old)
        return False

    def _set(self, values):
        self.db.execute("SELECT set_config(n, v, true) FROM unnest($1::text[], $2::text[]) AS"
                        " s(n, v)", [self.names, list(values)], ["text[]", "text[]"])


def recorded_digests(db, release_id):
    """The digests the release's log row recorded (None: logged before digests were)."""
    text = db.value("SELECT metrics->'digests' FROM deid.release WHERE release_id = $1",
                    [release_id], ["bigint"])
    return json.loads(text) if text else None
