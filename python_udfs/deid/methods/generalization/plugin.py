"""method => 'generalization': request-driven, priority-weighted generalization over
hierarchies with k per source system (paper 002, sec. 4.5). A pure plug-in: no SQL.

    plan_read(req, rid)  -> what to read; a generalized value in the selection (PT = '1') matches
                            its leaves (sec. 4.5 step 2)
    run(frame, req)      -> ReleasePlan: class table (step 1), methods.generalize.greedy (step 3;
                            or the optimal lattice search), the release table with the QIs as
                            hierarchy labels (step 4), and the classes per source system (the
                            catalog writer derives them from the stored release).
For a requester without SELECT the policy's minimum k also holds over ALL released
quasi-identifiers jointly, unless the policy allows per-source k (joint_k_required:
per-source k does not protect a record whose combination of values across the source systems
is rare -- it can be unique in the release although every source holds k twins of it).
The independent check of what was stored (k per source system, sec. 2, and k jointly where
required) is verify/generalization.py.
"""
import numpy as np

from ...catalog import hierarchies
from .. import kept_groups, support as ms
from ...errors import DeidError, INVALID_PARAMETER_VALUE, PRIVACY_MODEL_UNSATISFIABLE
from ...read.frame import value_dictionary
from ...request.options import COMMON, Option, option_class, typed
from . import report
from ...plan import Labels, ReleasePlan, Membership, SourceClasses, SourceValues, Table

NAME = "generalization"
RELEASE_HEAP = False            # no heap trim between the phases (methods/contract.py)
DISTRIBUTION = "global_merge"   # sharded: class counts merged globally (methods/contract.py)
HAS_L = False                   # no l: a policy's min_l does not apply (methods/contract.py)
COMPOSITION = "classes"         # composition rule (b): the same classes over shared rows
ESTIMATE_VIEW = False
SHARD_PRECHECK = None           # the nodes' class tables are merged instead (distributed/)
REPORT = report.REPORT
KEEPS_GROUPS = True             # old rows keep the earlier levels (methods/kept_groups.py)
read_columns = None             # the projection and the source's row id (methods/contract.py)
OPTIONS = (
    Option("priorities", "map_number", "the priority of each quasi-identifier in [0, 1] "
           "(002 sec. 4.3: a higher priority is generalized later).", low=0, high=1,
           example='{"priorities": {"pt": 0.8, "age": 0.2}}'),
    Option("limits", "map_int", "the highest level each quasi-identifier may reach "
           "(002 sec. 4.3); at most its hierarchy's top level.", low=0, high=2 ** 31 - 1,
           example='{"limits": {"pt": 1}}'),
    Option("search", "choice", "'greedy' (002 sec. 4.5) or 'optimal' (the whole lattice).",
           choices=("greedy", "optimal")),
)
# the options as typed attributes, derived from OPTIONS (request/options.py): what this
# plug-in reads; the dict itself is what the release log keeps
Options = option_class("GeneralizationOptions", COMMON + OPTIONS)


def _opts(options):
    return typed(Options, options)


def validate(k, l, opts):
    if k < 2:
        raise DeidError(INVALID_PARAMETER_VALUE, f"k must be at least 2, got {k}",
                        hint="k is the smallest equivalence-class size of the release.")
    if l is not None:
        raise DeidError(INVALID_PARAMETER_VALUE, "method generalization has no l",
                        hint="Leave l NULL, or use method => 'anatomy' for (K,L)-anonymity.")
    if (_opts(opts).search or "greedy") not in ("greedy", "optimal"):
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown search {_opts(opts).search!r}",
                        hint="options.search is 'greedy' (002 sec. 4.5) or 'optimal'.")
    pr = (_opts(opts).priorities or {})
    if not isinstance(pr, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in pr.values()):
        raise DeidError(INVALID_PARAMETER_VALUE, "options.priorities must map attributes to numbers in [0,1]",
                        hint='e.g. {"priorities": {"pt": 0.8, "r": 0.2}}')
    lim = (_opts(opts).limits or {})
    if not isinstance(lim, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in lim.values()):
        raise DeidError(INVALID_PARAMETER_VALUE, "options.limits must map attributes to levels >= 0",
                        hint='e.g. {"limits": {"pt": 1}}')


