"""Utility of a distributed release read on the coordinator (the union of the nodes' parts,
each row with its `node`), for bench/distributed/bench_distributed.py: the same definitions as the
single-node benchmarks, applied to the union.

* anatomy: ARE of 001's random COUNT queries (deid.methods.metrics: random_count_queries,
  exact_count, anatomy_estimate, are -- as bench/anatomy/bench_anatomy.py), the QIT and the count
  table of the union, a group being (node, group_id).
* condensation: the released rows' means and correlations against the source's (one-hot
  categories; bench/condensation/bench_condensation_kernel.py: coded_view, moment_errors), over the union.
* disassociation: ARE (003 Def. 2, deid.methods.disassociation.metrics_sets.are) of a W2-like
  workload (bench/bench_disassociation_kernel.workload: random sets of codes grown from one
  record) on reconstructions (003 Fig. 5, deid.methods.disassociation.disassociate.reconstruct)
  of the union's chunks, a cluster being (node, cluster_id).

Rows come from the server as binary COPY of int4 columns (text values mapped to codes by
array_position in SQL), parsed with numpy: millions of rows without Python objects.
"""
import pathlib
import sys
from types import SimpleNamespace

import numpy as np
from psycopg import sql

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import bench_paths  # noqa: E402,F401  (every bench folder and python_udfs importable)
from bench_condensation_kernel import coded_view, moment_errors  # noqa: E402
from bench_disassociation_kernel import workload as itemset_workload  # noqa: E402
from deid.methods import metrics  # noqa: E402
from deid.methods.disassociation import metrics_sets  # noqa: E402
from deid.methods.disassociation.disassociate import reconstruct  # noqa: E402

CONDENSED = {"age": "int", "sex": "categorical", "race": "categorical", "pt": "categorical",
             "surv_months": "int", "vital": "categorical"}
ANATOMY_QI = ["age", "sex", "race", "zip"]
ANATOMY_SENSITIVE = ["diagnosis"]
ANATOMY_CATEGORICAL = ("sex", "race", "diagnosis")
SIGNATURE = b"PGCOPY\n\xff\r\n\x00"


# --------------------------------------------------------------------------- reading

def parse_int4_copy(buf, ncols):
    """The columns (int64 arrays) of a binary COPY of `ncols` int4 columns without NULLs."""
    buf = bytes(buf)
    if not buf.startswith(SIGNATURE):
        raise ValueError("not a binary COPY")
    ext = int.from_bytes(buf[15:19], "big")
    body = buf[19 + ext:-2]                       # the trailer is int16 -1
    if buf[-2:] != b"\xff\xff":
        raise ValueError("binary COPY without its trailer")
    dt = np.dtype([("n", ">i2")] + [(f"{p}{i}", ">i4") for i in range(ncols) for p in "lv"])
    if len(body) % dt.itemsize:
        raise ValueError("binary COPY rows are not int4 columns without NULLs")
    rows = np.frombuffer(body, dtype=dt)
    if rows.size and (np.any(rows["n"] != ncols)
                      or any(np.any(rows[f"l{i}"] != 4) for i in range(ncols))):
        raise ValueError("binary COPY rows are not int4 columns without NULLs")
    return [rows[f"v{i}"].astype(np.int64) for i in range(ncols)]


def fetch_ints(conn, query, ncols):
    """Run `query` (a psycopg.sql.Composable of int4 columns) as a binary COPY."""
    buf = bytearray()
    with conn.cursor() as cur:
        with cur.copy(sql.SQL("COPY ({}) TO STDOUT (FORMAT binary)").format(query)) as cp:
            for block in cp:
                buf += block
    return parse_int4_copy(buf, ncols)


def code_expr(column, dictionary):
    """array_position(dictionary, column) - 1: the value's code (-1: not in it)."""
    return sql.SQL("coalesce(array_position({}::text[], {}::text), 0)::int4 - 1").format(
        sql.Literal(list(dictionary)), sql.Identifier(column))


# --------------------------------------------------------------------------- the union

