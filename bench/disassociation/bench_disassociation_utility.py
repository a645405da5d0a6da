"""Utility of disassociation (003 Sec. 6) on generated INFORMS-shaped data: ARE (Def. 2) for
k = 2..25 at m = 2, MRE (Def. 3) per constraint for 003's policies, and a bench-only
generalization peer (AA-like) in the same run.  Pure numpy (plots via bench/.venv-dis).

    python3 bench/disassociation/bench_disassociation_utility.py [--quick] [--recons 3] [--refining]

How 003 Sec. 6 defines the workloads, and what we do (see README "Disassociation: utility"):
  * Sec. 6.1: W1 = frequent itemsets (support >= a threshold); W2 = 1000 queries for sets of
    codes "selected uniformly at random".  Sec. 6.4 swaps the labels (Fig. 15 "W1" = random
    sets of 1-4 codes, each grown from its (c-1)-subset by a random code; Fig. 16 "W2" =
    itemsets mined at a min. support).  Fig. 17 (ARE <= 0.05 for k in [5, 25], m = 2, level 1
    / sim 10 / sup 2.5 policies) does not say which workload it uses.  003 does not say how
    queries with C_O = 0 are handled (Def. 2 divides by C_O), nor how many reconstructions.
  * W1 here: itemsets of 1-4 codes with support >= 0.625 % and >= 2.5 % (at most 1000, random).
  * W2 here: 1000 random sets of 1-4 codes, each c-set grown from its (c-1)-subset by a random
    code of one random record (so C_O >= 1).  Reported over all queries and over those with
    C_O >= k (a count below k is what k^m-anonymity exists to blur).
  * The utility policy in force is level 1 (003's default) for ARE; for MRE it is the policy
    measured.  ARE and MRE are averaged over --recons reconstructions (item-chunk codes on one
    record each).
  * MRE is Def. 3 as printed, (M_O - M_A) / M_O, where a record matches u when it holds any
    code of u (003 Sec. 3.3): a negative MRE is a reconstruction with MORE matching records.
    The attribution section (mre_attribution) shows where level-1 misses come from: codes of
    one 3-digit category in one record that the release puts in different chunks.  The
    generator rows vary exactly that (make_records(category_repeat=...)), at Table 1's shape.
"""
import json
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
import numpy as np  # noqa: E402

import icd9_hierarchy as icd9  # noqa: E402
from aa_generalization import aa_generalize, generalized_counts  # noqa: E402
from bench_disassociation_kernel import make_records, workload  # noqa: E402
from deid.methods.disassociation.disassociate import disassociate, reconstruct  # noqa: E402
from deid.methods.disassociation.metrics_sets import CodeIndex  # noqa: E402
from deid.verify.shared.km import verify_km  # noqa: E402

RESULTS = bench_paths.RESULTS
VENV = bench_paths.BENCH / ".venv-dis"


def sample_itemsets(fi, rng, n=1000):
    qs = sorted(fi)
    if len(qs) > n:
        qs = [qs[i] for i in rng.choice(len(qs), n, replace=False)]
    return qs


def counts(index, queries):
    return np.array([index.count(q) for q in queries], dtype=np.float64)


def match_counts(index, constraints):
    return np.array([index.count_any(u) for u in constraints], dtype=np.float64)


def mre_summary(mre):
    """Shares of constraints per MRE interval (003 Figs. 18-24), MRE as a fraction."""
    p = 100 * mre
    return {"n": int(p.size), "within_5": float(np.mean((p >= -5) & (p < 5))),
            "within_2_5": float(np.mean((p >= -2.5) & (p < 2.5))),
            "min_pct": float(p.min()), "max_pct": float(p.max())}


