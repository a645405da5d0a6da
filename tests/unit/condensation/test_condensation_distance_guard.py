"""distance_guard: redraws within the exact moments until fewer synthetic rows lie next to a
source row than a held-out record would (beyond 004)."""

import numpy as np

from deid.methods.condensation import pca_synthesis, plugin
from deid.methods.condensation.condense import condense
from deid.verify.shared.cluster_moments import verify_condensation

from test_condensation_plugin import SURV, frame, req
from test_condensation_ranked_times import monthly


def test_guard_keeps_exact_moments_and_moves_rows_away_from_source_rows():
    X, kinds = monthly(3000, 5)
    plain = condense(X, kinds, 10, status=3, time_col=2, seed=4,
                     survival_times="ranked")
    guarded = condense(X, kinds, 10, status=3, time_col=2, seed=4, distance_guard=8,
                       survival_times="ranked")
    before, after = guarded.close_rows
    assert plain.close_rows is None and 0 <= after < before
    assert np.array_equal(guarded.cluster_id, plain.cluster_id)     # the same clusters
    verify_condensation(X, guarded.cluster_id, guarded.synthetic, guarded.synthetic_cluster_id,
                        10, status_col=3, time_col=2, survival_times="ranked",
                        moment_columns=[0, 2], moment_values=guarded.synthetic_unrounded,
                        check_ranges=True, integer_columns=[0])
    again = condense(X, kinds, 10, status=3, time_col=2, seed=4, distance_guard=8,
                       survival_times="ranked")
    assert np.array_equal(again.synthetic, guarded.synthetic)        # seeded


def test_guard_distances_counts_rows_under_the_held_out_threshold():
    rng = np.random.default_rng(1)
    source = rng.normal(size=(4, 12, 3))
    copies = source.copy()                                  # every row on a source row
    redraws = iter([source[:, ::-1] + 0.0, source * 3.0])   # still on / far from the rows
    out, before, after = pca_synthesis.guard_distances(source, copies, 2,
                                                       lambda: next(redraws))
    assert before == 48 and after < 48
    assert np.allclose(out, source * 3.0)
    d = pca_synthesis.nearest_distances(source, source, exclude_self=True)
    assert d.shape == (4, 12) and np.all(d > 0)


def test_plugin_logs_the_guard():
    plan = plugin.run(frame(), req(**SURV, seed=3, distance_guard=4))
    guard = plan.metrics["distance_guard"]
    assert guard["rounds"] == 4 and guard["close_rows_after"] <= guard["close_rows_before"]
    assert "distance_guard" not in plugin.run(frame(), req(**SURV, seed=3)).metrics
