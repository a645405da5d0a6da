"""method => 'disassociation': k^m-anonymity of set-valued records (diagnosis codes) by
disassociation (paper 003, Loukides et al.). A pure plug-in: no SQL.

    read_columns(rel, columns, opts) -> the columns read: the item column and, for a long
                          table, the record column (else the row id is the record id)
    plan_read(req, rid) -> a plan.SetReadSpec: an array column (``columns => '{codes}'``) or a
                          long table of (record, item) rows (``options.record``/``options.item``)
    run(frame, req)     -> ReleasePlan: DISASSOCIATION (003 Fig. 6: HORPART Fig. 8, VERPART
                          Fig. 9, refining Fig. 10; methods.disassociation.disassociate), released
                          as the tables of 003 Figs. 4 and 10:
      <release>_cluster (cluster_id, size)                        the clusters P_i
      <release>_record_chunk (cluster_id, chunk_id, codes text[]) one row per subrecord of a
                                                                  record chunk C_j, empty included
      <release>_item_chunk (cluster_id, code)                     the item chunk C_I of P_i
      <release>_shared_chunk (shared_id, cluster_ids int[], codes text[])
                                                                  the non-empty subrecords of a
                                                                  shared chunk of a joint cluster
    and the record -> cluster membership (audit, deid.cluster_member).
Cluster, chunk and shared ids are numbered from 1 as in 003's figures (P1, C1, ...).
A re-release of a grown table keeps the earlier release's clusters first, as they were, and
clusters the new records among themselves (kept.py; metrics "kept" logs each refining
segment's digest, which the next re-release compares).
The independent check of what was stored is verify/disassociation.py.
"""
import numpy as np

from .. import metrics
from ...errors import DeidError, INVALID_PARAMETER_VALUE, PRIVACY_MODEL_UNSATISFIABLE
from ...request.options import COMMON, Option, option_class, typed
from . import report
from . import aa_generalization, itemsets, kept as kept_clusters
from ...plan import (Fixed, IntArrays, Labels, Membership, ReleasePlan, SetReadSpec, Table,
                     TextArrays)

NAME = "disassociation"
RELEASE_HEAP = False            # no heap trim between the phases (methods/contract.py)
DISTRIBUTION = "shard_local"    # sharded: each node releases its rows (methods/contract.py)
HAS_L = False                   # no l: a policy's min_l does not apply (methods/contract.py)
COMPOSITION = "whole_clusters"  # composition rule (b): released records keep their clusters
ESTIMATE_VIEW = False
SHARD_PRECHECK = None           # records whole on one node need no pre-check
REPORT = report.REPORT
KEEPS_GROUPS = True             # a re-release keeps the earlier clusters (kept.py)
DISJOINT_HINT = ("The constraints of a utility policy must be disjoint (003 Sec. 3.1): put "
                 "each code in at most one constraint.")
OPTIONS = (
    Option("m", "int", "the number of codes an attacker may know (003 Def. 1); default 2.",
           low=1, high=16, example='{"m": 2}'),
    Option("record", "string", "with item: the source is a long table of (record, item) rows; "
           "the column identifying a record.", example='{"record": "patient_id", "item": "icd9"}'),
    Option("item", "string", "with record: the column holding one code per row.",
           example='{"record": "patient_id", "item": "icd9"}'),
    Option("max_cluster_size", "int", "HORPART's maxClusterSize (003 Fig. 8); default 2k, "
           "at least k.", low=2, high=2 ** 31 - 1, example='{"max_cluster_size": 24}'),
    Option("utility", "code_lists", "the utility policy U (003 Sec. 3.1): disjoint lists of "
           "codes that VERPART keeps together; deid.utility_policy(hierarchy, level) and "
           "deid.utility_from(relation) build them.", example='{"utility": [["250.01", "250.02"]]}'),
    Option("model", "choice", "'disassociation' (003, default) or 'generalization': k^m by "
           "global generalization over options.hierarchy (Apriori Anonymization, Terrovitis et "
           "al. 2008), released as <release>_generalized (codes text[]).",
           choices=("disassociation", "generalization"),
           example='{"model": "generalization", "hierarchy": "icd9"}'),
    Option("hierarchy", "string", "with model 'generalization': the codes' member hierarchy "
           "(deid.load_hierarchy).", example='{"model": "generalization", "hierarchy": "icd9"}'),
)
# the options as typed attributes, derived from OPTIONS (request/options.py): what this
# plug-in reads; the dict itself is what the release log keeps
Options = option_class("DisassociationOptions", COMMON + OPTIONS)


def _opts(options):
    return typed(Options, options)


