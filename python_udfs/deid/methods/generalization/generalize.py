"""Full-domain generalization over member/dimension hierarchies (paper 002, Stark et al. 2007).

What is implemented
-------------------
* :class:`AttributeHierarchy` - the member hierarchy (002 sec. 4.1, Table 6: value -> aggregated
  value, one array of parent codes per level) together with the dimension hierarchy's information
  loss quantifiers phi (002 sec. 4.2, Table 7), the user's priority and limit (002 sec. 4.3) and the
  source system of the attribute (002 sec. 2).
* :func:`selection_limit` - selection-derived generalization limits (002 sec. 4.5 step 2).
* :func:`greedy` - the paper's anonymisation algorithm (002 sec. 4.5 step 3): repeatedly generalize
  the attribute whose next level edge has the least phi x priority, merge equivalence classes, until
  every class has >= k rows.  It works on the class table (distinct QI combinations + counts, 002
  sec. 4.5 step 1), never on rows; one step is O(classes) numpy work.
* :func:`optimal` - an exact search of the same solution space (all level vectors within the
  limits) for the k-anonymous vector of least total weighted loss sum(priority * phi[level]); the
  paper mentions backtracking over alternative paths (002 sec. 4.5) but does not give it.  It uses
  the monotonicity of full-domain generalization as Flash / OLA do (a k-anonymous vector makes all
  vectors above it k-anonymous, a non-anonymous one all vectors below it non-anonymous).
* :func:`apply_levels` - the release step (002 sec. 4.5 step 4): map level-0 codes to final levels.

Reading of the paper and deviations
-----------------------------------
* Edge cost.  002 sec. 4.2 assigns a quantifier phi(j) to each level L_j (phi = 0 at L_0 and 1 at
  L_max) and says an edge "models the information loss up to generalisation level" L_(j+1); sec. 4.5
  picks the attribute "that has the minimal weighted information loss after being transformed to
  the next generalisation level".  We therefore take the cost of the edge L_i -> L_(i+1) as
  ``priority * info_loss[i+1]`` (phi of the level reached), which is what Table 7 lists for each
  L_i -> L_(i+1) row.  (On the use case, whose edges all start at L_0, the marginal reading
  phi[i+1] - phi[i] would give the same numbers.)
* Ties.  The pseudo-code keeps the first attribute with a strictly smaller cost, so among equal
  costs (compared after rounding to 10 decimals) the attribute listed first wins.  Deterministic.
* k per source system (002 sec. 2 and sec. 4.5: "k-anonymity is to be accomplished in each source
  table T_j separately").  Attributes are grouped by ``source`` (``None`` is one group of its own,
  so with no sources at all this is plain k-anonymity over all QIs); for each group the class table
  is regrouped on that group's attributes only and must have every class >= k.  A step only ever
  moves an attribute of a group that is still violating: the paper builds the solution from
  "subsolutions for every data source", and moving an attribute of a satisfied source would lose
  information for nothing.  The final class table over *all* attributes may then hold classes
  smaller than k when there are several sources: that is the paper's model, not a bug.
* k per source is not k.  Per-source k does not protect a record whose combination of
  values over the quasi-identifiers of several sources together is rare: it may be unique in the
  release even though every source holds k data twins of it.  ``joint_k`` adds the constraint
  that every class over all attributes together holds >= joint_k rows (the plug-in passes a
  policy's minimum for a requester without SELECT).  :func:`greedy` first takes 002's per-source
  steps unchanged, then the same step rule over every attribute below its cap until the joint
  classes hold joint_k; :func:`optimal` returns the per-source optimum when it meets joint_k and
  otherwise searches the lattice of all attributes for the cheapest vector meeting both.
* The paper's per-source preprocessing applies only that source's selection criteria before
  counting (sec. 4.5 step 1).  We count every source on the rows actually released (the whole
  selection applied), which can only make classes smaller, i.e. is at least as safe.
* Limits: the effective cap of an attribute is ``min(limit, top)``; the caller combines the user's
  limit and the selection limit by taking the smaller (002 sec. 4.5 step 2).  If no movable
  attribute is left while a class is below k, no data is released (002 sec. 4.4) - we raise
  DeidError(PRIVACY_MODEL_UNSATISFIABLE) naming the blocking limits.
* Selection limits for a value that occurs at several levels (or several values in an IN list)
  take the lowest such level: the more restrictive limit, as the paper takes the smaller limit.
* Input classes that repeat a code combination are tolerated (counted conservatively at first,
  merged after the first step).  With several sources :func:`greedy` merges each source's class
  table before its first step, so rows (one class each) give the same steps, levels and final
  classes as the class table of 002 step 1; the generalization plug-in then skips that table.
* Priorities: the paper asks for equally spaced priorities in [0, 1] (sec. 4.5); we accept any
  value in [0, 1] (equal spacing is the caller's convention, e.g. 0.2/0.4/0.6/0.8 in sec. 5.2).
  A policy minimum for k (sec. 4.5) is checked by the caller against the request's k; over all
  quasi-identifiers jointly it is ``joint_k`` here.
* :func:`optimal` returns ``steps == []``: a lattice vector is reached by any order of its edges.
* The use case's class counts (sec. 5.2: 107 classes, 98 after suppressing R, 16 after PT -> 1)
  cannot all hold for (PT, PN, PM, R) with PT in {1a, 1b, 1c, 1mic}: 16 (PN, PM) classes split by
  four PT values give at most 64, not 98.  The tests reproduce the steps, costs, levels and the
  final 16 / 20 classes of Tables 8-9 on generated data instead.
"""

