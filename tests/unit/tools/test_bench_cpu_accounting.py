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


def test_cpu_model_reports_the_least_total_cpu_and_the_least_projection():
    """Of a configuration's --repeat runs the least total CPU and, from the run of least
    projected wall, its projection (contention on a shared machine only adds CPU and waits);
    the ratios are to the 1-node release's such figures."""
    import bench_distributed as bd

    def acc(total, slowest, coord=0.01, waits=0.05):
        return {"cpu": {"coord": coord}, "client_cpu": 0.0, "cpu_total": total,
                "cpu_slowest_node": slowest, "cpu_coord": coord, "waits": waits, "wall": 2 * total,
                "projected_wall": slowest + coord + waits}
    res = {"methods": {"anatomy": {
        1: {"warm": {"accounting": acc(7.0, 6.9)},
            "repeats": [acc(6.0, 5.9, waits=1.4), acc(6.5, 6.4)]},
        2: {"warm": {"accounting": acc(6.3, 3.2)}, "repeats": [acc(6.6, 3.3)]},
        4: {"skipped": "too big"}}}}
    model = bd.cpu_model(res)["anatomy"]
    one, two = model["nodes"][1], model["nodes"][2]
    assert one["cpu_total"] == 6.0 and one["runs"] == 3 and one["cpu_total_runs"] == [7.0, 6.0, 6.5]
    assert two["cpu_ratio"] == pytest.approx(6.3 / 6.0, abs=1e-3)
    assert one["projected_wall"] == pytest.approx(6.46) and one["waits"] == 0.05
    assert two["projected_ratio"] == pytest.approx(3.26 / 6.46, abs=1e-3)
    assert 4 not in model["nodes"] and "projected" in model


def test_a_child_that_ends_unseen_is_counted_through_its_parents_reaped_cpu():
    """A child shorter than a rescan (a node's parallel worker) is never tracked; its CPU
    reaches the parent's cutime + cstime when it is reaped, and the member counts it."""
    import subprocess
    s = ca.Sampler({"me": os.getpid()}, "no_such_database", rescan=60)
    s.start()
    subprocess.run([sys.executable, "-c",
                    "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.3: pass"], check=True)
    s.stop()
    assert s.owner == {}                                 # nothing tracked
    assert s.unseen_by_member()["me"] >= 0.25
    assert s.cpu_by_member()["me"] == pytest.approx(s.unseen_by_member()["me"])


def test_fit_raises_the_fixed_share_to_a_measured_floor_and_fits_the_rest():
    pts = [(n, {"cpu_slowest_node": 8.0 / n, "cpu_coord": 0.0, "waits": 0.0}) for n in (1, 2, 4)]
    coef, project = ca.fit(pts, min_fixed=0.4)
    assert coef["node_fixed"] == 0.4 and coef["node_per_share"] == pytest.approx(9.8 / 1.3125)
    assert project(64) == pytest.approx(coef["node_per_share"] / 64 + 0.4)
    coef, _ = ca.fit([(n, dict(p, cpu_slowest_node=p["cpu_slowest_node"] + 0.5)) for n, p in pts],
                     min_fixed=0.1)
    assert coef["node_fixed"] == pytest.approx(0.5)         # the fit's own b is above the floor
