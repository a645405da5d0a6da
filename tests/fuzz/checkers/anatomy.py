"""Anatomy's part of the fuzz checker (001 Def. 6/7, Fig. 3), from what was stored: every QIT
group has >= K rows; every count table adds up to its group; the RID sets add up to the counts,
hold the source's values, and the QIT rows of a group are the source's QI values of its RIDs; no
set of fewer than L sensitive values (at most L_i of attribute i) deletes every row of a group
(checked exactly on small groups, else the necessary per-attribute condition on the count
tables). A generalized output is checked for classes of >= K rows. Imports nothing of deid."""
import itertools
import struct
from collections import Counter

from psycopg import sql

from ..stored import Finding, by_suffix, rel

EXACT_L_COMBINATIONS = 20000      # beyond this many deletion sets a group gets the necessary check


def check(checker, name, src, params, relations, rids, out):
    k, l, cols, roles = params["k"], params.get("l"), params["columns"], params.get("roles") or {}
    opts = params.get("options") or {}
    qis = [c for c in cols if (roles.get(c) or {}).get("role") == "quasi_identifier"]
    sas = [c for c in cols if (roles.get(c) or {}).get("role") == "sensitive"]
    if opts.get("output") == "generalized":
        table = by_suffix(relations, name, "")
        n = checker._count(table)
        if n != len(rids):
            out.append(("rows", f"{name}: {n} rows released, the selection picks {len(rids)}"))
        small = [c for c in checker._groups(table, qis) if c < k]
        if small:
            out.append(("k", f"{name}: a generalized class of {min(small)} rows < K={k}"))
        return
    qit = by_suffix(relations, name, "_qit")
    if qit is None:
        raise Finding("layout", f"{name}: no QIT in {relations}")
    sizes = dict(checker.conn.execute(sql.SQL("SELECT group_id, count(*) FROM {} GROUP BY 1").format(rel(qit))).fetchall())
    if sum(sizes.values()) != len(rids):
        out.append(("rows", f"{name}: QIT has {sum(sizes.values())} rows, the selection picks {len(rids)}"))
    checker.stats["anatomy_groups_checked"] += len(sizes)
    if sizes and min(sizes.values()) < k:
        out.append(("k", f"{name}: a QIT group of {min(sizes.values())} rows < K={k}"))
    counts = {}
    for a in sas:
        t = by_suffix(relations, name, "_" + a)
        if t is None:
            out.append(("layout", f"{name}: no count table for {a}"))
            continue
        rows = checker.conn.execute(sql.SQL("SELECT group_id, {}::text, count FROM {}").format(
            sql.Identifier(a), rel(t))).fetchall()
        per = {}
        for g, v, c in rows:
            if c < 1 or v in per.setdefault(g, {}):
                out.append(("count_table", f"{name}.{a}: group {g} value repeated or count {c}"))
            per[g][v] = c
        for g, size in sizes.items():
            if sum(per.get(g, {}).values()) != size:
                out.append(("count_table", f"{name}.{a}: group {g} counts add up to "
                            f"{sum(per.get(g, {}).values())}, the QIT group has {size} rows"))
        if set(per) - set(sizes):
            out.append(("count_table", f"{name}.{a}: groups not in the QIT"))
        counts[a] = per
    if l and opts.get("model", "kl") == "kl" and sas:
        limits = {a: min(l, (opts.get("column_l") or {}).get(a, l)) for a in sas}
        _l_necessary(checker, name, counts, sizes, l, limits, out)
        _rid_sets(checker, name, src, params, qit, qis, sas, sizes, counts, l, limits, rids, out)


def _l_necessary(checker, name, counts, sizes, l, limits, out):
    """An attacker may delete every value of attribute a when it has at most L_a of them: then
    a group needs at least L distinct values of a (001 Def. 7)."""
    for a, per in counts.items():
        for g in sizes:
            d = len(per.get(g, {}))
            if d <= limits[a] and d < l:
                out.append(("l", f"{name}: group {g} has {d} distinct {a} (deletable, L_{a}="
                            f"{limits[a]}) < L={l}"))


def _rid_sets(checker, name, src, params, qit, qis, sas, sizes, counts, l, limits, rids, out):
    """001 Theorem 3's RID sets as stored: they add up to the count tables, hold the source's
    values, and no admissible set of < L values covers a group."""
    rel_id = checker.conn.execute("SELECT release_id FROM deid.release WHERE name = %s AND status = 'committed'",
                               [name]).fetchone()[0]
    sets = {}          # group -> {(attribute, value): set(rids)}
    for attr, gids, values, cnts, packed in checker.conn.execute(
            "SELECT attribute, group_ids, value_list, rid_counts, rids FROM deid.rid_set"
            " WHERE release_id = %s ORDER BY attribute, chunk", [rel_id]):
        n = len(values)
        gids = struct.unpack(f">{n}i", gids)
        cnts = struct.unpack(f">{n}i", cnts)
        flat = struct.unpack(f">{len(packed) // 8}q", packed)
        pos = 0
        for g, v, c in zip(gids, values, cnts):
            sets.setdefault(g, {})[(attr, v)] = set(flat[pos:pos + c])
            pos += c
    src_vals = checker._source_values(src, params, qis + sas, rids)
    qit_rows = {}
    for row in checker.conn.execute(sql.SQL("SELECT group_id, {} FROM {}").format(
            sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in qis), rel(qit))):
        qit_rows.setdefault(row[0], Counter())[tuple(row[1:])] += 1
    for g, size in sizes.items():
        entries = sets.get(g, {})
        for a in sas:
            mine = {v: s for (b, v), s in entries.items() if b == a}
            union = set().union(*mine.values()) if mine else set()
            if len(union) != size or sum(len(s) for s in mine.values()) != size:
                out.append(("rid_set", f"{name}: group {g} RID sets of {a} hold {len(union)} rows, QIT {size}"))
                return
            if {v: len(s) for v, s in mine.items()} != counts.get(a, {}).get(g):
                out.append(("rid_set", f"{name}: group {g} count table of {a} differs from its RID sets"))
            for v, s in mine.items():
                wrong = [r for r in s if r not in src_vals or src_vals[r][a] != v]
                if wrong:
                    out.append(("truth", f"{name}: group {g} {a}={v!r} names RIDs {wrong[:3]} with other values"))
        members = set().union(*entries.values()) if entries else set()
        if members - set(rids):
            out.append(("truth", f"{name}: group {g} holds RIDs outside the selection"))
            continue
        source_qis = Counter(tuple(src_vals[r][c] for c in qis) for r in members)
        if source_qis != qit_rows.get(g):
            out.append(("truth", f"{name}: QIT group {g} differs from its rows' source values"))
        _exact_l(checker, name, g, entries, members, l, limits, out)


def _exact_l(checker, name, g, entries, members, l, limits, out):
    keys = list(entries)
    for size in range(1, l):
        combos = sum(1 for _ in itertools.islice(itertools.combinations(keys, size), EXACT_L_COMBINATIONS + 1))
        if combos > EXACT_L_COMBINATIONS:
            checker.stats["anatomy_l_groups_too_large_for_exact"] += 1
            return
        for combo in itertools.combinations(keys, size):
            per = Counter(a for a, _ in combo)
            if any(per[a] > limits[a] for a in per):
                continue
            if set().union(*(entries[c] for c in combo)) >= members:
                out.append(("l", f"{name}: group {g} is emptied by deleting {size} values < L={l}"))
                return
    checker.stats["anatomy_l_groups_checked_exactly"] += 1
