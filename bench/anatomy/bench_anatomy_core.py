"""Time deid.methods.anatomy.anatomize on generated data (001 setting: K=50, L=10, 4 QIs,
3 sensitive attributes with Zipf-like skew over 20-50 values).

    PYTHONPATH=python_udfs python bench/anatomy/bench_anatomy_core.py [rows ...] [--column]
"""
import sys
import time

import numpy as np

from deid.methods.anatomy.partition import anatomize


def make_data(n, seed=0):
    rng = np.random.default_rng(seed)
    qi = np.stack([
        rng.integers(1920, 2010, n),          # birth year
        rng.integers(0, 2, n),                # gender
        rng.integers(0, 6, n),                # race
        rng.integers(0, 900, n),              # zip3
    ], axis=1).astype(np.float64)

    def zipf(values):
        p = 1.0 / np.arange(1, values + 1)
        return rng.choice(values, n, p=p / p.sum())

    sensitive = np.stack([zipf(20), zipf(35), zipf(50)], axis=1).astype(np.int64)
    return qi, sensitive


def main(argv):
    column = "--column" in argv
    sizes = [int(a) for a in argv if not a.startswith("--")] or [100_000, 1_000_000]
    for n in sizes:
        qi, sensitive = make_data(n)
        kwargs = {"column_l": {0: 2}} if column else {}
        t0 = time.perf_counter()
        res = anatomize(qi, sensitive, K=50, L=10, **kwargs)
        dt = time.perf_counter() - t0
        sizes_g = np.bincount(res.group_id)
        print(f"n={n:>9} seconds={dt:6.2f} n_groups={res.n_groups:>6} "
              f"mean_group={sizes_g.mean():7.1f} min_group={sizes_g.min()} "
              f"min_certified_l={res.certified_l.min()}" + (" column_l={0: 2}" if column else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