def main(argv):
    quick = "--quick" in argv
    if "--refining" in argv:
        refining_sensitivity(int(argv[argv.index("--recons") + 1]) if "--recons" in argv else 3)
        return
    n_rec = int(argv[argv.index("--recons") + 1]) if "--recons" in argv else (1 if quick else 3)
    t_start = time.perf_counter()
    offsets, codes, names, _ = make_records(58_302, seed=0)
    D = len(names)
    n = offsets.size - 1
    idx_o = CodeIndex(offsets, codes, D)
    policies = {f"level {lv}": icd9.level_policy(names, lv) for lv in (1, 2, 3)}
    policies.update({f"sim {s}": icd9.similarity_policy(names, s) for s in (5, 10)})
    for sup in (0.625, 1.25, 2.5, 5):
        policies[f"sup {sup}"] = icd9.frequency_policy(offsets, codes, D, sup)
    print(f"data: records={n} codes={D} mean={codes.size / n:.2f} max={np.diff(offsets).max()}")
    print("policies: " + ", ".join(f"{p}: {len(c)} constraints / {sum(map(len, c))} codes"
                                   for p, c in policies.items()))
    rng = np.random.default_rng(42)
    w2 = workload(rng, offsets, codes)
    w1 = {}
    for sup in (0.625, 2.5):
        fi = icd9.frequent_itemsets(offsets, codes, D, int(np.ceil(sup / 100 * n)))
        w1[sup] = sample_itemsets(fi, rng)
    c_w2 = counts(idx_o, w2)
    c_w1 = {s: counts(idx_o, q) for s, q in w1.items()}
    print(f"W2: {len(w2)} queries, C_O < 5: {np.mean(c_w2 < 5):.0%}, median C_O "
          f"{np.median(c_w2):.0f}; W1: " + ", ".join(f"sup {s}%: {len(q)} itemsets"
                                                     for s, q in w1.items()))
    out = {"n_records": n, "n_codes": D, "reconstructions": n_rec, "are": [], "mre": [],
           "aa": []}

    def releases(k, m, policy):
        res = disassociate(offsets, codes, D, k, m, constraints=policy, seed=k)
        verify_km(res, offsets, codes, k, m)
        for s in range(n_rec):
            rc = reconstruct(res, s)
            yield res, CodeIndex(rc.offsets, rc.codes, D)

    ks = [2, 5, 10, 25] if quick else list(range(2, 26))
    print(f"\nARE (003 Def. 2), m = 2, level-1 policy, mean of {n_rec} reconstructions")
    print("| k | W1 sup 0.625 % | W1 sup 2.5 % | W2 all | W2 C_O >= k | W2 size 1/2/3/4 |")
    print("|---|---|---|---|---|---|")
    for k in ks:
        acc = {"w1_0.625": [], "w1_2.5": [], "w2": []}
        for _, idx_a in releases(k, 2, policies["level 1"]):
            for s in w1:
                acc[f"w1_{s}"].append(np.abs(counts(idx_a, w1[s]) - c_w1[s]) / c_w1[s])
            acc["w2"].append(np.abs(counts(idx_a, w2) - c_w2) / c_w2)
        rel = {key: np.mean(v, axis=0) for key, v in acc.items()}
        sizes = np.array([len(q) for q in w2])
        row = {"k": k, "w1_0.625": rel["w1_0.625"].mean(), "w1_2.5": rel["w1_2.5"].mean(),
               "w2": rel["w2"].mean(), "w2_ge_k": rel["w2"][c_w2 >= k].mean(),
               "w2_by_size": [rel["w2"][sizes == c].mean() for c in (1, 2, 3, 4)]}
        out["are"].append(row)
        print(f"| {k} | {row['w1_0.625']:.3f} | {row['w1_2.5']:.3f} | {row['w2']:.3f} | "
              f"{row['w2_ge_k']:.3f} | " + "/".join(f"{x:.3f}" for x in row["w2_by_size"])
              + " |", flush=True)

    print(f"\nMRE (003 Def. 3) per constraint, the measured policy in force, mean of {n_rec} "
          "reconstructions")
    print("| policy | k | m | constraints | in [-5 %, 5 %) | in [-2.5 %, 2.5 %) | min % | max % |")
    print("|---|---|---|---|---|---|---|---|")
    runs = [(p, 5, 2) for p in policies] + [(p, 5, 5) for p in ("level 1", "sim 10", "sup 2.5")]
    for pname, k, m in runs:
        pol = [u for u in policies[pname] if u]
        m_o = match_counts(idx_o, pol)
        mres = [(m_o - match_counts(idx_a, pol)) / m_o for _, idx_a in releases(k, m, pol)]
        row = dict(policy=pname, k=k, m=m, **mre_summary(np.mean(mres, axis=0)))
        out["mre"].append(row)
        print(f"| {pname} | {k} | {m} | {row['n']} | {row['within_5']:.1%} | "
              f"{row['within_2_5']:.1%} | {row['min_pct']:.1f} | {row['max_pct']:.1f} |",
              flush=True)

    print("\nAgainst generalization (bench-only AA-like peer, aa_generalization.py), m = 2")
    print("| k | Dis W1 0.625 % | AA W1 0.625 % | Dis W2 | AA W2 | AA codes generalized | "
          "AA occurrences generalized | AA s | Dis s |")
    print("|---|---|---|---|---|---|---|---|---|")
    hier = [icd9.ancestors(nm) for nm in names]
    dis_by_k = {r["k"]: r for r in out["are"]}
    for k in ([5] if quick else [2, 5, 10, 25]):
        t0 = time.perf_counter()
        gen = aa_generalize(offsets, codes, hier, k, 2)
        t_aa = time.perf_counter() - t0
        t0 = time.perf_counter()
        disassociate(offsets, codes, D, k, 2, constraints=policies["level 1"], seed=k)
        t_dis = time.perf_counter() - t0
        a_w1 = generalized_counts(gen, w1[0.625])
        a_w2 = generalized_counts(gen, w2)
        row = {"k": k, "dis_w1": dis_by_k[k]["w1_0.625"], "dis_w2": dis_by_k[k]["w2"],
               "aa_w1": float(np.mean(np.abs(a_w1 - c_w1[0.625]) / c_w1[0.625])),
               "aa_w2": float(np.mean(np.abs(a_w2 - c_w2) / c_w2)),
               "codes_generalized": gen.codes_generalized,
               "occurrences_generalized": gen.occurrences_generalized,
               "aa_seconds": t_aa, "dis_seconds": t_dis, "aa_levels": gen.level_counts}
        out["aa"].append(row)
        print(f"| {k} | {row['dis_w1']:.3f} | {row['aa_w1']:.3f} | {row['dis_w2']:.3f} | "
              f"{row['aa_w2']:.3f} | {row['codes_generalized']:.1%} | "
              f"{row['occurrences_generalized']:.1%} | {t_aa:.1f} | {t_dis:.1f} |", flush=True)
    out["attribution"] = mre_attribution(n_rec)
    out["generators"] = generator_sensitivity(quick, n_rec)
    out["refining"] = refining_sensitivity(n_rec)
    name = "disassociation_utility_quick" if quick else "disassociation_utility"
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(out, indent=1, default=float) + "\n")
    print(f"\nwrote {path} ({time.perf_counter() - t_start:.0f} s)")
    plot(path)