def build_attribute(h, name, col, priority, limit, source):
    """AttributeHierarchy over the values present (002 sec. 4.1-4.2) and the
    level-0 code of every row."""
    codes, leaves = value_dictionary(col)
    leaves = list(leaves) + ["NULL"]          # the code of NULL (used with options.nulls)
    present = np.flatnonzero(np.bincount(codes, minlength=len(leaves)))   # = np.unique(codes)
    leaves = [leaves[i] for i in present]
    remap = np.full(int(codes.max()) + 1 if len(codes) else 1, -1, np.int64)
    remap[present] = np.arange(len(present))
    return attribute_from_leaves(h, name, leaves, priority, limit, source), remap[codes]


def attribute_from_leaves(h, name, leaves, priority, limit, source):
    """AttributeHierarchy of hierarchy ``h`` over the level-0 labels ``leaves`` (the values
    present, 'NULL' for NULL; 002 sec. 4.1-4.2). A label's chain depends on the label alone,
    so attributes built over different sets of values name every value's ancestors alike
    (the distributed search builds one over the union of the nodes' values)."""
    from .generalize import AttributeHierarchy
    chains = []
    if h.kind == "member":
        unknown = [v for v in leaves if v not in h.members[0] and v != "NULL"]
        if unknown:
            raise hierarchies.unknown_values(h.name, f'"{name}"', unknown, data_dependent=True)
    for v in leaves:
        if h.kind == "member":
            chain = h.chain(v, unknown="NULL")
        elif v == "NULL":
            chain = [v] * (h.levels - 1) + ["*"]
        else:
            up = hierarchies.interval_chain(v, *hierarchies.check_interval(h.low, h.high, h.widths))
            if up is None:
                raise DeidError(INVALID_PARAMETER_VALUE,
                                f'a value of "{name}" is outside [{h.low}, {h.high}) of hierarchy "{h.name}"',
                                detail=f"value {v}",
                                hint="Widen the interval hierarchy.", data_dependent=True)
            chain = [v] + up
        chains.append(chain)
    labels, parents = [], []
    level_codes = np.arange(len(leaves))
    labels.append(list(leaves))
    for level in range(1, h.levels):
        names = sorted({c[level] for c in chains})
        index = {n: i for i, n in enumerate(names)}
        parent_of = np.zeros(len(labels[-1]), np.int64)
        for leaf_i, c in enumerate(chains):
            parent_of[level_codes[leaf_i]] = index[c[level]]
        parents.append(parent_of)
        level_codes = parent_of[level_codes]
        labels.append(names)
    return AttributeHierarchy(name=name, parents=parents, labels=labels, info_loss=h.info_loss,
                              priority=float(priority), limit=limit, source=source)


def hierarchies_of(req, qis):
    hier = {}
    for q in qis:
        if q not in req.hierarchies:
            raise DeidError(INVALID_PARAMETER_VALUE, f'quasi-identifier "{q}" has no hierarchy',
                            hint=f"SELECT deid.set_role('{req.rel.display}', '{q}', 'quasi_identifier', "
                                 "hierarchy => '<name>');")
        hier[q] = req.hierarchies[q]
    return hier


def plan_read(req, rid):
    """Check the request against the hierarchies; what to read (by deid_owner, before
    anything is read)."""
    qis = ms.columns_with_role(req, "quasi_identifier")
    others = [c for c in req.columns if c not in qis]
    if not qis:
        raise DeidError(INVALID_PARAMETER_VALUE, "generalization needs at least one quasi-identifier",
                        hint="Project a column whose role is quasi_identifier.")
    hier = hierarchies_of(req, qis)
    opts = _opts(req.options)
    for opt, named in (("priorities", opts.priorities), ("limits", opts.limits)):
        for a in named or {}:
            if a not in qis:
                raise DeidError(INVALID_PARAMETER_VALUE,
                                f"options.{opt} names {a!r}, which is not a projected quasi-identifier",
                                hint="Quasi-identifiers: " + ", ".join(qis) + ".")
    for a, level in (_opts(req.options).limits or {}).items():
        if level > hier[a].levels - 1:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"options.limits of {a!r} is above the top level of its hierarchy",
                            hint=f'Hierarchy "{hier[a].name}" has levels 0..{hier[a].levels - 1}.')
    pinned = req.selection.equalities() if req.selection is not None else {}
    for q, values in pinned.items():
        h = hier.get(q)
        if h is not None and h.kind == "member":
            unknown = sorted(v for v in values if h.level_of(v) is None)
            if unknown:
                raise DeidError(INVALID_PARAMETER_VALUE,
                                f"selection value {unknown[0]!r} of column {q!r} is not in its hierarchy",
                                hint=f'Use a value of hierarchy "{h.name}" (any level).')
    # 002 sec. 4.5 step 2: a generalized value in the selection matches its leaves ...
    selection = None
    if req.selection is not None:
        selection = req.selection.render(expand=lambda c, v: leaves_under(hier.get(c), v))
    return ms.ReadSpec(req.rel, qis + others, rid, selection, by_rid=False)



