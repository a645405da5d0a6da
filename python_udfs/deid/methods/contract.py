"""The plug-in contract: every member the pipeline uses of a method's plug-in and of its
verifier, declared here and by every method (not probed with hasattr). A method is one folder
``methods/<method>/`` (its plug-in ``plugin.py`` beside its kernels), one verifier module
``verify/<method>.py`` and one line in ``methods/registry.py``; tests/unit/common/test_registry.py
checks every registered method against these protocols (docs/dev/adding-a-method.md).

The plug-in is pure: no SQL, no plpy. The pipeline (pipeline.py) calls, in order::

    validate(k, l, opts)                  refuse a request the method cannot take (22023 + hint)
    read_columns(rel, columns, opts)      the columns read and the record id, or None: the
                                          projection's columns and the source's row id
    plan_read(req, rid) -> plan.ReadSpec  what to read
    run(frame, req) -> plan.ReleasePlan   the release: tables, catalog artefacts, metrics and
                                          the verifier's evidence (its own typed object)

and then the verifier, on what was written::

    verify(db, req, frame, tables) -> dict   the report the log keeps; raises DE002 on a fault

The verifier imports nothing from deid.methods (tests/unit/common/test_verify_independence.py); the
plug-in builds the evidence object the verifier module declares (``verify.<method>.Evidence``),
so the two agree on its fields without the verifier importing the method.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, \
    Union, runtime_checkable

if TYPE_CHECKING:          # the types only: nothing of these is imported when deid runs
    from ..catalog.relations import Relation
    from ..pg import Database
    from ..plan import ReadSpec, ReleasePlan, SetReadSpec
    from ..read.frame import Frame
    from ..request.options import Option
    from ..request.release import Request

# How a method runs over a source sharded across nodes (deid.distributed, docs/sharding.md):
#   "shard_local"   every node releases its own rows with the single-node method; the union of
#                   the parts satisfies the privacy model (anatomy: a union of valid (K,L)
#                   groups is valid; condensation: clusters >= k per node; disassociation:
#                   records whole on one node, clusters and chunks per node)
#   "global_merge"  a step needs counts summed over the nodes (generalization: the class
#                   counts per source system); the coordinator merges the nodes' class tables,
#                   chooses the levels once and every node writes its rows at those levels
#                   (distributed/generalization.py)
DISTRIBUTIONS = ("shard_local", "global_merge")

# a request's options once checked against the schema (request/options.py)
Options = Dict[str, Any]
# (rel, columns, opts) -> (the columns read besides the record id, the record column or None
# for the source's row id)
ReadColumns = Callable[["Relation", Optional[Sequence[str]], Options],
                       Tuple[List[str], Optional[str]]]

# What the composition rule (log/composition.py, rule (b)) compares between a release and the
# earlier releases of the same source by the same method -- the grouping the method logs:
#   "classes"          equivalence classes, no row logged per class (generalization): a later
#                      release sharing rows publishes the very same classes over the same rows
#   "groups_values"    groups in deid.rid_set (anatomy): every cell of the groupings' common
#                      refinement holds k rows and l values of each sensitive attribute
#   "clusters"         clusters in deid.cluster_member (condensation): every cell holds k rows
#   "whole_clusters"   clusters in deid.cluster_member that are no crowds of k (disassociation:
#                      k^m bounds itemsets' supports): released records keep their clusters
#   "none"             no grouping is logged per row: rule (a), the selections, alone applies
COMPOSITIONS = ("classes", "groups_values", "clusters", "whole_clusters", "none")
# The groupings whose releases publish exact per-group statistics of the columns outside their
# quasi-identifiers, the groups placed by a reader who knows a patient's quasi-identifiers:
# anatomy's count tables per QIT group, generalization's raw values per class. Rule (c) of
# log/composition.py: two different methods of this set may not publish the same sensitive
# column over shared rows. Condensation's memberships are not published and disassociation
# publishes item sets, not rows placed in a group: not in the set.
EXACT_PER_GROUP = ("classes", "groups_values")


@dataclass(frozen=True)
class Report:
    """What `deid report` says of a release of the method (releases/report_source.py hands it
    to the client, which imports nothing of the server): every field is data or a pure function."""
    subject: str = "class"          # what one of its groups is called in the report's sentences
    unsourced: str = "all quasi-identifiers"   # the label of its classes logged without a source
    facts: Tuple[Any, ...] = ()     # logged metrics the privacy section shows beside the sizes
    guarantees: Tuple[str, ...] = ()   # the guarantee, in the words of docs/methods/<method>.md
    limits: Tuple[str, ...] = ()    # what it does not protect against
    measures: Optional[str] = None  # its source-side utility measures: a key of
                                    # releases/report_measures.py MEASURES (None: none)
    risk: Optional[str] = None      # its source-side risk figure: "dcr" (distance to closest
                                    # record, releases/report_risk.py) or None
    levels: bool = False            # its log holds a level per attribute (a table of them, and
                                    # the joint k counted on its one released table)
    # (parameters, metrics) -> the source columns its measures compare; None: none beyond the
    # row count
    source_columns: Optional[Callable[..., Any]] = None


@runtime_checkable
class Plugin(Protocol):
    NAME: str                          # the method's name in anonymize_request
    OPTIONS: Tuple[Option, ...]        # the method's own options
    RELEASE_HEAP: bool                 # trim the heap after the method and each written table
    read_columns: Optional[ReadColumns]  # None: the projection's columns and the row id
    DISTRIBUTION: str                  # over a sharded source (distributed/): one of DISTRIBUTIONS
    HAS_L: bool                        # takes an l (diversity of the sensitive values): a
                                       # policy's min_l applies to its requests, and only then
    COMPOSITION: str                   # the grouping the composition rule compares: one of
                                       # COMPOSITIONS
    ESTIMATE_VIEW: bool                # its release has 001's estimate view over the QIT (a
                                       # distributed release rebuilds it over the parts)
    # over shards: (read(req, spec) -> ReadSpec, check(frame, req)) every node runs before any
    # node writes, or None
    SHARD_PRECHECK: Optional[Tuple[Any, ...]]
    REPORT: Report                     # what the report says of its releases
    KEEPS_GROUPS: bool                 # a re-release of a growing source keeps the earlier
                                       # release's groups (req.run.kept, methods/kept_groups.py)

    def validate(self, k: int, l: Optional[int], opts: Options) -> None:  # noqa: E741
        """Refuse a request the method cannot take (22023 with a HINT)."""

    def plan_read(self, req: Request, rid: str) -> Union[ReadSpec, SetReadSpec]:
        """What to read for ``req``, its rows identified by the column ``rid``."""

    def run(self, frame: Frame, req: Request) -> ReleasePlan:
        """The release of the snapshot ``frame``: tables, artefacts, metrics, evidence."""


@runtime_checkable
class Verifier(Protocol):
    READS_SNAPSHOT_VALUES: bool        # False: only the snapshot's row ids (the rest may go)

    def verify(self, db: Database, req: Request, frame: Frame,
               tables: List[str]) -> Dict[str, Any]:
        """The report the log keeps, from what was stored in ``tables``; raises DE002 on a
        fault."""


def conforms(plugin: object, verifier: object) -> List[str]:
    """The members of the contract a method's modules lack ([] when it conforms)."""
    missing = [f"plugin.{m}" for m in ("NAME", "OPTIONS", "RELEASE_HEAP", "read_columns",
                                       "DISTRIBUTION", "HAS_L", "COMPOSITION", "ESTIMATE_VIEW",
                                       "SHARD_PRECHECK", "REPORT", "KEEPS_GROUPS",
                                       "validate", "plan_read", "run")
               if not hasattr(plugin, m)]
    if getattr(plugin, "DISTRIBUTION", DISTRIBUTIONS[0]) not in DISTRIBUTIONS:
        missing.append(f"plugin.DISTRIBUTION in {DISTRIBUTIONS}")
    if hasattr(plugin, "COMPOSITION") and plugin.COMPOSITION not in COMPOSITIONS:
        missing.append(f"plugin.COMPOSITION in {COMPOSITIONS}")
    if hasattr(plugin, "REPORT") and not isinstance(plugin.REPORT, Report):
        missing.append("plugin.REPORT a contract.Report")
    missing += [f"verifier.{m}" for m in ("READS_SNAPSHOT_VALUES", "verify")
                if not hasattr(verifier, m)]
    return missing
