"""PNGs of bench_disassociation_utility.py's JSON (runs in bench/.venv-dis, matplotlib):
<name>_are.png (ARE vs k, W1/W2), <name>_mre.png (share of constraints within +-5 % and
+-2.5 % per policy), <name>_aa.png (disassociation vs the AA-like peer), <name>_generators.png
(level-1 MRE against codes per (record, category) of the generated data sets)."""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(path):
    path = pathlib.Path(path)
    d = json.loads(path.read_text())
    stem = path.with_suffix("")
    ks = [r["k"] for r in d["are"]]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for key, lab in (("w1_0.625", "W1: itemsets, support >= 0.625 %"),
                     ("w1_2.5", "W1: itemsets, support >= 2.5 %"),
                     ("w2", "W2: random 1-4 code sets (all)"),
                     ("w2_ge_k", "W2: random sets with C_O >= k")):
        ax.plot(ks, [r[key] for r in d["are"]], marker="o", ms=3, label=lab)
    ax.axhline(0.05, color="grey", ls="--", lw=1, label="003 Fig. 17: 0.05")
    ax.set_xlabel("k (m = 2, level-1 policy)")
    ax.set_ylabel(f"ARE (mean of {d['reconstructions']} reconstructions)")
    ax.set_title("Disassociation: ARE vs k (003 Def. 2)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{stem}_are.png", dpi=110)

    fig, ax = plt.subplots(figsize=(8, 4.2))
    rows = d["mre"]
    labels = [f"{r['policy']}\nm={r['m']}" for r in rows]
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [100 * r["within_5"] for r in rows], 0.4, label="[-5 %, 5 %)")
    ax.bar([i + 0.2 for i in x], [100 * r["within_2_5"] for r in rows], 0.4,
           label="[-2.5 %, 2.5 %)")
    ax.axhline(90, color="grey", ls="--", lw=1, label="003 Fig. 18: 90 % (level 1)")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("% of constraints (k = 5)")
    ax.set_title("Disassociation: MRE per constraint (003 Def. 3)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{stem}_mre.png", dpi=110)

    if d.get("aa"):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        ka = [r["k"] for r in d["aa"]]
        for key, lab in (("dis_w1", "Dis W1 (0.625 %)"), ("aa_w1", "AA-like W1 (0.625 %)"),
                         ("dis_w2", "Dis W2"), ("aa_w2", "AA-like W2")):
            ax.plot(ka, [r[key] for r in d["aa"]], marker="o", label=lab)
        ax.set_yscale("log")
        ax.set_xlabel("k (m = 2)")
        ax.set_ylabel("ARE")
        ax.set_title("Disassociation vs generalization (bench-only AA-like peer)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(f"{stem}_aa.png", dpi=110)

    gens = [r for r in d.get("generators", []) if "codes_per_category" in r]
    if gens:
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
        series = [r for r in gens if r["generator"].startswith(("default", "same-category"))]
        for k, marker in ((5, "o"), (25, "s")):
            rows = sorted((r for r in series if r["k"] == k),
                          key=lambda r: r["codes_per_category"])
            left.plot([r["codes_per_category"] for r in rows],
                      [100 * r["mre_level1_within_5"] for r in rows], marker=marker,
                      label=f"k = {k}")
            rows = [r for r in gens if r["k"] == k]
            right.plot([100 * r["in_2_chunks"] for r in rows],
                       [100 * r["mre_level1_within_5"] for r in rows], marker=marker, ls="",
                       label=f"k = {k}")
        for ax in (left, right):
            ax.axhline(90, color="grey", ls="--", lw=1, label="003 Fig. 18: 90 % (k = 5)")
            ax.legend(fontsize=8)
        left.set_xlabel("codes of one 3-digit category per record holding any\n"
                        "(default groups, same-category repeats thinned)")
        right.set_xlabel("% of (record, category) pairs whose codes lie in >= 2 chunks\n"
                         "(all generated data sets)")
        left.set_ylabel("% of level-1 constraints in [-5 %, 5 %)")
        fig.suptitle("Level-1 MRE (003 Def. 3, m = 2) and within-category co-occurrence")
        fig.tight_layout()
        fig.savefig(f"{stem}_generators.png", dpi=110)


if __name__ == "__main__":
    main(sys.argv[1])
