"""What `deid report` says of a generalization release (methods/contract.py Report): the
guarantee in the words of docs/methods/generalization.md; its log holds a level per attribute
(and the joint k the report counts on the released table)."""
from ..contract import Report

REPORT = Report(
    subject="class",
    facts=("joint_k", "levels", "limits", "suppressed"),
    guarantees=("k-anonymity per source system: for each source, every combination of that "
                "source's projected quasi-identifiers, as released, occurs in at least k "
                "released rows (002 sec. 2).",),
    limits=("Nothing about sensitive values: a class whose rows all share a diagnosis "
            "discloses it.",
            "k holds per source, not over all quasi-identifiers jointly (joint k below)."),
    levels=True)
