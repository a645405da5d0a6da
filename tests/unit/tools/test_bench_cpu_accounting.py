"""bench/cpu_accounting.py: CPU seconds from /proc, the per-release summary and the fitted
cost model of the distributed benchmark."""
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "distributed"))
import cpu_accounting as ca  # noqa: E402


def test_stat_reads_this_process_and_grows_with_work():
    state, before = ca.stat(os.getpid())
    assert state == "R" and before >= 0
    t = time.process_time()
    while time.process_time() - t < 0.15:
        sum(range(10000))
    assert ca.stat(os.getpid())[1] > before
    assert ca.stat(2 ** 22 + 12345) is None          # no such process


def test_summary_projects_the_slowest_node_plus_the_coordinator_and_waits():
    s = ca.summary({"coord": 0.5, "node0": 2.0, "node1": 3.0}, 0.25, 0.4, 6.0)
    assert s["cpu_total"] == pytest.approx(5.75)
    assert s["cpu_slowest_node"] == 3.0 and s["cpu_coord"] == 0.5
    assert s["projected_wall"] == pytest.approx(3.9)


def test_fit_recovers_a_model_and_projects_it():
    def acc(n):
        return {"cpu_slowest_node": 8.0 / n + 0.5, "cpu_coord": 0.2 + 0.01 * n,
                "waits": 0.1 + 0.02 * np.log2(n)}
    coef, project = ca.fit([(n, acc(n)) for n in (1, 2, 4)])
    assert coef["node_per_share"] == pytest.approx(8.0) and coef["node_fixed"] == pytest.approx(0.5)
    assert coef["coord_per_node"] == pytest.approx(0.01) and coef["waits_per_node"] == pytest.approx(0.02)
    assert project(16) == pytest.approx(8 / 16 + 0.5 + 0.2 + 0.16 + 0.1 + 0.08)


def test_fit_clips_negative_slopes_at_zero():
    pts = [(1, {"cpu_slowest_node": 1.0, "cpu_coord": 0.3, "waits": 0.2}),
           (2, {"cpu_slowest_node": 0.6, "cpu_coord": 0.2, "waits": 0.1})]
    coef, _ = ca.fit(pts)
    assert coef["coord_per_node"] == 0.0 and coef["waits_per_node"] == 0.0
