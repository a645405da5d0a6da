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
from typing import Callable, Optional, Protocol, runtime_checkable

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


@runtime_checkable
class Plugin(Protocol):
    NAME: str                          # the method's name in anonymize_request
    OPTIONS: tuple                     # request.options.Option: the method's own options
    RELEASE_HEAP: bool                 # trim the heap after the method and each written table
    read_columns: Optional[Callable]   # (rel, columns, opts) -> (columns, record id) or None
    DISTRIBUTION: str                  # over a sharded source (distributed/): one of DISTRIBUTIONS
    HAS_L: bool                        # takes an l (diversity of the sensitive values): a
                                       # policy's min_l applies to its requests, and only then
    KEEPS_GROUPS: bool                 # a re-release of a growing source keeps the earlier
                                       # release's groups (req.run.kept, methods/kept_groups.py)

    def validate(self, k, l, opts): ...

    def plan_read(self, req, rid): ...

    def run(self, frame, req): ...


@runtime_checkable
class Verifier(Protocol):
    READS_SNAPSHOT_VALUES: bool        # False: only the snapshot's row ids (the rest may go)

    def verify(self, db, req, frame, tables): ...


def conforms(plugin, verifier):
    """The members of the contract a method's modules lack ([] when it conforms)."""
    missing = [f"plugin.{m}" for m in ("NAME", "OPTIONS", "RELEASE_HEAP", "read_columns",
                                       "DISTRIBUTION", "HAS_L", "KEEPS_GROUPS", "validate", "plan_read",
                                       "run")
               if not hasattr(plugin, m)]
    if hasattr(plugin, "DISTRIBUTION") and plugin.DISTRIBUTION not in DISTRIBUTIONS:
        missing.append(f"plugin.DISTRIBUTION in {DISTRIBUTIONS}")
    missing += [f"verifier.{m}" for m in ("READS_SNAPSHOT_VALUES", "verify")
                if not hasattr(verifier, m)]
    return missing