def validate(k, l, opts):
    if k < 2:
        raise DeidError(INVALID_PARAMETER_VALUE, "k must be at least 2 for disassociation",
                        detail=f"k = {k}",
                        hint="k is the least number of candidate records (003 Def. 1), e.g. k => 5.")
    if l is not None:
        raise DeidError(INVALID_PARAMETER_VALUE, "disassociation takes no l",
                        hint="Leave l NULL; k^m-anonymity has k and options.m.")
    aa_generalization.validate(k, opts)
    if (_opts(opts).record is not None) != (_opts(opts).item is not None):
        raise DeidError(INVALID_PARAMETER_VALUE, "options.record and options.item go together",
                        hint='A long table needs both: {"record": "patient_id", "item": "icd9"}.')
    if (_opts(opts).max_cluster_size or k) < k:
        raise DeidError(INVALID_PARAMETER_VALUE, "options.max_cluster_size must be at least k",
                        hint="HORPART's maxClusterSize bounds clusters of at least k records "
                             "(003 fn. 3); default 2k.")
    seen = set()
    for group in _opts(opts).utility or []:
        if seen & set(group):
            raise DeidError(INVALID_PARAMETER_VALUE, "utility constraints overlap",
                            hint=DISJOINT_HINT)
        seen |= set(group)


def read_columns(rel, columns, opts):
    """(columns read besides the record id, the record column or None for the row id)."""
    if _opts(opts).record is not None:
        if columns is not None:
            raise DeidError(INVALID_PARAMETER_VALUE, "pass either columns or options.record/item",
                            hint="A long table is named by options.record and options.item; "
                                 "leave columns NULL.")
        record, item = rel.column(_opts(opts).record), rel.column(_opts(opts).item)
        if record.base_type not in ("int2", "int4", "int8"):
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f'record column "{record.name}" must be an integer',
                            hint="Name an integer column that identifies a record.")
        _not_identifier(item)
        return [item.name], record.name
    if columns is None or len(columns) != 1:
        raise DeidError(INVALID_PARAMETER_VALUE, "disassociation reads one set-valued column",
                        hint="Pass columns => '{codes}' (an array column), or for a long table "
                             'options => \'{"record": "patient_id", "item": "icd9"}\'.')
    col = rel.column(columns[0])
    if not col.base_type.startswith("_"):
        raise DeidError(INVALID_PARAMETER_VALUE, f'column "{col.name}" is not an array',
                        hint="Pass an array column (e.g. text[]), or for a long table one code "
                             'per row: options => \'{"record": "patient_id", "item": "'
                             + col.name + '"}\'.')
    _not_identifier(col)
    return [col.name], None


def _not_identifier(col):
    if col.role == "identifier":
        raise DeidError(INVALID_PARAMETER_VALUE, f'column "{col.name}" is an identifier',
                        hint="Identifiers are never released.")


def plan_read(req, rid):
    selection = req.selection.render() if req.selection is not None else None
    return SetReadSpec(req.rel, rid, req.columns[0], _opts(req.options).record is not None, selection)


def constraints(utility, dictionary):
    """The utility policy U as lists of code ids into the snapshot's dictionary (codes that
    no record holds are left out)."""
    if not utility:
        return None
    index = {v: i for i, v in enumerate(dictionary)}
    return [[index[c] for c in group if c in index] for group in utility]


