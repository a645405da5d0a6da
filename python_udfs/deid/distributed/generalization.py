"""Generalization (002, global recoding) over the nodes of a sharded source.

Full-domain generalization puts every row of a column at ONE level, and each step of the
greedy loop (002 sec. 4.5 step 3) or of the lattice search needs the class counts over all the
rows: it cannot run shard-local.  Its partition step is therefore global and its per-partition
step local:

    node         node_classes(frame, req)         -> bytes: the node's class table (002 step 1)
                                                     over its own rows, with its own dictionaries
    coordinator  choose(req, parts)               -> Choice: the nodes' tables merged
                                                     (class_merge.merge_classes), the limits and
                                                     the search run on the merged table
    node         node_plan(frame, req, choice)    -> ReleasePlan of the node's part: its rows at
                                                     the chosen levels (002 step 4)

A hierarchy label's ancestors depend on the label alone, so a node's part names every value
exactly as the single-node release of all the rows would.  The global check of what was stored
is verify/shared/merged_classes.py (every node's stored classes merged, k per source and the
joint k of a policy request).  Pure: no SQL, no plpy.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..errors import DeidError, INVALID_PARAMETER_VALUE, PRIVACY_MODEL_UNSATISFIABLE
from ..methods import support as ms
from ..methods.generalization import plugin
from ..plan import Labels, ReleasePlan, SourceClasses, SourceValues, Table
from ..methods.generalization.class_merge import (NodeClasses, merge_classes, node_classes as _table,
                                                  pack, unpack)

__all__ = ["Choice", "node_classes", "choose", "node_plan"]



@dataclass
class Choice:
    """What the coordinator sends back to the nodes, and logs: the level of every
    quasi-identifier, and the release's metrics (over all the nodes' rows)."""

    levels: dict
    metrics: dict
    rows: int
    groups: int
    discernibility: float

    def to_json(self) -> str:
        return json.dumps({"levels": self.levels, "metrics": self.metrics, "rows": self.rows,
                           "groups": self.groups, "discernibility": self.discernibility})

    @classmethod
    def from_json(cls, text) -> "Choice":
        d = json.loads(text)
        return cls(d["levels"], d["metrics"], int(d["rows"]), int(d["groups"]),
                   float(d["discernibility"]))


def node_classes(frame, req) -> bytes:
    """The node's step before the search: its rows' class table over the level-0 labels of
    its values (002 sec. 4.5 step 1), packed.  Refuses what the single-node request refuses
    on these rows (NULL quasi-identifiers, values outside a hierarchy); the node's row count
    alone is not checked against k (the merged table's is)."""
    if frame.n == 0:                       # a node holding none of the selected rows
        qis = ms.columns_with_role(req, "quasi_identifier")
        return pack(NodeClasses([[] for _ in qis], np.zeros((0, len(qis)), np.int64),
                                np.zeros(0, np.int64), qis))
    qis, _, attrs, codes = plugin.attributes(frame, req, part=True)
    return pack(_table(codes, [a.labels[0] for a in attrs], qis))


def choose(req, parts) -> Choice:
    """The coordinator's step: the nodes' packed class tables merged, the hierarchies built
    over the union of the values, the limits applied (user limits, selection limits: 002 sec.
    4.5 step 2) and the greedy or optimal search run on the merged table (step 3)."""
    merged = merge_classes(unpack(p) for p in parts)
    attrs = attributes(req, merged)
    if merged.rows < req.k:
        raise DeidError(PRIVACY_MODEL_UNSATISFIABLE,
                        f"the request selects fewer rows than k = {req.k}",
                        detail=f"{merged.rows} row(s) selected",
                        hint="Widen the selection or lower k.", data_dependent=True)
    result = plugin.search(req, attrs, merged.codes, counts=merged.counts)
    return choice(req, attrs, result)


def attributes(req, merged: NodeClasses):
    """The attributes of the request over the merged table's values, capped as on one node."""
    qis = ms.columns_with_role(req, "quasi_identifier")
    if len(qis) != len(merged.leaves) or merged.names not in (None, qis):
        raise DeidError(INVALID_PARAMETER_VALUE, "the nodes' class tables are not over the "
                        "request's quasi-identifiers", hint="Run the request again.")
    hier = plugin.hierarchies_of(req, qis)
    return [plugin.cap_by_selection(req, hier[q], plugin.attribute_from_leaves(
        hier[q], q, leaves, *plugin.attribute_settings(req, q)))
            for q, leaves in zip(qis, merged.leaves)]


def choice(req, attrs, result) -> Choice:
    sizes = result.class_counts
    rows = int(sizes.sum())
    found = {"steps": result.steps, "loss": float(result.loss)}
    return Choice({a.name: int(lv) for a, lv in zip(attrs, result.levels)},
                  plugin.metrics(req, attrs, result.levels, sizes, found), rows, int(len(sizes)),
                  float((sizes.astype(float) ** 2).sum() / rows) if rows else 0.0)


def node_plan(frame, req, chosen: Choice):
    """The node's step after the search: its rows at the chosen levels (002 step 4), as the
    ReleasePlan of its part.  The plan's groups and discernibility are the node's own classes;
    the metrics are the release's (the coordinator's choice)."""
    if frame.n == 0:
        return _empty_plan(frame, req, chosen)
    qis, others, attrs, codes = plugin.attributes(frame, req, part=True)
    if set(chosen.levels) != set(qis):
        raise DeidError(INVALID_PARAMETER_VALUE, "the chosen levels are not over the request's "
                        "quasi-identifiers", hint="Run the request again.")
    levels = [chosen.levels[q] for q in qis]
    for a, lv in zip(attrs, levels):
        if not 0 <= lv < len(a.labels):
            raise DeidError(INVALID_PARAMETER_VALUE, f"level {lv} of {a.name!r} is outside its "
                            "hierarchy", hint="Run the request again.")
    mapped = [a.level_map(int(lv))[c] for a, lv, c in zip(attrs, levels, codes)]
    sizes = (plugin.class_table(mapped, [len(a.labels[lv]) for a, lv in zip(attrs, levels)])[1]
             if frame.n else np.zeros(0, np.int64))
    plan = plugin.release_plan(frame, req, qis, others, attrs, codes, levels, sizes,
                               {"steps": chosen.metrics["steps"], "loss": chosen.metrics["loss"]})
    plan.metrics = chosen.metrics
    return plan


def _empty_plan(frame, req, chosen):
    """The part of a node that holds none of the selected rows: an empty release table."""
    qis = ms.columns_with_role(req, "quasi_identifier")
    table = Table(req.name, [Labels(q, np.zeros(0, np.int64), []) for q in qis]
                  + [SourceValues(o, frame.columns[o], req.rel.columns[o])
                     for o in req.columns if o not in qis])
    by_source = {}
    for q in qis:
        by_source.setdefault(plugin.attribute_settings(req, q)[2], []).append(q)
    return ReleasePlan(tables=[table], rows=0, groups=0, discernibility=0.0,
                       classes=SourceClasses(by_source), metrics=chosen.metrics)
