"""Fingerprints of releases, to show that a change leaves every method's output bit-identical.

    .venv/bin/python bench/release/release_fingerprint.py [--label TEXT]

Runs fixed requests (fixed seeds) on the benchmark databases that bench_release_speed.py
leaves behind -- anatomy (001) on deid_bench_anatomy.patients_1m (K=50, L=10; and the
'generalized' output), generalization (002) on deid_bench_gen.bench_gen (k=10, the reference
priorities) -- and prints an md5 of every release relation and of the catalog artefacts it
logged (RID sets, equivalence classes), each over its rows in a canonical order, so only
content counts. Appends one JSON line to bench/results/release_fingerprints.jsonl.
"""
import argparse
import hashlib
import json
import pathlib
import subprocess
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
from common import RESULTS, ROOT, connect  # noqa: E402

ANATOMY_COLUMNS = ["birth_date", "sex", "race", "zip", "topography", "histology", "survival_years"]
GEN_QIS = ["age", "zip", "ethnicity", "diagnosis", "pt", "size_mm"]
GEN_PRIORITIES = {"age": 0.8, "zip": 0.4, "ethnicity": 0.2, "diagnosis": 1.0, "pt": 0.6, "size_mm": 0.4}


def md5_of(conn, relation):
    return conn.execute(f"SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), ''))"
                        f" FROM {relation} t").fetchone()[0]


def rid_set_md5(conn, release_id):
    """md5 of the release's deid.rid_set rows, each as 'attribute|groups|values|counts|rids'
    with every array in PostgreSQL's text form ('{1,2,3}'), rows in (attribute, chunk) order
    -- the packed numbers decoded here (numpy), so the md5 is the one of the catalog's earlier
    int[]/bigint[] columns (format('%s|%s|%s|%s|%s', ...) of them) and stays comparable."""
    def text(raw, dtype):
        return "{" + ",".join(map(str, np.frombuffer(raw, dtype).tolist())) + "}"
    lines = [f"{a}|{text(g, '>i4')}|{v}|{text(c, '>i4')}|{text(r, '>i8')}" for a, g, v, c, r in
             conn.execute("SELECT attribute, group_ids, value_list::text, rid_counts, rids"
                          " FROM deid.rid_set WHERE release_id = %s ORDER BY attribute, chunk",
                          [release_id])]
    return hashlib.md5("\n".join(lines).encode()).hexdigest()


def fingerprint(conn, method, table, k, l, columns, options, name):
    conn.execute("SELECT deid.drop_release(name) FROM deid.release WHERE name = %s"
                 " AND status = 'committed'", [name])
    rid, relations, rows, groups, disc, verified = conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, %s, k => %s, l => %s, columns => %s,"
        " options => %s, release => %s)",
        [table, method, k, l, columns, json.dumps(options), name]).fetchone()
    out = {r: md5_of(conn, r) for r in relations}
    out["rid_set"] = rid_set_md5(conn, rid)
    out["equivalence_class"] = conn.execute(
        "SELECT md5(coalesce(string_agg(format('%%s|%%s|%%s', class_id, cardinality, generalized),"
        " E'\\n' ORDER BY class_id), '')) FROM deid.equivalence_class WHERE release_id = %s",
        [rid]).fetchone()[0]
    out["result"] = [rows, groups, round(disc, 9), verified]
    conn.execute("SELECT deid.drop_release(%s)", [name])
    return {name: out}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    result = {}
    with connect("deid_bench_anatomy") as conn:
        result.update(fingerprint(conn, "anatomy", "patients_1m", 50, 10, ANATOMY_COLUMNS,
                                  {"seed": 7}, "fp_anatomy"))
        result.update(fingerprint(conn, "anatomy", "patients_1m", 50, None, ANATOMY_COLUMNS,
                                  {"seed": 7, "output": "generalized"}, "fp_anatomy_gen"))
    with connect("deid_bench_gen") as conn:
        result.update(fingerprint(conn, "generalization", "bench_gen", 10, None, GEN_QIS,
                                  {"seed": 7, "priorities": GEN_PRIORITIES}, "fp_generalization"))
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    print(json.dumps(result, indent=1))
    with open(RESULTS / "release_fingerprints.jsonl", "a") as f:
        f.write(json.dumps({"label": args.label, "git": head, "fingerprints": result}) + "\n")


if __name__ == "__main__":
    main()
