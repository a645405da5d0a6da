"""The independent check of a condensation release (004) before commit: the method's rows are
checked in memory, then the stored catalog and release table are proven to be those rows.

  * the cluster membership the method hands over (the clusters' sizes and their source RIDs,
    what the writer stored in deid.cluster_member): every RID a row of the snapshot (whose RIDs
    come from the read, not from the method), every row of the snapshot in exactly one cluster,
    every cluster >= k rows (004 Def. 1; Alg. 2 step 2c);
  * through verify.cluster_moments (written from 004, nothing from deid.methods), on the
    method's in-memory rows: each cluster releases its size in rows (Alg. 3), the mean vector
    and covariance matrix of its unrounded synthetic numbers equal the snapshot cluster's to
    rtol 1e-9 (Alg. 3, moment-exact), its vital-status and category counts are unchanged
    (Alg. 2 step 2.d.i; categories decoded by counts), under survival_times 'original' its
    times are the original multiset (step 2.d.ii), and values stay in the observed range,
    integers integral (step 2.d.iii);
  * the STORED membership is byte-for-byte the checked one: one aggregate pass over
    deid.cluster_member returns, per stored row in cluster order, its cluster id, its RID count
    and sha256(array_send(rids)); the same records are built from the arrays here (array_send's
    format from the PostgreSQL documentation) and must be equal -- clusters 0, 1, ... without gap
    or repeat, the same counts, the same digests (a changed, moved, added or dropped RID or row
    changes a record unless SHA-256 collides);
  * the STORED release table holds exactly the checked released rows, as a multiset: one
    aggregate pass returns count(*) and the sum over its rows (mod 2^64) of g(row) =
    hash_record_extended(ROW(h, h >> 32), seed), h = hash_record_extended(ROW(every column),
    seed), seed a fresh random 64-bit number per verification (summed as 31 x the sum of
    hashint8extended(h, seed) plus the sum of hashint8extended(h >> 32, seed), the same number
    mod 2^64 without a record per row); verify.
    row_hash computes PostgreSQL's record hash of every in-memory row (integers, dates,
    float4/float8 in numpy from the PostgreSQL sources; category labels hashed once each by the
    server) and the counts and the sums must be equal.  A changed, swapped, added or dropped
    stored row changes the count or the sum unless the 64-bit sums collide (about 2^-64 for a
    change the seed does not know; the row hash is hashed again so that the sum binds every
    value to its row, see verify/row_hash.py).  A table with a numeric column (its float8 -> numeric
    rounding is the server's), or a sum that differs, is compared value by value instead
    (check_values: the table read back in one aggregate pass, both sides in a canonical row
    order; numeric to 1e-12 relative, float4 after float32 rounding, everything else exactly),
    which names the first differing column;
  * rare records (verify.rare_records: a copied rare record re-identifies): every released categorical value held by
    >= k source rows, no released row equal to a source row shared by fewer than k rows;
  * under survival_times 'recode' (verify.survival_pairs): every released (time, status) pair
    stands for >= k source rows, each value within the times of the rows it stands for, and
    deid.verify_release re-counts the pairs in the stored table;
  * the stored table's row-hash digest is logged with the report, for deid.verify_release
    (verify_stored) to compare with later: the check's own count and sum under its fresh seed
    (one row hash per stored row; the seed is logged only after the check has run).
"""
import dataclasses
import hashlib
import json
import secrets

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import DeidError, VERIFICATION_FAILED
from ..sqltext import qualified, quote_ident
from .shared.cluster_moments import verify_condensation
from .shared.rare_records import check_rare_records, mapped_codes, stored_category_counts
from .shared.survival_pairs import check_pairs, released_source_times, stored_pairs
from .shared.rid_set_digest import INT8OID, array_elements, array_header, unpack_arrays
from .shared import row_hash

READS_SNAPSHOT_VALUES = True     # the verifier compares the snapshot's values (methods/contract.py)


