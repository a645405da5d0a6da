"""Disassociation's part of the fuzz checker (003 Def. 1, Guarantee 1, Figs. 4 and 10), from what
was stored: every cluster has >= k records, every record chunk has one subrecord per record of
its cluster, every record chunk and shared chunk is k^m-anonymous (each itemset of <= m codes
of a subrecord is in >= k subrecords of the chunk), shared chunks join existing clusters, and
the released codes are the selected records' codes; an AA release ({"model": "generalization"})
is k^m-anonymous record by record. Its result row counts records (the selection chooses
(record, code) rows of the long form), not the rows selected. Imports nothing of deid."""
import itertools
from collections import Counter

from psycopg import sql

from ..stored import Finding, by_suffix, rel

RESULT_ROWS_ARE_SELECTED_ROWS = False


def check(checker, name, src, params, relations, rids, out):
    k, opts = params["k"], params.get("options") or {}
    m = opts.get("m", 2)
    if opts.get("model") == "generalization":
        table = by_suffix(relations, name, "_generalized")
        recs = [r[0] for r in checker.conn.execute(sql.SQL("SELECT codes FROM {}").format(rel(table)))]
        if len(recs) != len(rids):
            out.append(("rows", f"{name}: {len(recs)} records, the selection picks {len(rids)}"))
        _km(checker, name, "generalized", recs, k, m, out)
        return
    cl, rc, ic, sc = (by_suffix(relations, name, s) for s in ("_cluster", "_record_chunk", "_item_chunk", "_shared_chunk"))
    if None in (cl, rc, ic, sc):
        raise Finding("layout", f"{name}: tables missing from {relations}")
    sizes = dict(checker.conn.execute(sql.SQL("SELECT cluster_id, size FROM {}").format(rel(cl))).fetchall())
    if sum(sizes.values()) != len(rids):
        out.append(("rows", f"{name}: clusters hold {sum(sizes.values())} records, the selection picks {len(rids)}"))
    if sizes and min(sizes.values()) < k:
        out.append(("k", f"{name}: a cluster of {min(sizes.values())} records < k={k}"))
    member_sizes = checker._membership(name, k, rids, out)
    if member_sizes != sizes:
        out.append(("membership", f"{name}: deid.cluster_member sizes differ from {name}_cluster"))
    chunks = {}
    for cid, chid, codes in checker.conn.execute(sql.SQL("SELECT cluster_id, chunk_id, codes FROM {}").format(rel(rc))):
        chunks.setdefault((cid, chid), []).append(codes)
    for (cid, chid), subs in chunks.items():
        if len(subs) != sizes.get(cid):
            out.append(("chunk", f"{name}: record chunk {cid}.{chid} has {len(subs)} subrecords, cluster {sizes.get(cid)}"))
        _km(checker, name, f"record chunk {cid}.{chid}", subs, k, m, out)
    shared = {}
    for sid, cids, codes in checker.conn.execute(sql.SQL("SELECT shared_id, cluster_ids, codes FROM {}").format(rel(sc))):
        shared.setdefault(sid, []).append(codes)
        if not set(cids) <= set(sizes) or len(cids) < 2:
            out.append(("chunk", f"{name}: shared chunk {sid} joins clusters {cids} of {sorted(sizes)}"))
    for sid, subs in shared.items():
        _km(checker, name, f"shared chunk {sid}", subs, k, m, out)
    released = {c for subs in list(chunks.values()) + list(shared.values()) for s in subs for c in s}
    released |= {r[0] for r in checker.conn.execute(sql.SQL("SELECT code FROM {}").format(rel(ic)))}
    if opts.get("record"):          # the codes of the selected (record, code) rows
        source = checker._select(src, sql.SQL("{}::text").format(sql.Identifier(opts["item"])),
                                 params.get("selection"))
        source.discard(None)
    else:
        q = sql.SQL("SELECT DISTINCT c FROM {}, unnest({}) c WHERE {} = ANY(%s) AND c IS NOT NULL").format(
            sql.SQL(src), sql.Identifier(params["columns"][0]), sql.Identifier(checker._rid_column(src, params)))
        source = {r[0] for r in checker.conn.execute(q, [list(rids)])}
    if released != source:
        out.append(("truth", f"{name}: released codes differ from the selected records' codes "
                    f"(only released: {sorted(released - source)[:3]}, only source: {sorted(source - released)[:3]})"))


def _km(checker, name, what, subrecords, k, m, out):
    """k^m-anonymity (003 Def. 1) of one chunk: every itemset of <= m codes that a subrecord
    holds is held by >= k subrecords of the chunk."""
    checker.stats["km_chunks_checked"] += 1
    support = Counter()
    for s in subrecords:
        items = sorted(set(s or ()), key=str)
        for size in range(1, min(m, len(items)) + 1):
            support.update(itertools.combinations(items, size))
    low = [(i, c) for i, c in support.items() if c < k]
    if low:
        out.append(("km", f"{name}: {what}: itemset {low[0][0]} in {low[0][1]} subrecords < k={k} (m={m})"))