def run(frame, req):
    """003 Fig. 6 on the snapshot (records ascending by record id) -> the release."""
    if _opts(req.options).model == "generalization":
        return aa_generalization.run(frame, req)
    from .disassociate import disassociate
    if len(frame.codes) == 0:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE, "no selected record holds a code",
                        hint="NULL and empty sets hold no code: select records that hold codes.",
                        data_dependent=True)
    m = (_opts(req.options).m or 2)
    max_size = _opts(req.options).max_cluster_size or 2 * req.k
    key = kept_clusters.parameters_key(req.k, m, max_size, _opts(req.options).utility)
    earlier = getattr(getattr(req, "run", None), "kept", None)    # a re-release keeps them
    kept = kept_clusters.kept_of(frame.rid, earlier, key)
    if kept is not None:
        kept_clusters.check_counts(kept, req.k)
    r = disassociate(frame.offsets, frame.codes, len(frame.dictionary), req.k, m,
                     max_cluster_size=_opts(req.options).max_cluster_size,
                     constraints=constraints(_opts(req.options).utility, frame.dictionary),
                     seed=int(req.seed), record_ids=frame.rid, kept=kept)
    labels = list(frame.dictionary)
    sizes = np.asarray(r.cluster_size, np.int64)
    cluster_ids = np.arange(1, sizes.size + 1, dtype=np.int32)
    # record chunks: one row per subrecord; chunk ids from 1 within each cluster
    per_chunk = np.diff(r.chunk_subrecords)
    chunk_cluster = np.asarray(r.chunk_cluster, np.int64)
    first = np.r_[True, chunk_cluster[1:] != chunk_cluster[:-1]] if chunk_cluster.size \
        else np.zeros(0, bool)
    run_start = np.maximum.accumulate(np.where(first, np.arange(chunk_cluster.size), 0)) \
        if chunk_cluster.size else np.zeros(0, np.int64)
    local = np.arange(chunk_cluster.size) - run_start + 1
    # stored by the length of their codes, then as made (cluster, chunk, shuffled subrecord):
    # rows of one length are copied as one block (write/copybin); the length is in the row
    by_length, sub_offsets, sub_codes = _by_length(r.subrecord_offsets, r.subrecord_codes,
                                                   labels)
    record_chunk = Table(f"{req.name}_record_chunk", [
        Fixed("cluster_id", np.repeat(chunk_cluster + 1, per_chunk).astype(np.int32)[by_length]),
        Fixed("chunk_id", np.repeat(local, per_chunk).astype(np.int32)[by_length]),
        TextArrays("codes", sub_offsets, sub_codes, labels)])
    item_cluster = np.repeat(np.arange(sizes.size), np.diff(r.item_offsets))
    item_chunk = Table(f"{req.name}_item_chunk", [
        Fixed("cluster_id", (item_cluster + 1).astype(np.int32)),
        Labels("code", np.asarray(r.item_codes, np.int64), labels)])
    # shared chunks: one row per stored (non-empty) subrecord, with its joint cluster
    n_sub = np.diff(r.shared_subrecords)
    owner = np.repeat(np.arange(r.n_shared), n_sub)
    span = np.diff(r.shared_cluster_offsets)[owner]
    take = np.repeat(r.shared_cluster_offsets[:-1][owner], span) + \
        np.arange(int(span.sum())) - np.repeat(np.cumsum(span) - span, span)
    shared_chunk = Table(f"{req.name}_shared_chunk", [
        Fixed("shared_id", (owner + 1).astype(np.int32)),
        IntArrays("cluster_ids", np.r_[0, np.cumsum(span)].astype(np.int64),
                  np.asarray(r.shared_cluster_ids, np.int64)[take] + 1),
        TextArrays("codes", r.shared_subrecord_offsets, r.shared_subrecord_codes, labels)])
    cluster = Table(f"{req.name}_cluster", [Fixed("cluster_id", cluster_ids),
                                             Fixed("size", sizes.astype(np.int32))])
    digests = kept_clusters.segment_digests(r, r.segment_of_cluster, local, labels)
    if kept is not None:
        kept_clusters.check_unchanged(kept, digests)
    for t in (cluster, record_chunk, item_chunk, shared_chunk):
        if len(t.name.encode()) > 63:
            raise DeidError(INVALID_PARAMETER_VALUE, "a release table name is too long",
                            hint="Choose a shorter release name (at most 50 characters).",
                            data_dependent=False)
    return ReleasePlan(
        tables=[cluster, record_chunk, item_chunk, shared_chunk], rows=frame.n,
        groups=int(sizes.size), discernibility=float(metrics.discernibility(sizes)),
        membership=Membership(frame.rid, np.asarray(r.cluster_of_record, np.int64) + 1),
        metrics={"m": m, "max_cluster_size": (_opts(req.options).max_cluster_size or 2 * req.k),
                 "clusters": int(sizes.size), "min_cluster": int(sizes.min()),
                 "record_chunks": int(chunk_cluster.size), "shared_chunks": int(r.n_shared),
                 "item_chunk_codes": int(len(r.item_codes)), "codes": len(labels),
                 "occurrences": int(len(frame.codes)),
                 "kept": {"key": key, "runs": [
                     [int(n), d] for n, d in zip(np.bincount(r.segment_of_cluster), digests)]}})


def _by_length(offsets, codes, labels):
    """The subrecords (CSR) in a stable order of their stored length (the bytes of their
    codes): (the order, its offsets, its codes)."""
    width = np.array([len(v.encode()) + 4 for v in labels] or [0], np.int64)
    cum = np.r_[0, np.cumsum(width[codes])]
    order = np.argsort(cum[offsets[1:]] - cum[offsets[:-1]], kind="stable")
    new_offsets, new_codes = itemsets.take_records(offsets, codes, order)
    return order, new_offsets, new_codes