@dataclass
class Evidence:
    """What condensation's plug-in computed in memory and hands this verifier
    (methods/contract.py)."""
    kinds: list                # per released column: "numeric" | "integer" | "categorical" | ...
    released: np.ndarray       # the released rows, as stored (after rounding and repair)
    membership: tuple          # (cluster sizes, the member RIDs concatenated)
    unrounded: np.ndarray      # the moment-exact synthetic rows, before rounding
    cluster: np.ndarray        # the cluster of every released row
    status: Optional[int]      # the vital-status column's index (004 Alg. 2), or None
    time: Optional[int]        # the survival-time column's index, or None
    survival_times: str        # how survival times were released
    generalized: dict = field(default_factory=dict)   # column -> {"labels", "map"} (rare values)
    bin_rows: Optional[int] = None   # the k the recoded times' bins were cut at (>= req.k)

STORE_SCHEMA = "deid_release"
NUMERIC_RTOL = 1e-12
HINT = ("Nothing was released. The stored release differs from what the method computed: "
        "report it with the request (deid.release keeps no row of a failed request).")


def verify(db, req, frame, tables):
    if getattr(frame, "stored_only", False):
        return verify_stored(db, req, frame, tables)
    ev = req_evidence(req)
    sizes, member_rids = ev.membership
    rows, clusters = membership_rows(sizes, member_rids, frame.rid)
    generalized = ev.generalized or {}
    source = np.stack([mapped_codes(c, frame.columns[c], generalized[c], req.k)
                       .astype(np.float64) if c in generalized
                       else frame.columns[c].values.astype(np.float64) for c in req.columns],
                      axis=1) if req.columns else np.zeros((frame.n, 0))
    kinds = ev.kinds
    numeric = [j for j, kd in enumerate(kinds) if kd != "categorical" and j != ev.status]
    categories = [j for j, kd in enumerate(kinds) if kd == "categorical"
                  and j not in (ev.status, ev.time)]
    report = verify_condensation(
        source, (rows, clusters), ev.released, ev.cluster, req.k,
        status_col=ev.status, time_col=ev.time, survival_times=ev.survival_times,
        moment_columns=numeric, moment_values=ev.unrounded, count_columns=categories,
        check_ranges=True, integer_columns=[j for j, kd in enumerate(kinds) if kd == "int"])
    if ev.survival_times == "recode" and ev.time is not None:
        report["time_status_pairs"] = dict(
            check_pairs(source[:, ev.time], source[:, ev.status], ev.released[:, ev.time],
                        ev.released[:, ev.status], req.k, ev.bin_rows),
            time=req.columns[ev.time], status=req.columns[ev.status])
        # the rare-record check compares in the release's representation: a source row's
        # time as the value of its bin
        source[:, ev.time] = released_source_times(source[:, ev.time], source[:, ev.status],
                                                   ev.released[:, ev.time],
                                                   ev.released[:, ev.status])
    report["rare_records"] = check_rare_records(source, ev.released, req.k,
                                                categories, list(req.columns))
    report["stored_membership"] = check_membership(db, req.release_id, sizes, member_rids)
    report["stored_rows_match"], report["stored_digest"] = check_stored(
        db, req, frame, tables[0], ev.released, generalized)
    return json.loads(json.dumps(report, default=lambda x: x.item() if hasattr(x, "item") else str(x)))


def verify_stored(db, req, frame, tables):
    """Re-verification of a committed release (deid.verify_release: after a restore, or to
    audit), from what is stored only: the stored membership partitions the snapshot's rows into
    clusters of at least k rows (004 Def. 1) and the release table holds one synthetic row per
    source row; every value of a categorical column occurs in >= k stored rows (rare records); the stored table has the row-hash digest logged when it was verified, so a row
    changed afterwards (a copied rare source row included) fails. The exact moments and the
    comparison with the source rows need the snapshot's values: they were checked before the
    release committed and are not re-checked here (the report says so)."""
    rows, clusters = read_membership(db, req.release_id, frame.rid)
    if not np.array_equal(np.bincount(rows, minlength=frame.n), np.ones(frame.n, np.int64)):
        raise DeidError(VERIFICATION_FAILED, "deid.cluster_member does not partition the snapshot",
                        hint=HINT)
    _, sizes = np.unique(clusters, return_counts=True)
    if sizes.size and sizes.min() < req.k:
        raise DeidError(VERIFICATION_FAILED, "a stored cluster has fewer than k rows", hint=HINT)
    stored = db.value(f"SELECT count(*) FROM deid_release.{quote_ident(tables[0])}")
    if int(stored) != frame.n:
        raise DeidError(VERIFICATION_FAILED, "the release table does not hold one row per source row",
                        hint=HINT)
    report = {"mode": "stored only (moments were checked before commit)",
              "clusters": int(sizes.size), "min_cluster": int(sizes.min()) if sizes.size else None,
              "rows": int(frame.n)}
    logged = logged_verification(db, req.release_id)
    categories = (logged.get("rare_records") or {}).get("category_columns")
    report["rare_records"] = "not logged (an older release)" if categories is None else \
        stored_category_counts(db, tables[0], categories, req.k)
    pairs = logged.get("time_status_pairs")
    if pairs:
        report["time_status_pairs"] = stored_pairs(db, tables[0], pairs["time"],
                                                   pairs["status"], req.k)
    report["stored_digest"] = "not logged (an older release)" if "stored_digest" not in logged \
        else check_stored_digest(db, req, tables[0], logged["stored_digest"])
    return report