GENERATORS = [  # make_records keyword arguments: all match 003 Table 1 (58,302 records, 631
    # codes, mean ~5, max 43); they differ in how concentrated co-occurrence is
    ("default (bench data)", {}),
    ("every same-category repeat kept (former default)", dict(category_repeat=1.0)),
    ("less background", dict(background_share=0.03)),
    ("concentrated", dict(background_share=0.03, group_codes=10,
                          groups_per_record=(0.7, 0.25, 0.05))),
    ("very concentrated", dict(background_share=0.0, group_codes=8, group_skew=1.6,
                               groups_per_record=(0.85, 0.15, 0.0), n_groups=60)),
    # the default groups with fewer codes of one 3-digit category in one record: a share of
    # the same-category repeats kept (the others dropped, the mean re-calibrated)
    ("same-category repeats kept: 50 %", dict(category_repeat=0.5)),
    ("same-category repeats kept: 25 %", dict(category_repeat=0.25)),
    ("same-category repeats kept: 15 %", dict(category_repeat=0.15)),
    ("same-category repeats kept: none", dict(category_repeat=0.0)),
]
QUICK_GENERATORS = ("default (bench data)", "same-category repeats kept: 25 %",
                    "same-category repeats kept: 15 %")


def codes_per_category(offsets, codes, pol):
    """Mean number of codes of one level-1 constraint (3-digit category) in a record that
    holds any: 1.0 when no record has two codes of one category."""
    cons = np.full(codes.max() + 1, -1, dtype=np.int64)
    for i, u in enumerate(pol):
        cons[u] = i
    row = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    c = cons[codes]
    return float((c >= 0).sum() / np.unique(row[c >= 0] * len(pol) + c[c >= 0]).size)


