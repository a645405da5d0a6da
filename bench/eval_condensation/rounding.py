"""The rounding attack on released survival times, per survival-time mode and data set.

    bench/.venv-eval/bin/python -m bench.eval_condensation.rounding [--datasets lung colon] [--k 10]

An attacker rounds every released time (ceil, rint and floor; the best of the three is
reported) and lines the rounded times up with the source times by rank within each vital
status (the best pairing an attacker could hope for: the release carries no row id).  Rows are
split into *rare* rows -- their (time, status) pair held by fewer than k source rows, the rows a
time identifies -- and the others.  Per mode:

* ``rare exact %``: rare rows whose source time the attack gives back exactly;
* ``grain exact %``: of those, the share the grain itself gives back -- rows whose time happens
  to equal the value released for every row of its pair (what knowing the >= k-row set alone
  tells).  An attack recovers "no more than the grain" when the two are equal;
* ``pairs < k``: released (rounded time, status) pairs held by fewer than k released rows
  (each singles its rows out by time);
* ``grain (units)``: mean span (max - min source time) of the rows behind a rare row's
  released pair -- how precisely the release places a rare row's time.

Outputs bench/results/condensation_rounding_attack.{json,txt}.
"""
import argparse
import json
import os

import numpy as np

from . import data, synth

RESULTS = os.path.join(synth.ROOT, "bench", "results")
MODES = ("recode", "ranked", "coarsened", "original")
ATTACKS = {"ceil": np.ceil, "rint": np.rint, "floor": np.floor}


def lined_up(source_t, source_s, released_t, released_s):
    """(source time, released time, status) per row, sorted by time within each status (ties
    in the source broken by the released value, the attacker's best pairing)."""
    out = []
    for s in np.unique(source_s):
        src = np.sort(source_t[source_s == s])
        rel = np.sort(released_t[released_s == s])
        out.append((src, rel, np.full(src.size, s)))
    return [np.concatenate(x) for x in zip(*out)]


def attack(ds, rel, k):
    """The measures of the module docstring for one release."""
    t, s = ds.df[ds.time].to_numpy(float), ds.df[ds.status].to_numpy()
    rt, rs = rel[ds.time].to_numpy(float), rel[ds.status].to_numpy()
    src, relt, st = lined_up(t, s, rt, rs)
    pair_counts = {}
    for a, b in zip(src, st):
        pair_counts[(a, b)] = pair_counts.get((a, b), 0) + 1
    rare = np.array([pair_counts[(a, b)] < k for a, b in zip(src, st)])
    best, best_name = -1.0, None
    for name, f in ATTACKS.items():
        hit = (f(relt) == src)
        share = float(hit[rare].mean()) if rare.any() else 0.0
        if share > best:
            best, best_name, hits = share, name, hit
    rounded = ATTACKS[best_name](relt)
    keys, inverse, counts = np.unique(np.stack([rounded, st.astype(float)], axis=1), axis=0,
                                      return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    lo = np.full(keys.shape[0], np.inf)
    hi = np.full(keys.shape[0], -np.inf)
    np.minimum.at(lo, inverse, src)
    np.maximum.at(hi, inverse, src)
    span = (hi - lo)[inverse]
    # what the grain alone gives back: a rare row whose time equals its pair's released value
    grain_hit = (rounded == src) & (counts[inverse] >= k)
    return {"rows": int(src.size), "rare_rows": int(rare.sum()),
            "attack": best_name, "rare_exact_pct": round(100 * best, 1),
            "grain_exact_pct": round(100 * float(grain_hit[rare].mean()), 1) if rare.any() else 0.0,
            "all_exact_pct": round(100 * float(hits.mean()), 1),
            "pairs_below_k": int((counts < k).sum()),
            "grain_units": round(float(span[rare].mean()), 2) if rare.any() else 0.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=list(data.LOADERS))
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rows = []
    for name in args.datasets:
        ds = data.load(name)
        k = min(args.k, ds.k) if name == "veterans" else args.k
        for mode in MODES:
            rel = synth.deid_release(ds, "deid", args.seed, k=k, extra={"survival_times": mode})
            r = dict(attack(ds, rel, k), dataset=name, k=k, mode=mode)
            rows.append(r)
            print(json.dumps(r), flush=True)
    head = ("| data set | k | mode | rare rows | best attack | rare exact % | grain exact % | "
            "all exact % | pairs < k | grain (units) |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [head] + [f"| {r['dataset']} | {r['k']} | {r['mode']} | {r['rare_rows']} | "
                      f"{r['attack']} | {r['rare_exact_pct']} | {r['grain_exact_pct']} | "
                      f"{r['all_exact_pct']} | {r['pairs_below_k']} | {r['grain_units']} |"
                      for r in rows]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(RESULTS, "condensation_rounding_attack.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(RESULTS, "condensation_rounding_attack.txt"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
