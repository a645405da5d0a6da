"""The store of each release's selection, and the entry of the composition rule.

Every release is readable by deid_reader, a role without SELECT on the source. Before a
release commits, its selected row ids are checked against every earlier release of the same
source by the composition rule (log/composition.py: the cells the selections and groupings
induce hold at least k rows), then stored here for the next one.

The row ids are the values of the request's row-id column (disassociation, 003: the record
column), kept per release in deid.release_selection (sorted, distinct, as a bitmap of their span or
as int8: log/rowids.py); the check is a set operation on them (numpy), never a re-read of
the source. Ids of another column are another id space: a release whose row-id column
differs from an earlier release's of the source cannot be compared, and is refused.

The source is the release's identity (log/source_identity.py): a view's releases count as
releases of the base table its row ids come from, and a table dropped and re-created keeps
the history of its name. Only releases whose audiences meet are compared (log/audience.py).

What it does not stop: releases of different sources (a copy of the table); generalization
releases logged before deid 1.1.0 (no row ids stored); groupings of different methods crossed
with each other. It is not differential privacy.

A requester with SELECT on the source may pass options.allow_overlap (recorded in the log
with the options, and as a warning in the release's metrics); a policy-based requester may
not. The refusal carries no count, no release name and no row.
"""
import numpy as np

from .. import locks
from ..errors import DeidError, INSUFFICIENT_PRIVILEGE
from . import audience, cellstore, composition, rowids, source_identity

OPTION = "allow_overlap"
REFUSAL, REFUSAL_HINT = composition.REFUSAL, composition.REFUSAL_HINT


# ------------------------------------------------------------------ pure set logic
def selected(rid):
    """The ids of a release's rows: sorted, distinct int64 (a read ordered by row id, as most
    are, is that already)."""
    ids = np.asarray(rid if rid is not None else [], dtype=np.int64)
    if ids.size < 2 or bool(np.all(ids[1:] > ids[:-1])):
        return ids
    return np.unique(ids)


def pack(ids):
    """Sorted distinct ids as stored in deid.release_selection (log/rowids.py)."""
    return rowids.pack(ids)


def unpack(data):
    return rowids.unpack(data)


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
    """Before the release `req` commits: refuse it when, read with the earlier releases of the
    source, its selection (the row ids `rid` of the read `spec`) or its groups (written in this
    transaction) would single out fewer than k rows (log/composition.py); then store it. Runs under a lock per source until the request's transaction ends, so two concurrent
    requests of one source are compared with each other."""
    ident = source_identity.of_request(db, req, row_id_of(spec))
    locks.lock_source_identity(db, ident.relation)     # a view and its table wait for each other
    row_id, ids, packed, earlier = check(db, req, spec, rid, groupings=True)
    cellstore.remember(db, earlier)            # the cells with this release, for the next
    db.execute("INSERT INTO deid.release_selection (release_id, row_id, n, rids)"
               " VALUES ($1, $2, $3, $4)", [req.release_id, row_id, int(ids.size), packed],
               ["bigint", "name", "bigint", "bytea"])
    source_identity.store(db, req.release_id, ident)
    audience.record_apart(db, req.release_id, composition.apart(db, req))


def row_id_of(spec):
    """The column whose values identify the rows of a read (003: the record column)."""
    return getattr(spec, "record", None) or spec.rid


def check(db, req, spec, rid, groupings=False):
    """The refusal of control(), storing nothing (a sharded request's pre-check on each node,
    distributed/eligibility.py, refuses before any node stores a part: its selections only,
    no groups are written yet); (row id column, the selected ids, packed, the earlier releases
    read, None when the rule was overridden)."""
    allow = bool(req.options.get(OPTION, False))
    if allow and req.grant.get("via") != "select":
        raise DeidError(INSUFFICIENT_PRIVILEGE,
                        f"a policy-based request may not pass options.{OPTION}",
                        hint="Only a requester with SELECT on the source may override the overlap "
                             "control; leave the option out.")
    row_id = row_id_of(spec)
    ident = source_identity.of_request(db, req, row_id)    # or refused: unmapped row ids
    ids = selected(rid)
    packed = pack(ids)
    earlier = None
    if allow:
        req.warnings.append(composition.WARNING)
    else:
        earlier = composition.check_selections(db, req, ident.row_id, ids)
        if groupings:
            composition.check_groupings(db, req, ids, earlier)
    return row_id, ids, packed, earlier