def logged_verification(db, release_id):
    """The report of the verification that ran before the release committed (its log)."""
    logged = db.value("SELECT metrics->'verification' FROM deid.release WHERE release_id = $1",
                      [release_id], ["bigint"])
    if logged is None:
        return {}
    return json.loads(logged) if isinstance(logged, str) else dict(logged)


def req_evidence(req):
    """What the method computed in memory (plan.evidence, handed over by the pipeline)."""
    ev = req.evidence
    if not isinstance(ev, Evidence):
        raise DeidError(VERIFICATION_FAILED, "no condensation evidence for this request", hint=HINT)
    return ev


def membership_rows(sizes, rids, snapshot_rids):
    """(row index into the snapshot, cluster id) of the membership (clusters 0, 1, ... of
    ``sizes`` rows, their RIDs concatenated); a RID that is not a snapshot row fails."""
    sizes, rids = np.asarray(sizes, np.int64), np.asarray(rids, np.int64)
    if sizes.sum() != rids.size or (sizes.size and sizes.min() < 0):
        raise DeidError(VERIFICATION_FAILED, "the cluster membership is malformed", hint=HINT)
    return _snapshot_rows(rids, snapshot_rids), np.repeat(np.arange(sizes.size), sizes)


def _snapshot_rows(rids, snapshot_rids):
    """Position of every RID in the snapshot's RIDs (sorted, unique); a RID that is not a
    snapshot row fails.  RIDs of a short range (the usual case: row ids from a sequence) are
    looked up in a table indexed by RID, O(n); others by binary search."""
    n = len(snapshot_rids)
    if n and rids.size and int(snapshot_rids[-1]) - int(snapshot_rids[0]) < 4 * n + 1024:
        lo, span = int(snapshot_rids[0]), int(snapshot_rids[-1]) - int(snapshot_rids[0]) + 1
        offset = rids - lo
        if offset.min() < 0 or offset.max() >= span:
            raise DeidError(VERIFICATION_FAILED, "deid.cluster_member names a row that is not "
                            "in the snapshot", hint=HINT)
        table = np.full(span, -1, dtype=np.int64)
        table[snapshot_rids - lo] = np.arange(n, dtype=np.int64)
        pos = table[offset]
        if pos.min() < 0:
            raise DeidError(VERIFICATION_FAILED, "deid.cluster_member names a row that is not "
                            "in the snapshot", hint=HINT)
        return pos
    pos = np.searchsorted(snapshot_rids, rids)
    pos = np.minimum(pos, max(len(snapshot_rids) - 1, 0))
    if len(snapshot_rids) == 0 or not np.array_equal(snapshot_rids[pos], rids):
        raise DeidError(VERIFICATION_FAILED, "deid.cluster_member names a row that is not in the "
                        "snapshot", hint=HINT)
    return pos.astype(np.int64)


_MEMBER_SQL = ("SELECT string_agg(int4send(cluster_id) || int4send(cardinality(rids))"
               " || sha256(array_send(rids)), ''::bytea ORDER BY cluster_id) AS d"
               " FROM deid.cluster_member WHERE release_id = $1")
_MEMBER_RECORD = np.dtype([("cluster", ">i4"), ("rids", ">i4"), ("digest", "S32")])