def generator_sensitivity(quick, n_rec):
    """ARE (W1 0.625 %, W2) and level-1 MRE at k = 5 and 25, m = 2, on data sets that all have
    003 Table 1's shape but more or less concentrated co-occurrence: 003 publishes no more of
    INFORMS than Table 1 and Fig. 12 (> 17 % of 2-code sets occur once), which all of them meet."""
    from bench_disassociation_kernel import _pairs_seen_once
    print("\nGenerator sensitivity (all of 003 Table 1's shape), m = 2, level-1 policy, mean of "
          f"{n_rec} reconstructions")
    print("| generator | mean codes | codes per (record, category) | (record, category) in >= 2 "
          "chunks | 2-code sets seen once | W2 C_O < 5 | k | W1 0.625 % | W2 | W2 C_O >= k | "
          "level-1 MRE in [-5 %, 5 %) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for label, kw in ([g for g in GENERATORS if g[0] in QUICK_GENERATORS] if quick
                      else GENERATORS):
        offsets, codes, names, _ = make_records(58_302, seed=0, **kw)
        D, n = len(names), offsets.size - 1
        idx_o = CodeIndex(offsets, codes, D)
        pol = icd9.level_policy(names, 1)
        rng = np.random.default_rng(42)
        w2 = workload(rng, offsets, codes)
        fi = icd9.frequent_itemsets(offsets, codes, D, int(np.ceil(0.00625 * n)))
        w1 = sample_itemsets(fi, rng)
        c2, c1, m_o = counts(idx_o, w2), counts(idx_o, w1), match_counts(idx_o, pol)
        once = _pairs_seen_once(offsets, codes, D)
        per_cat = codes_per_category(offsets, codes, pol)
        for k in (5, 25):
            res = disassociate(offsets, codes, D, k, 2, constraints=pol, seed=k)
            e1, e2, mre = [], [], []
            for s in range(n_rec):
                rc = reconstruct(res, s)
                ia = CodeIndex(rc.offsets, rc.codes, D)
                e1.append(np.abs(counts(ia, w1) - c1) / c1)
                e2.append(np.abs(counts(ia, w2) - c2) / c2)
                mre.append((m_o - match_counts(ia, pol)) / m_o)
            e2 = np.mean(e2, axis=0)
            row = {"generator": label, "k": k, "mean": codes.size / n, "pairs_once": once,
                   "codes_per_category": per_cat,
                   "w2_rare": float(np.mean(c2 < 5)), "w1": float(np.mean(e1)),
                   "w2": float(e2.mean()), "w2_ge_k": float(e2[c2 >= k].mean()),
                   "mre_level1_within_5": mre_summary(np.mean(mre, axis=0))["within_5"],
                   "in_2_chunks": split_shares(res, offsets, codes, pol)["in_2_chunks"]}
            rows.append(row)
            print(f"| {label} | {row['mean']:.2f} | {per_cat:.3f} | {row['in_2_chunks']:.1%} | "
                  f"{once:.0%} | "
                  f"{row['w2_rare']:.0%} | {k} | "
                  f"{row['w1']:.3f} | {row['w2']:.3f} | {row['w2_ge_k']:.3f} | "
                  f"{row['mre_level1_within_5']:.1%} |", flush=True)
    return rows


