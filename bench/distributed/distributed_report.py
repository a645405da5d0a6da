"""The table and the plot of bench/distributed/bench_distributed.py (bench/results/<name>.{txt,png})."""
import json

import numpy as np

TARGET_MB = 2048


def compare(u, base):
    """The utility of an n-node release against the 1-node release's (ratios of the numbers)."""
    out = {}
    for key, v in u.items():
        b = base.get(key)
        if key == "levels":
            out[key] = v
        elif isinstance(v, (int, float)) and isinstance(b, (int, float)) and b:
            out[key] = round(v / b, 3)
        elif isinstance(v, (int, float)) and isinstance(b, (int, float)):
            out[key] = f"{v} vs 0"             # no ratio to a 1-node value of 0
        elif isinstance(v, dict) and isinstance(b, dict):
            out[key] = {c: round(x / b[c], 3) for c, x in v.items()
                        if isinstance(x, (int, float)) and b.get(c)}
        else:
            out[key] = v
    return out


def fmt(x, spec):
    """format(x, spec), or "-" as wide for a missing number."""
    if x is None or (isinstance(x, float) and x != x):
        width = spec.split(".")[0]
        return "-".rjust(int(width) if width.isdigit() else 1)
    return format(x, spec)


def table(results):
    rows = results["rows"]
    out = [f"Distributed releases, {rows:,} rows ({results['cores']} cores, load average"
           f" {results['load_before']} before the run; shard members' shared_buffers"
           f" {results['shared_buffers']}).",
           "seconds cold (fresh coordinator session: every node backend imports deid's Python"
           " inside the timed call) and warm (the same session made a small request of the"
           " method first);",
           "ratios to a CTAS of the same rows on one node (/CTAS1) and to a parallel CTAS on the"
           " nodes (/CTASn), warm (cold in the JSON); peak = the largest VmHWM of a node backend"
           " in MB (cold / warm: reset after the warm-up);",
           "under 2 GB: every node's peak of both timed requests; ARE: anatomy 001 Table 1,"
           " disassociation 003 Def. 2; utility: ratios to the 1-node release of the same rows",
           "workloads: " + results["workloads"], ""]
    head = (f"{'method':15} {'nodes':>5} {'cold s':>8} {'warm s':>8} {'c/w':>5} {'/CTAS1':>7}"
            f" {'/CTASn':>7} {'peak MB c/w':>12} {'<2GB':>5} {'groups':>9} {'discern.':>9}"
            f" {'ARE':>7}  utility vs 1 node")
    out += [head, "-" * len(head)]
    for method, by_nodes in results["methods"].items():
        for n, r in sorted(by_nodes.items()):
            if r.get("skipped"):
                out.append(f"{method:15} {n:>5}  skipped: {r['skipped']}")
                continue
            cold, warm = r.get("cold", {}), r.get("warm", {})
            cw = cold.get("seconds") / warm["seconds"] if cold and warm else None
            peak = f"{fmt(r.get('peak_cold_mb'), '.0f')}/{fmt(r.get('peak_warm_mb'), '.0f')}"
            out.append(
                f"{method:15} {n:>5} {fmt(cold.get('seconds'), '8.2f')} {fmt(warm.get('seconds'), '8.2f')}"
                f" {fmt(cw, '5.2f')} {fmt(r['ratio_ctas_one'], '7.2f')} {fmt(r['ratio_ctas_nodes'], '7.2f')}"
                f" {peak:>12} {'yes' if r['under_2gb'] else 'NO':>5} {r['groups']:9d}"
                f" {r['discernibility']:9.1f} {fmt(r['utility'].get('are'), '7.3g')}"
                f"  {json.dumps(r['utility_vs_one']) if r['utility_vs_one'] else '(no 1-node release)'}")
    out += ["", "utility values (ARE: anatomy's all / < 1 % / >= 1 % of the rows; condensation:"
            " largest mean difference in SDs, mean and largest correlation difference):"]
    for method, by_nodes in results["methods"].items():
        for n, r in sorted(by_nodes.items()):
            if not r.get("skipped"):
                u = {k: round(v, 4) if isinstance(v, float) else v for k, v in r["utility"].items()}
                out.append(f"  {method:15} {n:>2} {json.dumps(u)}")
    out += ["", "CTAS: " + ", ".join(f"{n} node(s) {s:.2f} s" for n, s in results["ctas_nodes"].items())
            + (f"; one node, all rows: {results['ctas_one']:.2f} s" if results["ctas_one"] else
               "; one node, all rows: not measured (no 1-node configuration)")]
    out += [f"estimated wall time {results['estimate_min']:.0f} min, measured"
            f" {results.get('wall_min', float('nan')):.1f} min"]
    return "\n".join(out)


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    ticks = set()
    for i, (method, by_nodes) in enumerate(results["methods"].items()):
        done = {n: r for n, r in sorted(by_nodes.items()) if not r.get("skipped")}
        ns = [int(n) for n in done]
        ticks.update(ns)
        color = f"C{i}"
        for timing, style in (("cold", "--"), ("warm", "-")):
            ys = [r[timing]["seconds"] / results["ctas_one"] if results["ctas_one"] and timing in r
                  else (r[timing]["seconds"] / results["ctas_nodes"][n] if timing in r else np.nan)
                  for n, r in done.items()]
            if timing in results["timings"]:
                ax[0].plot(ns, ys, style, color=color, marker="o",
                           label=method if timing == "warm" else None)
        ax[1].plot(ns, [max(r.get("peak_cold_mb") or 0, r.get("peak_warm_mb") or 0)
                        for r in done.values()], marker="o", color=color, label=method)
        key = "are" if method in ("anatomy", "disassociation") else \
            "loss" if method == "generalization" else "cluster_sd_mean"
        ys = []
        for r in done.values():
            v = r["utility_vs_one"].get(key)
            ys.append(np.mean(list(v.values())) if isinstance(v, dict) and v else
                      v if isinstance(v, (int, float)) else np.nan)
        ax[2].plot(ns, ys, marker="o", color=color, label=f"{method}: {key}")
    ratio = "CTAS on one node" if results["ctas_one"] else "parallel CTAS on the nodes"
    ax[0].axhline(5, color="grey", ls="--", lw=0.8)
    ax[0].set(xlabel="nodes", ylabel=f"seconds / {ratio}", xticks=sorted(ticks),
              title=f"{results['rows']:,} rows (solid warm, dashed cold)")
    ax[1].axhline(TARGET_MB, color="grey", ls="--", lw=0.8)
    ax[1].set(xlabel="nodes", ylabel="peak MB of a node backend", xticks=sorted(ticks))
    ax[2].axhline(1, color="grey", ls="--", lw=0.8)
    ax[2].set(xlabel="nodes", ylabel="utility / 1-node release", xticks=sorted(ticks))
    for a in ax:
        a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cpu_table(results):
    """The CPU accounting (bench/cpu_accounting.py): per method and node count, the CPU seconds
    of the coordinator, the slowest node and in all, the waits, the projected wall time on a
    machine with a core per node, and the ratios to the 1-node release (goals: total CPU <= 1.25
    x at 2 and 4 nodes; projected wall <= 0.6 x at 2 nodes, <= 0.35 x at 4)."""
    out = ["CPU accounting (utime + stime of every backend that served the request, /proc; the"
           " client's thread CPU; waits = no tracked process running or runnable).",
           "projected = slowest node CPU + coordinator CPU + waits (one core per node);"
           " cpu x = total CPU / 1-node total; proj x = projected / 1-node projected (the 1-node"
           " wall time on an idle machine, where nothing waits for a core); runs: timed requests"
           " of the configuration: nodes, client and total are the run of least total CPU; coord,"
           " slowest, waits and proj the run of least projected wall (contention only adds).",
           ""]
    head = (f"{'method':15} {'nodes':>5} {'wall s':>7} {'coord':>7} {'slowest':>8} {'nodes':>7}"
            f" {'client':>7} {'total':>7} {'waits':>6} {'proj s':>7} {'cpu x':>6} {'proj x':>7}"
            f" {'runs':>4}")
    out += [head, "-" * len(head)]
    for m, model in results.get("cpu_model", {}).items():
        for n, a in model["nodes"].items():
            nodes_cpu = sum(v for k, v in a["cpu"].items() if k != "coord")
            out.append(f"{m:15} {n:>5} {a['wall']:7.2f} {a['cpu_coord']:7.2f}"
                       f" {a['cpu_slowest_node']:8.2f} {nodes_cpu:7.2f} {a['client_cpu']:7.2f}"
                       f" {a['cpu_total']:7.2f} {a['waits']:6.2f} {a['projected_wall']:7.2f}"
                       f" {fmt(a['cpu_ratio'], '6.2f')} {fmt(a['projected_ratio'], '7.2f')}"
                       f" {a.get('runs', 1):>4}")
    out += ["", "cost model fitted per method (slowest node = a/N + b, coordinator = c + d N,"
            " waits = e + f log2 N; seconds) and the projected wall time at N nodes:"]
    for m, model in results.get("cpu_model", {}).items():
        if "model" in model:
            c = model["model"]
            proj = ", ".join(f"{n}: {s:.2f} s" for n, s in model["projected"].items())
            src = model.get("node_fixed_from", "fit")
            out.append(f"  {m:15} a {c['node_per_share']:.3f} b {c['node_fixed']:.3f}"
                       + ("" if src == "fit" else f" (b: floor of {src})") +
                       f" c {c['coord_fixed']:.3f} d {c['coord_per_node']:.4f}"
                       f" e {c['waits_fixed']:.3f} f {c['waits_per_node']:.4f} | {proj}")
    return "\n".join(out)


