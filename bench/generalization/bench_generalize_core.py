"""Benchmark of the pure generalization core (002 sec. 4.5): greedy vs optimal on a class table.

Generates 1M synthetic patient rows over 6 hierarchical quasi-identifiers (3-5 levels each),
builds the class table (distinct combinations + counts, what the database's GROUP BY returns),
then times greedy() and optimal() for k=10 and k=100.

    PYTHONPATH=python_udfs /opt/deid-devenv/bin/python bench/generalization/bench_generalize_core.py \
        [--rows N] [--seed S] [--k 10 100] [--profile unique|moderate]
"""

import argparse
import sys
import time

import numpy as np

from deid.methods.generalization.generalize import AttributeHierarchy, greedy, optimal


def hierarchy(name, sizes, loss, priority, limit=None):
    """A balanced hierarchy: level i has sizes[i] values, each parent covers a contiguous run."""
    sizes = list(sizes) + [1]
    parents = [np.arange(sizes[i]) * sizes[i + 1] // sizes[i] for i in range(len(sizes) - 1)]
    labels = [[f"{name}{i}:{c}" for c in range(s)] for i, s in enumerate(sizes)]
    labels[-1] = ["*"]
    return AttributeHierarchy(name, parents, labels, loss, priority=priority, limit=limit)


def zipf(rng, n, m, a=1.1, shift=5.0):
    p = 1.0 / (np.arange(m) + shift) ** a
    p /= p.sum()
    return rng.choice(m, size=n, p=p)


def make_data(n, seed, profile="unique"):
    rng = np.random.default_rng(seed)
    if profile == "moderate":  # coarser, skewed domains: ~10^5 classes per 10^6 rows
        attrs = [
            hierarchy("age", [100, 20, 10, 5], [0, 0.2, 0.4, 0.7, 1], 0.8),
            hierarchy("zip", [100, 10, 2], [0, 0.3, 0.6, 1], 0.4),
            hierarchy("diagnosis", [60, 12, 4], [0, 0.4, 0.7, 1], 1.0),
            hierarchy("admitted", [24, 12, 4, 2], [0, 0.3, 0.5, 0.8, 1], 0.6),   # half-month .. half-year
            hierarchy("ethnicity", [6, 2], [0, 0.5, 1], 0.2),
            hierarchy("education", [8, 4, 2], [0, 0.3, 0.6, 1], 0.3),
        ]
        cols = [
            np.clip(rng.normal(52, 8, n).round(), 0, 99).astype(np.int64),
            zipf(rng, n, 100, a=2.0, shift=1.0),
            zipf(rng, n, 60, a=2.0, shift=1.0),
            rng.integers(0, 24, n),
            zipf(rng, n, 6, a=2.5, shift=1.0),
            zipf(rng, n, 8, a=2.0, shift=1.0),
        ]
        return np.stack(cols, axis=1), attrs
    attrs = [
        hierarchy("age", [100, 20, 10, 5], [0, 0.2, 0.4, 0.7, 1], 0.8),          # 5y, 10y, 20y bands
        hierarchy("zip", [1000, 100, 10], [0, 0.3, 0.6, 1], 0.4),                 # 3 -> 2 -> 1 digits
        hierarchy("diagnosis", [400, 40, 8], [0, 0.4, 0.7, 1], 1.0),             # code, block, chapter
        hierarchy("admitted", [360, 12, 4, 2], [0, 0.3, 0.5, 0.8, 1], 0.6),      # day, month, qtr, half
        hierarchy("ethnicity", [12, 4], [0, 0.5, 1], 0.2),
        hierarchy("education", [20, 6, 2], [0, 0.3, 0.6, 1], 0.3),
    ]
    cols = [
        np.clip(rng.normal(52, 18, n).round(), 0, 99).astype(np.int64),
        zipf(rng, n, 1000),
        zipf(rng, n, 400, a=1.3),
        rng.integers(0, 360, n),
        zipf(rng, n, 12, a=1.5, shift=1.0),
        zipf(rng, n, 20, a=1.0, shift=2.0),
    ]
    return np.stack(cols, axis=1), attrs


def class_table(rows, attrs):
    key = np.zeros(rows.shape[0], dtype=np.int64)
    for j, h in enumerate(attrs):
        key = key * h.size(0) + rows[:, j]
    uniq, counts = np.unique(key, return_counts=True)
    codes = np.empty((uniq.size, len(attrs)), dtype=np.int64)
    rest = uniq.copy()
    for j in range(len(attrs) - 1, -1, -1):
        codes[:, j] = rest % attrs[j].size(0)
        rest //= attrs[j].size(0)
    return codes, counts


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--k", type=int, nargs="*", default=[10, 100])
    ap.add_argument("--profile", choices=["unique", "moderate"], default="unique",
                    help="unique: nearly every row its own class (worst case); moderate: skewed, coarser")
    args = ap.parse_args(argv)

    rows, attrs = make_data(args.rows, args.seed, args.profile)
    t = time.perf_counter()
    codes, counts = class_table(rows, attrs)
    t_group = time.perf_counter() - t
    lattice = int(np.prod([h.top + 1 for h in attrs]))
    print(f"profile={args.profile} rows={args.rows} classes={codes.shape[0]} singletons={(counts == 1).sum()} "
          f"lattice={lattice} numpy_group_by={t_group:.3f}s")
    for k in args.k:
        t = time.perf_counter()
        g = greedy(codes, counts, attrs, k)
        t_g = time.perf_counter() - t
        t = time.perf_counter()
        o = optimal(codes, counts, attrs, k)
        t_o = time.perf_counter() - t
        excess = (g.loss - o.loss) / o.loss * 100 if o.loss > 0 else 0.0
        print(f"k={k:<4d} greedy  {t_g:7.3f}s levels={g.levels} loss={g.loss:.3f} steps={len(g.steps)} "
              f"classes={g.class_counts.size}")
        print(f"k={k:<4d} optimal {t_o:7.3f}s levels={o.levels} loss={o.loss:.3f} "
              f"checks={o.stats['checks']} classes={o.class_counts.size}")
        print(f"k={k:<4d} greedy loss exceeds optimum by {g.loss - o.loss:.3f} ({excess:.1f}%)")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