def run(frame, req):
    """002 sec. 4.5 on the snapshot -> the release as a ReleasePlan."""
    qis, others, attrs, codes = attributes(frame, req)
    kept = kept_groups.split(frame.rid, req.run.kept)
    if kept.n_kept and req.run.kept.levels:
        return _kept_levels(frame, req, qis, others, attrs, codes, kept)
    result = search(req, attrs, codes, frame.n)
    return release_plan(frame, req, qis, others, attrs, codes, result.levels, result.class_counts,
                        {"steps": result.steps, "loss": float(result.loss)})


def _kept_levels(frame, req, qis, others, attrs, codes, kept):
    """A re-release: the old rows at the earlier release's levels (each record as it was
    published), the new rows at levels searched over the new rows alone."""
    levels_of_row, found = _row_levels(req, qis, attrs, codes,
                                       kept_groups.labels_of(frame.rid, req.run.kept))
    columns, keys = _labelled(qis, attrs, levels_of_row, codes, frame.n)
    _, sizes = np.unique(np.stack(keys, axis=1), axis=0, return_counts=True) if keys else \
        (None, np.asarray([frame.n]))
    keys_of_source = {}
    for a, key in zip(attrs, keys):
        keys_of_source.setdefault(a.source, []).append(key)
    if _below_k(req, sizes, keys_of_source):
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE, "the earlier levels do not meet this "
                        "request's k", hint="Ask for a fresh grouping (options.regroup).",
                        data_dependent=True)
    table = Table(req.name, columns + [SourceValues(o, frame.columns[o], req.rel.columns[o])
                                       for o in others])
    by_source = {}
    for q, a in zip(qis, attrs):
        by_source.setdefault(a.source, []).append(q)
    vectors, batch = np.unique(np.stack(levels_of_row, axis=1), axis=0, return_inverse=True)
    out = metrics(req, attrs, vectors[0], sizes, found)
    out["kept_release"] = req.run.kept.release_id
    out["level_batches"] = {str(b): {q: int(lv) for q, lv in zip(qis, v)}
                            for b, v in enumerate(vectors.tolist())}
    return ReleasePlan(tables=[table], rows=frame.n, groups=int(len(sizes)),
                       discernibility=float((sizes.astype(float) ** 2).sum() / max(frame.n, 1)),
                       classes=SourceClasses(by_source), metrics=out,
                       membership=Membership(frame.rid, batch.reshape(-1).astype(np.int64)))


def _row_levels(req, qis, attrs, codes, label):
    """(per quasi-identifier, each row's level; the search's steps and loss): a kept row
    (`label`: its batch in the earlier release) at its batch's levels, the new rows (-1) at
    the levels searched over them alone."""
    new = label < 0
    levels_of_row = [np.zeros(label.size, np.int64) for _ in qis]
    for b, levels in req.run.kept.levels.items():
        for per_row, q in zip(levels_of_row, qis):
            per_row[label == b] = int(levels.get(q, 0))
    if not new.any():
        return levels_of_row, {"steps": 0, "loss": 0.0}
    if int(new.sum()) < req.k:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE, "too few rows are new since the earlier "
                        "release to be released in classes of their own",
                        hint="Release again when at least k rows were added.",
                        data_dependent=True)
    result = search(req, attrs, [c[new] for c in codes], int(new.sum()))
    for per_row, lv in zip(levels_of_row, result.levels):
        per_row[new] = int(lv)
    return levels_of_row, {"steps": result.steps, "loss": float(result.loss)}