def release_places(res, offsets, codes):
    """Bench-only (reads the membership): where each source occurrence is in the release,
    as (kind, place): kind 0 record chunk, 1 shared chunk, 2 item chunk; place the chunk id
    (record chunk), shared chunk id, or cluster id (item chunk)."""
    D = max(int(res.n_codes), 1)
    row = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    key = res.cluster_of_record[row] * D + codes
    dom_len = np.diff(res.chunk_domain_offsets)
    rk = np.repeat(res.chunk_cluster, dom_len) * D + res.chunk_domain_codes
    rid = np.repeat(np.arange(res.n_chunks), dom_len)
    owner = np.repeat(np.arange(res.n_shared), np.diff(res.shared_cluster_offsets))
    dl = np.diff(res.shared_domain_offsets)[owner]
    entry = np.repeat(np.arange(owner.size), dl)
    nth = np.arange(entry.size) - np.repeat(np.cumsum(dl) - dl, dl)
    sk = res.shared_cluster_ids[entry] * D + res.shared_domain_codes[
        res.shared_domain_offsets[owner[entry]] + nth]
    all_key = np.r_[rk, sk]
    all_kind = np.r_[np.zeros(rk.size, np.int64), np.ones(sk.size, np.int64)]
    all_place = np.r_[rid, owner[entry]]
    order = np.argsort(all_key)
    all_key, all_kind, all_place = all_key[order], all_kind[order], all_place[order]
    at = np.minimum(np.searchsorted(all_key, key), max(all_key.size - 1, 0))
    found = all_key[at] == key if all_key.size else np.zeros(key.size, bool)
    kind = np.where(found, all_kind[at], 2)
    place = np.where(found, all_place[at], res.cluster_of_record[row])
    return row, kind, place


