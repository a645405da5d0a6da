"""L-diversity over several sensitive attributes (paper 001: Gal, Chen, Gangopadhyay 2008).

A group's sensitive values are an int64 array ``codes`` of shape (m, s): m rows, s sensitive
attributes, each column integer codes (NULL is just another code).  Deleting a distinct value
(attribute a, code v) deletes every row holding it (001 "Our Model").  A group is L-diverse
(001 Def. 6) when at least L such deletions are needed to delete all its rows; with column-wise
limits (001 Def. 7, ``column_l = {attribute_index: L_i}``) at most L_i of the deletions may come
from attribute i (attributes not listed are unlimited).  Deciding this is NP-hard (001 Theorem 3:
it is a minimum set cover over the RID sets), so the release path uses the sound greedy checks:

* :func:`greedy_check` / :func:`certified_l` / :func:`certified_l_per_group` -- 001 Fig. 6
  (an independent row set C, Theorems 4-5) and, when ``column_l`` is given, 001 Figs. 7-8
  (grow C row by row and certify it with Theorem 6).  All groups are processed together with
  numpy (one vectorised "lockstep" pass per greedy step); :func:`greedy_trace` is the literal,
  row-at-a-time reference of the same algorithm and the tests check that both agree.
* :func:`exact_min_deletions` -- exact hitting-set branch and bound, for tests and small groups.
* :func:`exponential_l_per_group` -- the "Exponential-L" baseline of 001 (Machanavajjhala et al.).

Modules (this package re-exports their public names):

* :mod:`.common` -- input validation, dense codes, pair keys, the Fig. 6 line 3 order;
* :mod:`.certify` -- entry points of the greedy certificate (Figs. 6-8), picks the algorithm;
* :mod:`.capped` -- Fig. 6 capped at L without column limits (the ">= L" fast path);
* :mod:`.greedy` -- Fig. 6 for all groups at once (lockstep steps, then windows);
* :mod:`.column_wise` -- Figs. 7-8 (column-wise limits, Theorem 6);
* :mod:`.reference` -- the literal row-at-a-time Figs. 6-7 (reference for tests);
* :mod:`.exact` -- exact minimum deletions (Theorem 3), for tests and small groups;
* :mod:`.exponential` -- the Exponential-L baseline.

Deviations from / additions to the paper (all keep the check sound):

1. Theorem 6 / Fig. 7 lines 7-13 certify "C is x-diverse" when the x most frequent allowed
   values have total frequency <= |C|.  That is unsound when fewer than x allowed values exist
   (e.g. C = {(a1,b1), (a2,b1)} with L_a = 0: the only allowed value b1 has frequency 2 <= |C|,
   yet deleting b1 alone deletes C).  We use the strict form: C needs more than j deletions if
   the j most frequent allowed values cover fewer than |C| rows (Lemma 1), so
   ``x(C) = 1 + max{j : T_j(C) < |C|}`` where T_j is the largest total frequency of j values
   with at most L_i from attribute i.  Whenever the paper's test holds and x values exist, ours
   holds too, so we never certify less than the paper.  T_j is computed exactly by the greedy
   "top L_i per attribute, then top j overall" rule (a partition matroid), and, as the paper
   suggests, from an incrementally merged top list (only the new row's values can change rank).
2. Fig. 7 accepts a row when C stays x-diverse and then tests x+1; we recompute x(C) and keep
   the row iff x does not drop, which is the same rule.  The Fig. 7 loop examines at most
   ``PHASE2_MAX_SCAN`` candidate rows and adds at most ``PHASE2_MAX_KEEP`` rows per group, and
   keeps a top list of at most ``PHASE2_MAX_WIDTH`` values (so column-wise certificates are
   capped at PHASE2_MAX_WIDTH + 1).  Stopping early can only answer "no" more often, never
   "yes" wrongly.  Since a candidate's fate depends only on C, candidates are tested in
   batches against the same C (exactly equivalent to the row-at-a-time loop).
3. If the column limits make it impossible to delete every row (e.g. all attributes limited and
   the limits exhausted), the group resists every attack allowed by Def. 7 and its certificate
   is ``UNBOUNDED_L``.  Attributes not in ``column_l`` are unlimited (L_i = L in Def. 7).
4. Ties in Fig. 6 line 3 (equal total frequency) keep the input row order (stable sort).
5. Empty groups certify 0.

The tuning constants (``CAPPED_LOCAL_PAIRS``, ``LOCKSTEP_STEPS``, ``PHASE2_MAX_*``,
``EXACT_MAX_*``) may be set on this package (``diversity.CAPPED_LOCAL_PAIRS = 0``, as the tests
do): the new value reaches every module that reads it.
"""

import sys
import types

from . import capped, certify, column_wise, common, exact, exponential, greedy, reference
from .capped import CAPPED_LOCAL_PAIRS
from .certify import certified_l, certified_l_per_group, certify_dense, greedy_check
from .column_wise import PHASE2_MAX_KEEP, PHASE2_MAX_SCAN, PHASE2_MAX_WIDTH
from .common import (UNBOUNDED_L, _check_l, _order_by_group_then, _order_grouped_then, as_codes,
                     column_caps, dense_columns)
from .exact import EXACT_MAX_NODES, EXACT_MAX_ROWS, exact_min_deletions
from .exponential import _exponential_l_sorted, exponential_l_dense, exponential_l_per_group
from .greedy import LOCKSTEP_STEPS
from .reference import greedy_trace

__all__ = [
    "UNBOUNDED_L", "EXACT_MAX_ROWS", "EXACT_MAX_NODES", "PHASE2_MAX_SCAN", "PHASE2_MAX_KEEP",
    "PHASE2_MAX_WIDTH", "CAPPED_LOCAL_PAIRS", "LOCKSTEP_STEPS",
    "as_codes", "column_caps", "dense_columns", "certify_dense", "certified_l_per_group",
    "greedy_check", "certified_l", "greedy_trace", "exact_min_deletions",
    "exponential_l_dense", "exponential_l_per_group",
]

_TUNABLES = frozenset({"CAPPED_LOCAL_PAIRS", "LOCKSTEP_STEPS", "PHASE2_MAX_SCAN",
                       "PHASE2_MAX_KEEP", "PHASE2_MAX_WIDTH", "EXACT_MAX_ROWS",
                       "EXACT_MAX_NODES"})
_MODULES = (common, capped, greedy, column_wise, certify, reference, exact, exponential)


class _Package(types.ModuleType):
    """Setting a tuning constant on the package sets it in every module that binds it (as when
    the package was one module); anything else is a plain attribute."""

    def __setattr__(self, name, value):
        if name in _TUNABLES:
            for module in _MODULES:
                if name in vars(module):
                    setattr(module, name, value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