from __future__ import annotations

from .class_table import (ROUND as _ROUND, GeneralizationResult, _Table, _check_inputs, _finish,
                          _source_groups, _unsatisfiable, apply_levels)
from .hierarchy import AttributeHierarchy, selection_limit
from .lattice import OPTIMAL_MAX_NODES, optimal

__all__ = [
    "AttributeHierarchy",
    "GeneralizationResult",
    "selection_limit",
    "greedy",
    "optimal",
    "apply_levels",
    "OPTIMAL_MAX_NODES",
]


def greedy(codes, counts, attributes, k, joint_k=None) -> GeneralizationResult:
    """The anonymisation algorithm of 002 sec. 4.5 on a class table.

    ``codes`` (c, d) level-0 codes of the distinct classes, ``counts`` (c,) their cardinalities,
    ``attributes`` the d hierarchies in column order.  While some source (002 sec. 2) has a class
    below k, generalize by one level the attribute of a violating source with the least
    phi(next level) x priority among those below min(limit, top) (ties: first listed), then merge
    classes.  Raises DeidError(PRIVACY_MODEL_UNSATISFIABLE) when a violating source can move no
    attribute.  With ``joint_k`` (k over all quasi-identifiers jointly), the same rule then continues over all attributes
    until every class over all of them together holds >= joint_k rows (:func:`_joint_steps`).
    """
    codes, counts, k = _check_inputs(codes, counts, attributes, k)
    groups = _source_groups(attributes)
    levels = [0] * len(attributes)
    steps: list = []
    total = int(counts.sum())
    tables = {}
    for g, idx in groups:
        # one source: the caller's classes are distinct already (duplicates would only be conservative)
        tables[g] = _Table.bottom(codes[:, idx], counts, [attributes[j] for j in idx], merge=len(groups) > 1)
    where = {j: (g, p) for g, idx in groups for p, j in enumerate(idx)}
    while True:
        cand = []
        for g, idx in groups:
            tab = tables[g]
            if tab.n == 0 or tab.min_count() >= k:
                continue
            movable = [j for j in idx if levels[j] < attributes[j].cap]
            if not movable:
                raise _unsatisfiable(k, g, len(groups), [attributes[j] for j in idx], tab.min_count(), total)
            cand.extend(movable)
        if not cand:
            break
        j = _step(attributes, levels, cand, steps)
        g, p = where[j]
        new = list(tables[g].levels)
        new[p] = levels[j]
        tables[g] = tables[g].rolled(new)
    final = tables[groups[0][0]] if len(groups) == 1 else None
    if final is not None and not steps:
        final = final.merged()
    if joint_k is not None:
        final = _joint_steps(codes, counts, attributes, levels, steps, joint_k, final)
    return _finish(codes, counts, attributes, levels, steps, final, {"steps": len(steps)})


def _step(attributes, levels, cand, steps) -> int:
    """One step of 002 sec. 4.5: generalize by one level the candidate with the least
    phi(next level) x priority (ties: first listed); record it in GS. Returns its index."""
    j = min(cand, key=lambda j: (round(attributes[j].edge_cost(levels[j]), _ROUND), j))
    h, lv = attributes[j], levels[j]
    levels[j] = lv + 1
    steps.append({"attribute": h.name, "from": lv, "to": lv + 1, "cost": h.edge_cost(lv)})
    return j


def _joint_steps(codes, counts, attributes, levels, steps, joint_k, final):
    """k per source is not k: after 002's per-source steps, while a class over ALL
    attributes together holds fewer than ``joint_k`` rows, take 002's step over every attribute
    still below its cap.  Per-source k stays (generalizing only merges classes).  Returns the
    joint class table at the final levels; raises PRIVACY_MODEL_UNSATISFIABLE (naming the
    blocking limits, no count) when every attribute is at its cap."""
    tab = final if final is not None else _Table.bottom(codes, counts, attributes, merge=False).rolled(levels)
    while tab.n and tab.min_count() < joint_k:
        cand = [j for j, h in enumerate(attributes) if levels[j] < h.cap]
        if not cand:
            raise _unsatisfiable(joint_k, None, 1, attributes, tab.min_count(), int(counts.sum()),
                                 joint=True)
        _step(attributes, levels, cand, steps)
        tab = tab.rolled(levels)
    return tab
