"""The condensation evaluation's bookkeeping (bench/eval_condensation), without the
evaluation's venv: the per-seed cache that makes a re-run recompute only stale rows, the
tallies of significance changes by the original p, and the target and dominance verdicts."""
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from bench.eval_condensation import cache, report, utility  # noqa: E402


def test_cache_keeps_lines_of_its_fingerprint_and_drops_stale_ones(tmp_path):
    s = cache.Store(str(tmp_path), "rossi", "deid", 10, "aaa")
    assert s.get(1) is None
    s.put(1, {"x": 1})
    s.put(2, {"x": 2})
    again = cache.Store(str(tmp_path), "rossi", "deid", 10, "aaa")
    assert again.get(1)["x"] == 1 and again.get(2)["x"] == 2
    with open(again.path, "a") as f:
        f.write('{"seed": 3, "fingerprint": "aaa", "x": ')        # a line cut short
    assert cache.Store(str(tmp_path), "rossi", "deid", 10, "aaa").get(3) is None
    changed = cache.Store(str(tmp_path), "rossi", "deid", 10, "bbb")   # the code changed
    assert changed.get(1) is None and changed.get(2) is None
    changed.put(1, {"x": 9})
    changed.compact()
    with open(changed.path) as f:                       # the earlier code's lines stay
        assert [json.loads(line)["fingerprint"] for line in f] == ["aaa", "aaa", "bbb"]
    assert cache.Store(str(tmp_path), "rossi", "deid", 10, "aaa").get(2)["x"] == 2
    other = cache.Store(str(tmp_path), "rossi", "copulas", 0, "ccc")    # a peer is apart
    assert other.path != changed.path


def test_cache_risk_lines_apart_from_utility_lines(tmp_path):
    u = cache.Store(str(tmp_path), "lung", "deid", 25, "f")
    r = cache.Store(str(tmp_path), "lung", "deid", 25, "f", kind="risk")
    u.put(1, {"fits": 1})
    assert r.get(1) is None and r.path.endswith(".risk.jsonl")


def _fit(coef, p, se=0.1):
    coef, p = np.asarray(coef, float), np.asarray(p, float)
    return coef, p, coef - 1.96 * se, coef + 1.96 * se


def test_tally_splits_significance_changes_into_clear_and_near_threshold():
    orig = _fit([1.0, 0.5, 0.01, -0.3], [1e-5, 0.03, 0.8, 0.2])   # clear, near, clear, near
    t = utility.Tally(orig)
    t.add(_fit([1.0, 0.5, 0.01, -0.3], [1e-5, 0.07, 0.8, 0.01]))   # both near ones flip
    t.add(_fit([-1.0, 0.5, 0.01, -0.3], [0.2, 0.03, 0.01, 0.2]))   # both clear ones flip
    row = t.row()
    assert row["changed_significance_pct"] == 50.0
    assert row["changed_significance_clear_pct"] == 50.0
    assert row["changed_significance_near_pct"] == 50.0
    assert row["clear_coefficients"] == 2
    assert row["changed_direction"] == 1                    # coefficient 0: significant, flipped
    assert row["changed_direction_pct"] == 25.0             # of 2 x 2 significant
    assert row["outside_ci_pct"] == 12.5                    # -1.0 outside [0.804, 1.196]
    assert abs(row["shift_se"][0] - (-10.0)) < 0.01         # mean (-2/0.1 + 0) / 2


def test_a_failed_fit_changes_every_coefficient():
    t = utility.Tally(_fit([1.0, 0.2], [1e-4, 0.6]))
    t.add(None)
    row = t.row()
    assert row["changed_significance_pct"] == 100.0 and row["outside_ci_pct"] == 100.0
    assert row["failed"] == 1 and row["changed_direction"] == 1


def _row(sig, clear, direction, ci):
    return {"changed_significance_pct": sig, "changed_significance_clear_pct": clear,
            "changed_direction": direction, "changed_direction_pct": 0.0 if not direction else 50,
            "outside_ci_pct": ci}


def test_targets_compare_with_the_bootstrap_floor_of_the_same_cell():
    floor = _row(12.0, 0.0, 0, 8.0)
    met = report.targets(_row(10.0, 0.0, 0, 9.0), floor)
    assert all(ok for ok, _ in met.values())
    missed = report.targets(_row(13.0, 2.0, 1, 11.0), floor)
    assert not any(ok for ok, _ in missed.values())


def _risk(v, lo, hi):
    return {"value": v, "ci": [lo, hi]}


def _cell(loss, so, link, inf):
    models = {m: _row(loss, 0.0, 0, loss) for m in utility.MODELS}
    return dict(models, risk=[{"singling_out_multivariate": _risk(*so), "linkability":
                               _risk(*link), "inference": _risk(*inf)}])


def test_dominance_needs_every_risk_within_the_copula_ci_and_better_utility():
    cop = _cell(30.0, (0.10, 0.05, 0.15), (0.0, 0.0, 0.1), (0.2, 0.0, 0.5))
    r = {"chosen_k": 10, "cells": {("copulas", 0): cop,
                                   ("deid", 10): _cell(2.0, (0.14, 0.1, 0.2), (0.05, 0, 0.2),
                                                       (0.1, 0, 0.4))}}
    assert report.dominance(r, "deid")[0] == "yes"
    r["cells"][("deid", 10)] = _cell(2.0, (0.16, 0.1, 0.2), (0.05, 0, 0.2), (0.1, 0, 0.4))
    yes, why = report.dominance(r, "deid")
    assert yes == "no" and "SO multivariate 0.160" in why and "HIGHER" in why
    r["cells"][("deid", 10)] = _cell(40.0, (0.1, 0.1, 0.2), (0.05, 0, 0.2), (0.1, 0, 0.4))
    yes, why = report.dominance(r, "deid")
    assert yes == "no" and "WORSE" in why
    del r["cells"][("deid", 10)]
    assert report.dominance(r, "deid")[0] == "no"
