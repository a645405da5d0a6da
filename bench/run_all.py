"""make bench: every benchmark, one after the other (numbers + PNGs in bench/results/)."""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS = ["release/bench_datapath.py", "anatomy/bench_anatomy.py", "generalization/bench_generalization.py",
         "condensation/bench_condensation.py", "disassociation/bench_disassociation.py",
         "disassociation/bench_disassociation_utility.py", "generalization/bench_generalization_shapes.py"]

if __name__ == "__main__":
    extra = sys.argv[1:]
    failed = []
    for script in STEPS:
        print(f"== {script}", flush=True)
        if subprocess.call([sys.executable, str(HERE / script)] + extra) != 0:
            failed.append(script)
    if failed:
        sys.exit("failed: " + ", ".join(failed))
