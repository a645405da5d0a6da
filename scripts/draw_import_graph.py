"""Draw python_udfs/deid's folder-level import graph (scripts/code_metrics.py's, imports inside
functions included) as a PNG, for docs/dev/architecture.md. A development tool: it needs the
venv's matplotlib, never the server's Python.

    .venv/bin/python scripts/draw_import_graph.py [out.png]

Folders are placed in layers: a folder sits one layer below the lowest folder it imports, so
every arrow points down the page (the graph has no loop: tests/unit/common/test_import_graph.py).
"""
import pathlib
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import code_metrics  # noqa: E402

OUT = code_metrics.ROOT / "docs" / "dev" / "img" / "import_graph.png"
# the folders of a request's path, drawn in a colour of their own
PATH = ("request", "read", "methods", "plan.py", "write", "verify", "log")


def layers(g):
    """{node: depth}: a node's depth is one more than the deepest node it imports, so an
    importer is drawn above what it imports."""
    depth = {}

    def visit(v):
        if v not in depth:
            depth[v] = 0
            depth[v] = 1 + max((visit(t) for t in g.get(v, ())), default=-1)
        return depth[v]
    for v in g:
        visit(v)
    return depth


def positions(depth):
    """{node: (x, y)}: layers from the bottom (what nothing below it imports) up, each layer's
    nodes spread across the width in name order."""
    rows = {}
    for v, d in depth.items():
        rows.setdefault(d, []).append(v)
    pos = {}
    for d, nodes in rows.items():
        nodes.sort()
        for i, v in enumerate(nodes):
            pos[v] = ((i + 1) / (len(nodes) + 1), d)
    return pos


def draw(g, out):
    pos = positions(layers(g))
    top = max(y for _, y in pos.values())
    fig, ax = plt.subplots(figsize=(13, 1.1 * (top + 2)))
    for v, targets in g.items():
        for t in targets:
            (x0, y0), (x1, y1) = pos[v], pos[t]
            ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                        arrowprops=dict(arrowstyle="->", color="#9aa5b1", lw=0.6,
                                        shrinkA=12, shrinkB=12))
    for v, (x, y) in pos.items():
        colour = "#d7ecff" if v in PATH else "#f2f2f2"
        ax.text(x, y, v, ha="center", va="center", fontsize=8,
                bbox=dict(boxstyle="round,pad=0.3", fc=colour, ec="#52606d", lw=0.6))
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.7, top + 0.7)
    ax.axis("off")
    ax.set_title("python_udfs/deid: which folder imports which (arrows point to what is "
                 "imported; blue: a request's path)", fontsize=9)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main(argv):
    out = pathlib.Path(argv[1]) if len(argv) > 1 else OUT
    draw(code_metrics.folder_graph(code_metrics.graph()), out)
    print(out)


if __name__ == "__main__":
    main(sys.argv)
