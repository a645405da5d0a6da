"""What `deid report` says of an anatomy release (methods/contract.py Report): the guarantee in
the words of docs/methods/anatomy.md, the logged facts, and the source-side measures (001's
random COUNT queries, releases/report_measures.py)."""
from ..contract import Report


def _source_columns(parameters, metrics):
    return list(metrics.get("quasi_identifiers") or []) + list(metrics.get("sensitive") or [])


REPORT = Report(
    subject="group", unsourced="groups",
    facts=("min_group", "min_certified_l", "sensitive", "quasi_identifiers"),
    guarantees=("Every released group holds at least K rows.",
                "For every group, at least L sensitive values must be ruled out before an attacker "
                "can pin any one row of the group (001 Def. 6)."),
    limits=("The quasi-identifiers are released as they are: anatomy hides which sensitive values "
            "belong to which row of a group, not that a person is in the data.",
            "The groups' counts are exact: a sensitive value that is rare in a group is visible as rare."),
    measures="count_queries", source_columns=_source_columns)
