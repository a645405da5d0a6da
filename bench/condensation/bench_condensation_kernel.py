"""Time and check the pure condensation kernel (deid.methods.condensation, paper 004) on
generated registry-like data (no server): 8 attributes shaped like 004's colon/lung tables
(age, stage, sex, race, tobacco, payor, survival months, vital status), k = 100.

1. Speed: condense + the independent verifier at 100k, 300k, 1M rows (best of --repeat runs),
   with the growth exponent between sizes.
2. Blocked (k-d blocks, default) vs exact (unblocked) k-means on <= 50k rows, over --seeds seeds:
   within-cluster SSE in the weighted feature space, differences of means and correlations
   between the source and the release, time.
3. Survival times: how many released times are exact original times, per option.

    PYTHONPATH=python_udfs python bench/condensation/bench_condensation_kernel.py \
        [--sizes 100000,300000,1000000] [--utility-rows 20000,50000] [--seeds 5] \
        [--repeat 2] [--workers 1]
"""
import argparse
import time

import numpy as np

from deid.methods.condensation import condense as cd
from deid.verify.shared.cluster_moments import verify_condensation

K = 100
KINDS = ["int", "categorical", "categorical", "categorical", "categorical", "categorical",
         "int", "categorical"]
AGE, STAGE, SEX, RACE, TOBACCO, PAYOR, MONTHS, STATUS = range(8)


def make_registry(n, seed=0, days=False):
    """Registry-like rows; status 1 = died (event), survival from a proportional-hazards model."""
    rng = np.random.default_rng(seed)
    age = np.clip(np.rint(rng.normal(68, 12, n)), 18, 100)
    stage = rng.choice(4, n, p=[0.2, 0.3, 0.3, 0.2])
    sex = rng.integers(0, 2, n)
    race = rng.choice(5, n, p=[0.8, 0.12, 0.04, 0.02, 0.02])
    tobacco = (rng.random(n) < 0.25 + 0.1 * sex).astype(int)
    payor = np.where(age >= 65, 1, rng.choice([0, 2], n, p=[0.8, 0.2]))
    payor = np.where(rng.random(n) < 0.1, rng.integers(0, 3, n), payor)
    risk = 0.03 * (age - 68) + 0.7 * stage + 0.3 * tobacco + 0.1 * (race == 1) - 0.1 * sex
    event = rng.exponential(40.0 * np.exp(-risk))
    censor = rng.uniform(0, 72, n)
    time_months = np.minimum(event, censor)
    died = (event <= censor).astype(int)
    t = np.rint(time_months * 30.44) if days else np.rint(time_months)
    X = np.stack([age, stage, sex, race, tobacco, payor, t, died], axis=1).astype(float)
    return X


def run(X, seed, workers=1, k=K, **kw):
    t0 = time.perf_counter()
    res = cd.condense(X, KINDS, k, status=STATUS, time_col=MONTHS, seed=seed, workers=workers,
                      **kw)
    return res, time.perf_counter() - t0


def verify(X, res):
    t0 = time.perf_counter()
    verify_condensation(X, res.cluster_id, res.synthetic, res.synthetic_cluster_id, K,
                        status_col=STATUS, time_col=MONTHS, survival_times=res.survival_times,
                        moment_columns=[AGE, MONTHS], moment_values=res.synthetic_unrounded,
                        check_ranges=True, integer_columns=[AGE, MONTHS])
    return time.perf_counter() - t0


def speed(sizes, repeat, workers):
    print(f"== speed: condense (improved, survival, default survival times), k={K}, 8 attributes, "
          f"workers={workers}; best of {repeat}")
    print(f"{'rows':>9} {'seconds':>8} {'verify':>7} {'clusters':>8} {'blocks':>6} "
          f"{'min':>4} {'max':>4}  phases (s)")
    results = []
    for n in sizes:
        X = make_registry(n, seed=1)
        best, best_res = None, None
        for r in range(repeat):
            res, dt = run(X, seed=r, workers=workers)
            if best is None or dt < best:
                best, best_res = dt, res
        vt = verify(X, best_res)
        phases = " ".join(f"{k}={v:.2f}" for k, v in best_res.timings.items() if k != "total")
        print(f"{n:>9} {best:8.2f} {vt:7.2f} {best_res.n_clusters:>8} {best_res.n_blocks:>6} "
              f"{best_res.cluster_size.min():>4} {best_res.cluster_size.max():>4}  {phases}")
        results.append((n, best))
    for (n0, t0), (n1, t1) in zip(results, results[1:]):
        print(f"growth exponent {n0}->{n1}: {np.log(t1 / t0) / np.log(n1 / n0):.2f}")
    if len(results) > 2:
        ns, ts = np.log([r[0] for r in results]), np.log([r[1] for r in results])
        print(f"growth exponent (least squares over all sizes): {np.polyfit(ns, ts, 1)[0]:.2f}")


def coded_view(X, kinds=KINDS, like=None):
    """Numeric columns and one-hot blocks over the levels of `like` (default X itself): the
    release's statistics are compared on these."""
    ref = X if like is None else like
    cols = []
    for j, kd in enumerate(kinds):
        if kd == "categorical":
            for level in np.unique(ref[:, j])[:-1]:
                cols.append((X[:, j] == level).astype(float))
        else:
            cols.append(X[:, j])
    return np.stack(cols, axis=1)


