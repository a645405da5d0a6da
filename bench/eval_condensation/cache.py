"""The evaluation's cache: one JSON-lines file per (data set, method, k), one line per seed.

    bench/results/condensation_eval/cache/<data set>/<method>_k<k>.jsonl       utility fits
    bench/results/condensation_eval/cache/<data set>/<method>_k<k>.risk.jsonl  anonymeter runs

Each line carries the seed and a fingerprint of what produced it (the data set's rows, the
method's code and options); a line whose fingerprint does not match the current code is kept
but not used (the results of an earlier code stay with it), so re-running after a change to
deid's condensation code recomputes deid's rows only, and an interrupted run resumes where it
stopped.
"""
import hashlib
import json
import os

import numpy as np


def digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def files_digest(paths):
    """A digest of the bytes of ``paths`` (sorted), e.g. a method's source files."""
    h = hashlib.sha256()
    for p in sorted(paths):
        with open(p, "rb") as f:
            h.update(os.path.basename(p).encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


def frame_digest(df):
    return digest(",".join(df.columns), np.ascontiguousarray(df.to_numpy(np.float64)).tobytes())


class Store:
    """The cached lines of one (data set, method, k, kind): ``get(seed)`` -> dict or None."""

    def __init__(self, root, dataset, method, k, fingerprint, kind=""):
        d = os.path.join(root, dataset)
        os.makedirs(d, exist_ok=True)
        suffix = f".{kind}.jsonl" if kind else ".jsonl"
        self.path = os.path.join(d, f"{method}_k{k}{suffix}")
        self.fingerprint = fingerprint
        self.lines = {}
        self.others = []                                # other code's lines: kept, not used
        if os.path.exists(self.path):
            with open(self.path) as f:
                for line in f:
                    try:
                        x = json.loads(line)
                    except ValueError:                  # a line cut by an interrupted run
                        continue
                    if x.get("fingerprint") == fingerprint:
                        self.lines[x["seed"]] = x
                    else:
                        self.others.append(line.rstrip("\n"))

    def get(self, seed):
        return self.lines.get(seed)

    def put(self, seed, value):
        x = dict(value, seed=seed, fingerprint=self.fingerprint)
        self.lines[seed] = x
        with open(self.path, "a") as f:
            f.write(json.dumps(x) + "\n")
        return x

    def compact(self):
        """Rewrite the file: other fingerprints' lines as they were, then this one's by seed
        (one line a seed)."""
        with open(self.path, "w") as f:
            for line in self.others:
                f.write(line + "\n")
            for seed in sorted(self.lines):
                f.write(json.dumps(self.lines[seed]) + "\n")