def _labelled(qis, attrs, levels_of_row, codes, n):
    """(the Labels column of each quasi-identifier, each row's code in it): each row's value
    at its own level."""
    columns, keys = [], []
    for q, a, per_row, c in zip(qis, attrs, levels_of_row, codes):
        text = np.empty(n, object)
        for lv in np.unique(per_row).tolist():
            at = per_row == lv
            text[at] = np.asarray(a.labels[lv], object)[a.level_map(lv)[c[at]]]
        dictionary, code = np.unique(text.astype(str), return_inverse=True)
        columns.append(Labels(q, code.reshape(-1).astype(np.int64), list(dictionary)))
        keys.append(code.reshape(-1))
    return columns, keys


def _below_k(req, joint, by_source):
    """Whether a class holds fewer than k rows: over each source's quasi-identifiers (002
    sec. 2), and over all of them jointly where the request requires it."""
    if joint_k_required(req.grant) and joint.size and joint.min() < req.k:
        return True
    return any(np.unique(np.stack(keys, axis=1), axis=0, return_counts=True)[1].min() < req.k
               for keys in by_source.values())


def attributes(frame, req, part=False):
    """(qis, other columns, attributes, level-0 codes of every row): the hierarchies over the
    values of the snapshot, capped by the limits and the selection (002 sec. 4.5 step 2).
    ``part``: the snapshot is one node's part of the rows (its size is not the release's)."""
    qis = ms.columns_with_role(req, "quasi_identifier")
    others = [c for c in req.columns if c not in qis]
    hier = hierarchies_of(req, qis)
    if not part and frame.n < req.k:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE,
                        f"the request selects fewer rows than k = {req.k}",
                        detail=f"{frame.n} row(s) selected",
                        hint="Widen the selection or lower k.", data_dependent=True)
    ms.refuse_null_qis(frame, qis, req.options)
    attrs, codes = [], []
    for q in qis:
        a, c = build_attribute(hier[q], q, frame.columns[q], *attribute_settings(req, q))
        attrs.append(cap_by_selection(req, hier[q], a))
        codes.append(c)
    return qis, others, attrs, codes


def attribute_settings(req, q):
    """(priority, user limit, source system) of quasi-identifier ``q`` (002 sec. 2, 4.3)."""
    return ((_opts(req.options).priorities or {}).get(q, 1.0), (_opts(req.options).limits or {}).get(q),
            req.rel.columns[q].source or req.rel.display)


def cap_by_selection(req, h, a):
    """An equality in the selection caps the attribute at that value's level; the smaller
    limit wins (002 sec. 4.5 step 2)."""
    pinned = req.selection.equalities() if req.selection is not None else {}
    if a.name in pinned:
        sel_limit = selection_limit(h, a, pinned[a.name])
        a.limit = sel_limit if a.limit is None else min(a.limit, sel_limit)
    return a


def search(req, attrs, codes, n=None, counts=None):
    """002 sec. 4.5 steps 1 and 3: the class table of the rows' level-0 ``codes`` (or, with
    ``counts``, ``codes`` is already a class table: a (classes, attributes) matrix), then the
    greedy loop or the optimal search. Returns generalize.GeneralizationResult."""
    from . import generalize
    search_kind = (_opts(req.options).search or "greedy")
    if counts is not None:
        classes = codes
    elif search_kind == "greedy" and len({a.source for a in attrs}) > 1:
        # greedy merges each source's rows into its own class table first (generalize.greedy),
        # so the joint class table of 002 step 1 would be sorted for nothing: the rows go in
        # as classes of one row each (same steps, levels and final classes)
        # (column-major: the kernel reads it column by column)
        classes, counts = np.stack(codes).T, np.ones(n, np.int64)
    else:
        classes, counts = class_table(codes, [len(a.labels[0]) for a in attrs])     # 002 step 1
    solve = generalize.optimal if search_kind == "optimal" else generalize.greedy
    return solve(classes, counts.astype(np.int64), attrs, req.k, joint_k=joint_k_required(req.grant))


