"""Independent verification of a release before it commits.

This package re-checks the privacy guarantees a method claims, from the
release's own artefacts (group memberships, the ``deid.rid_set`` catalog,
equivalence-class cardinalities).  It is written from the papers, not from
``deid.methods``: it never imports that package and shares no code with it,
so a bug in a method cannot hide itself here
(``tests/unit/common/test_verify_independence.py`` enforces this, transitively).

Every check raises :class:`deid.errors.DeidError` with SQLSTATE
``VERIFICATION_FAILED`` (DE002) when the release violates the model, naming
the first failing group (smallest group id), and ``INVALID_PARAMETER_VALUE``
when the input itself is malformed.  On success a check returns a small dict
of figures for the release's summary.

One module per guarantee:

* ``partition.py``     -- check_partition: every source row in exactly one
  group (001 Def. 1);
* ``sizes.py``         -- check_group_sizes (check_group_counts: from counts),
  check_cluster_sizes: groups of at least k rows (001 Def. 4, Def. 6 (1);
  004 Def. 1, Alg. 2 step 2c);
* ``k_per_source.py``  -- check_k_per_source: k data twins in every source
  system separately (002 sec. 2, sec. 4.5);
* ``kl.py``            -- check_kl: the (K, L) model (001 Def. 6) and its
  column-wise variant (001 Def. 7), the independent L check;
* ``cluster_moments.py`` -- verify_condensation: clusters >= k partitioning
  the rows, exact per-cluster means and covariances, status and category
  counts, original survival multisets, permissible values (004 Def. 1,
  Alg. 2, Alg. 3);

and the pieces they share:

* ``rid_set.py``       -- reading the ``deid.rid_set`` catalog (001 Theorem 3):
  well formed, complete rows (001 Def. 1);
* ``caps.py``          -- column-wise deletion caps L_i (001 Def. 7);
* ``certificate.py``   -- per-group proven diversity: 001 Lemma 1 / Theorem 6
  bound, then the greedy certificate;
* ``greedy.py``        -- the greedy certificate of 001 Figs. 6-8, vectorised
  and scalar (certify_group_scalar);
* ``readers.py``       -- stored columns into checked int64 arrays and codes;
* ``arrays.py``        -- numpy primitives (dense codes, radix argsort);
* ``failures.py``      -- the errors a check raises and their texts;
* ``rid_set_digest.py``, ``row_hash.py`` -- proofs that what was stored is
  the arrays checked in memory (sha256 per stored row; PostgreSQL's record
  hash summed over a release table's rows).

The release plugins' checks of what was stored (``anatomy.py``,
``generalization.py``, ``condensation.py``) read the stored tables back, or
check the method's arrays and prove by server-side digests that the stored
rows are those arrays (anatomy's RID sets, condensation), and call the
checks above.

Papers (``shared/papers`` of the project, the index in its README):

* 001 Gal, Chen, Gangopadhyay (2008): Def. 1 (partition), Def. 4
  (K-anonymity), Def. 6 ((K,L) model over several sensitive attributes),
  Def. 7 (column-wise constraints), Theorem 3 (RID sets), Theorems 4-6,
  Lemma 1, Fig. 6 (greedy L check), Figs. 7-8 (column-wise check).
* 002 Stark, Eder, Zatloukal (2007): sec. 2 and sec. 4 (k data twins in
  every source system separately).
* 004 Gal et al. (2014): condensation into clusters of at least k records.

All checks are vectorised with numpy (1.24 compatible) and pure Python: no
plpy.
"""

from .shared.greedy import certify_group_scalar
from .shared.k_per_source import check_k_per_source
from .shared.kl import check_kl
from .shared.partition import check_partition
from .shared.sizes import check_cluster_sizes, check_group_counts, check_group_sizes

# Internals the unit tests reach through ``deid.verify`` (as when this was
# one module): the catalog parser, the caps, the certificate and the greedy.
from .shared.caps import _column_caps
from .shared.certificate import _certify
from .shared.greedy import _VECTOR_MAX_GROUP, _greedy
from .shared.rid_set import _parse_rid_set

__all__ = [
    "check_partition",
    "check_group_sizes",
    "check_group_counts",
    "check_cluster_sizes",
    "check_kl",
    "check_k_per_source",
]
