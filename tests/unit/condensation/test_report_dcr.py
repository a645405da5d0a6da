"""The distance to closest record of a condensation release's report (releases/report_risk.py):
the blocked nearest-neighbour search equals a brute-force one, and the share of synthetic rows
closer to a source row than that row's nearest source neighbour is 1 for copies of isolated
source rows and 0 for rows far from every source row."""
import numpy as np
import pytest

from deid.releases import report_risk


def brute(points, source):
    d = np.sqrt(((points[:, None, :] - source[None, :, :]) ** 2).sum(axis=2))
    return d.argmin(axis=1), d.min(axis=1)


@pytest.mark.parametrize("cells", [7, 1000, 10 ** 6])
def test_blocked_search_equals_brute_force(monkeypatch, cells):
    monkeypatch.setattr(report_risk, "CELLS", cells)
    rng = np.random.default_rng(3)
    source, points = rng.normal(size=(300, 4)), rng.normal(size=(50, 4))
    idx, dist = report_risk.nearest(points, source)
    want_idx, want_dist = brute(points, source)
    assert (idx == want_idx).all() and np.allclose(dist, want_dist)


def test_self_is_skipped():
    rng = np.random.default_rng(4)
    source = rng.normal(size=(200, 3))
    rows = np.array([0, 5, 199])
    idx, dist = report_risk.nearest(rows, source, exclude_self=True)
    d = np.sqrt(((source[rows][:, None, :] - source[None, :, :]) ** 2).sum(axis=2))
    d[np.arange(3), rows] = np.inf
    assert (idx == d.argmin(axis=1)).all() and np.allclose(dist, d.min(axis=1))
    assert not (idx == rows).any()


def test_copies_of_isolated_rows_are_closer_than_neighbours():
    rng = np.random.default_rng(5)
    source = rng.normal(size=(500, 3)) * [1.0, 10.0, 100.0]
    out = report_risk.dcr(source[:100].copy(), source, seed=1)
    assert out["closer_than_neighbour"] == 1.0 and out["identical"] == 1.0
    assert out["checked"] == 100 and out["of"] == 100 and out["median_distance"] == 0.0


def test_far_rows_are_not():
    rng = np.random.default_rng(6)
    source = rng.normal(size=(500, 3))
    out = report_risk.dcr(source[:80] + 50.0, source, seed=1)
    assert out["closer_than_neighbour"] == 0.0 and out["identical"] == 0.0


def test_duplicated_source_rows_are_no_neighbours_to_beat():
    """A synthetic row equal to a source row that appears twice is not closer than that row's
    nearest other source row (distance 0 both)."""
    source = np.array([[0.0, 0.0], [0.0, 0.0], [5.0, 5.0], [9.0, 1.0]])
    out = report_risk.dcr(np.array([[0.0, 0.0]]), source, seed=0)
    assert out["identical"] == 1.0 and out["closer_than_neighbour"] == 0.0


def test_the_sample_is_capped_and_seeded(monkeypatch):
    monkeypatch.setattr(report_risk, "DCR_SAMPLE", 30)
    rng = np.random.default_rng(7)
    source, released = rng.normal(size=(200, 2)), rng.normal(size=(120, 2))
    a, b = report_risk.dcr(released, source, seed=9), report_risk.dcr(released, source, seed=9)
    assert a == b and a["checked"] == 30 and a["of"] == 120
