"""The evaluation's tables (docs/condensation-evaluation.md's targets), from run.py's per data set results.

1. Targets per data set x model at the k deid uses, each with met / missed: significance
   changes <= the bootstrap floor of the same cell, and <= 1 % among the clear coefficients
   (original p < 0.001 or > 0.5; near-threshold ones shown apart); 0 direction changes;
   CI misses <= 10 %.
2. Every release per data set x model: bootstrap, deid at each k, the peers.
3. Risk (anonymeter value [95 % CI], queries found for singling out).
4. Dominance per data set: at deid's k, multivariate singling out, linkability and inference
   each no higher than the copula's within anonymeter's CI (deid's estimate <= the copula's
   upper bound), and every model's utility loss (mean of its three percentages) lower.
"""
import numpy as np

from . import synth, utility

CLEAR_TARGET = 1.0
CI_TARGET = 10.0
DOMINANCE_RISKS = ("singling_out_multivariate", "linkability", "inference")


def _f(v, fmt="{:.1f}"):
    return "-" if v is None or v != v else fmt.format(v)


def _label(method, k):
    return f"{method} k={k}" if method in synth.DEID_VARIANTS else method


def targets(cell, floor):
    """{target: (met, text)} of one deid cell's model row against its bootstrap row."""
    sig, fl = cell["changed_significance_pct"], floor["changed_significance_pct"]
    clear = cell["changed_significance_clear_pct"]
    return {"sig": (sig <= fl, f"{sig:.1f} vs {fl:.1f}"),
            "clear": (not clear > CLEAR_TARGET, _f(clear)),
            "dir": (cell["changed_direction"] == 0, str(cell["changed_direction"])),
            "ci": (cell["outside_ci_pct"] <= CI_TARGET, f"{cell['outside_ci_pct']:.1f}")}


def _mark(ok):
    return "met" if ok else "**missed**"