def split_shares(res, offsets, codes, pol):
    """Shares of the (record, constraint) pairs (a record and a constraint it matches) whose
    codes number >= 2 in the source, and whose codes the release puts in >= 2 chunks, by the
    kinds of chunk (bench-only: reads the membership)."""
    D = max(int(res.n_codes), 1)
    row, kind, place = release_places(res, offsets, codes)
    cons = np.full(D, -1, dtype=np.int64)
    for i, u in enumerate(pol):
        cons[u] = i
    inside = cons[codes] >= 0
    rc_key = row[inside] * len(pol) + cons[codes][inside]
    label = kind[inside] * (1 << 40) + place[inside]
    o = np.lexsort((label, rc_key))
    rc_key, label, kd = rc_key[o], label[o], kind[inside][o]
    new_pair = np.r_[True, rc_key[1:] != rc_key[:-1]]
    new_place = new_pair | np.r_[True, label[1:] != label[:-1]]
    grp = np.cumsum(new_pair) - 1
    n_codes_in = np.bincount(grp)
    n_places = np.bincount(grp, weights=new_place).astype(np.int64)
    kinds = np.zeros((grp[-1] + 1, 3), dtype=np.int64)
    np.add.at(kinds, (grp[new_place], kd[new_place]), 1)
    split = n_places >= 2
    # shared-only splits whose shared chunks cover the very same clusters (one joint cluster)
    joint = {}
    joint_of = np.array([joint.setdefault(res.shared_cluster_ids[
        res.shared_cluster_offsets[i]:res.shared_cluster_offsets[i + 1]].tobytes(), len(joint))
        for i in range(res.n_shared)] or [0], dtype=np.int64)
    sh = new_place & (kd == 1)
    jk = np.unique(grp[sh] * (len(joint) + 1) + joint_of[(label[sh] % (1 << 40))])
    n_joints = np.bincount(jk // (len(joint) + 1), minlength=grp[-1] + 1)
    shared_only = split & (kinds[:, 1] >= 2) & (kinds[:, 0] == 0) & (kinds[:, 2] == 0)
    return {"record_category_pairs": int(n_codes_in.size),
            "split_shared_same_joint": float(np.mean(shared_only & (n_joints == 1))),
            "with_2_codes": float(np.mean(n_codes_in >= 2)),
            "in_2_chunks": float(np.mean(split)),
            "split_record_shared": float(np.mean(split & (kinds[:, 0] > 0) & (kinds[:, 1] > 0))),
            "split_shared_shared_only": float(np.mean(split & (kinds[:, 1] >= 2)
                                                      & (kinds[:, 0] == 0) & (kinds[:, 2] == 0))),
            "split_with_item": float(np.mean(split & (kinds[:, 2] > 0))),
            "split_record_record": float(np.mean(split & (kinds[:, 0] >= 2)))}


def split_pairs(res, offsets, codes, pol, k):
    """Same-constraint code pairs {a, b} of one record: how many the release splits (a and b
    in different chunks), against the pair's support in the record's cluster (a chunk holding
    both would need >= k such records for k^2-anonymity) and in the whole data set."""
    D = max(int(res.n_codes), 1)
    row, kind, place = release_places(res, offsets, codes)
    label = kind * (1 << 40) + place
    cons = np.full(D, -1, dtype=np.int64)
    for i, u in enumerate(pol):
        cons[u] = i
    lengths = np.diff(offsets)
    first, second = [], []
    for length in np.unique(lengths[lengths >= 2]).tolist():
        recs = offsets[:-1][lengths == length]
        a, b = np.triu_indices(length, 1)
        first.append((recs[:, None] + a).ravel())
        second.append((recs[:, None] + b).ravel())
    i, j = np.concatenate(first), np.concatenate(second)
    keep = (cons[codes[i]] >= 0) & (cons[codes[i]] == cons[codes[j]])
    i, j = i[keep], j[keep]
    split = label[i] != label[j]
    cluster = res.cluster_of_record[row[i]]
    _, inv, cnt = np.unique((cluster * D + codes[i]) * D + codes[j], return_inverse=True,
                            return_counts=True)
    in_cluster = cnt[inv]
    _, inv, cnt = np.unique(codes[i] * D + codes[j], return_inverse=True, return_counts=True)
    overall = cnt[inv]
    rare = in_cluster < k
    return {"pairs": int(i.size), "split": int(split.sum()),
            "split_if_rare_in_cluster": float(np.mean(split[rare])) if rare.any() else 0.0,
            "split_if_frequent_in_cluster": float(np.mean(split[~rare])) if (~rare).any()
            else 0.0,
            "split_rare_in_cluster": float(np.mean(rare[split])) if split.any() else 0.0,
            "split_overall_support_median": float(np.median(overall[split])) if split.any()
            else 0.0}


def mre_attribution(n_rec, k=5, m=2):
    """Where the level-1 MRE misses come from (default data): their sign; the (record,
    category) pairs whose codes the release puts in two or more chunks (a reconstruction
    deals each chunk's subrecords independently, so such a record counts once in D and up to
    once per chunk in D'); and how much the item-chunk estimator matters."""
    offsets, codes, names, _ = make_records(58_302, seed=0)
    D = len(names)
    pol = icd9.level_policy(names, 1)
    idx_o = CodeIndex(offsets, codes, D)
    m_o = match_counts(idx_o, pol)
    res = disassociate(offsets, codes, D, k, m, constraints=pol, seed=k)
    out = {"k": k, "m": m}
    for mode in ("one", "uniform"):
        mres = []
        for s in range(n_rec):
            rc = reconstruct(res, s, item_support=mode)
            mres.append((m_o - match_counts(CodeIndex(rc.offsets, rc.codes, D), pol)) / m_o)
        p = 100 * np.mean(mres, axis=0)
        out[f"item_{mode}"] = {"within_5": float(np.mean((p >= -5) & (p < 5))),
                               "below_minus_5": int((p < -5).sum()), "at_least_5": int(
                                   (p >= 5).sum())}
    # true support of what stays in item chunks (bench-only: the release hides it)
    item = release_places(res, offsets, codes)[1] == 2
    n_item_pairs = int(res.item_codes.size)
    out["item_occurrences"] = int(item.sum())
    out["item_entries"] = n_item_pairs
    out.update(split_shares(res, offsets, codes, pol))
    out["pairs"] = split_pairs(res, offsets, codes, pol, k)
    n_pairs = out["record_category_pairs"]
    print(f"\nLevel-1 MRE attribution, k = {k}, m = {m}, default data, mean of {n_rec} "
          "reconstructions")
    print(f"* misses: {out['item_one']['below_minus_5']} constraints below -5 % (M_A > M_O), "
          f"{out['item_one']['at_least_5']} at or above +5 % (M_A < M_O)")
    print(f"* item chunks hold {out['item_occurrences']} occurrences in {n_item_pairs} "
          f"(cluster, code) entries (mean true support "
          f"{out['item_occurrences'] / max(n_item_pairs, 1):.2f}); level-1 within +-5 %: "
          f"{out['item_one']['within_5']:.1%} with each on one record, "
          f"{out['item_uniform']['within_5']:.1%} on 1..k-1 records")
    print(f"* (record, category) pairs: {n_pairs}; with >= 2 codes of the category: "
          f"{out['with_2_codes']:.1%}; codes in >= 2 chunks: {out['in_2_chunks']:.1%} "
          f"(record + shared chunk {out['split_record_shared']:.1%}, shared chunks only "
          f"{out['split_shared_shared_only']:.1%} (of which over one joint cluster "
          f"{out['split_shared_same_joint']:.2%}), with the item chunk "
          f"{out['split_with_item']:.1%}, two record chunks {out['split_record_record']:.2%})")
    pr = out["pairs"]
    print(f"* same-category code pairs in a record: {pr['pairs']}, split by the release: "
          f"{pr['split']}; split when the pair has < k records in its cluster: "
          f"{pr['split_if_rare_in_cluster']:.1%}, when >= k: "
          f"{pr['split_if_frequent_in_cluster']:.1%}; split pairs with < k in their cluster: "
          f"{pr['split_rare_in_cluster']:.1%} (no record chunk may hold them, k^2), their "
          f"support in all records: median "
          f"{pr['split_overall_support_median']:.0f}")
    return out


def refining_sensitivity(n_rec, k=5):
    """Refining (003 Fig. 10) with joint clusters capped at 1 (no refining), 2, 8, 32 clusters
    or uncapped (deid's default): exact supports of refined codes against associations spread
    over large joint clusters."""
    offsets, codes, names, _ = make_records(58_302, seed=0)
    D, n = len(names), offsets.size - 1
    idx_o = CodeIndex(offsets, codes, D)
    pol = icd9.level_policy(names, 1)
    rng = np.random.default_rng(42)
    w2 = workload(rng, offsets, codes)
    w1 = sample_itemsets(icd9.frequent_itemsets(offsets, codes, D, int(np.ceil(0.00625 * n))), rng)
    c2, c1, m_o = counts(idx_o, w2), counts(idx_o, w1), match_counts(idx_o, pol)
    print(f"\nRefining sensitivity, k = {k}, m = 2, level-1 policy, mean of {n_rec} reconstructions")
    print("| max joint clusters | shared chunks | codes left in item chunks | W1 0.625 % | W2 | "
          "level-1 MRE in [-5 %, 5 %) |")
    print("|---|---|---|---|---|---|")
    rows = []
    for cap in (1, 2, 8, 32, None):
        res = disassociate(offsets, codes, D, k, 2, constraints=pol, seed=k,
                           max_joint_clusters=cap)
        e1, e2, mre = [], [], []
        for s in range(n_rec):
            rc = reconstruct(res, s)
            ia = CodeIndex(rc.offsets, rc.codes, D)
            e1.append(np.mean(np.abs(counts(ia, w1) - c1) / c1))
            e2.append(np.mean(np.abs(counts(ia, w2) - c2) / c2))
            mre.append((m_o - match_counts(ia, pol)) / m_o)
        row = {"max_joint_clusters": cap, "shared": res.n_shared,
               "item_occurrences": int(res.item_codes.size), "w1": float(np.mean(e1)),
               "w2": float(np.mean(e2)),
               "mre_level1_within_5": mre_summary(np.mean(mre, axis=0))["within_5"]}
        rows.append(row)
        print(f"| {cap or 'no limit (default)'} | {row['shared']} | {row['item_occurrences']} | "
              f"{row['w1']:.3f} | {row['w2']:.3f} | {row['mre_level1_within_5']:.1%} |",
              flush=True)
    return rows


def plot(path):
    """PNGs via bench/.venv-dis (matplotlib; created here, idempotent)."""
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(VENV)], check=True)
    if subprocess.run([str(py), "-c", "import matplotlib"], capture_output=True).returncode:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "matplotlib"], check=True)
    subprocess.run([str(py), str(HERE / "plot_disassociation.py"), str(path)], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
