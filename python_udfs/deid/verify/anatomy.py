"""The independent check of an anatomy release (001), before commit.

Checks with this package's own code (nothing from deid.methods):
  * the (K,L) model over every group (001 Def. 6; Def. 7 with column_l): verify.kl, on the
    RID sets of 001 Theorem 3;
  * that the RID sets of the first sensitive attribute partition the snapshot's rows
    exactly (001 Def. 1): verify.partition;
  * every QIT group has >= K rows and the QIT holds every row of the snapshot (a GROUP BY on
    the stored QIT);
  * the QIT's groups hold as many rows as their RID sets, and every count table (or the
    generalized table) holds exactly the RID sets' (group, value, count): count_tables.py.
The snapshot's row ids come from the read, not from the method.

Where the RID sets come from.  During a request the checks run on the RID sets in memory
(the plan's arrays), and rid_set_digest proves that the stored deid.rid_set rows are
byte-for-byte those arrays: the server digests the stored rows (SHA-256 per chunk) in one
aggregate pass and the verifier compares with the same digests of the arrays -- instead of
transferring and unpacking every stored RID.  deid.verify_release (no snapshot, no arrays:
``frame.stored_only``) reads the stored RID sets back in full (read_rid_sets) and checks them.
"""
import json

from dataclasses import dataclass

import numpy as np

from ..errors import DeidError, VERIFICATION_FAILED
from . import check_kl, check_partition
from .shared.sizes import check_group_counts
from .shared.arrays import _runs
from .shared.count_tables import check_tables, group_sizes, label_keys, used_labels
from .shared.readers import Coded
from .shared.rid_set_digest import check_stored, stored_digests

READS_SNAPSHOT_VALUES = False    # of the snapshot, only its row ids (the pipeline may drop the rest)


@dataclass
class Evidence:
    """What anatomy's plug-in computed in memory and hands this verifier (methods/contract.py):
    its RID sets, one array per kind (see in_memory_rid_sets), and what they were made from."""
    rid_sets: dict                 # group, code, count, rids, entries, attributes, dictionaries
    rids: np.ndarray = None        # the snapshot's row ids
    sensitive: list = None         # the sensitive attributes, in request order
    column_l: dict = None          # options.column_l
    l: int = None                  # the L of the (K,L) model, None for other models
PACKED_HINT = ("deid.rid_set packs 4 bytes per value in group_ids and rid_counts (big-endian int4)"
               " and 8 per RID in rids (big-endian int8): a row of another shape was changed after"
               " deid wrote it.")
VERIFY_HINT = ("Nothing was released. The stored release differs from what the method computed: "
               "report it with the request (deid.release keeps no row of a failed request).")


def verify(db, req, frame, tables):
    """Independent checks on what was stored, before commit."""
    sas = [c for c in req.columns if req.rel.columns[c].role == "sensitive"]
    column_l = req.options.get("column_l") or None
    out = {}
    all_rids = frame.rid
    # the digests of what was stored that the log row records, taken in the passes below
    # (table_digest.digests takes no pass of its own over them); none afterwards
    known = None if getattr(frame, "stored_only", False) else req.run.digests
    labels = None            # each attribute's labels, when its RID sets are proven stored
    if sas:
        if getattr(frame, "stored_only", False):
            g, a, v, n, flat = read_rid_sets(db, req.release_id)
            first_rids = flat[np.repeat(a == sas[0], n)]
            entries = {s: (g[a == s], v[a == s], n[a == s]) for s in sas}
        else:
            sets = req.evidence.rid_sets if req.evidence is not None else None
            if sets is None:
                raise DeidError(VERIFICATION_FAILED, "no RID sets to verify for this request",
                                hint=VERIFY_HINT)
            by_attribute = per_attribute(sets)
            out["stored"] = check_stored(stored_digests(db, req.release_id, known), by_attribute)
            # the first attribute's RID sets: its slice of the flat RIDs below (a view)
            first_rids = next((r for name, *_, r in by_attribute if name == sas[0]), None)
            if first_rids is None:
                raise DeidError(VERIFICATION_FAILED, f"no RID sets of attribute {sas[0]!r}",
                                hint=VERIFY_HINT)
            entries = {name: (group, label_keys(db, dictionary, code), count)
                       for name, group, code, dictionary, count, _ in by_attribute}
            labels = {name: used_labels(dictionary, code)
                      for name, _, code, dictionary, _, _ in by_attribute}
            del by_attribute
            g, a, v, n, flat = memory_rid_sets(sets)
        out["kl"] = check_kl(g, a, v, flat, req.k,
                             req.l if req.options.get("model", "kl") == "kl" else None,
                             column_l, rid_counts=n)
        out["partition"] = check_partition(first_rids, all_rids)
    group_ids, sizes = group_sizes(db, tables[0], known)
    out["sizes"] = check_group_counts(sizes, req.k)
    if int(sizes.sum()) != len(all_rids):
        raise DeidError(VERIFICATION_FAILED, "the release table does not hold every row of the snapshot",
                        detail=f"release table {int(sizes.sum())} rows, snapshot {len(all_rids)}",
                        hint=VERIFY_HINT)
    if sas:
        out["tables"] = check_tables(db, req, tables, sas, entries, group_ids, sizes, known,
                                     labels)
    return json.loads(json.dumps(out, default=lambda x: x.item() if hasattr(x, "item") else str(x)))


