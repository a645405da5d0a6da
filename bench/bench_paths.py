"""Where the benchmarks live: bench/<purpose>/ folders (release/: the data path and release
speed over every method; anatomy/, generalization/, condensation/, disassociation/: one method
each; distributed/: releases over PL/Proxy nodes), bench/common.py beside them, the numbers and
plots in bench/results/. A benchmark script puts bench/ on sys.path and imports this module:
every folder and python_udfs/ (the pure kernels) become importable by module name, so a script
imports its neighbours wherever they sit (`import bench_generalization as bg`)."""
import pathlib
import sys

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
FOLDERS = ("release", "anatomy", "generalization", "condensation", "disassociation", "distributed")

for _path in (*(BENCH / f for f in FOLDERS), BENCH):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
# last: a tree given in PYTHONPATH (an older commit's, exported, to time it) comes first
if str(ROOT / "python_udfs") not in sys.path:
    sys.path.append(str(ROOT / "python_udfs"))