def union_ids(*pairs):
    """Dense ids 0..G-1 of (node, id) pairs, consistent over several arrays of pairs: one
    group per node and id (ids of groups and clusters are per node).  Returns one id array
    per (node, id) pair given, and G."""
    nodes = [np.asarray(n, np.int64) for n, _ in pairs]
    ids = [np.asarray(i, np.int64) for _, i in pairs]
    if any(len(n) != len(i) for n, i in zip(nodes, ids)):
        raise ValueError("node and id arrays differ in length")
    allid = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    lo = int(allid.min()) if allid.size else 0
    width = int(allid.max()) - lo + 1 if allid.size else 1
    keys = [n * width + (i - lo) for n, i in zip(nodes, ids)]
    uniq, inv = np.unique(np.concatenate(keys), return_inverse=True)
    cuts = np.cumsum([len(k) for k in keys])[:-1]
    return np.split(inv.astype(np.int64), cuts) + [int(uniq.size)]


# --------------------------------------------------------------------------- anatomy (001)

def anatomy_workload(source, n_queries, seed):
    """001's random COUNT queries (1-4 conditions, one on the sensitive attribute) drawn
    from the source's coded columns, seeded."""
    return metrics.random_count_queries(np.random.default_rng(seed), source, ANATOMY_QI,
                                        ANATOMY_SENSITIVE, n_queries, max_conditions=4,
                                        categorical=ANATOMY_CATEGORICAL)


def exact_counts(source, queries):
    """The true answers of `queries` on the source's coded columns."""
    return np.array([metrics.exact_count(q, source) for q in queries], np.float64)


def anatomy_are(actual, n, queries, qit, st):
    """ARE (001 Table 1) of `queries` answered from the union of the parts (true answers
    `actual`, `n` source rows). `qit`: {"node", "group_id", QI columns}; `st`: {"node",
    "group_id", "diagnosis", "count"} (the count table)."""
    g_qit, g_st, n_groups = union_ids((qit["node"], qit["group_id"]),
                                      (st["node"], st["group_id"]))
    tables = {"diagnosis": (g_st, st["diagnosis"], st["count"])}
    qit_cols = {c: qit[c] for c in ANATOMY_QI}
    estimate = np.array([metrics.anatomy_estimate(q, qit_cols, g_qit, tables, n_groups)
                         for q in queries])
    return metrics.are(actual, estimate, n=n)


def read_anatomy_source(nodes):
    """The anatomy request's columns of every node's source rows, coded (text: its rank in
    the sorted values of all nodes), and the dictionaries."""
    texts = ["sex", "race", "zip", "diagnosis"]
    values = {c: sorted({v for conn in nodes for (v,) in conn.execute(
        sql.SQL("SELECT DISTINCT {} FROM bench.patients").format(sql.Identifier(c)))})
        for c in texts}
    cols = [sql.SQL("age::int4")] + [code_expr(c, values[c]) for c in texts]
    parts = [fetch_ints(conn, sql.SQL("SELECT {} FROM bench.patients").format(
        sql.SQL(", ").join(cols)), 5) for conn in nodes]
    source = {c: np.concatenate([p[i] for p in parts]) for i, c in enumerate(["age"] + texts)}
    return source, values


def read_anatomy_release(coord, relations, values):
    """The union of the parts of an anatomy release (its QIT and the diagnosis count table,
    through the coordinator's views), coded as the source; node = the node's port."""
    qit = next(r for r in relations if r.endswith("_qit"))
    st = next(r for r in relations if r.endswith("_diagnosis"))
    node = sql.SQL("split_part(node, ':', 2)::int4")
    q = fetch_ints(coord, sql.SQL("SELECT {}, group_id, age::int4, {} FROM {}").format(
        node, sql.SQL(", ").join(code_expr(c, values[c]) for c in ("sex", "race", "zip")),
        sql.Identifier(*qit.split("."))), 6)
    t = fetch_ints(coord, sql.SQL("SELECT {}, group_id, {}, count::int4 FROM {}").format(
        node, code_expr("diagnosis", values["diagnosis"]), sql.Identifier(*st.split("."))), 4)
    return (dict(zip(["node", "group_id", "age", "sex", "race", "zip"], q)),
            dict(zip(["node", "group_id", "diagnosis", "count"], t)))


# --------------------------------------------------------------------------- condensation (004)

