"""plugins/condensation.py without a server: option schemas, refusals (SQLSTATE, hint, no
value and no count in message or hint), the ReleasePlan it builds, and its verifier's pure
part on that plan."""
import re

import numpy as np
import pytest

from deid.request import options as opts_schema
from deid.catalog.relations import Column, Relation
from deid.errors import DeidError
from deid.read.frame import EncodedColumn, Frame
from deid.plan import Clusters, SourceCodes, Synthetic
from deid.methods.condensation import plugin
from deid.request.release import Request
from deid.verify.shared.cluster_moments import verify_condensation

TYPES = {"age": ("integer", "int4"), "bmi": ("double precision", "float8"),
         "lab": ("numeric(6,2)", "numeric"), "dx": ("date", "date"), "sex": ("text", "text"),
         "smoker": ("boolean", "bool"), "t": ("integer", "int4"), "dead": ("integer", "int4"),
         "seen": ("timestamp with time zone", "timestamptz"), "doc": ("jsonb", "jsonb")}


def relation():
    cols = {n: Column(n, t, b, False, role="quasi_identifier") for n, (t, b) in TYPES.items()}
    return Relation(1, "public", "t", "r", False, cols)


def req(columns=("age", "bmi", "lab", "dx", "sex", "smoker", "t", "dead"), k=5, **options):
    options = opts_schema.validate(dict(options), opts_schema.COMMON + plugin.OPTIONS,
                                   "condensation")
    plugin.validate(k, None, options)
    return Request(relation(), "condensation", k, None, list(columns), None, None, options,
                   "rel", 1, options.get("seed", 3), "me", {"via": "select"})


def frame(n=120, seed=0, nulls=()):
    rng = np.random.default_rng(seed)
    cols = {
        "age": ("int", rng.integers(20, 90, n), None),
        "bmi": ("float", rng.normal(27, 4, n), None),
        "lab": ("float", np.round(rng.uniform(0, 50, n), 2), None),
        "dx": ("date", rng.integers(16000, 18000, n), None),
        "sex": ("category", rng.integers(0, 2, n), ["F", "M"]),
        "smoker": ("category", rng.integers(0, 2, n), ["false", "true"]),
        "t": ("int", rng.integers(1, 120, n), None),
        "dead": ("int", (np.arange(n) % 3 == 0).astype(np.int64), None),
    }
    out = {}
    for name, (kind, values, dictionary) in cols.items():
        null = np.zeros(n, bool)
        if name in nulls:
            null[::7] = True
            values = np.where(null, len(dictionary) if dictionary else 0, values)
        out[name] = EncodedColumn(name, kind, np.asarray(values), null, dictionary)
    return Frame(n, np.arange(1, n + 1, dtype=np.int64) * 10, out)


ROW_COUNTS = (120, 80, 40, 30, 20, 18, 10)
SURV = {"survival": {"time": "t", "status": "dead"}}


def refused(fn, sqlstate):
    with pytest.raises(DeidError) as e:
        fn()
    err = e.value
    assert err.sqlstate == sqlstate and err.hint
    text = f"{err} {err.hint}"
    for n in ROW_COUNTS:                      # the frames' sizes and subset sizes never show
        assert not re.search(rf"(?<![\w.]){n}(?![\w.])", text), text
    return err


def test_k_below_three_is_refused():
    err = refused(lambda: req(k=2), "22023")
    assert "k >= 3" in err.hint
    req(k=3)


def test_l_and_inapplicable_options_are_refused():
    with pytest.raises(DeidError):
        plugin.validate(5, 2, {})
    with pytest.raises(DeidError):
        plugin.validate(5, None, {"algorithm": "original", "weights": {"age": 0.2}})
    with pytest.raises(DeidError):
        plugin.validate(5, None, {"survival_times": "original"})


@pytest.mark.parametrize("bad", [
    {"survival": "t"}, {"survival": {"time": "t"}}, {"survival": {"time": "t", "status": 1}},
    {"survival": {"time": "t", "status": "dead", "x": "y"}}, {"weights": {"age": 1.5}},
    {"weights": {"age": -0.1}}, {"weights": [0.5]}, {"algorithm": "magic"},
    {"survival_times": "exact"}])
