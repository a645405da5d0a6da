"""The independent check of a generalization release (002), from what was STORED, before
commit: every source system is k-anonymous on its own projected quasi-identifiers (002 sec. 2:
k data twins in every source separately) -- counted by GROUP BY on the stored release table and
checked by verify.k_per_source. The sources come from the catalog's column roles, not from the
method."""
import json

import numpy as np

from ..sqltext import qualified, quote_ident
from . import check_k_per_source

STORE_SCHEMA = "deid_release"


def verify(db, req, frame, tables):
    by_source = {}
    for q in req.columns:
        meta = req.rel.columns[q]
        if meta.role == "quasi_identifier":
            by_source.setdefault(meta.source or req.rel.display, []).append(q)
    counts = {}
    for source, cols in by_source.items():
        keys = ", ".join(quote_ident(c) for c in cols)
        buf = db.query(f"SELECT string_agg(int8send(n), ''::bytea) AS c FROM (SELECT count(*) AS n"
                       f" FROM {qualified(STORE_SCHEMA, tables[0])} GROUP BY {keys}) s")[0]["c"]
        counts[source] = np.frombuffer(buf or b"", ">i8").astype(np.int64)
    out = check_k_per_source(counts, req.k)
    return json.loads(json.dumps(out, default=lambda x: x.item() if hasattr(x, "item") else str(x)))