def _condensed_columns(values):
    return sql.SQL(", ").join(
        code_expr(c, values[c]) if c in values else sql.SQL("{}::int4").format(sql.Identifier(c))
        for c in CONDENSED)


def read_condensation_source(nodes):
    """condensation's columns of every node's source rows (bench.survival) as one int64
    matrix (categories coded by their rank over all nodes), and the dictionaries."""
    texts = [c for c, kind in CONDENSED.items() if kind == "categorical" and c != "vital"]
    values = {c: sorted({v for conn in nodes for (v,) in conn.execute(
        sql.SQL("SELECT DISTINCT {}::text FROM bench.survival").format(sql.Identifier(c)))})
        for c in texts}
    parts = [np.stack(fetch_ints(conn, sql.SQL("SELECT {} FROM bench.survival").format(
        _condensed_columns(values)), len(CONDENSED)), axis=1) for conn in nodes]
    return np.concatenate(parts), values


def read_condensation_release(coord, relations, values):
    """The union of the parts of a condensation release (the synthetic rows, through the
    coordinator's view), coded as the source."""
    view = sql.Identifier(*relations[0].split("."))
    return np.stack(fetch_ints(coord, sql.SQL("SELECT {} FROM {}").format(
        _condensed_columns(values), view), len(CONDENSED)), axis=1)


def condensation_moments(source, released):
    """moment_errors of the released rows against the source's (one-hot over the source's
    categories)."""
    kinds = list(CONDENSED.values())
    return moment_errors(coded_view(source, kinds), coded_view(released, kinds, like=source))


# --------------------------------------------------------------------------- disassociation (003)

def _csr(owner, codes):
    """Rows `owner` (one per code, -1 code: an empty row) -> CSR offsets and codes, rows in
    order 0..max; codes sorted within a row."""
    n = int(owner.max()) + 1 if owner.size else 0
    keep = codes >= 0
    order = np.lexsort((codes[keep], owner[keep]))
    counts = np.bincount(owner[keep], minlength=n)
    return np.r_[0, np.cumsum(counts)].astype(np.int64), codes[keep][order]


def _sequential(*keys):
    """Rows sorted by `keys` (the last the most significant, as np.lexsort): the order and,
    in that order, a running index that grows where the last key (the finest) changes."""
    order = np.lexsort(keys)
    fine = keys[0][order]
    if not fine.size:
        return order, np.zeros(0, np.int64)
    return order, np.r_[0, np.cumsum(fine[1:] != fine[:-1])].astype(np.int64)


def _starts(seq):
    """Where a run of equal values of `seq` starts."""
    return np.flatnonzero(np.r_[True, seq[1:] != seq[:-1]]) if seq.size else seq


