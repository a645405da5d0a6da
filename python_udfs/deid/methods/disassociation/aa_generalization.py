"""method => 'disassociation' with options.model = 'generalization': k^m-anonymity by global
generalization over a code hierarchy, Apriori Anonymization (AA) of Terrovitis, Mamoulis,
Kalnis, VLDB 2008 (methods.apriori_anonymization) -- the comparison 003 makes. A pure plug-in
helper of plugins.disassociation: no SQL (the hierarchy was loaded by the pipeline).

    run(frame, req) -> ReleasePlan:
      <release>_generalized (codes text[])   one row per source record, its codes mapped through
                                             the cut (de-duplicated), in seeded random order
    and, for audit (deid.cluster_member, deid_admin only), the records grouped by their released
    set: cluster c holds the records whose released set is the c-th distinct one.
The independent check of what was stored is verify/shared/km_generalization.py.
"""
import numpy as np

from .. import metrics
from ...catalog import hierarchies
from ...errors import DeidError, INVALID_PARAMETER_VALUE, PRIVACY_MODEL_UNSATISFIABLE
from ...plan import Membership, ReleasePlan, Table, TextArrays

SUFFIX = "generalized"
_NOT_WITH = ("max_cluster_size", "utility")


def validate(k, opts):
    if opts.get("model", "disassociation") == "generalization":
        if not opts.get("hierarchy"):
            raise DeidError(INVALID_PARAMETER_VALUE, 'options.model "generalization" needs '
                            "options.hierarchy", hint='Name a hierarchy loaded with '
                            'deid.load_hierarchy: {"model": "generalization", "hierarchy": "icd9"}.')
        for o in _NOT_WITH:
            if o in opts:
                raise DeidError(INVALID_PARAMETER_VALUE, f"options.{o} is for disassociation only",
                                hint='Leave it out with {"model": "generalization"}.')
    elif "hierarchy" in opts:
        raise DeidError(INVALID_PARAMETER_VALUE, "options.hierarchy goes with options.model "
                        '"generalization"', hint='Add "model": "generalization", or leave '
                        "options.hierarchy out.")


def _tree(h):
    from .apriori_anonymization import AmbiguousLabel, build_tree
    if h.kind != "member":
        raise DeidError(INVALID_PARAMETER_VALUE, f'hierarchy "{h.name}" is not a member hierarchy',
                        hint="Load the codes' hierarchy with deid.load_hierarchy(name, rows).")
    leaves = h.leaves
    try:
        return build_tree(leaves, [h.ancestors(v) for v in leaves])
    except AmbiguousLabel as e:
        raise DeidError(INVALID_PARAMETER_VALUE, f'hierarchy "{h.name}" names two different sets '
                        "of codes with one label", detail=f"label {e.args[0]!r}",
                        hint="Give every node of the hierarchy its own label and load it again "
                             "(a released node must say which codes it stands for).") from None


def run(frame, req):
    from .apriori_anonymization import apriori_anonymize
    m, k, h = req.options.get("m", 2), req.k, req.option_hierarchy
    tree = _tree(h)
    index = {v: i for i, v in enumerate(tree.labels[:tree.anc.shape[0]])}
    leaf_of = np.asarray([index.get(v, -1) for v in frame.dictionary], np.int64)
    if np.any(leaf_of < 0):      # every code of the source must be a leaf (level 0)
        raise hierarchies.unknown_values(
            h.name, "the codes", [frame.dictionary[int(i)] for i in np.flatnonzero(leaf_of < 0)],
            data_dependent=True)
    offsets = np.asarray(frame.offsets, np.int64)
    leaves = leaf_of[np.asarray(frame.codes, np.int64)]
    if int(np.count_nonzero(np.diff(offsets))) < k:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE, "fewer than k records hold a code",
                        hint="Lower k or release more records: generalization to the root '*' "
                             "still needs k records with a code.", data_dependent=True)
    r = apriori_anonymize(offsets, leaves, tree, k, m)
    n = len(offsets) - 1
    perm = np.random.default_rng(int(req.seed)).permutation(n)
    lengths = np.diff(r.offsets)
    take = (np.repeat(r.offsets[:-1][perm], lengths[perm]) + np.arange(int(lengths.sum()))
            - np.repeat(np.cumsum(lengths[perm]) - lengths[perm], lengths[perm])).astype(np.int64)
    table = Table(f"{req.name}_{SUFFIX}", [TextArrays(
        "codes", np.r_[0, np.cumsum(lengths[perm])].astype(np.int64), r.nodes[take], tree.labels)])
    if len(table.name.encode()) > 63:
        raise DeidError(INVALID_PARAMETER_VALUE, "a release table name is too long",
                        hint="Choose a shorter release name (at most 50 characters).",
                        data_dependent=False)
    group = _groups(r.offsets, r.nodes)
    sizes = np.bincount(group)
    used = np.unique(r.label[leaves])
    gen = r.label != np.arange(len(r.label))
    codes = np.unique(leaves)
    return ReleasePlan(
        tables=[table], rows=n, groups=int(sizes.size),
        discernibility=float(metrics.discernibility(sizes)),
        membership=Membership(frame.rid, group + 1),
        metrics={"m": m, "model": "generalization", "hierarchy": h.name,
                 "codes": int(codes.size), "occurrences": int(leaves.size),
                 "codes_generalized": float(gen[codes].mean()) if codes.size else 0.0,
                 "occurrences_generalized": float(gen[leaves].mean()) if leaves.size else 0.0,
                 "released_codes": int(used.size), "generalizations": int(r.fixes),
                 "cut": sorted(tree.labels[g] for g in used if g >= tree.anc.shape[0]),
                 "distinct_released_records": int(sizes.size)})


def _groups(offsets, nodes):
    """Records with the same released set share a group (ids 0 .. G-1)."""
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    width = int(lengths.max()) if n and lengths.size else 0
    mat = np.full((n, width + 1), -1, np.int64)
    mat[:, 0] = lengths
    row = np.repeat(np.arange(n), lengths)
    mat[row, 1 + np.arange(nodes.size) - np.repeat(offsets[:-1], lengths)] = nodes
    return np.unique(mat, axis=0, return_inverse=True)[1].reshape(-1)