def per_attribute(sets):
    """The in-memory RID sets (the plan's evidence: one array per kind -- entries' groups,
    codes and counts, and the RIDs -- attribute after attribute, ``entries`` the offsets of
    each attribute's entries) as (attribute, group, code, dictionary, count, rids) per
    attribute: views, no copies."""
    e, count, out, r0 = sets["entries"], sets["count"], [], 0
    for i, (attribute, dictionary) in enumerate(zip(sets["attributes"], sets["dictionaries"])):
        e0, e1 = int(e[i]), int(e[i + 1])
        r1 = r0 + int(count[e0:e1].sum())
        out.append((attribute, sets["group"][e0:e1], sets["code"][e0:e1], dictionary,
                    count[e0:e1], sets["rids"][r0:r1]))
        r0 = r1
    if r0 != len(sets["rids"]):
        raise DeidError(VERIFICATION_FAILED, "the RID sets in memory do not add up to their RIDs",
                        hint=VERIFY_HINT)
    return out


def memory_rid_sets(sets):
    """The RID sets in memory (see per_attribute) in read_rid_sets' flat form. A value is
    identified by its text (equal labels of one attribute are one value, as in the stored
    catalog), not by the method's code. The group, count and RID arrays are the evidence's
    own (one array per kind already), not copies (check_kl reads the groups as int64 itself,
    int32 RIDs as they are); each entry's attribute is a code into the names (readers.Coded),
    not a name object per entry."""
    names, entries, values = [], [], []
    for attribute, group, code, dictionary, count, rids in per_attribute(sets):
        labels = np.array([("N" if x is None else "V" + x) for x in dictionary] + ["N"], object)
        _, text_code = np.unique(labels, return_inverse=True)
        names.append(attribute)
        entries.append(len(count))
        values.append(text_code[np.minimum(code, len(dictionary))])
    cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dt))
    as64 = (lambda x: np.asarray(x, np.int64))
    attrs = Coded(_runs(entries), names)                          # each entry's attribute
    return (np.asarray(sets["group"]), attrs, cat(values, np.int64),
            as64(sets["count"]), np.asarray(sets["rids"]))


def read_rid_sets(db, release_id):
    """The stored RID sets, flattened to one entry per group, attribute and
    value (001 Theorem 3): per entry its group, attribute, value hash and RID
    count, and all RIDs concatenated. group_ids, rid_counts and rids are packed
    big-endian bytea (int4, int4, int8 per element), read with np.frombuffer.
    Values are identified by hashtext(): a collision can only merge two values,
    which makes the verifier stricter (a duplicate entry it refuses), never more
    lenient."""
    rows = db.query(
        "SELECT attribute AS a,"
        " string_agg(int4send(cardinality(value_list)), ''::bytea ORDER BY chunk) AS nv,"
        " string_agg(int4send(length(group_ids)), ''::bytea ORDER BY chunk) AS ng,"
        " string_agg(int4send(length(rid_counts)), ''::bytea ORDER BY chunk) AS nc,"
        " string_agg(int4send(length(rids)), ''::bytea ORDER BY chunk) AS nr,"
        " string_agg(group_ids, ''::bytea ORDER BY chunk) AS g,"
        " string_agg((SELECT string_agg(int4send(coalesce(hashtext(v), -2147483648)), ''::bytea)"
        "             FROM unnest(r.value_list) AS v), ''::bytea ORDER BY chunk) AS v,"
        " string_agg(rid_counts, ''::bytea ORDER BY chunk) AS c,"
        " string_agg(rids, ''::bytea ORDER BY chunk) AS r"
        " FROM deid.rid_set r WHERE release_id = $1 GROUP BY attribute", [release_id], ["bigint"])
    groups, attrs, values, counts, flat = [], [], [], [], []
    for r in rows:
        def bad(what, hint=VERIFY_HINT):
            raise DeidError(VERIFICATION_FAILED, f"deid.rid_set of attribute {r['a']!r}: {what}", hint=hint)
        packed = {k: np.frombuffer(r[k] or b"", ">i4").astype(np.int64)
                  for k in ("nv", "ng", "nc", "nr", "v")}
        entries, rid_bytes = packed["nv"], packed["nr"]
        if not (np.array_equal(packed["ng"], 4 * entries) and np.array_equal(packed["nc"], 4 * entries)
                and packed["v"].size == entries.sum()):
            bad("group_ids, value_list and rid_counts differ in length", PACKED_HINT)
        if np.any(rid_bytes % 8):
            bad("rids is not a whole number of RIDs", PACKED_HINT)
        n = unpack_packed(r["c"], ">i4", entries.sum())
        per_chunk = np.bincount(np.repeat(np.arange(len(entries)), entries), weights=n,
                                minlength=len(entries)).astype(np.int64)
        if np.any(n < 0) or not np.array_equal(per_chunk, rid_bytes // 8):
            bad("rid_counts do not add up to the RIDs stored")
        groups.append(unpack_packed(r["g"], ">i4", entries.sum()))
        values.append(packed["v"])
        attrs.append(np.full(len(n), r["a"]))
        counts.append(n)
        flat.append(unpack_packed(r["r"], ">i8", per_chunk.sum()))
    cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dt))
    return (cat(groups, np.int64), cat(attrs, object), cat(values, np.int64),
            cat(counts, np.int64), cat(flat, np.int64))


def unpack_packed(buf, dtype, count=None):
    """The numbers of packed big-endian bytes (deid.rid_set's group_ids, rid_counts: '>i4';
    rids: '>i8') as one int64 array.  Raises DE002 if the bytes are not whole numbers, or
    not ``count`` of them when given."""
    buf = buf or b""
    size = np.dtype(dtype).itemsize
    if len(buf) % size or (count is not None and len(buf) != size * int(count)):
        raise DeidError(VERIFICATION_FAILED, "deid.rid_set holds packed numbers of an unexpected length",
                        hint=PACKED_HINT)
    return np.frombuffer(buf, dtype).astype(np.int64)