def disassociated_union(n_codes, k, clusters, record_chunks, item_chunks, shared_clusters=None,
                        shared_codes=None):
    """The union of the parts as the arrays reconstruct() reads (003 Figs. 4, 10), a cluster
    being (node, cluster_id), a shared chunk (node, shared_id). Every argument is a dict of
    equal-length arrays, one row per:
      clusters        cluster: node, cluster_id, size
      record_chunks   code of a subrecord (code -1: an empty subrecord): node, cluster_id,
                      chunk_id, sub (the subrecord's number, unique within its node), code
      item_chunks     code of an item chunk: node, cluster_id, code
      shared_clusters cluster of a shared chunk: node, shared_id, cluster_id
      shared_codes    code of a shared chunk's subrecord: node, shared_id, sub, code"""
    empty = {c: np.zeros(0, np.int64) for c in ("node", "shared_id", "cluster_id", "sub", "code")}
    shared_clusters = shared_clusters or empty
    shared_codes = shared_codes or empty
    order = np.lexsort((clusters["cluster_id"], clusters["node"]))
    rc, it, sc, cl, g = union_ids(
        (record_chunks["node"], record_chunks["cluster_id"]),
        (item_chunks["node"], item_chunks["cluster_id"]),
        (shared_clusters["node"], shared_clusters["cluster_id"]),
        (clusters["node"][order], clusters["cluster_id"][order]))
    if not np.array_equal(cl, np.arange(g)):
        raise ValueError("a chunk belongs to no listed cluster")
    # record chunks: subrecords by cluster, chunk and number
    sub = union_ids((record_chunks["node"], record_chunks["sub"]))[0]
    o, sub_seq = _sequential(sub, record_chunks["chunk_id"], rc)
    first = _starts(sub_seq)
    sub_cluster, sub_chunk = rc[o][first], record_chunks["chunk_id"][o][first]
    chunk_seq = np.r_[0, np.cumsum((sub_cluster[1:] != sub_cluster[:-1])
                                   | (sub_chunk[1:] != sub_chunk[:-1]))][:sub_cluster.size]
    chunk_first = _starts(chunk_seq)
    sub_off, sub_codes = _csr(sub_seq, record_chunks["code"][o])
    it_order = np.lexsort((item_chunks["code"], it))
    # shared chunks: their clusters, and their non-empty subrecords
    sid_c, sid_s, n_shared = union_ids((shared_clusters["node"], shared_clusters["shared_id"]),
                                       (shared_codes["node"], shared_codes["shared_id"]))
    sc_order = np.lexsort((sc, sid_c))
    keep = shared_codes["code"] >= 0
    ssub = union_ids((shared_codes["node"][keep], shared_codes["sub"][keep]))[0]
    so, ssub_seq = _sequential(ssub, sid_s[keep])
    sfirst = _starts(ssub_seq)
    ssub_off, ssub_codes = _csr(ssub_seq, shared_codes["code"][keep][so])
    counts = lambda x, n: np.r_[0, np.cumsum(np.bincount(x, minlength=n))].astype(np.int64)  # noqa: E731
    return SimpleNamespace(
        k=k, n_codes=n_codes, n_shared=n_shared,
        cluster_size=np.asarray(clusters["size"], np.int64)[order],
        chunk_cluster=sub_cluster[chunk_first],
        chunk_subrecords=np.r_[chunk_first, len(first)].astype(np.int64),
        subrecord_offsets=sub_off, subrecord_codes=sub_codes,
        item_offsets=counts(it, g), item_codes=item_chunks["code"][it_order],
        shared_cluster_offsets=counts(sid_c, n_shared), shared_cluster_ids=sc[sc_order],
        shared_subrecords=counts(sid_s[keep][so][sfirst], n_shared),
        shared_subrecord_offsets=ssub_off, shared_subrecord_codes=ssub_codes)


def disassociation_are(offsets, codes, n_codes, union, n_queries, seed, reconstructions=3):
    """ARE (003 Def. 2) of a W2-like workload (sets of 1-3 codes grown from a record of the
    source, seeded), averaged over `reconstructions` reconstructions (seeds 0, 1, ...)."""
    lengths = np.diff(offsets)
    sizes = tuple(range(1, min(3, int(lengths.max())) + 1))
    queries = itemset_workload(np.random.default_rng(seed), offsets, codes, n_queries, sizes)
    errs = []
    for s in range(reconstructions):
        rc = reconstruct(union, s)
        errs.append(metrics_sets.are((offsets, codes), (rc.offsets, rc.codes), queries, n_codes))
    return {"all": float(np.mean(errs)), "queries": len(queries), "sizes": list(sizes),
            "reconstructions": reconstructions}


def read_diagnoses(nodes):
    """Every node's source records (patient -> codes) as CSR, codes ranked in the sorted
    codes of all nodes, and that dictionary."""
    values = sorted({v for conn in nodes for (v,) in conn.execute(
        "SELECT DISTINCT icd9 FROM bench.diagnoses")})
    parts = [fetch_ints(conn, sql.SQL("SELECT patient_id::int4, {} FROM bench.diagnoses").format(
        code_expr("icd9", values)), 2) for conn in nodes]
    rec = np.concatenate([p[0] for p in parts])
    code = np.concatenate([p[1] for p in parts])
    order = np.lexsort((code, rec))
    rec, code = rec[order], code[order]
    starts = np.flatnonzero(np.r_[True, rec[1:] != rec[:-1]]) if rec.size else rec
    return np.r_[starts, rec.size].astype(np.int64), code, values


