"""Condensation's part of the fuzz checker (004 Def. 1, Alg. 2 step 2.d.iii), from what was
stored: every cluster of deid.cluster_member has >= k rows, the clusters partition the selected
rows, the release has one row per selected row, numbers and dates stay in the selected rows'
range; a released row equal to a source row that fewer than k source rows share is reported,
unless k released rows repeat it. Imports nothing of deid."""
import re

from psycopg import sql

from ..stored import by_suffix, rel


def check(checker, name, src, params, relations, rids, out):
    k = params["k"]
    table = by_suffix(relations, name, "")
    n = checker._count(table)
    if n != len(rids):
        out.append(("rows", f"{name}: {n} rows released, the selection picks {len(rids)}"))
    checker._membership(name, k, rids, out)
    cols = params["columns"]
    rid = checker._rid_column(src, params)
    _ranges(checker, name, src, table, cols, rid, rids, out)
    fmt = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols)
    rare = {tuple(r[:-1]) for r in checker.conn.execute(
        sql.SQL("SELECT {}, count(*) FROM {} WHERE {} = ANY(%s) GROUP BY {} HAVING count(*) < %s").format(
            fmt, sql.SQL(src), sql.Identifier(rid), fmt), [list(rids), k])}
    # A released row that >= k released rows repeat names no fewer than k rows, whatever
    # the source holds (recoded survival times release every row of a bin as the bin's
    # value, which may be a value that fewer than k source rows hold); one repeated fewer
    # than k times is a copy of that rare source row.
    copies = sum(int(r[-1]) for r in checker.conn.execute(
        sql.SQL("SELECT {}, count(*) FROM {} GROUP BY {} HAVING count(*) < %s").format(
            fmt, rel(table), fmt), [k])
                 if tuple(r[:-1]) in rare)
    if copies:
        out.append(("condensation_copies_rare_row", f"{name}: {copies} released rows equal a source "
                    f"row shared by fewer than k={k} rows"))


def _ranges(checker, name, src, table, cols, rid, rids, out):
    """004 Alg. 2 step 2.d.iii: synthetic numbers and dates stay in the selected rows' range."""
    kinds = dict(checker.conn.execute(
        "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attnum > 0", [src]).fetchall())
    for c in cols:
        if not re.match(r"(integer|bigint|smallint|numeric|real|double|date)", kinds.get(c, "")):
            continue
        lo, hi = checker.conn.execute(sql.SQL("SELECT min({c}), max({c}) FROM {s} WHERE {r} = ANY(%s)").format(
            c=sql.Identifier(c), s=sql.SQL(src), r=sql.Identifier(rid)), [list(rids)]).fetchone()
        rlo, rhi = checker.conn.execute(sql.SQL("SELECT min({c}), max({c}) FROM {t}").format(
            c=sql.Identifier(c), t=rel(table))).fetchone()
        if isinstance(rlo, str) != isinstance(lo, str):
            # a column with a hierarchy whose rare values were generalized: released as its
            # labels (text), checked by the rare-value rule, not by range
            checker.stats["condensation_generalized_columns"] += 1
            continue
        checker.stats["condensation_ranges_checked"] += 1
        if rlo is not None and lo is not None and (rlo < lo or rhi > hi):
            out.append(("range", f"{name}: {c} released in [{rlo}, {rhi}], the selection holds [{lo}, {hi}]"))
