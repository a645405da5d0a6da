"""Anatomy release under the (K,L) model for several sensitive attributes (paper 001).

:func:`anatomize` is 001 Fig. 5 ``Anonymize``: partition the rows with the k-d median split
(:mod:`.mondrian`, Fig. 5 ``Split``) so that every group satisfies the privacy model, then
anatomize (001 Def. 3, Fig. 3): the quasi-identifier table keeps each row's QIs plus its group id,
and one table per sensitive attribute holds (group id, value, count) -- :func:`sensitive_counts`.

Models (``model=``):

* ``"kl"`` -- 001 Def. 6: every group has >= K rows and needs >= L value deletions to delete
  all its rows; with ``column_l`` it is Def. 7 (at most L_i deletions from attribute i).  Checked
  with the sound greedy of 001 Fig. 6 / Figs. 7-8 (:mod:`.diversity`).  ``L=None`` is plain
  K-anonymity (Def. 4).
* ``"exponential_l"`` -- the Exponential-L baseline of 001's experiments (Machanavajjhala et al.
  2006): in each group, every sensitive attribute has >= L distinct values among the rows that
  share any one combination of the other sensitive attributes' values (so a group needs >= L^s
  rows).  001 runs the same Split with this check instead of Fig. 6.

Deviations: see :mod:`.mondrian` (row-preserving, tie-safe split) and :mod:`.diversity`.
``certified_l`` of the result is the greedy certificate of each final group (Fig. 6/7), capped
at L for the "kl" model (the greedy stops once it has certified L, which is all the release
needs; in column-wise mode the limits L_i of Def. 7 are defined relative to L anyway) -- and
not recomputed: every final group was certified, with the same rows in the same order, when
its split was accepted (the release path re-checks it independently in verify.py); with
``full_certificate=True`` and no ``column_l`` it is the uncapped Fig. 6 certificate.  With
``L=None`` it is uncapped.  For "exponential_l" it is the group's Exponential-L level.
"""

from dataclasses import dataclass

import numpy as np

from ...errors import (DeidError, INVALID_PARAMETER_VALUE, PRIVACY_MODEL_UNSATISFIABLE,
                       VERIFICATION_FAILED)
from . import diversity, mondrian

MODELS = ("kl", "exponential_l")


@dataclass
class AnatomyResult:
    group_id: np.ndarray      # int64 (n,): group of each input row, 0..n_groups-1
    n_groups: int
    certified_l: np.ndarray   # int64 (n_groups,): L certificate of each group (capped at L
    #                           for "kl" unless full_certificate=True; see the module docstring)
    model: str                # "kl" or "exponential_l"


