"""The independent check of a condensation release (004), from what was STORED, before commit.

  * the cluster membership read back from deid.cluster_member: every row of the snapshot in
    exactly one cluster, every cluster >= k rows (004 Def. 1; Alg. 2 step 2c);
  * through verify.cluster_moments (written from 004, nothing from deid.methods), on the
    method's in-memory rows: each cluster releases its size in rows (Alg. 3), the mean vector
    and covariance matrix of its unrounded synthetic numbers equal the snapshot cluster's to
    rtol 1e-9 (Alg. 3, moment-exact), its vital-status and category counts are unchanged
    (Alg. 2 step 2.d.i; categories decoded by counts), under survival_times 'original' its
    times are the original multiset (step 2.d.ii), and values stay in the observed range,
    integers integral (step 2.d.iii);
  * the STORED release table equals those in-memory released rows, as a multiset of rows: the
    server reads the table back in one aggregate pass (numbers as float8/int8, dates as days,
    categories as hashtext of their text), both sides are put in a canonical row order (a row
    hash, then numeric columns) and compared value by value, so a changed, swapped, added or
    dropped stored row fails.  numeric columns are compared to
    1e-12 relative (float8 -> numeric keeps 15 significant digits), float4 after float32
    rounding, everything else exactly.
The snapshot's row ids come from the read, not from the method.
"""
import json

import numpy as np

from ..errors import DeidError, VERIFICATION_FAILED
from ..sqltext import qualified, quote_ident
from .anatomy import unpack_arrays
from .cluster_moments import verify_condensation

STORE_SCHEMA = "deid_release"
NUMERIC_RTOL = 1e-12
HINT = ("Nothing was released. The stored release differs from what the method computed: "
        "report it with the request (deid.release keeps no row of a failed request).")


def verify(db, req, frame, tables):
    if getattr(frame, "stored_only", False):
        return verify_stored(db, req, frame, tables)
    ev = req_evidence(req)
    rows, clusters = read_membership(db, req.release_id, frame.rid)
    source = np.stack([frame.columns[c].values.astype(np.float64) for c in req.columns], axis=1) \
        if req.columns else np.zeros((frame.n, 0))
    kinds = ev["kinds"]
    numeric = [j for j, kd in enumerate(kinds) if kd != "categorical" and j != ev["status"]]
    report = verify_condensation(
        source, (rows, clusters), ev["released"], ev["cluster"], req.k,
        status_col=ev["status"], time_col=ev["time"], survival_times=ev["survival_times"],
        moment_columns=numeric, moment_values=ev["unrounded"],
        count_columns=[j for j, kd in enumerate(kinds) if kd == "categorical"
                       and j != ev["status"]],
        check_ranges=True, integer_columns=[j for j, kd in enumerate(kinds) if kd == "int"])
    report["stored_rows_match"] = check_stored(db, req, frame, tables[0], ev["released"])
    return json.loads(json.dumps(report, default=lambda x: x.item() if hasattr(x, "item") else str(x)))


def verify_stored(db, req, frame, tables):
    """Re-verification of a committed release (deid.verify_release: after a restore, or to
    audit), from what is stored only: the stored membership partitions the snapshot's rows into
    clusters of at least k rows (004 Def. 1) and the release table holds one synthetic row per
    source row. The exact moments need the in-memory synthesis: they were checked before the
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
    return {"mode": "stored only (moments were checked before commit)", "clusters": int(sizes.size),
            "min_cluster": int(sizes.min()) if sizes.size else None, "rows": int(frame.n)}


def req_evidence(req):
    """What the method computed in memory (plan.evidence, handed over by the pipeline)."""
    ev = getattr(req, "evidence", None) or {}
    if "released" not in ev:
        raise DeidError(VERIFICATION_FAILED, "no condensation evidence for this request", hint=HINT)
    return ev


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
    clusters = np.repeat(ids, counts)
    pos = np.searchsorted(snapshot_rids, rids)
    pos = np.minimum(pos, max(len(snapshot_rids) - 1, 0))
    if len(snapshot_rids) == 0 or not np.array_equal(snapshot_rids[pos], rids):
        raise DeidError(VERIFICATION_FAILED, "deid.cluster_member names a row that is not in the "
                        "snapshot", hint=HINT)
    return pos.astype(np.int64), clusters


def check_stored(db, req, frame, table, released):
    """The stored table, read back in one pass, equals the released rows as a multiset."""
    exprs, expected, tolerance = [], [], []
    for j, c in enumerate(req.columns):
        col, meta = frame.columns[c], req.rel.columns[c]
        q = quote_ident(c)
        v = released[:, j]
        if col.kind == "category":
            hashes = [r["h"] for r in db.query(
                "SELECT hashtext(v) AS h FROM unnest($1::text[]) WITH ORDINALITY d(v, o) ORDER BY o",
                [list(col.dictionary)], ["text[]"])] if col.dictionary else []
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
    stored = np.stack([np.frombuffer(row[f"c{j}"] or b"", ">i8" if req.columns and
                                     frame.columns[req.columns[j]].kind == "category" else ">f8")
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