def check_membership(db, release_id, sizes, rids):
    """The stored deid.cluster_member rows are byte-for-byte clusters 0, 1, ... with these
    sizes and RIDs (module docstring). Raises DE002; returns what was compared."""
    buf = db.query(_MEMBER_SQL, [release_id], ["bigint"])[0]["d"] or b""
    if len(buf) % _MEMBER_RECORD.itemsize:
        raise DeidError(VERIFICATION_FAILED, "deid.cluster_member could not be digested", hint=HINT)
    got = np.frombuffer(buf, _MEMBER_RECORD)
    sizes = np.asarray(sizes, np.int64)
    if got.size != sizes.size or not np.array_equal(got["cluster"], np.arange(sizes.size)) \
            or not np.array_equal(got["rids"].astype(np.int64), sizes):
        raise DeidError(VERIFICATION_FAILED, "deid.cluster_member does not hold the checked "
                        "clusters", hint=HINT)
    image = memoryview(array_elements(np.asarray(rids, np.int64), ">i8"))
    ends = np.cumsum(sizes) * 12
    digests = [hashlib.sha256(array_header(int(n), INT8OID) + image[e - 12 * n:e]).digest()
               for n, e in zip(sizes.tolist(), ends.tolist())]
    bad = np.flatnonzero(np.asarray(digests, "S32") != got["digest"])
    if bad.size:
        raise DeidError(VERIFICATION_FAILED, f"deid.cluster_member: cluster {int(bad[0])} is not "
                        "the cluster the verifier checked", hint=HINT)
    return {"clusters": int(sizes.size), "digest": "sha256 per cluster"}


def read_membership(db, release_id, snapshot_rids):
    """(row index into the snapshot, cluster id) per stored membership; a RID that is not a
    snapshot row fails (snapshot RIDs are unique and sorted)."""
    r = db.query("SELECT string_agg(int4send(cluster_id), ''::bytea ORDER BY cluster_id) AS ids,"
                 " string_agg(int4send(cardinality(rids)), ''::bytea ORDER BY cluster_id) AS n,"
                 " string_agg(array_send(rids), ''::bytea ORDER BY cluster_id) AS r"
                 " FROM deid.cluster_member WHERE release_id = $1", [release_id], ["bigint"])[0]
    ids = np.frombuffer(r["ids"] or b"", ">i4").astype(np.int64)
    counts = np.frombuffer(r["n"] or b"", ">i4").astype(np.int64)
    rids = unpack_arrays(r["r"], counts)
    return _snapshot_rows(rids, snapshot_rids), np.repeat(ids, counts)


def released_column(req, j):
    """The type the release stores column j in: its own, but float8 for the survival time
    under survival_times 'ranked' (its values lie strictly between the source's times)."""
    meta = req.rel.columns[req.columns[j]]
    ev = getattr(req, "evidence", None)
    if ev is not None and ev.survival_times == "ranked" and j == ev.time:
        return dataclasses.replace(meta, type="double precision", base_type="float8")
    return meta


def _category(req, frame, generalized, j):
    """(labels, SQL type) of a column released as category labels, else None."""
    c = req.columns[j]
    if c in generalized:
        return list(generalized[c]["labels"]), "text"
    col = frame.columns[c]
    return (list(col.dictionary), req.rel.columns[c].type) if col.kind == "category" else None


def check_stored(db, req, frame, table, released, generalized=None):
    """The stored table holds exactly the released rows, as a multiset: by the row-hash sum
    (module docstring), else value by value (check_values). Returns how it was compared and
    the stored table's digest (:func:`stored_digest`): the check's own sum, under its seed."""
    generalized = generalized or {}
    hashes = _digest_columns(db, req, frame, released, generalized)
    if hashes is None:
        check_values(db, req, frame, table, released, generalized)
        return "values (a numeric column)", stored_digest(db, req.columns, table)
    # one seed for the check and the logged digest: one row hash per stored row, not two.
    # The seed is fresh (drawn after the table was written) and logged only with the
    # verification's report, so the check is as strong as under a seed of its own, and the
    # digest is what it was (its seed is logged either way)
    seed, columns = hashes
    stored_rows, stored_sum = stored_table_sum(db, req.columns, table, seed)
    if stored_rows != released.shape[0]:
        raise DeidError(VERIFICATION_FAILED, "the stored release table does not hold the released "
                        "rows", detail=f"stored {stored_rows}, released {released.shape[0]}",
                        hint=HINT)
    digest = {"seed": str(seed), "sum": str(stored_sum), "rows": stored_rows}
    if stored_sum == row_hash.row_hash_sum(columns, seed):
        return "row-hash sum", digest
    check_values(db, req, frame, table, released, generalized)      # names the column, or the sums were off
    return "values (the row-hash sums differed)", digest


