"""The fuzzer's checks of condensation (004) and disassociation (003) releases, from what was
stored: a mixin of tests/fuzz/checker.Checker (which provides conn, stats, _count,
_rid_column, _select). Imports nothing of deid.

- condensation (004 Def. 1, Alg. 2 step 2.d.iii): every cluster of deid.cluster_member has >= k
  rows, the clusters partition the selected rows, the release has one row per selected row,
  numbers and dates stay in the selected rows' range; a released row equal to a source row
  that fewer than k source rows share is reported, unless k released rows repeat it;
- disassociation (003 Def. 1, Guarantee 1, Figs. 4 and 10): every cluster has >= k records,
  every record chunk has one subrecord per record of its cluster, every record chunk and
  shared chunk is k^m-anonymous (each itemset of <= m codes of a subrecord is in >= k
  subrecords of the chunk), shared chunks join existing clusters, and the released codes are
  the selected records' codes; an AA release ({"model": "generalization"}) is k^m-anonymous
  record by record.
"""
import itertools
import re
from collections import Counter

from psycopg import sql

from .stored import Finding, by_suffix, rel


class SetChecks:
    def _membership(self, name, k, rids, out):
        rel_id = self.conn.execute("SELECT release_id FROM deid.release WHERE name = %s AND status = 'committed'",
                                   [name]).fetchone()[0]
        seen, sizes = [], {}
        for cid, members in self.conn.execute(
                "SELECT cluster_id, rids FROM deid.cluster_member WHERE release_id = %s", [rel_id]):
            sizes[cid] = len(members)
            seen.extend(members)
        self.stats["clusters_checked"] += len(sizes)
        if sizes and min(sizes.values()) < k:
            out.append(("k", f"{name}: a cluster of {min(sizes.values())} < k={k}"))
        if len(seen) != len(set(seen)) or set(seen) != set(rids):
            out.append(("membership", f"{name}: the clusters hold {len(set(seen))} distinct of {len(seen)} ids,"
                        f" the selection picks {len(rids)}"))
        return sizes

    def _condensation(self, name, src, params, relations, rids, out):
        k = params["k"]
        table = by_suffix(relations, name, "")
        n = self._count(table)
        if n != len(rids):
            out.append(("rows", f"{name}: {n} rows released, the selection picks {len(rids)}"))
        self._membership(name, k, rids, out)
        cols = params["columns"]
        rid = self._rid_column(src, params)
        self._ranges(name, src, table, cols, rid, rids, out)
        fmt = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols)
        rare = {tuple(r[:-1]) for r in self.conn.execute(
            sql.SQL("SELECT {}, count(*) FROM {} WHERE {} = ANY(%s) GROUP BY {} HAVING count(*) < %s").format(
                fmt, sql.SQL(src), sql.Identifier(rid), fmt), [list(rids), k])}
        # A released row that >= k released rows repeat names no fewer than k rows, whatever
        # the source holds (recoded survival times release every row of a bin as the bin's
        # value, which may be a value that fewer than k source rows hold); one repeated fewer
        # than k times is a copy of that rare source row.
        copies = sum(int(r[-1]) for r in self.conn.execute(
            sql.SQL("SELECT {}, count(*) FROM {} GROUP BY {} HAVING count(*) < %s").format(
                fmt, rel(table), fmt), [k])
                     if tuple(r[:-1]) in rare)
        if copies:
            out.append(("condensation_copies_rare_row", f"{name}: {copies} released rows equal a source "
                        f"row shared by fewer than k={k} rows"))

    def _ranges(self, name, src, table, cols, rid, rids, out):
        """004 Alg. 2 step 2.d.iii: synthetic numbers and dates stay in the selected rows' range."""
        kinds = dict(self.conn.execute(
            "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = %s::regclass AND attnum > 0", [src]).fetchall())
        for c in cols:
            if not re.match(r"(integer|bigint|smallint|numeric|real|double|date)", kinds.get(c, "")):
                continue
            lo, hi = self.conn.execute(sql.SQL("SELECT min({c}), max({c}) FROM {s} WHERE {r} = ANY(%s)").format(
                c=sql.Identifier(c), s=sql.SQL(src), r=sql.Identifier(rid)), [list(rids)]).fetchone()
            rlo, rhi = self.conn.execute(sql.SQL("SELECT min({c}), max({c}) FROM {t}").format(
                c=sql.Identifier(c), t=rel(table))).fetchone()
            if isinstance(rlo, str) != isinstance(lo, str):
                # a column with a hierarchy whose rare values were generalized: released as its
                # labels (text), checked by the rare-value rule, not by range
                self.stats["condensation_generalized_columns"] += 1
                continue
            self.stats["condensation_ranges_checked"] += 1
            if rlo is not None and lo is not None and (rlo < lo or rhi > hi):
                out.append(("range", f"{name}: {c} released in [{rlo}, {rhi}], the selection holds [{lo}, {hi}]"))

    # ---------------------------------------------------------------- disassociation (003)
    def _disassociation(self, name, src, params, relations, rids, out):
        k, opts = params["k"], params.get("options") or {}
        m = opts.get("m", 2)
        if opts.get("model") == "generalization":
            table = by_suffix(relations, name, "_generalized")
            recs = [r[0] for r in self.conn.execute(sql.SQL("SELECT codes FROM {}").format(rel(table)))]
            if len(recs) != len(rids):
                out.append(("rows", f"{name}: {len(recs)} records, the selection picks {len(rids)}"))
            self._km(name, "generalized", recs, k, m, out)
            return
        cl, rc, ic, sc = (by_suffix(relations, name, s) for s in ("_cluster", "_record_chunk", "_item_chunk", "_shared_chunk"))
        if None in (cl, rc, ic, sc):
            raise Finding("layout", f"{name}: tables missing from {relations}")
        sizes = dict(self.conn.execute(sql.SQL("SELECT cluster_id, size FROM {}").format(rel(cl))).fetchall())
        if sum(sizes.values()) != len(rids):
            out.append(("rows", f"{name}: clusters hold {sum(sizes.values())} records, the selection picks {len(rids)}"))
        if sizes and min(sizes.values()) < k:
            out.append(("k", f"{name}: a cluster of {min(sizes.values())} records < k={k}"))
        member_sizes = self._membership(name, k, rids, out)
        if member_sizes != sizes:
            out.append(("membership", f"{name}: deid.cluster_member sizes differ from {name}_cluster"))
        chunks = {}
        for cid, chid, codes in self.conn.execute(sql.SQL("SELECT cluster_id, chunk_id, codes FROM {}").format(rel(rc))):
            chunks.setdefault((cid, chid), []).append(codes)
        for (cid, chid), subs in chunks.items():
            if len(subs) != sizes.get(cid):
                out.append(("chunk", f"{name}: record chunk {cid}.{chid} has {len(subs)} subrecords, cluster {sizes.get(cid)}"))
            self._km(name, f"record chunk {cid}.{chid}", subs, k, m, out)
        shared = {}
        for sid, cids, codes in self.conn.execute(sql.SQL("SELECT shared_id, cluster_ids, codes FROM {}").format(rel(sc))):
            shared.setdefault(sid, []).append(codes)
            if not set(cids) <= set(sizes) or len(cids) < 2:
                out.append(("chunk", f"{name}: shared chunk {sid} joins clusters {cids} of {sorted(sizes)}"))
        for sid, subs in shared.items():
            self._km(name, f"shared chunk {sid}", subs, k, m, out)
        released = {c for subs in list(chunks.values()) + list(shared.values()) for s in subs for c in s}
        released |= {r[0] for r in self.conn.execute(sql.SQL("SELECT code FROM {}").format(rel(ic)))}
        if opts.get("record"):          # the codes of the selected (record, code) rows
            source = self._select(src, sql.SQL("{}::text").format(sql.Identifier(opts["item"])),
                                  params.get("selection"))
            source.discard(None)
        else:
            q = sql.SQL("SELECT DISTINCT c FROM {}, unnest({}) c WHERE {} = ANY(%s) AND c IS NOT NULL").format(
                sql.SQL(src), sql.Identifier(params["columns"][0]), sql.Identifier(self._rid_column(src, params)))
            source = {r[0] for r in self.conn.execute(q, [list(rids)])}
        if released != source:
            out.append(("truth", f"{name}: released codes differ from the selected records' codes "
                        f"(only released: {sorted(released - source)[:3]}, only source: {sorted(source - released)[:3]})"))

    def _km(self, name, what, subrecords, k, m, out):
        """k^m-anonymity (003 Def. 1) of one chunk: every itemset of <= m codes that a subrecord
        holds is held by >= k subrecords of the chunk."""
        self.stats["km_chunks_checked"] += 1
        support = Counter()
        for s in subrecords:
            items = sorted(set(s or ()), key=str)
            for size in range(1, min(m, len(items)) + 1):
                support.update(itertools.combinations(items, size))
        low = [(i, c) for i, c in support.items() if c < k]
        if low:
            out.append(("km", f"{name}: {what}: itemset {low[0][0]} in {low[0][1]} subrecords < k={k} (m={m})"))

    # ---------------------------------------------------------------- refusals
