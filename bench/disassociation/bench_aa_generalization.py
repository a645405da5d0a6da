"""k^m generalization (method disassociation, options.model 'generalization': Apriori
Anonymization, Terrovitis et al. 2008) end to end through SQL on 003's INFORMS shape
(bench_disassociation_kernel.make_records: 58,302 records, 631 codes) with the ICD-9 hierarchy
of bench/disassociation/icd9_hierarchy.py loaded by deid.load_hierarchy; compared with a CREATE TABLE AS copy
of the source; per k the phases, the share of codes and occurrences generalized and the
released codes (from the log).

    .venv/bin/python bench/disassociation/bench_aa_generalization.py [--n 58302] [--ks 2,5,10,25] [--m 2]

Writes bench/results/aa_generalization.json.
"""
import argparse
import json
import pathlib
import sys
import time

from psycopg import sql

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
from bench_disassociation import load  # noqa: E402
from bench_disassociation_kernel import make_records  # noqa: E402
from common import fresh_database, save, timed  # noqa: E402
import icd9_hierarchy  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=58302)
    ap.add_argument("--ks", default="2,5,10,25")
    ap.add_argument("--m", type=int, default=2)
    args, _ = ap.parse_known_args()
    admin = fresh_database("bench_aa")
    admin.execute("CREATE SCHEMA IF NOT EXISTS bench")
    table = f"bench.aa_{args.n}"
    src, copy = (sql.Identifier("bench", f"aa_{args.n}{s}") for s in ("", "_copy"))
    rows = load(admin, table, args.n)
    _, _, names, _ = make_records(args.n, seed=0)
    admin.execute("SELECT deid.load_hierarchy('bench_icd9', %s)", [icd9_hierarchy.rows(names)])
    ctas, _ = timed(admin, sql.SQL("CREATE TABLE {} AS SELECT * FROM {}").format(copy, src))
    admin.execute(sql.SQL("DROP TABLE {}").format(copy))
    out = []
    for k in [int(x) for x in args.ks.split(",")]:
        name = f"bench_aa_{k}"
        admin.execute("SELECT deid.drop_release(name) FROM deid.release WHERE name = %s"
                      " AND status = 'committed'", [name])
        opts = {"m": args.m, "model": "generalization", "hierarchy": "bench_icd9",
                "record": "patient_id", "item": "icd9", "seed": 1}
        t = time.perf_counter()
        r = admin.execute("SELECT * FROM deid.anonymize_request(%s::regclass, 'disassociation',"
                          " k => %s, options => %s, release => %s)",
                          [table, k, json.dumps(opts), name]).fetchone()
        total = time.perf_counter() - t
        met = admin.execute("SELECT metrics FROM deid.release WHERE release_id = %s",
                            [r[0]]).fetchone()[0]
        rec = {"records": args.n, "occurrences": rows, "k": k, "m": args.m, "seconds": total,
               "ctas_seconds": ctas, "ratio": total / ctas, "phases": met.get("seconds"),
               "codes_generalized": met["codes_generalized"],
               "occurrences_generalized": met["occurrences_generalized"],
               "released_codes": met["released_codes"], "generalizations": met["generalizations"],
               "cut": met["cut"]}
        print(f"k={k:>3}: {total:.2f} s end to end (CTAS {ctas:.2f} s = {total / ctas:.1f} x);"
              f" phases " + ", ".join(f"{a} {b:.2f}" for a, b in (met.get("seconds") or {}).items())
              + f"; codes generalized {met['codes_generalized']:.3f}, occurrences"
              f" {met['occurrences_generalized']:.3f}, {met['released_codes']} released codes",
              flush=True)
        out.append(rec)
        admin.execute("SELECT deid.drop_release(%s)", [name])
    admin.execute(sql.SQL("DROP TABLE {}").format(src))
    admin.execute("SELECT deid.drop_hierarchy('bench_icd9')")
    save("aa_generalization", out)


if __name__ == "__main__":
    main()
