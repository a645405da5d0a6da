"""Overlap control: no two releases of one source differ by a few rows.

Every release is readable by deid_reader, a role without SELECT on the source. Two releases
of one source whose selected rows differ by d rows, 0 < d < k, give away those d rows: the
difference of the two releases (``release.a EXCEPT ALL release.b``; for anatomy, the
difference of the count tables, 001 Def. 3) is their sensitive values, which the k of either
release was meant to hide among at least k rows. So before a release commits, its selected
row ids A are compared with every earlier release's B of the same source (deid.release.source:
the relation, whatever the method, the columns or the requester; committed, replaced or
dropped alike, since each was readable while it lived): |A \\ B| and |B \\ A| must each be 0
or at least max(k_A, k_B) -- the rows only one release holds are hidden among themselves, and
no later release may weaken an earlier one's k.

The row ids are the values of the request's row-id column (disassociation, 003: the record
column), kept per release in deid.release_selection, packed as deid.rid_set's RIDs (sorted,
distinct, int8 big-endian); the check is a set operation on them (numpy on sorted int64),
never a re-read of the source. Ids of another column are another id space: a release whose
row-id column differs from an earlier release's of the source cannot be compared, and is
refused in the same way.

What it does not stop: a tracker over three or more releases, each pair differing by 0 or k
or more rows, whose sum and difference isolate one row -- R1 = U + {x}, R2 = U + V + {x},
R3 = V + {x} with |U|, |V| >= k: R1 + R3 - R2 = {x} (``age < 50 OR age = 99``, all rows,
``age >= 50``: tests/security/test_composition.py shows it); releases of different sources (a copy of the table, a view over it);
generalization releases logged before deid 1.1.0 (no row ids stored; the update rebuilds the
others' selections); a source dropped and re-created (a new relation); two requests racing in
REPEATABLE READ transactions (the later one's snapshot predates the earlier one's commit; READ
COMMITTED, the default, waits for the lock and sees it, SERIALIZABLE fails one of them). It
is not differential privacy: it bounds what two releases give away, not what many do.

A requester with SELECT on the source may pass options.allow_overlap (recorded in the log
with the options); a policy-based requester may not. The refusal carries no count, no release
name and no row: its existence tells a policy requester only that some earlier selection
differs from this one by fewer than k rows, which the k check already tells of a selection of
those rows.
"""
import numpy as np

from .. import locks
from ..errors import DeidError, INSUFFICIENT_PRIVILEGE, PRIVACY_MODEL_UNSATISFIABLE

OPTION = "allow_overlap"
REFUSAL = "the release would differ from an earlier release of the same source by too few rows"
REFUSAL_HINT = ("Select the same rows as the earlier releases of this source, or rows that differ "
                "from each of them by at least k rows either way (and use the same row id "
                "column). A requester with SELECT on the source may override this with "
                "options => '{\"allow_overlap\": true}'.")


# ------------------------------------------------------------------ pure set logic
def selected(rid):
    """The ids of a release's rows: sorted, distinct int64 (a read ordered by row id, as most
    are, is that already)."""
    ids = np.asarray(rid if rid is not None else [], dtype=np.int64)
    if ids.size < 2 or bool(np.all(ids[1:] > ids[:-1])):
        return ids
    return np.unique(ids)


def pack(ids):
    """Sorted distinct ids as deid's packed bytea (int8 big-endian, back to back)."""
    return np.asarray(ids, dtype=">i8").tobytes()


def unpack(data):
    return np.frombuffer(bytes(data or b""), dtype=">i8").astype(np.int64)


def differences(a, b):
    """(|a \\ b|, |b \\ a|) of two sorted distinct int64 arrays: |a & b| by a binary search
    of a's ids in b (no merge sort of both)."""
    if a.size == 0 or b.size == 0:
        return a.size, b.size
    at = np.searchsorted(b, a)
    common = int(np.count_nonzero(b[np.minimum(at, b.size - 1)] == a))
    return a.size - common, b.size - common


def too_close(a, b, k):
    """True when a and b differ by more than 0 and fewer than k rows, either way."""
    return any(0 < d < k for d in differences(a, b))


# ------------------------------------------------------------------ the check and the store
def control(db, req, spec, rid):
    """Before the release `req` commits: refuse when its selection (the row ids `rid` of the
    read `spec`) differs by 0 < d < k rows from an earlier release of the source; then store
    it. Runs under a lock per source until the request's transaction ends, so two concurrent
    requests of one source are compared with each other."""
    locks.lock_source(db, req.rel.oid)
    row_id, ids, packed = check(db, req, spec, rid)
    db.execute("INSERT INTO deid.release_selection (release_id, row_id, n, rids)"
               " VALUES ($1, $2, $3, $4)", [req.release_id, row_id, int(ids.size), packed],
               ["bigint", "name", "bigint", "bytea"])


def check(db, req, spec, rid):
    """The refusal of control(), storing nothing (a sharded request's pre-check on each node,
    distributed/eligibility.py, refuses before any node stores a part); (row id column, the
    selected ids, packed)."""
    allow = bool(req.options.get(OPTION, False))
    if allow and req.grant.get("via") != "select":
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"a policy-based request may not pass options.{OPTION}",
                        hint="Only a requester with SELECT on the source may override the overlap "
                             "control; leave the option out.")
    row_id = getattr(spec, "record", None) or spec.rid
    ids = selected(rid)
    packed = pack(ids)
    if not allow:
        _check(db, req, row_id, ids, packed)
    return row_id, ids, packed


def _check(db, req, row_id, ids, packed):
    """Compare with every earlier selection of the source that is not the same set: first
    which they are (equal ones are skipped in SQL), then their ids one release at a time."""
    earlier = db.query(
        "SELECT s.release_id, r.name, greatest($2, (r.parameters->>'k')::int) AS k,"
        " s.row_id = $3 AS same_ids FROM deid.release_selection s"
        " JOIN deid.release r ON r.release_id = s.release_id"
        " WHERE r.source = $1 AND (s.row_id <> $3 OR s.rids <> $4) ORDER BY s.release_id",
        [req.rel.oid, req.k, row_id, packed], ["oid", "int", "name", "bytea"])
    for e in earlier:
        if e["same_ids"]:
            other = unpack(db.value("SELECT rids FROM deid.release_selection WHERE release_id = $1",
                                    [e["release_id"]], ["bigint"]))
            if not too_close(ids, other, int(e["k"] or req.k)):
                continue
        raise _refusal(req, e)


def _refusal(req, earlier):
    """One refusal for every such case, with no number in it; a requester with SELECT is told
    which release (the detail, which a policy-based request never sees)."""
    e = DeidError(PRIVACY_MODEL_UNSATISFIABLE, REFUSAL, hint=REFUSAL_HINT)
    if req.grant.get("via") == "select":
        e.detail = f'the earlier release is "{earlier["name"]}"'
    e.data_dependent = True
    return e
