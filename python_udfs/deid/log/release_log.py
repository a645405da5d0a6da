"""The one writer of deid's catalog log for a release: the analysts' views, the release row
(append-only), and the artefacts of the ReleasePlan -- 001 Theorem 3's RID sets
(deid.rid_set), the equivalence classes (deid.equivalence_class), and the one membership
catalog deid.cluster_member: the clusters of a condensation release (004 Def. 1) and 003's
record -> cluster membership of a disassociated release, both as sorted ids per cluster."""
import json

import numpy as np

from ..write import copybin, copy_files
from ..errors import DeidError, DUPLICATE_TABLE
from ..request.release import STORE_SCHEMA, VIEW_SCHEMA
from ..plan import SourceClasses
from ..sqltext import qualified, quote_ident
from ..verify.shared import table_digest
from . import audience, estimate_view

RID_CHUNK = 1 << 16          # RIDs per deid.rid_set row (a chunk ends at an entry boundary)


def publish(db, req, tables, estimate=None):
    """Views in schema release over the stored tables, readable by the release's audience
    (deid_reader, or options.audience: log/audience.py) and by the requester, in a session
    that reads no release the composition rule kept apart from this one
    (deid._release_readable, once per query); and an anatomy
    release's estimate view (plan.EstimateView), with the same grants, which is not one of the
    relations returned (log/estimate_view.py)."""
    relations = []
    readers = audience.initial_grantee(db, req)
    for t in tables:
        view = qualified(VIEW_SCHEMA, t)
        db.execute(f"CREATE VIEW {view} AS SELECT * FROM {qualified(STORE_SCHEMA, t)}"
                   f" WHERE (SELECT deid._release_readable({int(req.release_id)}::bigint))")
        db.execute(f"GRANT SELECT ON {view} TO {readers}, {quote_ident(req.caller)}")
        db.execute(f"COMMENT ON VIEW {view} IS " + db.quote_literal(
            f"deid release {req.name} (#{req.release_id}, {req.method}, k={req.k}"
            + (f", l={req.l}" if req.l else "") + f") of {req.rel.display}"))
        relations.append(f"{VIEW_SCHEMA}.{t}")
    if estimate is not None:
        estimate_view.create(
            db, qualified(VIEW_SCHEMA, estimate.name), qualified(VIEW_SCHEMA, estimate.qit),
            [(a, qualified(VIEW_SCHEMA, t)) for a, t in estimate.counts],
            [audience.initial(req), req.caller], estimate_view.describe(req.name))
    audience.record(db, req.release_id, audience.initial(req), req.caller)
    return relations


def digests(db, req, tables):
    """The digests of what the release stored (its tables, unqualified names, and its
    catalog rows), verified just now: deid.verify_release compares them
    (verify/table_digest.py); those its verifier took in its own passes are not taken again."""
    return table_digest.digests(db, req.release_id, tables, known=req.run.digests)


