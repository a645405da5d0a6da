"""What `deid report` says of a disassociation release (methods/contract.py Report): the
guarantee in the words of docs/methods/disassociation.md and the source-side measures on a
reconstruction (003 Defs. 2 and 3, releases/report_measures.py)."""
from ..contract import Report


def _source_columns(parameters, metrics):
    options = parameters.get("options") or {}
    return [c for c in (options.get("record"), options.get("item")) if c]


REPORT = Report(
    subject="cluster",
    facts=("m", "clusters", "min_cluster", "max_cluster_size", "record_chunks",
           "shared_chunks", "item_chunk_codes", "codes", "occurrences"),
    guarantees=("Guarantee 1 of 003: an attacker who knows up to m codes of a patient finds at "
                "least k candidate records.",),
    limits=("An attacker who knows more than m codes of a patient is not covered.",
            "Every code's count per cluster is released exactly."),
    measures="reconstruction", source_columns=_source_columns)
