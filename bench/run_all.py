"""make bench: every benchmark, one after the other (numbers + PNGs in bench/results/)."""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS = ["bench_datapath.py", "bench_anatomy.py", "bench_generalization.py", "bench_condensation.py",
         "bench_disassociation.py", "bench_disassociation_utility.py",
         "bench_generalization_shapes.py"]

if __name__ == "__main__":
    extra = sys.argv[1:]
    failed = []
    for script in STEPS:
        print(f"== {script}", flush=True)
        if subprocess.call([sys.executable, str(HERE / script)] + extra) != 0:
            failed.append(script)
    if failed:
        sys.exit("failed: " + ", ".join(failed))
