"""The SQL entry point of deid.anonymize_request (deid._anonymize_request, SECURITY INVOKER,
as the caller): a source registered as distributed runs on every node of its PL/Proxy cluster
(distributed/coordinator.py), any other in this database (pipeline.py). The one place that
knows both, so that neither imports the other."""
from . import pipeline
from .distributed import coordinator
from .request.args import RequestArgs


def anonymize_request(db, request):
    """The request's release row, from the coordinator or from the pipeline; the jsonb the
    public wrapper built becomes one RequestArgs here."""
    args = RequestArgs.of_json(request)
    run = coordinator if is_distributed(db, args.relid) else pipeline
    return run.anonymize_request(db, args)


def is_distributed(db, relid):
    return relid is not None and bool(db.value(
        "SELECT 1 FROM deid.distributed_source WHERE source = $1", [relid], ["oid"]))
