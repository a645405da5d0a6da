"""What ``distance_guard`` costs: the plug-in's time (the server's code path after the read)
on colon and lung at k = 10, without and with 8 and 16 redraws, median of 3 seeds, and the close
rows it counts before and after.

    bench/.venv-eval/bin/python -m bench.eval_condensation.guard_cost

Writes bench/results/condensation_guard_cost.json.  The plug-in's time is the request's
without the read, the write and the verifier, so the share measured here is an upper bound of
the guard's share of a request.
"""
import json
import os
import time

from . import data, synth

OUT = os.path.join(synth.ROOT, "bench", "results", "condensation_guard_cost.json")


def main():
    out = []
    for name in ("colon", "lung"):
        ds = data.load(name)
        for guard in (0, 8, 16):
            times, metrics = [], None
            for seed in (1, 2, 3):
                t0 = time.perf_counter()
                rel = synth.deid_release(ds, "deid", seed, k=10,
                                         extra={"distance_guard": guard} if guard else None)
                times.append(time.perf_counter() - t0)
                metrics = rel.attrs["metrics"].get("distance_guard")
            out.append({"dataset": name, "distance_guard": guard,
                        "seconds": round(sorted(times)[1], 3), "close_rows": metrics})
            print(json.dumps(out[-1]), flush=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