def anatomize(qi, sensitive, K, L=None, column_l=None, model="kl", *, full_certificate=False):
    """001 Fig. 5 Anonymize: partition the rows into groups satisfying the model.

    ``qi``: float64 (n, d) quasi-identifiers (categorical ones as codes in sort order);
    ``sensitive``: int64 (n, s) sensitive codes; ``K`` >= 2; ``L`` >= 1 or None (K-anonymity
    only); ``column_l``: {attribute index: L_i} with 0 <= L_i <= L (001 Def. 7, model "kl").
    ``certified_l`` of the result is capped at L for model "kl" (enough to verify the release
    and much cheaper); ``full_certificate=True`` computes the uncapped Fig. 6 certificate when
    there is no ``column_l``.
    Raises DeidError: INVALID_PARAMETER_VALUE for bad arguments or an L no group can reach
    (more than the distinct values of a fully deletable attribute); PRIVACY_MODEL_UNSATISFIABLE
    when n < K or the whole table is not certified.
    """
    _check_model(model)
    K = _check_k(K)
    qi = mondrian.as_qi(qi)
    codes = diversity.as_codes(sensitive)
    n, s = codes.shape
    if qi.shape[0] != n:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"qi has {qi.shape[0]} rows but sensitive has {n}",
                        hint="pass the quasi-identifiers and sensitive codes of the same rows")
    if L is not None:
        L = diversity._check_l(L)
    caps = _check_column_l(column_l, L, s, model)
    dense, sizes = _eligible(codes, K, L, caps, model)

    accept_groups = None
    packed = False
    if L is not None and L > 1:
        # every row's sensitive codes packed into one integer, carried by the partition with
        # the rows: each candidate child's codes arrive in node order (no gather by row id)
        packed = sum(_field_bits(sizes)) <= PACK_MAX_BITS
        accept_groups = _acceptor(None if packed else dense,
                                  [c.dtype for c in dense], sizes, caps, model, L)
    # the capped certificate of "kl" needs no second look at the codes (see below)
    capped_cert = model == "kl" and accept_groups is not None and not full_certificate
    # handed to the partition without a reference kept here: it replaces the packed codes by
    # their reordered copy level by level (less peak memory)
    payload = [_pack(dense, sizes) if packed else None]
    if capped_cert:
        del dense                                          # not needed: less peak memory

    group_id = mondrian.partition(qi, K, accept_groups=accept_groups, payload=payload.pop())
    n_groups = int(group_id.max()) + 1
    if capped_cert:
        # Every group is the root (certified as `whole`) or a child that accept_groups
        # certified with these very rows in this order, so the capped certificate is L.
        cert = np.full(n_groups, L, dtype=np.int64)
    else:
        max_l = L if (model == "kl" and (caps is not None or not full_certificate)) else None
        cert = _level(group_id, dense, sizes, n_groups, caps, model, max_l)
    sizes_g = np.bincount(group_id, minlength=n_groups)
    if sizes_g.min() < K or (L is not None and cert.min() < L):
        raise DeidError(VERIFICATION_FAILED, "anatomy produced a group violating (K,L)",
                        hint="this is a bug in deid; please report it")
    return AnatomyResult(group_id=group_id, n_groups=n_groups, certified_l=cert, model=model)


def anatomize_kept(qi, sensitive, K, L=None, column_l=None, model="kl", *, kept):
    """:func:`anatomize` of a re-release: the rows of ``kept`` (methods/kept_groups.Split)
    keep their earlier groups; the new rows are partitioned among themselves only (never
    merged into an old group: a group's count minus its earlier count would isolate them).
    A kept group that no longer satisfies the model (a row's value changed since) is refused,
    as new rows too few for a group of their own are."""
    from ..kept_groups import combine
    codes = diversity.as_codes(sensitive)
    new = kept.new
    if new.any():
        fresh = anatomize(np.asarray(qi)[new], codes[new], K, L, column_l, model)
        group_id, n_groups = combine(kept, fresh.group_id)
    else:
        group_id, n_groups = combine(kept, np.zeros(0, np.int64))
    caps = _check_column_l(column_l, L, codes.shape[1], model)
    dense, sizes = diversity.dense_columns(codes)
    max_l = L if model == "kl" else None
    cert = (_level(group_id, dense, sizes, n_groups, caps, model, max_l) if L is not None
            else np.ones(n_groups, np.int64))
    sizes_g = np.bincount(group_id, minlength=n_groups)
    if sizes_g.min() < K or (L is not None and cert.min() < L):
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE,
                        "a group of the earlier release no longer satisfies the model",
                        hint="A row's value changed since the earlier release (each group is "
                             "published again as it was); ask for a fresh grouping "
                             "(options.regroup), which the composition rule judges.",
                        data_dependent=True)
    return AnatomyResult(group_id=group_id, n_groups=n_groups, certified_l=cert, model=model)


def check_eligible(sensitive, K, L=None, column_l=None, model="kl"):
    """001 Fig. 5's root: whether the rows, as one group, satisfy the model (Satisfy-Model(T, K,
    L): |T| >= K and the Fig. 6 / Figs. 7-8 certificate of T reaches L) -- the condition every
    partition of :func:`anatomize` starts from, so exactly the rows it refuses before it
    splits, with the same errors. Needs the sensitive codes only (no quasi-identifier), in the
    rows' order (the greedy's ties keep it). A sharded request checks it on every node before
    any node stores a part (distributed/eligibility.py)."""
    _check_model(model)
    codes = diversity.as_codes(sensitive)
    L = diversity._check_l(L) if L is not None else None
    _eligible(codes, _check_k(K), L, _check_column_l(column_l, L, codes.shape[1], model), model)


