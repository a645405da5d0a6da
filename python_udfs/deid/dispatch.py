"""The SQL entry point of deid.anonymize_request (deid._anonymize_request, SECURITY INVOKER,
as the caller): a source registered as distributed runs on every node of its PL/Proxy cluster
(distributed/coordinator.py), any other in this database (pipeline.py). The one place that
knows both, so that neither imports the other."""
from . import pipeline
from .distributed import coordinator


def anonymize_request(db, relid, method, k, l, columns, selection, options, name):
    """The request's release row, from the coordinator or from the pipeline."""
    run = coordinator if is_distributed(db, relid) else pipeline
    return run.anonymize_request(db, relid, method, k, l, columns, selection, options, name)


def is_distributed(db, relid):
    return relid is not None and bool(db.value(
        "SELECT 1 FROM deid.distributed_source WHERE source = $1", [relid], ["oid"]))