def target_table(results, variant):
    lines = [f"### Targets at the k deid uses ({variant}; pooled over seeds; bootstrap = the "
             "same n resampled from the original)", "",
             "| data set (rows, k) | model | significance changes %: deid vs bootstrap | "
             "<= floor | clear coef. (p < 0.001 or > 0.5) changes % | <= 1 % | near-threshold "
             "changes % | direction changes (deid / bootstrap) | = 0 | CI misses % (deid / "
             "bootstrap) | <= 10 % | max mean shift (SE) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        k = r["chosen_k"]
        cell, floor = r["cells"].get((variant, k)), r["cells"].get(("bootstrap", 0))
        if not cell or not floor:
            lines.append(f"| {r['dataset']} ({r['rows']}, {k}) | - | not evaluated "
                         + "| " * 10 + "|")
            continue
        for m in utility.MODELS:
            c, b = cell[m], floor[m]
            t = targets(c, b)
            lines.append(
                f"| {r['dataset']} ({r['rows']}, {k}) | {m} | {t['sig'][1]} | "
                f"{_mark(t['sig'][0])} | {t['clear'][1]} (of {c['clear_coefficients']}) | "
                f"{_mark(t['clear'][0])} | {_f(c['changed_significance_near_pct'])} | "
                f"{c['changed_direction']} / {b['changed_direction']} | {_mark(t['dir'][0])} | "
                f"{c['outside_ci_pct']:.1f} / {b['outside_ci_pct']:.1f} | {_mark(t['ci'][0])} | "
                f"{c['max_abs_shift_se']:.1f} |")
    return lines


def ordered(cells):
    """The cells as bootstrap, deid variants by k, copulas, DataSynthesizer."""
    rank = {"bootstrap": 0, "copulas": 2, "datasynthesizer": 3}
    return sorted(cells.items(), key=lambda kv: (rank.get(kv[0][0], 1), kv[0][0], kv[0][1]))


def full_table(results):
    lines = ["### Every release per data set x model (pooled over seeds)", "",
             "| data set | model | release | seeds | significance changes % | clear % | near % | "
             "direction changes (n, % of significant) | CI misses % | max mean shift (SE) | "
             "failed fits | utility loss |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for m in utility.MODELS:
            for (method, k), cell in ordered(r["cells"]):
                c = cell[m]
                lines.append(
                    f"| {r['dataset']} | {m} | {_label(method, k)} | {cell['seeds']} | "
                    f"{c['changed_significance_pct']:.1f} | "
                    f"{_f(c['changed_significance_clear_pct'])} | "
                    f"{_f(c['changed_significance_near_pct'])} | {c['changed_direction']} "
                    f"({_f(c['changed_direction_pct'])}) | {c['outside_ci_pct']:.1f} | "
                    f"{c['max_abs_shift_se']:.1f} | {c['failed']}/{c['fits']} | "
                    f"{utility.score(c):.1f} |")
    return lines


def risk_summary(runs, key):
    """(value, ci_low, ci_high, queries) of one risk, averaged over the runs."""
    xs = [r[key] for r in runs if key in r]
    if not xs:
        return None
    v = float(np.mean([x["value"] for x in xs]))
    lo = float(np.mean([x["ci"][0] for x in xs]))
    hi = float(np.mean([x["ci"][1] for x in xs]))
    q = [x.get("queries") for x in xs if x.get("queries") is not None]
    return v, lo, hi, (min(q) if q else None)


def _risk_text(s, queries=False):
    if s is None:
        return "-"
    txt = f"{s[0]:.3f} [{s[1]:.3f}, {s[2]:.3f}]"
    return txt + (f" ({s[3]} q)" if queries and s[3] is not None else "")


def risk_table(results):
    lines = ["### Risk (anonymeter, release from the 75 % split, 25 % held-out control; value "
             "[95 % CI], mean over runs; q = singling-out queries found of 300)", "",
             "| data set | release | runs | singling out univariate | singling out "
             "multivariate | linkability | inference (status) |", "|---|---|---|---|---|---|---|"]
    for r in results:
        for (method, k), cell in ordered(r["cells"]):
            runs = cell.get("risk")
            if not runs:
                continue
            s = {key: risk_summary(runs, key) for key in
                 ("singling_out_univariate", "singling_out_multivariate", "linkability",
                  "inference")}
            label = _label(method, k)
            if method in synth.DEID_VARIANTS and cell.get("risk_k", [k]) != [k]:
                label += f" (risk: the rule's k = {cell['risk_k']} on the 75 % split)"
            lines.append(f"| {r['dataset']} | {label} | {len(runs)} | "
                         f"{_risk_text(s['singling_out_univariate'], True)} | "
                         f"{_risk_text(s['singling_out_multivariate'], True)} | "
                         f"{_risk_text(s['linkability'])} | {_risk_text(s['inference'])} |")
    return lines


def dominance(r, variant):
    """(yes/no, reason) for one data set."""
    k = r["chosen_k"]
    cell, cop = r["cells"].get((variant, k)), r["cells"].get(("copulas", 0))
    if not cell or not cop or not cell.get("risk") or not cop.get("risk"):
        return "no", "not evaluated (missing deid or copula risk runs)"
    reasons, ok = [], True
    for key in DOMINANCE_RISKS:
        d, c = risk_summary(cell["risk"], key), risk_summary(cop["risk"], key)
        good = d[0] <= c[2]
        ok &= good
        reasons.append(f"{key.replace('singling_out_', 'SO ')} {d[0]:.3f} vs {c[0]:.3f} "
                       f"[{c[1]:.3f}, {c[2]:.3f}] {'ok' if good else 'HIGHER'}")
    for m in utility.MODELS:
        d, c = utility.score(cell[m]), utility.score(cop[m])
        good = d < c
        ok &= good
        reasons.append(f"{m} loss {d:.1f} vs {c:.1f} {'ok' if good else 'WORSE'}")
    return ("yes" if ok else "no"), "; ".join(reasons)


def tables(results, args):
    lines = [f"Seeds: {args.seeds} per release (utility; the `seeds` column says where fewer "
             f"were run), {args.risk_seeds} risk run(s) per release; deid risk runs for k <= "
             f"{args.risk_max_k} and the chosen k.", ""]
    lines += ["### The k deid uses (its k rule, options.auto_k, from the requested k; seed 1)", ""]
    for r in results:
        rule = r.get("k_rule")
        lines.append(f"- {r['dataset']}: k = {r['chosen_k']}"
                     + (f" -- {rule['why']}" if rule else " (the data set's k; no k rule)"))
    for variant in args.variants:
        lines += [""] + target_table(results, variant)
    lines += ["", "### Dominance over the Gaussian copula at the k deid uses (risk: deid's "
              "estimate <= the copula's 95 % upper bound; utility: loss = mean of the model's "
              "three percentages, lower on every model)", ""]
    for variant in args.variants:
        for r in results:
            yes, why = dominance(r, variant)
            lines.append(f"- **{r['dataset']}** {variant} (k = {r['chosen_k']}): dominates: "
                         f"**{yes}** -- {why}")
    lines += [""] + risk_table(results) + [""] + full_table(results)
    refused = [f"{r['dataset']} {what}: {msg}" for r in results
               for what, msg in r["refused"].items()]
    if refused:
        lines += ["", "Not allowed by the data set (the plug-in refuses):", ""]
        lines += [f"- {x}" for x in refused]
    return "\n".join(lines)
