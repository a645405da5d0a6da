"""Helper of bench_generalization.py that runs in the benchmark-only venv bench/.venv-anjana.

    generalization_peer.py anjana --dir D --k K --qis a,b,...   # prints one JSON line last
    generalization_peer.py plot --json results.json --png out.png

anjana: reads D/data.csv (id + QIs) and one ARX-style hierarchy D/<qi>.csv per QI (rows
value;level1;...;*, one per leaf), and runs anjana.anonymity.k_anonymity_inner (full-domain
generalization, Datafly-like: it generalizes the QI with the most distinct values until k holds)
with supp_level 0, i.e. no record suppression, the same model as deid's generalization with one
source. Only the library call is timed (not reading the CSV).
"""
import argparse
import json
import sys
import time


def run_anjana(args):
    import pandas as pd
    from anjana.anonymity import k_anonymity_inner
    from anjana.anonymity.utils import utils

    qis = args.qis.split(",")
    numeric = set(filter(None, args.numeric.split(",")))
    hier = {}
    for q in qis:
        h = pd.read_csv(f"{args.dir}/{q}.csv", sep=";", header=None, dtype=str, keep_default_na=False)
        if q in numeric:
            h[0] = h[0].astype("int64")
        hier[q] = dict(h)            # {level: Series}, as anjana's examples build it
    dtypes = {q: ("int64" if q in numeric else str) for q in qis}
    data = pd.read_csv(f"{args.dir}/data.csv", dtype=dtypes, keep_default_na=False)
    data = data.drop(columns=["id"])
    t = time.perf_counter()
    anon, suppressed, levels = k_anonymity_inner(data, [], qis, args.k, 0, hier)
    seconds = time.perf_counter() - t
    out = {"seconds": seconds, "rows_in": int(len(data)), "rows_out": int(len(anon)),
           "suppressed": int(suppressed), "numeric_qis": sorted(numeric)}
    if len(anon):
        sizes = anon.groupby(qis).size()
        out.update(levels={q: int(levels[q]) for q in qis}, classes=int(len(sizes)),
                   min_class=int(sizes.min()),
                   discernibility=float((sizes.astype(float) ** 2).sum() / len(anon)),
                   transformation=[int(x) for x in utils.get_transformation(anon, qis, hier)])
    else:
        out.update(levels=None, error="anjana returned an empty table (k not reachable)")
    print(json.dumps(out))


def plot(args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = json.load(open(args.json))
    ks = [str(k) for k in r["ks"]]
    fig, ax = plt.subplots(1, 3, figsize=(17, 5.2))

    # (a) time per k
    names = [("GROUP BY (6 QIs)", lambda t: t["greedy"]["group_by_s"]),
             ("CTAS copy", lambda t: t["greedy"]["ctas_s"]),
             ("greedy: method", lambda t: t["greedy"]["method_s"]),
             ("greedy: end to end", lambda t: t["greedy"]["end_to_end_s"]),
             ("optimal: method", lambda t: t["optimal"]["method_s"]),
             ("optimal: end to end", lambda t: t["optimal"]["end_to_end_s"])]
    w = 0.8 / len(names)
    for i, (label, f) in enumerate(names):
        xs = [j + (i - (len(names) - 1) / 2) * w for j in range(len(ks))]
        ys = [f(r["timing"][k]) for k in ks]
        bars = ax[0].bar(xs, ys, w, label=label)
        ax[0].bar_label(bars, fmt="%.2f", fontsize=7)
    ax[0].set_xticks(range(len(ks)), [f"k = {k}" for k in ks])
    ax[0].set_ylabel("seconds (median)")
    ax[0].set_title(f"deid generalization on {r['rows']:,} rows, 6 QIs, 2 sources")
    ax[0].set_ylim(top=ax[0].get_ylim()[1] * 1.35)
    ax[0].legend(fontsize=8, loc="upper left", ncol=3)

    # (b) loss greedy vs optimal over the priority vectors
    lim = 0
    for k, m in zip(ks, ["o", "s", "^", "D"]):
        cases = r["loss"][k]["cases"]
        xs = [c["optimal"]["loss"] for c in cases]
        ys = [c["greedy"]["loss"] for c in cases]
        s = r["loss"][k]["summary"]
        ax[1].scatter(xs, ys, marker=m, alpha=0.7,
                      label=f"k = {k}: greedy > optimal in {s['greedy_worse']}/{s['vectors']},"
                            f" max +{s['max_excess_rel']:.0%}")
        lim = max([lim] + xs + ys)
    ax[1].plot([0, lim * 1.05], [0, lim * 1.05], "k--", lw=0.8, label="greedy = optimal")
    ax[1].set_xlabel("optimal loss  sum(priority x phi)")
    ax[1].set_ylabel("greedy loss  sum(priority x phi)")
    ax[1].set_title(f"information loss over {len(r['loss'][ks[0]]['cases'])} priority vectors")
    ax[1].legend(fontsize=8)

    # (c) the peer
    peers = [p for p in r.get("peer", []) if not p.get("skipped")]
    if peers:
        p = peers[-1]
        labels, times, losses = [], [], []
        for key, label in (("greedy_one_source", "deid greedy\n(1 source)"),
                           ("optimal_one_source", "deid optimal\n(1 source)"),
                           ("greedy_two_sources", "deid greedy\n(2 sources)")):
            labels.append(label)
            times.append(p["deid"][key]["end_to_end_s"])
            losses.append(p["deid"][key]["loss"])
        a = p["anjana"]
        labels.append("anjana\n(full-domain)")
        times.append(a.get("seconds", a.get("wall_s", 0)))
        losses.append(a.get("loss"))
        bars = ax[2].bar(range(len(labels)), times, color=["C0", "C1", "C2", "C3"])
        ax[2].set_yscale("log")
        ax[2].set_xticks(range(len(labels)), labels, fontsize=8)
        for b, t, l in zip(bars, times, losses):
            txt = f"{t:.2f} s" + (f"\nloss {l:.2f}" if l is not None else f"\n{a.get('status')}")
            ax[2].annotate(txt, (b.get_x() + b.get_width() / 2, t), ha="center", va="bottom",
                           fontsize=8)
        ax[2].set_ylabel("seconds, end to end (log)")
        ax[2].set_title(f"peer on the same {p['rows']:,} rows, k = {p['k']}, k over 6 QIs")
        ax[2].set_ylim(top=max(times) * 8)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("anjana")
    a.add_argument("--dir", required=True)
    a.add_argument("--k", type=int, required=True)
    a.add_argument("--qis", required=True)
    a.add_argument("--numeric", default="", help="QIs whose leaves are integers")
    p = sub.add_parser("plot")
    p.add_argument("--json", required=True)
    p.add_argument("--png", required=True)
    args = ap.parse_args()
    (run_anjana if args.cmd == "anjana" else plot)(args)


if __name__ == "__main__":
    sys.exit(main())