def _eligible(codes, K, L, caps, model):
    """Refuse rows that cannot reach (K,L) as one group (PRIVACY_MODEL_UNSATISFIABLE; an L
    above an attribute's distinct values: INVALID_PARAMETER_VALUE); their dense codes and
    sizes (diversity.dense_columns)."""
    n = codes.shape[0]
    if n < K:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE,
                        f"the request selects fewer rows than K = {K}",
                        detail=f"{n} row(s) selected",
                        hint="Lower K, or widen the selection to release more rows.",
                        data_dependent=True)
    dense, sizes = diversity.dense_columns(codes)
    if L is not None:
        _check_reachable(dense, sizes, L, caps, model)
    if L is not None and L > 1:
        whole = _level(np.zeros(n, dtype=np.int64), dense, sizes, 1, caps, model, L)[0]
        if whole < L:
            raise DeidError(
                PRIVACY_MODEL_UNSATISFIABLE,
                f"the selected rows as one group do not satisfy the {model} model with L = {L}",
                detail=f"certified L of all selected rows: {whole}",
                hint="lower L" + (
                    " (Exponential-L needs every combination of the other sensitive values "
                    "to have L values of each attribute)" if model == "exponential_l" else
                    " or relax column_l; the greedy check of 001 Figs. 6-7 is sound but not "
                    "complete, so a table may be L-diverse without being certified"),
                data_dependent=True)
    return dense, sizes


def sensitive_counts(group_id, values):
    """001 Fig. 3 / Def. 3 sensitive table of one attribute: (groups, values, counts), one
    entry per distinct (group, value), sorted by group then value."""
    gid = np.asarray(group_id).ravel()
    vals = np.asarray(values).ravel()
    if gid.size != vals.size:
        raise DeidError(INVALID_PARAMETER_VALUE, "group_id and values have different lengths",
                        hint="pass one value per row")
    if gid.size == 0:
        return gid[:0].astype(np.int64), vals[:0], np.zeros(0, dtype=np.int64)
    order = np.lexsort((vals, gid))
    g, v = gid[order], vals[order]
    new = np.ones(g.size, dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, g.size))
    return g[starts].astype(np.int64), v[starts], counts.astype(np.int64)


# --------------------------------------------------------------------------------------------

def _level(gid, dense, sizes, n_groups, caps, model, max_l, grouped=None):
    if model == "exponential_l":
        return diversity.exponential_l_dense(gid, dense, sizes, n_groups)
    return diversity.certify_dense(gid, dense, sizes, n_groups, caps, max_l, grouped=grouped)


BLOCK_ROWS = 1 << 17
PACK_MAX_BITS = 64      # sensitive codes packed into one integer when they fit (-1: never)


def _field_bits(sizes):
    return [max(int(v) - 1, 0).bit_length() for v in sizes]


def _pack(dense, sizes):
    """The dense codes of every row as bit fields of one unsigned integer (attribute 0 in the
    lowest bits; at most 64 bits in all)."""
    bits = _field_bits(sizes)
    total = sum(bits)
    dtype = np.uint32 if total <= 32 else np.uint64
    packed = np.zeros(dense[0].size, dtype=dtype)
    shift = 0
    for col, b in zip(dense, bits):
        if b:
            field = col.astype(dtype)
            if shift:
                field <<= dtype(shift)
            packed |= field
        shift += b
    return packed


def _unpack(packed, dtypes, sizes):
    """The columns :func:`_pack` packed (in the dtypes of the dense columns)."""
    cols, shift = [], 0
    for dtype, b in zip(dtypes, _field_bits(sizes)):
        if b:
            field = packed >> packed.dtype.type(shift) if shift else packed.copy()
            field &= packed.dtype.type((1 << b) - 1)
            cols.append(field.astype(dtype))
        else:
            cols.append(np.zeros(packed.size, dtype=dtype))
        shift += b
    return cols