def feature_sse(X, res):
    """Within-cluster sum of squares in 004's weighted feature space, per status subset."""
    attrs = [j for j in range(8) if j != STATUS]
    coded, layout = cd._code_attributes(X, KINDS, attrs)
    feats = coded * cd._feature_scale(coded, layout, res.weights)
    counts = np.bincount(res.cluster_id)
    total = 0.0
    for j in range(feats.shape[1]):
        sums = np.bincount(res.cluster_id, weights=feats[:, j])
        sq = np.bincount(res.cluster_id, weights=feats[:, j] ** 2)
        total += float((sq - sums ** 2 / counts).sum())
    return total


def moment_errors(a, b):
    """The released rows' first and second moments against the original's, on coded views
    (coded_view): the largest |difference of means| in the original's SDs, the mean and the
    largest |difference of correlations|."""
    sd = a.std(axis=0)
    sd[sd == 0] = 1
    mean_diff = np.abs(a.mean(0) - b.mean(0)) / sd
    ca, cb = np.corrcoef(a.T), np.corrcoef(b.T)
    corr = np.abs(np.nan_to_num(ca) - np.nan_to_num(cb))[np.triu_indices(a.shape[1], 1)]
    return {"mean_diff_max": float(mean_diff.max()), "corr_diff_mean": float(corr.mean()),
            "corr_diff_max": float(corr.max())}


def utility(X, res):
    return dict(sse=feature_sse(X, res),
                **moment_errors(coded_view(X), coded_view(res.synthetic, like=X)))


def blocked_vs_exact(rows, seeds, workers):
    auto = max(cd.CLUSTERS_PER_BLOCK * K, cd.MIN_AUTO_BLOCK_ROWS)
    print(f"\n== blocked (block_rows='auto' = {auto} rows) vs exact k-means, {seeds} seeds; "
          "mean (sd over seeds)")
    metrics = ("sse", "mean_diff_max", "corr_diff_mean", "corr_diff_max", "seconds")
    print(f"{'rows':>7} {'path':>7} " + " ".join(f"{m:>20}" for m in metrics))
    for n in rows:
        X = make_registry(n, seed=2)
        table = {}
        for path, block_rows in (("blocked", "auto"), ("exact", None)):
            vals = {m: [] for m in metrics}
            for s in range(seeds):
                res, dt = run(X, seed=100 + s, workers=workers, block_rows=block_rows)
                for m, v in utility(X, res).items():
                    vals[m].append(v)
                vals["seconds"].append(dt)
            table[path] = vals
            print(f"{n:>7} {path:>7} " + " ".join(
                f"{np.mean(vals[m]):>12.4g} ({np.std(vals[m]):.2g})" for m in metrics))
        for m in metrics[:-1]:
            d = np.mean(table["blocked"][m]) - np.mean(table["exact"][m])
            noise = np.sqrt((np.var(table["blocked"][m]) + np.var(table["exact"][m])) / seeds)
            rel = d / abs(np.mean(table["exact"][m])) if np.mean(table["exact"][m]) else 0.0
            print(f"{'':>7} {'':>7} {m}: blocked - exact = {d:+.4g} ({rel:+.1%}), "
                  f"{abs(d) / noise if noise else float('inf'):.1f} x its standard error")


def survival_exposure():
    print("\n== survival times: share of released times equal to the same-rank original time, "
          "to any original time, and matching exactly one source row (singles it out)")
    print(f"{'table':>18} {'option':>10} {'same-rank':>10} {'any':>6} {'unique':>7}")
    for n, k, days in ((20_000, K, False), (20_000, K, True), (700, 20, True)):
        X = make_registry(n, seed=3, days=days)
        values, counts = np.unique(X[:, MONTHS], return_counts=True)
        for option in ("original", "perturbed", "coarsened"):
            res, _ = run(X, seed=0, k=k, survival_times=option)
            same = 0
            for c in range(res.n_clusters):
                src = np.sort(X[res.cluster_id == c, MONTHS])
                mine = res.synthetic_cluster_id == c
                rank = np.argsort(res.synthetic_unrounded[mine, MONTHS], kind="stable")
                same += int((res.synthetic[mine, MONTHS][rank] == src).sum())
            rel = res.synthetic[:, MONTHS]
            pos = np.clip(np.searchsorted(values, rel), 0, values.size - 1)
            matches = np.where(values[pos] == rel, counts[pos], 0)
            label = f"{n} {'days' if days else 'months'} k={k}"
            print(f"{label:>18} {option:>10} {same / n:>10.3f} {(matches > 0).mean():>6.3f} "
                  f"{(matches == 1).mean():>7.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,300000,1000000")
    ap.add_argument("--utility-rows", default="20000,50000")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    speed([int(s) for s in a.sizes.split(",") if s], a.repeat, a.workers)
    blocked_vs_exact([int(s) for s in a.utility_rows.split(",") if s], a.seeds, a.workers)
    survival_exposure()


if __name__ == "__main__":
    main()