def log(db, req, relations, plan, verification, seconds, digests=None):
    """The release's row in the append-only log (its seed, who asked and how it was allowed,
    the method's metrics, the verifier's report, the phase timings and the `digests` of what
    it stored (:func:`digests`; taken here when not given)."""
    metrics = dict(plan.metrics, rows=plan.rows, groups=plan.groups,
                   discernibility=plan.discernibility, verification=verification, seconds=seconds)
    if plan.estimate is not None:     # not a relation: no digest; a held part revokes it too
        metrics["estimate_view"] = f"{VIEW_SCHEMA}.{plan.estimate.name}"
    if req.warnings:                    # e.g. the composition rule overridden
        metrics["warnings"] = list(req.warnings)
    metrics["digests"] = digests or table_digest.digests(
        db, req.release_id, [r.split(".", 1)[1] for r in relations])
    grant = {k: v for k, v in req.grant.items() if k != "reader_function"}
    params = {"k": req.k, "l": req.l, "columns": req.columns, "selection": req.selection_text,
              "options": req.options, "authorized_via": grant,
              "roles": {c: {"role": req.rel.columns[c].role, "source": req.rel.columns[c].source}
                        for c in req.columns}}
    if getattr(req, "part", None):
        params["part"] = req.part         # k holds over all parts (the coordinator's check)
    try:
        db.execute(
            "INSERT INTO deid.release (release_id, name, method, source, source_name, parameters,"
            " seed, requested_by, started_at, finished_at, status, relations, metrics)"
            " OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8,"
            " $9::timestamptz, clock_timestamp(), 'committed', $10, $11::jsonb)",
            [req.release_id, req.name, req.method, req.rel.oid, req.rel.display,
             json.dumps(params, default=str), req.seed, req.caller, req.started, relations,
             json.dumps(metrics, default=float)],
            ["bigint", "text", "text", "oid", "text", "text", "bigint", "name", "text", "text[]",
             "text"])
    except Exception as e:
        if getattr(e, "sqlstate", None) == "23505":
            raise DeidError(DUPLICATE_TABLE, f'release "{req.name}" already exists',
                            hint="Another request committed a release of this name first; "
                                 "choose another name.") from None
        raise


def write_artefacts(db, release_id, plan):
    """The plan's rows in deid's artefact catalogs; into plan.digests (when set: the
    request's RunState.digests) the digests of those a writer hashed as it wrote them
    (write_source_classes)."""
    known = plan.digests
    for r in plan.rid_sets:
        write_rid_set(db, release_id, r)
    if plan.classes is not None:
        write_classes(db, release_id, plan.classes, plan.tables[0].name if plan.tables else None,
                      (plan.groups, plan.rows), known)
    if plan.clusters is not None:
        write_clusters(db, release_id, plan.clusters)
    if plan.membership is not None:
        write_membership(db, release_id, plan.membership)


def write_clusters(db, release_id, clusters):
    """deid.cluster_member (004 Def. 1): clusters 0, 1, ... with their sorted RIDs."""
    write_members(db, release_id, np.arange(len(clusters.sizes)), clusters.sizes, clusters.rids)


def write_membership(db, release_id, member):
    """deid.cluster_member for a disassociated release (003): record -> cluster, for audit and
    the verifier, as each cluster's sorted record ids."""
    records = np.asarray(member.record_ids, np.int64)
    clusters = np.asarray(member.cluster_ids, np.int64)
    order = np.lexsort((records, clusters))
    ids, sizes = np.unique(clusters[order], return_counts=True)
    write_members(db, release_id, ids, sizes, records[order])


def write_members(db, release_id, cluster_ids, sizes, ids):
    """The one membership catalog: a row per cluster (its id, its members' ids concatenated
    cluster after cluster, each sorted), one binary COPY."""
    count = len(cluster_ids)
    copy_files.copy_fields(db, "deid.cluster_member", ["release_id", "cluster_id", "rids"],
                         [copybin.Fixed(np.full(count, release_id, np.int64), ">i8"),
                          copybin.Fixed(np.asarray(cluster_ids, np.int64), ">i4"),
                          copybin.Array(np.asarray(sizes, np.int64),
                                        copybin.Fixed(np.asarray(ids, np.int64), ">i8"),
                                        copybin.INT8OID)])


