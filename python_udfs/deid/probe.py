"""Data-path probe (superuser only): read columns into numpy and write
(row id, group id) pairs back, timing each half. Used by bench/ and by the
integration tests of the encodings (the md5 of the frame: row ids, then per column its
values as little-endian int64 or float64 and its NULL flags as bytes; only for frames of up
to MD5_ROWS rows, so that a benchmark's timing of the probe does not include hashing)."""
import hashlib
import json
import time

import numpy as np

from .catalog import relations as catalog
from .read import parallel_pass, snapshot
from .write import copy_files

MD5_ROWS = 200_000


def datapath_probe(db, relid, columns, rid_column, write):
    rel = catalog.relation(db, relid)
    rid = catalog.row_id_column(db, rel, rid_column)
    t0 = time.perf_counter()
    frame = snapshot.read(db, rel, list(columns), rid_column=rid)
    t1 = time.perf_counter()
    written = 0
    if write:
        group = (np.arange(frame.n, dtype=np.int64) // 50).astype(np.int32)
        db.execute("DROP TABLE IF EXISTS deid._probe_out")
        db.execute("CREATE TABLE deid._probe_out (rid bigint NOT NULL, group_id integer NOT NULL)")
        db.execute("ALTER TABLE deid._probe_out OWNER TO deid_owner")   # deid._copy_in's rule
        written = copy_files.copy_into(db, "deid._probe_out", ["rid", "group_id"], [frame.rid, group])
    t2 = time.perf_counter()
    db.execute("DROP TABLE IF EXISTS deid._probe_out")
    digest = hashlib.md5(np.ascontiguousarray(frame.rid, "<i8").tobytes()
                         if frame.rid is not None else b"") if frame.n <= MD5_ROWS else None
    summary = {}
    for name, col in frame.columns.items():
        if digest is not None:
            wide = "<f8" if col.values.dtype.kind == "f" else "<i8"
            digest.update(np.ascontiguousarray(col.values, wide).tobytes())
            digest.update(np.ascontiguousarray(col.null, np.uint8).tobytes())
        summary[name] = {
            "kind": col.kind, "dtype": str(col.values.dtype), "nulls": int(col.null.sum()),
            "dictionary": col.dictionary, "first": col.values[:3].tolist(),
            "labels": col.labels()[:3].tolist() if col.dictionary is not None else None,
        }
    return json.dumps({"rows": frame.n, "read_s": t1 - t0, "write_s": t2 - t1,
                       "written": written, "rid_first": frame.rid[:3].tolist(),
                       "parts": len(parallel_pass.parallel_cuts(db, rel)) + 1,
                       "md5": digest and digest.hexdigest(),
                       "columns": summary})
