"""The coordinator's share of a distributed generalization (a term of the cost model in
docs/sharding.md): unpacking
the nodes' class tables, merging them (methods/generalization/class_merge.py) and the greedy
search on the merged table, against the number of nodes and of classes per node. Pure numpy,
no server. Each node's table is a random draw of `classes` distinct classes out of one pool of
2 x `classes` classes over 5 quasi-identifiers (hash-sharded rows of one distribution: the
nodes share most of their classes), counts 1..19; "unique" rows draw each node's classes from
a pool of nodes x `classes` (nearly unique joint classes: the merged table holds about all
of them), and nearly unique ones at one total (1.6M classes over 4, 16 or 64 nodes: does the
coordinator's share fall with R / N or stay with R). Wall seconds and this process's CPU
seconds of each phase and of the coordinator's whole share, unpack + merge + greedy search
(the machine is shared: CPU is the figure to compare).

    .venv/bin/python bench/distributed/bench_class_merge.py      (holds the benchmark lock, DEID_BENCH_LOCK, while timing)
Writes bench/results/class_merge.{json,txt,png} (--plot: the PNG again from the JSON).
"""
import json
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_udfs"))
sys.path.insert(0, str(ROOT / "bench"))
import bench_paths  # noqa: E402,F401  (every bench folder importable)

from bench_distributed import bench_lock  # noqa: E402
from deid.methods.generalization.class_merge import (NodeClasses, merge_classes, pack,  # noqa: E402
                                                     unpack)
from deid.methods.generalization.generalize import AttributeHierarchy, greedy  # noqa: E402

SIZES = [100, 2, 8, 60, 8]       # age, sex, race, zip, pt: 768k possible classes
UNIQUE = [100, 2, 8, 6000, 8]    # a finer zip: 76.8M possible classes (nearly unique)


def hierarchy(name, n):
    paths = [(f"{name}{i}", f"{name}/{i // 4}", f"{name}//{i // 16}", "*") for i in range(n)]
    return AttributeHierarchy.from_paths(name, paths, [0, 0.3, 0.6, 1.0])


def pool(rng, size, sizes=SIZES):
    codes = np.stack([rng.integers(0, s, int(size * 1.5) + 10) for s in sizes], axis=1)
    codes = np.unique(codes, axis=0)
    return codes[rng.permutation(len(codes))[:size]]


def node_table(rng, pooled, classes, sizes=SIZES):
    codes = pooled[np.sort(rng.choice(len(pooled), classes, replace=False))]
    leaves = [[f"{'abcde'[j]}{i}" for i in range(s)] for j, s in enumerate(sizes)]
    return NodeClasses(leaves, codes, rng.integers(1, 20, len(codes)))


def measure(nodes, classes, seed=0, unique=False):
    rng = np.random.default_rng(seed)
    sizes = UNIQUE if unique else SIZES
    pooled = pool(rng, (nodes if unique else 2) * classes, sizes)
    blobs = [pack(node_table(rng, pooled, classes, sizes)) for _ in range(nodes)]
    with bench_lock():
        c0, t0 = time.process_time(), time.perf_counter()
        tables = [unpack(b) for b in blobs]
        c1, t1 = time.process_time(), time.perf_counter()
        merged = merge_classes(tables)
        c2, t2 = time.process_time(), time.perf_counter()
        attrs = [hierarchy("abcde"[j], s) for j, s in enumerate(sizes)]
        # the merged leaves are a subset of every hierarchy's leaves, in sorted order
        index = [{v: i for i, v in enumerate(a.labels[0])} for a in attrs]
        codes = np.stack([np.array([index[j][v] for v in merged.leaves[j]])[merged.codes[:, j]]
                          for j in range(len(sizes))], axis=1)
        c3, t3 = time.process_time(), time.perf_counter()
        greedy(codes, merged.counts, attrs, 10)
        c4, t4 = time.process_time(), time.perf_counter()
    return {"nodes": nodes, "classes_per_node": classes, "unique": unique,
            "merged_classes": int(len(merged.counts)),
            "bytes_per_node": int(np.mean([len(b) for b in blobs])),
            "unpack_s": t1 - t0, "merge_s": t2 - t1, "search_s": t4 - t3,
            "unpack_cpu_s": c1 - c0, "merge_cpu_s": c2 - c1, "search_cpu_s": c4 - c3,
            "coord_cpu_s": (c2 - c0) + (c4 - c3)}


def plot(rows, path):
    """The coordinator's CPU (unpack + merge + search) against the merged table's classes:
    shared classes by nodes, nearly unique ones by nodes, the fixed-R series joined."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for unique, marker in ((False, "o"), (True, "s")):
        pts = [r for r in rows if r["unique"] == unique]
        for r in pts:
            ax.annotate(f"{r['nodes']}x{r['classes_per_node'] // 1000}k",
                        (r["merged_classes"], r["coord_cpu_s"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
        ax.scatter([r["merged_classes"] for r in pts], [r["coord_cpu_s"] for r in pts],
                   marker=marker, label="nearly unique classes" if unique else "shared classes")
    ax.set(xscale="log", yscale="log", xlabel="classes after the merge",
           ylabel="coordinator CPU s (unpack + merge + search)",
           title="generalization over shards: the coordinator's share")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    out = ROOT / "bench" / "results"
    if "--plot" in sys.argv:            # redraw from the JSON, run nothing
        return plot(json.loads((out / "class_merge.json").read_text()), out / "class_merge.png")
    rows = [measure(n, c) for n in (2, 16, 64) for c in (10_000, 100_000)]
    rows.append(measure(16, 400_000))
    rows += [measure(n, 100_000, unique=True) for n in (2, 16, 64)]
    # nearly unique classes at one size of the source (1.6M classes in all): the coordinator's
    # CPU against N at a fixed R says whether its share shrinks with R / N or stays with R
    rows += [measure(n, 1_600_000 // n, unique=True) for n in (4, 64)]
    (out / "class_merge.json").write_text(json.dumps(rows, indent=2) + "\n")
    plot(rows, out / "class_merge.png")
    head = (f"{'nodes':>5} {'classes/node':>12} {'shape':>7} {'merged':>9} {'KB/node':>8}"
            f" {'unpack s':>9} {'merge s':>8} {'greedy s':>9} {'unpack cpu':>10} {'merge cpu':>9}"
            f" {'greedy cpu':>10} {'coord cpu':>9}")
    lines = ["The coordinator's merge of the nodes' class tables (5 QIs; greedy k=10)", "",
             head, "-" * len(head)]
    lines += [f"{r['nodes']:5d} {r['classes_per_node']:12,d}"
              f" {'unique' if r['unique'] else 'shared':>7} {r['merged_classes']:9,d}"
              f" {r['bytes_per_node'] / 1024:8.0f} {r['unpack_s']:9.3f} {r['merge_s']:8.3f}"
              f" {r['search_s']:9.3f} {r['unpack_cpu_s']:10.3f} {r['merge_cpu_s']:9.3f}"
              f" {r['search_cpu_s']:10.3f} {r['coord_cpu_s']:9.3f}"
              for r in rows]
    (out / "class_merge.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
