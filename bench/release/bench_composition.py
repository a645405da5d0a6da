"""The composition rule's cost (python_udfs/deid/log/partition.py): the cells of a new
release's selection crossed with every earlier release's selection of the same source, as the
request computes them before commit (numpy, no server), and with groups (anatomy's groups of
about 10 rows, as rule (b) crosses them).

    .venv/bin/python bench/release/bench_composition.py [--rows 1000000] [--releases 100]

Earlier selections are distinct (an identical one is skipped before this step, so distinct
is the worst case), in two shapes (layers()); groups: the band selections with groups of 10. Prints seconds (median
of 3) per (rows, releases) and writes bench/results/composition.json.
"""
import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (python_udfs importable)
from deid.log.partition import Layer, cells, too_small  # noqa: E402

RESULTS = pathlib.Path(__file__).resolve().parents[1] / "results" / "composition.json"


def layers(rows, releases, grouped, scattered):
    """Release i: all rows but a band of 1,000 (few runs of consecutive ids), or, scattered,
    all rows but those whose id is i modulo 1,000 (as a predicate on a column would: a run
    break every 1,000 rows) -- cells of about 1,000 rows either way."""
    ids = np.arange(1, rows + 1, dtype=np.int64)
    out = []
    for i in range(releases + 1):
        keep = np.ones(rows, bool)
        if scattered:
            keep[ids % 1000 == i] = False
        else:
            keep[(1000 * i) % rows:(1000 * i) % rows + 1000] = False
        sel = ids[keep]
        labels = (np.arange(sel.size) // 10).astype(np.int64) if grouped else None
        out.append(Layer(sel, labels, 10))
    return out[:-1], out[-1]


def seconds(rows, releases, grouped, scattered, repeat=3):
    earlier, new = layers(rows, releases, grouped, scattered)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        c = cells(earlier, new)
        small = too_small(c)
        times.append(time.perf_counter() - t)
    assert grouped or not small
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--releases", type=int, default=100)
    a = p.parse_args(argv)
    grid = [(a.rows, r) for r in (1, 10, 30, 100) if r <= a.releases]
    grid += [(n, a.releases) for n in (10_000, 100_000) if n < a.rows]
    out = []
    for grouped, scattered in ((False, False), (False, True), (True, False)):
        kind = "groups" if grouped else "scattered" if scattered else "bands"
        for rows, releases in grid:
            s = seconds(rows, releases, grouped, scattered)
            out.append({"rows": rows, "releases": releases, "kind": kind, "seconds": s})
            print(f"{kind:>10} rows {rows:>9,} earlier releases {releases:>4}: {s:.3f} s",
                  flush=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
