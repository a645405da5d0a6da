"""The bench_condensation.py table's distribution in numpy (dates as days), for the kernel
benchmarks that run without a server; imports nothing but numpy, so the server's Python
(no psycopg) can run them too."""
import numpy as np


def rows(n, seed=7):
    """n rows of age, bmi, sbp, dx_date, sex, stage, survival months, vital status."""
    rng = np.random.default_rng(seed)
    r = rng.random((7, n))
    age = 20 + np.floor(rng.random(n) ** 0.8 * 70)
    bmi = np.round(22 + age * 0.08 + 4 * r[0], 1)
    sbp = 100 + np.floor(age / 2) + np.floor(30 * r[1])
    dx_date = 14610 + np.floor(r[2] * 4000)
    sex = (r[3] >= 0.52).astype(float)
    stage = np.floor(r[4] ** 1.3 * 4)
    surv = 1 + np.floor(120 * r[5] ** (1 + age / 80.0))
    vital = (r[6] < 0.3 + age / 300.0).astype(float)
    return np.stack([age, bmi, sbp, dx_date, sex, stage, surv, vital], axis=1)
