"""The SQL entry points of generalization over shards (distributed/generalization.py), each
one request's step on one database, as the caller (SECURITY INVOKER; pipeline.step: the
caller authorized and reading with its own rights, SELECT on the source required):

    deid.generalization_classes(source, k, columns, selection, options) -> bytea
        on a node: its rows' class table (002 sec. 4.5 step 1), packed (class_merge.pack)
    deid.generalization_levels(source, k, columns, selection, options, parts bytea[]) -> jsonb
        on the coordinator: the nodes' tables merged and searched (step 3): the chosen level
        of every quasi-identifier and the release's metrics (distributed.generalization.Choice)

What they return the caller could compute with a GROUP BY of its own (it holds SELECT), so
neither gives it anything it could not read.
"""
from .. import pipeline
from ..errors import DeidError, NULL_VALUE_NOT_ALLOWED
from . import generalization as dg

METHOD = "generalization"


def classes(db, relid, k, columns, selection, options):
    return pipeline.step(db, relid, METHOD, k, None, columns, selection, options,
                         lambda req, frame: dg.node_classes(frame, req))


def levels(db, relid, k, columns, selection, options, parts):
    if parts is None or any(p is None for p in parts):
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "parts must hold one class table per node",
                        hint="Pass the results of deid.generalization_classes on every node.")
    return pipeline.step(db, relid, METHOD, k, None, columns, selection, options,
                         lambda req, frame: dg.choose(req, parts).to_json(), read=False)