def release_plan(frame, req, qis, others, attrs, codes, levels, sizes, found):
    """002 step 4 (generalize.apply_levels, column by column): the release table at ``levels``
    with the QIs as hierarchy labels. ``sizes`` are the classes over all QIs jointly (of the
    whole release: the merged table's, when the rows are one node's part), ``found`` the
    search's steps and loss."""
    table = Table(req.name, [Labels(q, a.level_map(int(lv))[c], list(a.labels[lv]))
                             for q, a, lv, c in zip(qis, attrs, levels, codes)]
                  + [SourceValues(o, frame.columns[o], req.rel.columns[o]) for o in others])
    by_source = {}
    for q, a in zip(qis, attrs):
        by_source.setdefault(a.source, []).append(q)
    rows = int(sizes.sum())
    return ReleasePlan(
        tables=[table], rows=frame.n, groups=int(len(sizes)),
        discernibility=float((sizes.astype(float) ** 2).sum() / rows) if rows else 0.0,
        classes=SourceClasses(by_source), metrics=metrics(req, attrs, levels, sizes, found))


def metrics(req, attrs, levels, sizes, found):
    """The release log's metrics of a generalization at ``levels`` whose classes over all
    quasi-identifiers jointly have the cardinalities ``sizes``."""
    return {"search": (_opts(req.options).search or "greedy"), "steps": found["steps"],
            "levels": {a.name: int(lv) for a, lv in zip(attrs, levels)},
            "level_labels": {a.name: level_name(a, lv) for a, lv in zip(attrs, levels)},
            "limits": {a.name: a.limit for a in attrs},
            "loss": float(found["loss"]),
            # what the release protects over all its QIs together (k per source is not k)
            "joint_k": int(sizes.min()) if len(sizes) else None,
            "joint_classes": int(len(sizes)), "joint_k_required": joint_k_required(req.grant),
            "suppressed": [a.name for a, lv in zip(attrs, levels) if lv == len(a.labels) - 1]}


def joint_k_required(grant):
    """The k the release must hold over all its quasi-identifiers jointly (k per source is
    not k), or None for 002's k per source system alone: a requester without SELECT
    gets the policy's minimum jointly unless the policy itself allows per-source k
    (deid.allow_requests' per_source_k, carried in the grant); a SELECT holder gets k per
    source as asked."""
    if grant.get("via") != "policy" or grant.get("per_source_k", False) is True:
        return None
    return grant["min_k"]


def selection_limit(h, attribute, values):
    """002 sec. 4.5 step 2: the limit a selection ``col = v`` puts on its attribute -- the
    level of v in the column's hierarchy (the lowest, for several values). Taken from the
    whole hierarchy, so a value no selected row holds is still known; interval hierarchies
    name their bands from the values present (methods.generalize.selection_limit)."""
    from . import generalize
    if h.kind != "member":
        return generalize.selection_limit(attribute, values)
    levels = [h.level_of(v) for v in values]
    return min(levels) if levels else 0


def class_table(columns, sizes):
    """Distinct rows (level-0 code vectors, one array per column) with their counts, in
    lexicographic order (as np.unique(rows, axis=0)). The codes are packed into one int64 key,
    each column in a bit field of its own, the first in the highest bits, when they fit: the
    key's order is the rows' lexicographic order, and decoding is shifts (far faster than
    unique(axis=0) or ravel_multi_index's divisions)."""
    widths = [(int(s) - 1).bit_length() for s in sizes]
    if sum(widths) <= 62:
        key = np.zeros(len(columns[0]), np.int64)
        for c, w in zip(columns, widths):
            key <<= w
            key |= c
        uniq, counts = np.unique(key, return_counts=True)
        out = np.empty((len(uniq), len(columns)), np.int64)
        off = 0
        for j in range(len(columns) - 1, -1, -1):
            out[:, j] = (uniq >> off) & ((1 << widths[j]) - 1)
            off += widths[j]
        return out, counts
    return np.unique(np.stack(columns, axis=1), axis=0, return_counts=True)


def level_name(a, level):
    return "*" if level == len(a.labels) - 1 else f"level {level}"


def leaves_under(h, value):
    """Leaves of a member hierarchy below a generalized value (None for a leaf
    or an unknown value: the literal then stands for itself)."""
    if h is None or h.kind != "member":
        return None
    return h.leaves_under(value)
