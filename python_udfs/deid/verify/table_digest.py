"""Digests of everything a release stored, recorded in its log row when it commits and compared
by deid.verify_release afterwards (issue 26: a release tampered with after it was verified must
not verify again).

What is digested.  Every table the release stored under deid_release (its QIT and count tables,
its generalized table, its chunks, ...) and the release's rows in each artefact catalog
(:data:`CATALOGS`: deid.rid_set, deid.equivalence_class, deid.cluster_member -- recorded even
when the release has no row there, so rows added later are seen). For each, the server
computes in one pass (:func:`digests`)::

    rows   = the number of rows
    sha256 = sha256( shape || int8send(rows) || sha256( the rows' digests, sorted, concatenated ) )
    a row's digest = sha256( its image )

a release table's image is ``convert_to(ROW(t.*)::text, 'UTF8')`` (the row's text, every
column in table order, in UTF-8 whatever the database's encoding), its shape the text of its
column names and types in order (a renamed, retyped, added or dropped column changes it); a
catalog row's image is the text of its columns other than release_id, with the packed bytea of
deid.rid_set and the RID arrays of deid.cluster_member digested as their bytes (:data:`CATALOGS`).
The output settings a row's text depends on (dates, intervals, floats, bytea, the time zone)
are pinned around the statement (:data:`PINNED`, restored afterwards), so the digest is of the
stored values and not of the session that computes it.

Why equal digests mean equal tables.  The row digests are sorted, so the digest does not
depend on the rows' physical order (an UPDATE, a VACUUM FULL or a restore moves rows); it does
depend on every row: a changed, moved (another group_id), added, removed or duplicated row
changes the sorted list of row digests -- unless two different images have the same SHA-256
(a collision, which no known method finds). A row's text determines the row: record_out
quotes every field that could be confused with a separator, and every built-in type's text
determines its value (floats at extra_float_digits 1: the shortest exact form).

What this does NOT protect against: anyone who may change a release's tables may, as a
superuser or deid's owner, change its log row too (the append-only trigger of deid.release
stops DML, not a superuser who disables it) and record a new digest. The digests detect a
release that changed after it was verified -- by hand, by a faulty restore, by a bug -- not a
forger with the rights of deid's owner.
"""
import json

from ..sqltext import qualified, quote_ident
from .failures import _fail

STORE_SCHEMA = "deid_release"
ALGORITHM = "sha256 of the sorted sha256 of every row's UTF-8 text"

# (setting, value) pinned while digesting: the text of dates, intervals, floats, bytea,
# timestamptz and money does not depend on the session's choices
PINNED = (("DateStyle", "ISO, YMD"), ("IntervalStyle", "postgres"), ("extra_float_digits", "1"),
          ("bytea_output", "hex"), ("TimeZone", "UTC"), ("lc_monetary", "C"))

# catalog -> the image of one of a release's rows (alias c)
CATALOGS = {
    "deid.rid_set": "convert_to(ROW(c.attribute, c.chunk, c.value_list)::text, 'UTF8')"
                    " || sha256(c.group_ids) || sha256(c.rid_counts) || sha256(c.rids)",
    "deid.equivalence_class": "convert_to(ROW(c.class_id, c.cardinality, c.generalized,"
                              " c.source)::text, 'UTF8')",
    "deid.cluster_member": "int4send(c.cluster_id) || sha256(array_send(c.rids))",
}

HINT = ("The release changed after it was verified: restore it (its tables and deid's catalog) "
        "from a backup taken after it was made, or drop it and request it again.")


def _digest_sql(rows_from, image, shape):
    """One statement: (rows, hex digest) of the rows `rows_from` (alias c) by their `image`."""
    return (f"SELECT count(*) AS n, encode(sha256(convert_to({shape}, 'UTF8') || int8send(count(*))"
            f" || sha256(coalesce(string_agg(d, ''::bytea ORDER BY d), ''::bytea))), 'hex') AS d"
            f" FROM (SELECT sha256({image}) AS d FROM {rows_from}) s")


def _shape(db, table):
    """SQL literal: the text of the stored table's column names and types, in order."""
    cols = db.value("SELECT string_agg(quote_ident(attname) || ' ' || format_type(atttypid,"
                    " atttypmod), ', ' ORDER BY attnum) FROM pg_catalog.pg_attribute"
                    " WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped",
                    [qualified(STORE_SCHEMA, table)], ["text"])
    return db.quote_literal(cols or "")


def digests(db, release_id, tables):
    """{"algorithm", "tables": {name: {"rows", "sha256"}}} of the release's stored tables
    (deid_release.<name>, unqualified names) and of its rows in every catalog of CATALOGS."""
    out = {}
    with pinned(db):
        for t in tables:
            row = db.query(_digest_sql(f"{qualified(STORE_SCHEMA, t)} c", "convert_to(ROW(c.*)::text,"
                                       " 'UTF8')", _shape(db, t)))[0]
            out[t] = {"rows": int(row["n"]), "sha256": row["d"]}
        for catalog, image in CATALOGS.items():
            schema, name = catalog.split(".")
            row = db.query(_digest_sql(f"{quote_ident(schema)}.{quote_ident(name)} c"
                                       f" WHERE c.release_id = $1", image, db.quote_literal(catalog)),
                           [release_id], ["bigint"])[0]
            out[catalog] = {"rows": int(row["n"]), "sha256": row["d"]}
    return {"algorithm": ALGORITHM, "tables": out}


def check(db, release_id, tables, recorded):
    """Compare what is stored now with the digests `recorded` when the release committed.
    Raises DE002 naming the first table that differs; returns the report's "digests" part."""
    now = digests(db, release_id, tables)["tables"]
    was = recorded.get("tables") or {}
    if sorted(was) != sorted(now):
        _fail("the release's stored tables are not those recorded when it was verified",
              detail=f"recorded {sorted(was)}, stored {sorted(now)}", hint=HINT)
    for name in sorted(now):
        if now[name] != was[name]:
            _fail(f"the stored table {name} differs from its digest recorded when the release "
                  "was verified", detail=f"recorded {was[name]['rows']} rows, stored "
                  f"{now[name]['rows']}", hint=HINT)
    return {"recorded": True, "algorithm": recorded.get("algorithm"), "tables": now}


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