def stored_table_sum(db, columns, table, seed):
    """(count(*), the row-hash sum mod 2^64) of a stored table, in one aggregate pass."""
    rows, (total,) = stored_table_sums(db, columns, table, (seed,))
    return rows, total


def stored_table_sums(db, columns, table, seeds):
    """(count(*), [the row-hash sum mod 2^64 under each of ``seeds``]) of a stored table, in
    one aggregate pass."""
    # sum of hash_record_extended(ROW(h, h >> 32), seed) = 31 * sum of hashint8extended(h, seed)
    # + sum of hashint8extended(h >> 32, seed) (a record hash is 31 * e1 + e2, mod 2^64): two
    # bigint sums (exact, 128-bit accumulators) instead of building a record per row
    record = "ROW(" + ", ".join(f"t.{quote_ident(c)}" for c in columns) + ")"
    sums = ", ".join(f"sum(hashint8extended(r.h{i}, ${i + 1}))::text AS a{i},"
                     f" sum(hashint8extended(r.h{i} >> 32, ${i + 1}))::text AS b{i}"
                     for i in range(len(seeds)))
    hashes = ", ".join(f"hash_record_extended({record}, ${i + 1}) AS h{i}"
                       for i in range(len(seeds)))
    row = db.query(f"SELECT count(*) AS n, {sums} FROM {qualified(STORE_SCHEMA, table)} t,"
                   f" LATERAL (SELECT {hashes}) r", list(seeds), ["bigint"] * len(seeds))[0]
    return int(row["n"]), [(31 * int(row[f"a{i}"] or 0) + int(row[f"b{i}"] or 0)) % (1 << 64)
                           for i in range(len(seeds))]


def _fresh_seed():
    return secrets.randbits(63) | 1


def stored_digest(db, columns, table):
    """What deid.verify_release compares the stored table with later (logged with the
    verification): its row count and row-hash sum under a fresh seed.  Any later change of a
    stored row changes them (unless 64-bit sums collide); it detects changes by anyone who
    cannot also rewrite deid.release, i.e. anyone but deid's owner or a superuser."""
    seed = _fresh_seed()
    rows, total = stored_table_sum(db, columns, table, seed)
    return {"seed": str(seed), "sum": str(total), "rows": rows}


def check_stored_digest(db, req, table, logged):
    """deid.verify_release: the stored table still has the digest logged at commit."""
    rows, total = stored_table_sum(db, req.columns, table, int(logged["seed"]))
    if rows != int(logged["rows"]) or str(total) != logged["sum"]:
        raise DeidError(VERIFICATION_FAILED, "the stored release table changed after it was "
                        "verified", hint="Drop the release and request it again.")
    return "row-hash sum as logged"


def _digest_columns(db, req, frame, released, generalized):
    """(seed, element hashes of every column) of the released rows, or None when a column's
    type is not hashed here (numeric)."""
    if not req.columns:
        return None
    seed = secrets.randbits(63) | 1
    out = []
    for j, c in enumerate(req.columns):
        meta = released_column(req, j)
        v = released[:, j]
        category = _category(req, frame, generalized, j)
        if category is not None:
            labels = [r["h"] for r in db.query(row_hash.label_hashes_sql(category[1]),
                                               [category[0], seed], ["text[]", "bigint"])]
            out.append(row_hash.column_hash(v.astype(np.int64), None, seed, labels))
        elif meta.base_type not in row_hash.HASHED_TYPES:
            return None
        elif meta.base_type in ("float8", "float4"):
            x = v.astype(np.float32).astype(np.float64) if meta.base_type == "float4" else v
            out.append(row_hash.column_hash(x, meta.base_type, seed))
        else:
            out.append(row_hash.column_hash(np.rint(v).astype(np.int64), meta.base_type, seed))
    return seed, out


