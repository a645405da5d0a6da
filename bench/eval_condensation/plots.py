"""The evaluation's plots: the risk-utility frontier per data set, and the speed plot
of bench_condensation.py's JSON.

``frontier``: bench/results/condensation_frontier_<data set>.png, one panel per risk
(multivariate singling out, linkability, inference) against the utility loss (mean over the
three models of their three percentages; lower is better): deid at k = 5...200 as a curve per
variant (each point labelled with its k, error bars anonymeter's 95 % CI), the copula and
DataSynthesizer as points, the bootstrap's utility loss as a dashed line.
"""
import json
import os

import numpy as np

from . import synth, utility
from .report import risk_summary

PANELS = (("singling_out_multivariate", "singling out (multivariate)"),
          ("linkability", "linkability"), ("inference", "inference (status)"))


def _loss(cell):
    return float(np.mean([utility.score(cell[m]) for m in utility.MODELS]))


def frontier(results, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for r in results:
        cells = r["cells"]
        if not any(c.get("risk") for c in cells.values()):
            continue
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
        for ax, (key, title) in zip(axes, PANELS):
            variants = sorted({m for m, _ in cells if m in synth.DEID_VARIANTS})
            for v in variants:
                pts = sorted((k, risk_summary(c["risk"], key), _loss(c))
                             for (m, k), c in cells.items() if m == v and c.get("risk"))
                if not pts:
                    continue
                x = [p[1][0] for p in pts]
                err = [[p[1][0] - p[1][1] for p in pts], [p[1][2] - p[1][0] for p in pts]]
                y = [p[2] for p in pts]
                ax.errorbar(x, y, xerr=err, fmt="o-", capsize=2, label=v)
                for k, s, loss in pts:
                    mark = "*" if k == r["chosen_k"] and v == "deid" else ""
                    ax.annotate(f"k={k}{mark}", (s[0], loss), textcoords="offset points",
                                xytext=(4, 4), fontsize=7)
            for peer, marker, color in (("copulas", "s", "tab:red"),
                                        ("datasynthesizer", "^", "tab:purple")):
                c = cells.get((peer, 0))
                if c and c.get("risk"):
                    s = risk_summary(c["risk"], key)
                    ax.errorbar([s[0]], [_loss(c)], xerr=[[s[0] - s[1]], [s[2] - s[0]]],
                                fmt=marker, color=color, capsize=2, markersize=8, label=peer)
            boot = cells.get(("bootstrap", 0))
            if boot:
                ax.axhline(_loss(boot), ls="--", color="grey", lw=1,
                           label="bootstrap utility loss")
            ax.set_xlabel(f"anonymeter risk: {title}")
            ax.set_ylabel("utility loss (mean %, lower is better)")
            ax.set_ylim(bottom=0)
            ax.set_xlim(left=min(0, ax.get_xlim()[0]))
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(f"{r['dataset']} ({r['rows']} rows; * = the k deid uses, "
                     f"{r['chosen_k']})", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, f"condensation_frontier_{r['dataset']}.png"), dpi=80)
        plt.close(fig)


def speed_plot(results_dir):
    """bench/results/condensation_speed.png from bench_condensation.py's JSON (the server venv
    has no matplotlib), with bench_condensation_peer_speed.py's copulas CPU times if present."""
    path = os.path.join(results_dir, "condensation_speed.json")
    if not os.path.exists(path):
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(path) as f:
        out = json.load(f)
    sizes = sorted(int(n) for n in out["sizes"])
    get = lambda key: [out["sizes"][str(n)][key] for n in sizes]        # noqa: E731
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.loglog(sizes, get("min_s"), "o-", label="condensation, end to end (min of 3)")
    ax.loglog(sizes, get("seconds"), "o:", label="condensation (median)")
    ax.loglog(sizes, get("ctas_min_s"), "s-", label="CTAS (min)")
    ax.loglog(sizes, [20 * c for c in get("ctas_min_s")], "--", color="grey", label="20 x CTAS")
    peer_path = os.path.join(results_dir, "condensation_peer_speed.json")
    if os.path.exists(peer_path):
        with open(peer_path) as f:
            peer = json.load(f)
        ps = sorted(int(n) for n in peer["sizes"])
        ax.loglog(ps, [peer["sizes"][str(n)]["copulas_beta_cpu"] for n in ps], "^-",
                  label="copulas fit+sample (CPU s)")
        ax.loglog(ps, [peer["sizes"][str(n)]["deid_cpu"] for n in ps], "v-",
                  label="condensation kernel (CPU s)")
    ax.set_xlabel("rows (8 attributes, k = 100)")
    ax.set_ylabel("seconds")
    ax.set_title(f"growth exponent {out.get('growth_exponent', float('nan')):.2f}; "
                 f"load {out['sizes'][str(sizes[-1])]['load'][0]:.0f} on 2 cores", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(results_dir, "condensation_speed.png"), dpi=90)
    plt.close(fig)