def cpu_plot(results, path):
    """Two panels: total CPU over the 1-node release's, and the projected wall time over the
    1-node wall time, by nodes, with the goals drawn."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401  (matplotlib.ticker.NullFormatter below)
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for i, (m, model) in enumerate(results.get("cpu_model", {}).items()):
        ns = list(model["nodes"])
        ax[0].plot(ns, [a["cpu_ratio"] for a in model["nodes"].values()], marker="o",
                   color=f"C{i}", label=m)
        ax[1].plot(ns, [a["projected_ratio"] for a in model["nodes"].values()], marker="o",
                   color=f"C{i}", label=m)
        if "projected" in model and model["nodes"].get(1):
            far = [n for n in model["projected"] if n > max(ns)]
            one = model["nodes"][1]["projected_wall"]
            ax[1].plot(far, [model["projected"][n] / one for n in far], ls=":", marker="x",
                       color=f"C{i}")
    ax[0].axhline(1.25, color="grey", ls="--", lw=0.8)
    ax[0].set(xlabel="nodes", ylabel="total CPU / 1-node release", xscale="log", xticks=[1, 2, 4],
              xticklabels=["1", "2", "4"], title=f"{results['rows']:,} rows: the protocol's overhead")
    ax[1].plot([2, 4], [0.6, 0.35], color="grey", ls="none", marker="_", ms=14, label="goal")
    ax[1].set(xlabel="nodes", ylabel="projected wall / 1-node projected wall", xscale="log",
              xticks=[1, 2, 4, 16, 64], xticklabels=["1", "2", "4", "16", "64"],
              title="one core per node (dotted: the fitted model)")
    for a in ax:
        a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