def read_disassociation_release(coord, relations, values, k):
    """The union of the parts of a disassociation release through the coordinator's views
    (node = the node's port), as disassociated_union() takes it."""
    t = {kind: sql.Identifier(*next(r for r in relations if r.endswith("_" + kind)).split("."))
         for kind in ("cluster", "record_chunk", "item_chunk", "shared_chunk")}
    node = sql.SQL("split_part(node, ':', 2)::int4")
    code = code_expr("c", values)

    def rows(query, names):
        return dict(zip(names, fetch_ints(coord, query, len(names))))
    clusters = rows(sql.SQL("SELECT {}, cluster_id, size::int4 FROM {}").format(node, t["cluster"]),
                    ["node", "cluster_id", "size"])
    records = rows(sql.SQL(
        "SELECT n, cluster_id, chunk_id, sub, {} FROM (SELECT {} AS n, cluster_id, chunk_id,"
        " codes, (row_number() OVER ())::int4 AS sub FROM {}) s"
        " LEFT JOIN LATERAL unnest(s.codes) c ON true").format(code, node, t["record_chunk"]),
        ["node", "cluster_id", "chunk_id", "sub", "code"])
    items = rows(sql.SQL("SELECT {}, cluster_id, {} FROM {}").format(
        node, code_expr("code", values), t["item_chunk"]), ["node", "cluster_id", "code"])
    shared_clusters = rows(sql.SQL(
        "SELECT DISTINCT {}, shared_id, unnest(cluster_ids)::int4 FROM {}").format(
        node, t["shared_chunk"]), ["node", "shared_id", "cluster_id"])
    shared_codes = rows(sql.SQL(
        "SELECT n, shared_id, sub, {} FROM (SELECT {} AS n, shared_id, codes,"
        " (row_number() OVER ())::int4 AS sub FROM {}) s"
        " LEFT JOIN LATERAL unnest(s.codes) c ON true").format(code, node, t["shared_chunk"]),
        ["node", "shared_id", "sub", "code"])
    return disassociated_union(len(values), k, clusters, records, items, shared_clusters,
                               shared_codes)

class Workloads:
    """The seeded query workloads and their true answers, drawn once from the source rows
    (the same in every configuration) and reused for every release."""

    def __init__(self, n_queries, seed, reconstructions):
        self.n_queries, self.seed, self.reconstructions = n_queries, seed, reconstructions
        self.anatomy = self.diagnoses = self.condensation = None

    def describe(self):
        return (f"anatomy ARE: {self.n_queries} random COUNT queries of 1-4 conditions (one on"
                f" diagnosis; age, sex, race, zip; ranges on age and zip), seed {self.seed};"
                f" disassociation ARE: {self.n_queries} random sets of 1-3 codes grown from one"
                f" record, seed {self.seed}, mean of {self.reconstructions} reconstruction(s);"
                " condensation: means and correlations of age, surv_months and one-hot sex, race,"
                " pt, vital against the source's")

    def measure(self, connect, members, method, relations, k):
        """The utility computed on the coordinator's views of a release (its `relations`);
        `connect(member)` opens a connection to the coordinator or a node."""
        nodes = [connect(m) for m in members]
        try:
            with connect("coord") as coord:
                if method == "anatomy":
                    if self.anatomy is None:
                        source, values = read_anatomy_source(nodes)
                        queries = anatomy_workload(source, self.n_queries, self.seed)
                        self.anatomy = (values, queries, exact_counts(source, queries),
                                        len(source["age"]))
                    values, queries, actual, n = self.anatomy
                    qit, st = read_anatomy_release(coord, relations, values)
                    a = anatomy_are(actual, n, queries, qit, st)
                    return {"are": a["all"], "are_small": a["small"], "are_large": a["large"]}
                if method == "condensation":
                    if self.condensation is None:
                        self.condensation = read_condensation_source(nodes)
                    source, values = self.condensation
                    return condensation_moments(
                        source, read_condensation_release(coord, relations, values))
                if method == "disassociation":
                    if self.diagnoses is None:
                        self.diagnoses = read_diagnoses(nodes)
                    offsets, codes, values = self.diagnoses
                    union = read_disassociation_release(coord, relations, values,
                                                           k)
                    a = disassociation_are(offsets, codes, len(values), union, self.n_queries,
                                              self.seed, self.reconstructions)
                    return {"are": a["all"]}
        finally:
            for c in nodes:
                c.close()
        return {}