def write_rid_set(db, release_id, r):
    """deid.rid_set (001 Theorem 3), one binary COPY per attribute: its entries (one per group
    and value: the group, the value, the size of its RID set) and the RID sets concatenated,
    each sorted, cut into chunks of about RID_CHUNK RIDs. Groups, counts and RIDs are packed
    bytea (big-endian int4, int4, int8: sql/00_catalog.sql), each chunk's bytes a slice of
    one conversion per attribute."""
    entries = rid_chunks(r.count)
    chunks = len(entries)
    rids_per_chunk = np.bincount(np.repeat(np.arange(chunks), entries), weights=r.count,
                                 minlength=chunks).astype(np.int64)
    copy_files.copy_fields(db, "deid.rid_set", ["release_id", "attribute", "chunk", "group_ids",
                                              "value_list", "rid_counts", "rids"],
                         [copybin.Fixed(np.full(chunks, release_id, np.int64), ">i8"),
                          copybin.Text(np.zeros(chunks, np.int64), [r.attribute]),
                          copybin.Fixed(np.arange(chunks), ">i4"),
                          copybin.Bytes(entries, r.group, ">i4"),
                          copybin.Array(entries, copybin.Text(r.code, r.dictionary), copybin.TEXTOID),
                          copybin.Bytes(entries, r.count, ">i4"),
                          copybin.Bytes(rids_per_chunk, r.rids, ">i8")])


def rid_chunks(counts, limit=RID_CHUNK):
    """Entries per chunk: consecutive entries, a new chunk once a chunk holds `limit` RIDs or
    more (so a chunk exceeds `limit` only by its last entry)."""
    if len(counts) == 0:
        return np.zeros(0, np.int64)
    before = np.cumsum(counts) - counts            # RIDs before each entry
    chunk = before // limit                         # chunk of each entry's first RID
    _, entries = np.unique(chunk, return_counts=True)
    return entries.astype(np.int64)


def write_classes(db, release_id, classes, table=None, joint=None, known=None):
    """deid.equivalence_class. Per-source classes (plan.SourceClasses, 002) are derived
    set-based from the stored release `table` (write_source_classes); classes given in memory
    (plan.Classes: over all quasi-identifiers jointly, source NULL) are one binary COPY (jsonb's
    binary form is a version byte, 1, then the text)."""
    if isinstance(classes, SourceClasses):
        return write_source_classes(db, release_id, classes, table, joint, known)
    count = len(classes.sizes)
    generalized = ["\x01" + g for g in generalized_json(classes.labels, count)]
    copy_files.copy_fields(db, "deid.equivalence_class",
                         ["release_id", "class_id", "cardinality", "generalized"],
                         [copybin.Fixed(np.full(count, release_id, np.int64), ">i8"),
                          copybin.Fixed(np.arange(count), ">i4"),
                          copybin.Fixed(np.asarray(classes.sizes, dtype=np.int64), ">i8"),
                          copybin.Text(np.arange(count), generalized)])


def generalized_json(labels, count):
    """Each class's values as the text of a JSON object {"q": value, ...} (json.dumps of the
    dict of labels[q][i]): each distinct label JSON-encoded once, then one format per class."""
    parts = []
    for values in labels.values():
        encoded = {x: _json_value(x) for x in set(values)}
        parts.append(list(map(encoded.__getitem__, values)))
    # one template per release: '{"q1": %s, "q2": %s}' (a % in a name doubled)
    template = "{" + ", ".join(json.dumps(q).replace("%", "%%") + ": %s" for q in labels) + "}"
    return [template % values for values in zip(*parts)] if parts else [template] * count


def _json_value(x):
    """json.dumps(x); a str directly by json's own string encoder (what dumps runs for one)."""
    return json.encoder.encode_basestring_ascii(x) if isinstance(x, str) else json.dumps(x)


JOINT_ROLLUP_MAX = 20_000    # joint classes up to which one joint GROUP BY is rolled up per source