def check_values(db, req, frame, table, released, generalized=None):
    """The stored table, read back in one pass, equals the released rows as a multiset."""
    exprs, expected, tolerance = [], [], []
    categories = [_category(req, frame, generalized or {}, j) for j in range(len(req.columns))]
    for j, c in enumerate(req.columns):
        meta = released_column(req, j)
        q = quote_ident(c)
        v = released[:, j]
        if categories[j] is not None:
            hashes = [r["h"] for r in db.query(
                "SELECT hashtext(v) AS h FROM unnest($1::text[]) WITH ORDINALITY d(v, o) ORDER BY o",
                [categories[j][0]], ["text[]"])] if categories[j][0] else []
            table_ = np.append(np.asarray(hashes, np.int64), 1 << 32)      # NULL: out of int4
            exprs.append(f"int8send(coalesce(hashtext({q}::text)::int8, {1 << 32}))")
            expected.append(table_[v.astype(np.int64)].astype(np.float64))
            tolerance.append(0.0)
        elif meta.base_type == "date":
            exprs.append(f"float8send(({q} - DATE '1970-01-01')::float8)")
            expected.append(np.rint(v))
            tolerance.append(0.0)
        elif meta.base_type in ("int2", "int4", "int8"):
            exprs.append(f"float8send({q}::float8)")
            expected.append(np.rint(v))
            tolerance.append(0.0)
        else:
            exprs.append(f"float8send({q}::float8)")
            expected.append(v.astype(np.float32).astype(np.float64) if meta.base_type == "float4"
                            else v)
            tolerance.append(NUMERIC_RTOL if meta.base_type == "numeric" else 0.0)
    select = ", ".join(f"string_agg({e}, ''::bytea) AS c{j}" for j, e in enumerate(exprs))
    row = db.query(f"SELECT count(*) AS n{', ' + select if select else ''}"
                   f" FROM {qualified(STORE_SCHEMA, table)}")[0]
    if int(row["n"]) != released.shape[0]:
        raise DeidError(VERIFICATION_FAILED, "the stored release table does not hold the released "
                        "rows", detail=f"stored {row['n']}, released {released.shape[0]}", hint=HINT)
    if not exprs:
        return True
    stored = np.stack([np.frombuffer(row[f"c{j}"] or b"", ">i8" if categories[j] is not None
                                     else ">f8")
                       .astype(np.float64) for j in range(len(exprs))], axis=1)
    want = np.stack(expected, axis=1)
    inexact = [j for j, t in enumerate(tolerance) if t]
    stored, want = _canonical(stored, inexact), _canonical(want, inexact)
    tol = np.asarray(tolerance) * np.maximum(np.abs(want), 1.0)
    if stored.shape != want.shape or np.any(np.abs(stored - want) > tol):
        bad = int(np.flatnonzero((np.abs(stored - want) > tol).any(axis=0))[0]) \
            if stored.shape == want.shape else 0
        raise DeidError(VERIFICATION_FAILED, f'the stored release table differs from the released '
                        f'rows in column "{req.columns[bad]}"', hint=HINT)
    return True


def _canonical(a, inexact):
    """The rows of ``a`` in a canonical order, so two tables holding the same multiset of rows
    line up row for row: by a 64-bit hash of the exactly compared columns, then by the inexact
    (numeric) columns. Equal rows hash equally; two different rows whose hashes collide (about
    n^2 / 2^64) could only make the check fail, never pass."""
    if a.shape[0] == 0:
        return a
    a = a + 0.0                                    # -0.0 -> 0.0: the same value, the same bits
    exact = [j for j in range(a.shape[1]) if j not in inexact]
    h = np.zeros(a.shape[0], np.uint64)
    with np.errstate(over="ignore"):
        for j in exact:
            h ^= np.ascontiguousarray(a[:, j]).view(np.uint64)
            h *= np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(29)
    keys = [a[:, j] for j in reversed(inexact)] + [h]
    order = np.lexsort(keys) if len(keys) > 1 else np.argsort(h, kind="stable")
    return a[order]
