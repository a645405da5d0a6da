"""Utility of k^m generalization (options.model 'generalization': Terrovitis et al.'s AA,
methods/apriori_anonymization.py) next to disassociation and the bench-only AA-like peer
(bench/disassociation/aa_generalization.py), on the data and workloads of bench_disassociation_utility.py
(58,302 INFORMS-shaped records, ICD-9 hierarchy, m = 2): ARE (003 Def. 2) on W1 (frequent
itemsets, support >= 0.625 %) and W2 (1000 random in-record code sets), counts on generalized
data estimated as in 003 Sec. 3.2 (a node stands for each leaf below it with probability
1 / leaves), and the shares of codes and occurrences generalized, at k = 2, 5, 10, 25.
Disassociation's ARE is read from bench/results/disassociation_utility.json (same data and
workloads; not re-run here). Pure numpy, no server.

    .venv/bin/python bench/disassociation/bench_aa_utility.py

Writes bench/results/aa_utility.json.
"""
import json
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
import numpy as np  # noqa: E402

import icd9_hierarchy as icd9  # noqa: E402
from aa_generalization import Generalized, aa_generalize, generalized_counts  # noqa: E402
from bench_disassociation_kernel import make_records, workload  # noqa: E402
from bench_disassociation_utility import counts, sample_itemsets  # noqa: E402
from deid.methods.disassociation.apriori_anonymization import apriori_anonymize, build_tree  # noqa: E402
from deid.methods.disassociation.metrics_sets import CodeIndex  # noqa: E402


def main():
    offsets, codes, names, _ = make_records(58_302, seed=0)
    D, n = len(names), offsets.size - 1
    idx_o = CodeIndex(offsets, codes, D)
    rng = np.random.default_rng(42)              # the draws of bench_disassociation_utility
    w2 = workload(rng, offsets, codes)
    fi = icd9.frequent_itemsets(offsets, codes, D, int(np.ceil(0.625 / 100 * n)))
    w1 = sample_itemsets(fi, rng)
    c_w1, c_w2 = counts(idx_o, w1), counts(idx_o, w2)
    tree = build_tree(list(names), [list(icd9.ancestors(c)) + ["*"] for c in names])
    hier = [icd9.ancestors(nm) for nm in names]
    try:
        dis = {r["k"]: r for r in json.loads(
            (bench_paths.RESULTS / "disassociation_utility.json").read_text())["are"]}
    except (OSError, KeyError, ValueError):
        dis = {}
    freq = np.bincount(codes, minlength=D)
    out = []
    print("| k | Dis W1 | AA W1 | peer W1 | Dis W2 | AA W2 | peer W2 | AA codes / occ. generalized"
          " | peer codes / occ. generalized | AA s | peer s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in (2, 5, 10, 25):
        t0 = time.perf_counter()
        r = apriori_anonymize(offsets, codes, tree, k, 2)
        t_aa = time.perf_counter() - t0
        gen = r.label != np.arange(D)
        aa = Generalized(label=r.label, n_leaves=tree.n_leaves, offsets=r.offsets, nodes=r.nodes,
                         n_nodes=tree.n_nodes, codes_generalized=float(gen.mean()),
                         occurrences_generalized=float(freq[gen].sum() / freq.sum()),
                         level_counts=[])
        t0 = time.perf_counter()
        peer = aa_generalize(offsets, codes, hier, k, 2)
        t_peer = time.perf_counter() - t0
        are = {}
        for who, g in (("aa", aa), ("peer", peer)):
            are[who + "_w1"] = float(np.mean(np.abs(generalized_counts(g, w1) - c_w1) / c_w1))
            are[who + "_w2"] = float(np.mean(np.abs(generalized_counts(g, w2) - c_w2) / c_w2))
        row = dict(k=k, dis_w1=dis.get(k, {}).get("w1_0.625"), dis_w2=dis.get(k, {}).get("w2"),
                   aa_codes_generalized=aa.codes_generalized,
                   aa_occurrences_generalized=aa.occurrences_generalized,
                   peer_codes_generalized=peer.codes_generalized,
                   peer_occurrences_generalized=peer.occurrences_generalized,
                   aa_seconds=t_aa, peer_seconds=t_peer, aa_released_codes=int(np.unique(r.nodes).size),
                   **are)
        out.append(row)
        f = (lambda x: "-" if x is None else f"{x:.3f}")
        print(f"| {k} | {f(row['dis_w1'])} | {f(row['aa_w1'])} | {f(row['peer_w1'])} | "
              f"{f(row['dis_w2'])} | {f(row['aa_w2'])} | {f(row['peer_w2'])} | "
              f"{row['aa_codes_generalized']:.1%} / {row['aa_occurrences_generalized']:.1%} | "
              f"{row['peer_codes_generalized']:.1%} / {row['peer_occurrences_generalized']:.1%} | "
              f"{t_aa:.1f} | {t_peer:.1f} |", flush=True)
    path = bench_paths.RESULTS / "aa_utility.json"
    path.write_text(json.dumps(out, indent=1, default=float) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