def write_source_classes(db, release_id, classes, table, joint=None, known=None):
    """Per source system, the stored release table grouped by that source's quasi-identifiers
    -- per class its count and its values as JSON. Class ids run on over the sources (in the
    order given), within a source in the byte order of the values.

    Each source's GROUP BY is a SELECT of its own, so PostgreSQL may run it in parallel (it
    never plans an INSERT ... SELECT in parallel); the classes come back as two arrays (in their
    text form: no Python object per class) and one INSERT unnests them. The statement has no
    bound parameter: only a one-shot SPI plan (plpy.execute of text) may be parallel. When the
    release has few classes over all quasi-identifiers jointly (`joint`: the method's count of
    them and of the rows, which only choose the plan: at most JOINT_ROLLUP_MAX, and at least 4
    rows a class), one statement groups the stored release by all of them once (in parallel)
    and rolls that up per source: one scan instead of one per source, the same classes (15 %
    less time for the benchmark's 7,741 joint classes; nearly unique ones stay per source).

    With ``known`` (a dict), the INSERTs hash the rows they insert as the release's digest of
    deid.equivalence_class (table_digest.CATALOGS' text of each row, RETURNING it: the rows
    as stored) into known: the log takes no pass of its own over them. Only for a release
    whose every class this writes (no other writer adds rows of the release there). The joint
    GROUP BY takes the release table's digest too where that is exact (_digest_columns)."""
    name, table = table, qualified(STORE_SCHEMA, table)
    sources = list(classes.sources.items())
    joint = len(sources) > 1 and joint is not None and joint[0] <= JOINT_ROLLUP_MAX \
        and 4 * joint[0] <= joint[1]
    if joint:
        digested = _digest_columns(db, table, sources) if known is not None else None
        with parallel_query(db):
            rolled = {r["s"]: r for r in db.query(_rolled_up(db, table, sources, digested))}
        if digested is not None:
            s1, _, s2 = (rolled[-1]["g"] or "").partition(" ")
            known[name] = table_digest.combine([{"digest_n": rolled[-1]["n"],
                                                  "digest_1": s1 or None, "digest_2": s2 or None}])
    first, sums = 0, []
    for i, (source, columns) in enumerate(sources):
        if joint:
            grouped = rolled[i]
        else:
            with parallel_query(db):
                grouped = db.query(_grouped(db, columns, [quote_ident(c) for c in columns], table,
                                            "count(*)"))[0]
        args = ([release_id, first, source, grouped["n"], grouped["g"]],
                ["bigint", "int", "text", "text", "text"])
        if known is None:
            first += db.execute(_INSERT_CLASSES, *args)
            continue
        with table_digest.pinned(db):
            sums.append(db.query(f"WITH i AS ({_INSERT_CLASSES} RETURNING "
                                 + table_digest.row_hash(table_digest.CATALOGS[
                                     "deid.equivalence_class"]) + " AS h) SELECT "
                                 + table_digest.PARTIAL_SUMS + " FROM i", *args)[0])
        first += int(sums[-1]["digest_n"])
    if known is not None:
        known["deid.equivalence_class"] = table_digest.combine(sums)


_INSERT_CLASSES = (
    "INSERT INTO deid.equivalence_class AS c (release_id, class_id, cardinality, generalized,"
    " source) SELECT $1, $2 + u.o::int - 1, u.n, u.g, $3"
    " FROM unnest($4::bigint[], $5::jsonb[]) WITH ORDINALITY AS u(n, g, o)")


def _grouped(db, columns, exprs, source, count):
    """SELECT of one source's classes from `source` (the release table, or the joint classes
    j): their counts and their values as JSON, as two arrays in the byte order of the values."""
    keys = [f"k{i}" for i in range(len(exprs))]
    pairs = ", ".join(f"{db.quote_literal(c)}, {q}" for c, q in zip(columns, exprs))
    order = ", ".join(f'{k} COLLATE "C"' for k in keys)
    return (f"SELECT array_agg(n ORDER BY {order})::text AS n, array_agg(g ORDER BY {order})::text"
            f" AS g FROM (SELECT {', '.join(exprs)}, {count}, jsonb_build_object({pairs})"
            f" FROM {source} GROUP BY {', '.join(exprs)}) c({', '.join(keys)}, n, g)")