def _acceptor(dense, dtypes, sizes, caps, model, L):
    """``accept_groups`` of :func:`.mondrian.partition`: whether each candidate child passes
    the model.  With ``dense`` it gets row ids and gathers the codes, without it the
    payload of :func:`_pack`."""
    def accept_groups(rows, child, n_children):
        # rows (or their packed codes) grouped by child, input order within each child:
        # certify_dense then skips its grouping sort.  Children are independent, so runs of
        # consecutive children (about BLOCK_ROWS rows) are checked one at a time: every
        # temporary (the unpacked or gathered columns included) stays small and cache-resident.
        ok = np.empty(n_children, dtype=bool)
        cuts = _blocks(child, n_children)
        c1 = 0
        for b in range(cuts.size - 1):
            lo, hi = int(cuts[b]), int(cuts[b + 1])
            c0, c1 = c1, int(child[hi]) if hi < child.size else n_children
            if dense is None:
                cols = _unpack(rows[lo:hi], dtypes, sizes)
            else:
                part = rows[lo:hi].astype(np.intp)       # one index cast, not one per column
                cols = [np.take(c, part) for c in dense]
            gid = np.subtract(child[lo:hi], c0, dtype=np.intp)   # intp: no index casts
            ok[c0:c1] = _level(gid, cols, sizes, c1 - c0, caps, model, L, grouped=True) >= L
        return ok
    return accept_groups


def _blocks(child, n_children):
    """Row offsets cutting ``child`` (non-decreasing, 0..n_children-1) into runs of whole
    children of about BLOCK_ROWS rows (a larger child is one run)."""
    n = child.size
    if n <= 2 * BLOCK_ROWS:
        return np.array([0, n])
    start = np.searchsorted(child, np.arange(n_children + 1, dtype=child.dtype))
    # the first child starting at or after each multiple of BLOCK_ROWS
    want = np.arange(BLOCK_ROWS, n, BLOCK_ROWS)
    cuts = start[np.searchsorted(start, want)]
    return np.unique(np.concatenate([[0], cuts, [n]]))


def _check_model(model):
    if model not in MODELS:
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown anatomy model {model!r}",
                        hint="use 'kl' (001 Def. 6/7) or 'exponential_l' (001 baseline)")


def _check_k(K):
    if isinstance(K, (bool, np.bool_)) or not isinstance(K, (int, np.integer)) or K < 2:
        raise DeidError(INVALID_PARAMETER_VALUE, f"K must be an integer >= 2, got {K!r}",
                        hint="K is the minimum group size of K-anonymity (001 Def. 4)")
    return int(K)


def _check_column_l(column_l, L, s, model):
    if not column_l:
        return None
    if L is None or model != "kl":
        raise DeidError(INVALID_PARAMETER_VALUE,
                        "column_l needs L and the 'kl' model",
                        hint="column-wise limits L_i refine L-diversity (001 Def. 7)")
    caps = diversity.column_caps(column_l, s)
    for a, cap in dict(column_l).items():
        if cap > L:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"column_l[{a}] = {cap} exceeds L = {L}",
                            hint="001 Def. 7 requires 0 <= L_i <= L")
    return caps


def _check_reachable(dense, sizes, L, caps, model):
    """Reject an L that no group can reach: a group never needs more deletions than the
    distinct values of an attribute it may delete entirely."""
    bound, which = None, None
    for a in range(len(dense)):
        distinct = int(np.count_nonzero(np.bincount(dense[a], minlength=int(sizes[a]))))
        if model == "exponential_l" or caps is None or caps[a] >= distinct:
            if bound is None or distinct < bound:
                bound, which = distinct, a
    if bound is not None and L > bound:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"L = {L} exceeds the distinct values of a sensitive attribute; "
                        f"no group can be {L}-diverse",
                        detail=f"sensitive attribute {which} has {bound} distinct value(s)",
                        hint="Lower L, or release a sensitive attribute with more distinct values.",
                        data_dependent=True)