def test_option_schema(bad):
    refused(lambda: opts_schema.validate(bad, opts_schema.COMMON + plugin.OPTIONS,
                                         "condensation"), "22023")


@pytest.mark.parametrize("columns,options,sqlstate", [
    (("age", "seen"), {}, "0A000"),
    (("age", "doc"), {}, "0A000"),
    (("age", "t"), SURV, "22023"),                                       # status not projected
    (("age", "sex", "dead"), {"survival": {"time": "sex", "status": "dead"}}, "22023"),
    (("age", "t", "bmi"), {"survival": {"time": "t", "status": "bmi"}}, "22023"),
    (("age", "t", "dead"), {"survival": {"time": "t", "status": "t"}}, "22023"),
    (("age", "t", "dead"), dict(SURV, weights={"bmi": 0.3}), "22023"),  # weight not projected
    (("age", "t", "dead"), dict(SURV, weights={"dead": 0.3}), "22023"),
])
def test_plan_read_refusals(columns, options, sqlstate):
    refused(lambda: plugin.plan_read(req(columns, **options), "id"), sqlstate)


def test_nulls():
    f = frame(nulls=("bmi",))
    r = req()
    refused(lambda: plugin.run(f, r), "22004")
    refused(lambda: plugin.run(f, req(nulls="value")), "22004")     # numbers never
    f = frame(nulls=("sex",))
    err = refused(lambda: plugin.run(f, r), "22004")
    assert "nulls" in err.hint and err.detail                        # the count is in the detail
    plan = plugin.run(f, req(nulls="value"))
    sex = plan.tables[0].columns[4]
    assert (sex.codes == 2).sum() == f.columns["sex"].null.sum()     # NULL stays a category


def test_status_refusals():
    f = frame(n=30)
    refused(lambda: plugin.run(f, req(k=11, **SURV)), "DE001")       # 10 dead rows < k
    f.columns["dead"].values[0] = 2
    refused(lambda: plugin.run(f, req(k=5, **SURV)), "22023")        # not binary


def test_plan_shape_and_evidence_pass_the_verifier():
    # coarsened times stay integers (the default "ranked" releases float8 times: its own test)
    f, r = frame(), req(**SURV, seed=11, survival_times="coarsened")
    plan = plugin.run(f, r)
    [table] = plan.tables
    assert table.name == "rel" and [c.name for c in table.columns] == r.columns
    kinds = [type(c) for c in table.columns]
    assert kinds == [Synthetic] * 4 + [SourceCodes] * 2 + [Synthetic] * 2
    assert plan.rows == f.n and isinstance(plan.clusters, Clusters)
    sizes, rids = plan.clusters.sizes, plan.clusters.rids
    assert sizes.min() >= 5 and sizes.sum() == f.n and np.array_equal(np.sort(rids), f.rid)
    starts = np.cumsum(sizes) - sizes
    assert all(np.all(np.diff(rids[s:s + z]) > 0) for s, z in zip(starts, sizes))
    lab = table.columns[2].values
    assert np.array_equal(lab, np.round(lab, 2))                      # numeric(6,2) grain
    for j in (0, 3, 6, 7):
        assert np.array_equal(table.columns[j].values, np.rint(table.columns[j].values))
    ev = plan.evidence
    source = np.stack([f.columns[c].values.astype(float) for c in r.columns], axis=1)
    cluster = np.empty(f.n, np.int64)
    cluster[np.searchsorted(f.rid, rids)] = np.repeat(np.arange(len(sizes)), sizes)
    report = verify_condensation(source, cluster, ev.released, ev.cluster, 5,
                                 status_col=ev.status, moment_columns=[0, 1, 2, 3, 6],
                                 moment_values=ev.unrounded, count_columns=[4, 5],
                                 check_ranges=True, integer_columns=[0, 3, 6, 7])
    assert report["clusters"] == plan.groups
    assert plan.metrics["per_cluster"]["size"] == sizes.tolist()
    again = plugin.run(f, req(**SURV, seed=11, survival_times="coarsened"))
    assert np.array_equal(again.evidence.released, ev.released)


def test_usage_describes_the_object_option():
    text = opts_schema.usage(plugin.OPTIONS)
    assert 'survival: an object {"time": column, "status": column}' in text