def _rolled_up(db, table, sources, digested=None):
    """One statement: the release grouped by every source's quasi-identifiers jointly (j, its
    columns by position: no quasi-identifier's name can clash), then per source (row s) the
    joint classes summed by that source's quasi-identifiers. With `digested` (the table's
    columns in order, _digest_columns), a row s = -1 more: the table's digest (n: its rows, g:
    its two sums; a joint class's text is its stored rows' text, ROW(c.*)::text)."""
    everything = [c for _, columns in sources for c in columns]
    cols = ", ".join(quote_ident(c) for c in everything)
    position = {c: f"j.c{i}" for i, c in enumerate(everything)}
    names = ", ".join(f"c{i}" for i in range(len(everything)))
    parts = [f"SELECT {i} AS s, n, g FROM ("
             + _grouped(db, columns, [position[c] for c in columns], "j", "sum(j.n)::bigint")
             + f") r{i}" for i, (_, columns) in enumerate(sources)]
    if digested is not None:
        text = "ROW(" + ", ".join(position[c] for c in digested) + ")::text"
        parts.append("SELECT -1 AS s, coalesce(sum(d.n), 0)::text AS n, sum(d.n * d.h)::text"
                     " || ' ' || sum(d.n * hashint8extended(d.h, 1))::text AS g FROM (SELECT"
                     f" j.n::numeric AS n, {table_digest.row_hash(text)} AS h FROM j"
                     f" {table_digest.ONCE}) d")
    return (f"WITH j({names}, n) AS MATERIALIZED (SELECT {cols}, count(*) FROM {table}"
            f" GROUP BY {cols}) " + " UNION ALL ".join(parts))


# The stored table's columns: names in order, and whether every one is text of a deterministic
# collation (equal values are then equal bytes, so GROUP BY puts only identical rows together)
_COLUMNS = ("SELECT array_agg(a.attname::text ORDER BY a.attnum) AS names,"
            " coalesce(bool_and(a.atttypid = 'pg_catalog.text'::pg_catalog.regtype"
            " AND co.collisdeterministic), false) AS text FROM pg_catalog.pg_attribute a"
            " LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation"
            " WHERE a.attrelid = $1::pg_catalog.regclass AND a.attnum > 0 AND NOT a.attisdropped")


def _digest_columns(db, table, sources):
    """The stored table's columns in order when the joint GROUP BY takes its digest exactly
    (table_digest: h of each row's ROW(c.*)::text): the table holds the quasi-identifiers and
    nothing else, all text of a deterministic collation -- then the rows of a joint class are
    byte-identical, one text and hash each, and its n rows add n times its hash to each sum
    (no text depends on a setting). Otherwise None: the digest takes a pass of its own."""
    row = db.query(_COLUMNS, [table], ["text"])[0]
    names = list(row["names"] or [])
    everything = [c for _, columns in sources for c in columns]
    if not row["text"] or sorted(names) != sorted(everything):
        return None
    return names


# Planner settings that let a GROUP BY of a release table run in parallel, whatever its size
# (PostgreSQL's defaults plan ~1M-row aggregates serially). Set only around such a statement
# and restored right after it (set_config(..., true) would otherwise last until the end of the
# caller's transaction): the caller's settings are unchanged by a request.
#
# What the parallel workers run, with deid_owner's rights: a scan of a deid_release table that
# deid created in this transaction (built-in column types, no RLS, triggers, rules or
# defaults), text hashing in the database's collation, count(), sum() and jsonb_build_object()
# (and, for the joint classes, a CTE of them) -- built-in code only, on deid's own table. Nothing the caller wrote (no view, operator, cast,
# domain or policy of theirs) is in the plan.
PARALLEL_GROUP_BY = (("parallel_setup_cost", "0"), ("parallel_tuple_cost", "0"),
                     ("min_parallel_table_scan_size", "0"),
                     ("max_parallel_workers_per_gather", "2"))


def parallel_query(db, settings=PARALLEL_GROUP_BY):
    """Context manager: `settings` for this transaction while it runs, then set back."""
    return table_digest.pinned(db, settings)
