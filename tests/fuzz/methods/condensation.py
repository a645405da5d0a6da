"""Plausible condensation requests (004): numeric and categorical columns, survival data and
its time handling, the original algorithm."""
PAPER = "004"


def base(rng, t, k, opts):
    pool = [t.col(n) for n in ("age", "zip", "sex", "bmi", "seen", "alive", "months", "dx", "tr", "stage")]
    pool = [c for c in pool if c.role or rng.random() < 0.1]
    cols = rng.sample(pool, rng.randint(1, 5))
    k = max(k, 3) if rng.random() < 0.9 else k
    if rng.random() < 0.15:
        time_col = rng.choice(("months", "months", "age"))
        cols = [c for c in cols if c.name not in (time_col, "alive")] + [t.col(time_col), t.col("alive")]
        opts["survival"] = {"time": time_col, "status": "alive"}
        if rng.random() < 0.3:
            opts["survival_times"] = rng.choice(("recode", "coarsened", "perturbed", "original"))
    if rng.random() < 0.1 and "survival" not in opts:
        opts["algorithm"] = "original"
    return cols, k, None
