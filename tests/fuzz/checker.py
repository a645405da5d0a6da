"""The fuzzer's independent checker (with check_sets.py, check_refusal.py and stored.py). It
imports nothing of deid (python_udfs/deid): it reads only what a request stored -- the release's row in deid.release (method, source, parameters),
its tables (schema deid_release), the catalog rows deid keeps for it (deid.rid_set,
deid.cluster_member) -- and, as an oracle, the source rows the selection picks (read by a role
with SELECT, in a read-only transaction). From those it checks the privacy model of each
method, as the papers state it:

- anatomy (001 Def. 6/7, Fig. 3): every QIT group has >= K rows; every count table adds up to
  its group; the RID sets add up to the counts, hold the source's values, and the QIT rows of a
  group are the source's QI values of its RIDs; no set of fewer than L sensitive values
  (at most L_i of attribute i) deletes every row of a group (checked exactly on small groups,
  else the necessary per-attribute condition on the count tables);
- generalization (002 sec. 2, 4.5): the stored release grouped by each source system's
  projected quasi-identifiers has classes of >= k rows, and every released column is the
  selected source column mapped to one level of its hierarchy (Tables 6-7; raw for the others);
  a policy release that is below k over its quasi-identifiers jointly is reported (pending);
- condensation (004) and disassociation (003): check_sets.py;
- every method: the release holds exactly the rows the selection picks from the source.

Refusals: check_refusal.py. Every finding is (kind, text); the runner tallies them.
"""
import itertools
import re
import struct
from collections import Counter
from decimal import Decimal

from psycopg import sql

from . import checkers
from .check_refusal import RefusalChecks
from .check_sets import SetChecks
from .stored import Finding, by_suffix, rel

EXACT_L_COMBINATIONS = 20000      # beyond this many deletion sets a group gets the necessary check
# Findings of checks whose protection is not yet built: reported, not failures.
PENDING = set()      # findings that belong to open work (none: each is a failure)


class Checker(SetChecks, RefusalChecks):
    """conn: a superuser connection (the catalog and the release tables); oracle: a connection
    of a role with SELECT on the sources (the selection is run as that role, read-only)."""

    def __init__(self, conn, oracle, stats=None):
        self.conn, self.oracle = conn, oracle
        self.stats = stats if stats is not None else Counter()     # what was checked, by kind

    # ---------------------------------------------------------------- successes
    def check_release(self, release_id, result_rows):
        """Findings (list of (kind, text)) for a committed release."""
        row = self.conn.execute(
            "SELECT name, method, source::oid, source::text, parameters, relations, status"
            " FROM deid.release WHERE release_id = %s", [release_id]).fetchone()
        if row is None:
            return [("no_log_row", f"release {release_id} has no deid.release row")]
        name, method, src_oid, src, params, relations, status = row
        if status != "committed":
            return [("status", f"release {name} is {status}")]
        out = []
        self.stats[f"{method}_releases_checked"] += 1
        try:
            rids = self._oracle(src, src_oid, params, method)
            check = getattr(self, "_" + method, None) or checkers.check_for(self, method)
            check(name, src, params, relations, rids, out)
            if result_rows is not None and checkers.result_rows_are_selected_rows(method) \
                    and result_rows != len(rids):
                out.append(("rows", f"{name}: result says {result_rows} rows, selection has {len(rids)}"))
        except Finding as f:
            out.append(tuple(f.args))
        return out

    def _oracle(self, src, src_oid, params, method):
        """The record ids the selection picks (row ids; records for a long table)."""
        opts = params.get("options") or {}
        rid = opts.get("record") or opts.get("row_id") or self._primary_key(src_oid)
        return self._select(src, sql.Identifier(rid), params.get("selection"))

    def _rid_column(self, src, params):
        return (params.get("options") or {}).get("row_id") or self._primary_key(
            self.conn.execute("SELECT %s::regclass::oid", [src]).fetchone()[0])

    def _select(self, src, what, where):
        """The distinct values of `what` over the source rows the selection picks, read by the
        oracle role in a read-only transaction, with the selection's text as written."""
        q = sql.SQL("SELECT DISTINCT {} FROM {}").format(what, sql.SQL(src))
        if where:
            q = q + sql.SQL(" WHERE (") + sql.SQL(where) + sql.SQL(")")
        try:
            with self.oracle.transaction():
                self.oracle.execute("SET TRANSACTION READ ONLY")
                self.oracle.execute("SET LOCAL statement_timeout = '5s'")
                return {r[0] for r in self.oracle.execute(q)}
        except Exception as e:
            raise Finding("oracle_error", f"the accepted selection {where!r} fails in PostgreSQL: {e}")

    def _primary_key(self, oid):
        row = self.conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = i.indkey[0] WHERE i.indrelid = %s AND i.indisprimary"
            " AND i.indnatts = 1", [oid]).fetchone()
        if not row:
            raise Finding("oracle_error", "the source has no single-column primary key")
        return row[0]

    def _groups(self, table, cols):
        q = sql.SQL("SELECT count(*) FROM {} GROUP BY {}").format(
            rel(table), sql.SQL(", ").join(sql.Identifier(c) for c in cols))
        return [r[0] for r in self.conn.execute(q)]

    def _count(self, table):
        return self.conn.execute(sql.SQL("SELECT count(*) FROM {}").format(rel(table))).fetchone()[0]

    # ---------------------------------------------------------------- generalization (002)
    def _generalization(self, name, src, params, relations, rids, out):
        k, cols, roles = params["k"], params["columns"], params.get("roles") or {}
        table = by_suffix(relations, name, "")
        if table is None:
            raise Finding("layout", f"{name}: no table {name} in {relations}")
        n = self._count(table)
        if n != len(rids):
            out.append(("rows", f"{name}: {n} rows released, the selection picks {len(rids)}"))
        sources = {}
        for c in cols:
            r = roles.get(c) or {}
            if r.get("role") == "quasi_identifier":
                sources.setdefault(r.get("source") or "\0" + src, []).append(c)
        for s, qis in sources.items():
            small = [c for c in self._groups(table, qis) if c < k]
            if small:
                out.append(("k_per_source", f"{name}: source {s!r} over {qis} has a class of {min(small)} < k={k}"))
        self.stats["generalization_classes_checked"] += sum(len(self._groups(table, q)) for q in sources.values())
        self._generalization_truth(name, src, params, table, rids, out)
        qis = [c for v in sources.values() for c in v]
        grant = params.get("authorized_via") or {}
        if len(sources) > 1 and grant.get("via") not in (None, "select") and not grant.get("per_source_k"):
            # the policy's minimum holds over all quasi-identifiers jointly (not the request's k)
            joint_k = grant.get("min_k") or k
            small = [c for c in self._groups(table, qis) if c < joint_k]
            if small:
                out.append(("policy_joint_k", f"{name}: a policy release is {min(small)}-anonymous over {qis}"
                            f" jointly, the policy's min_k={joint_k}"))

    def _generalization_truth(self, name, src, params, table, rids, out):
        """Every released column is the source column over the selection, as a multiset: raw for
        columns that are not quasi-identifiers, mapped to one level of the column's hierarchy
        (002: whole columns are generalized) for quasi-identifiers."""
        roles = params.get("roles") or {}
        bound = dict(self.conn.execute("SELECT column_name::text, hierarchy FROM deid.column_role"
                                       " WHERE relation = %s::regclass", [src]).fetchall())
        vals = self._source_values(src, params, params["columns"], rids)
        for c in params["columns"]:
            released = Counter(_canon(r[0]) for r in self.conn.execute(
                sql.SQL("SELECT {}::text FROM {}").format(sql.Identifier(c), rel(table))))
            source = Counter(_canon(v[c]) for v in vals.values())
            if (roles.get(c) or {}).get("role") != "quasi_identifier" or not bound.get(c):
                ok = released == source
            else:
                ok = any(released == image for image in self._images(bound[c], source))
            self.stats["generalization_columns_checked"] += 1
            if not ok:
                out.append(("truth", f"{name}: column {c} is not the selected source column "
                            f"at any level of its hierarchy"))

    def _images(self, hierarchy, source):
        """The source multiset mapped to each level of the hierarchy (002 Tables 6-7), a NULL
        (options.nulls 'value') as SQL NULL or as the label 'NULL' below the top, '*' at it."""
        for image in self._levels(hierarchy, source):
            yield image
            yield _mapped(image, {v: "NULL" if v == NULL else v for v in image})

    def _levels(self, hierarchy, source):
        kind, levels, low, widths = self.conn.execute(
            "SELECT kind, levels, low, widths FROM deid.hierarchy WHERE name = %s", [hierarchy]).fetchone()
        yield source
        if kind == "member":
            parent = {(lv, v): p for lv, v, p in self.conn.execute(
                "SELECT level, value, parent FROM deid.hierarchy_member WHERE hierarchy = %s", [hierarchy])}
            cur = dict((v, v) for v in source)
            for lv in range(levels - 1):
                top = lv == levels - 2
                cur = {v: (parent.get((lv, a)) if a != NULL else ("*" if top else NULL)) for v, a in cur.items()}
                yield _mapped(source, cur)
            return
        for w in widths:
            yield _mapped(source, {v: NULL if v == NULL else _band(Decimal(v), low, w) for v in source})
        yield _mapped(source, {v: "*" for v in source})

    # ---------------------------------------------------------------- anatomy (001)
    def _anatomy(self, name, src, params, relations, rids, out):
        k, l, cols, roles = params["k"], params.get("l"), params["columns"], params.get("roles") or {}
        opts = params.get("options") or {}
        qis = [c for c in cols if (roles.get(c) or {}).get("role") == "quasi_identifier"]
        sas = [c for c in cols if (roles.get(c) or {}).get("role") == "sensitive"]
        if opts.get("output") == "generalized":
            table = by_suffix(relations, name, "")
            n = self._count(table)
            if n != len(rids):
                out.append(("rows", f"{name}: {n} rows released, the selection picks {len(rids)}"))
            small = [c for c in self._groups(table, qis) if c < k]
            if small:
                out.append(("k", f"{name}: a generalized class of {min(small)} rows < K={k}"))
            return
        qit = by_suffix(relations, name, "_qit")
        if qit is None:
            raise Finding("layout", f"{name}: no QIT in {relations}")
        sizes = dict(self.conn.execute(sql.SQL("SELECT group_id, count(*) FROM {} GROUP BY 1").format(rel(qit))).fetchall())
        if sum(sizes.values()) != len(rids):
            out.append(("rows", f"{name}: QIT has {sum(sizes.values())} rows, the selection picks {len(rids)}"))
        self.stats["anatomy_groups_checked"] += len(sizes)
        if sizes and min(sizes.values()) < k:
            out.append(("k", f"{name}: a QIT group of {min(sizes.values())} rows < K={k}"))
        counts = {}
        for a in sas:
            t = by_suffix(relations, name, "_" + a)
            if t is None:
                out.append(("layout", f"{name}: no count table for {a}"))
                continue
            rows = self.conn.execute(sql.SQL("SELECT group_id, {}::text, count FROM {}").format(
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
            self._l_necessary(name, counts, sizes, l, limits, out)
            self._rid_sets(name, src, params, qit, qis, sas, sizes, counts, l, limits, rids, out)

    def _l_necessary(self, name, counts, sizes, l, limits, out):
        """An attacker may delete every value of attribute a when it has at most L_a of them: then
        a group needs at least L distinct values of a (001 Def. 7)."""
        for a, per in counts.items():
            for g in sizes:
                d = len(per.get(g, {}))
                if d <= limits[a] and d < l:
                    out.append(("l", f"{name}: group {g} has {d} distinct {a} (deletable, L_{a}="
                                f"{limits[a]}) < L={l}"))

    def _rid_sets(self, name, src, params, qit, qis, sas, sizes, counts, l, limits, rids, out):
        """001 Theorem 3's RID sets as stored: they add up to the count tables, hold the source's
        values, and no admissible set of < L values covers a group."""
        rel_id = self.conn.execute("SELECT release_id FROM deid.release WHERE name = %s AND status = 'committed'",
                                   [name]).fetchone()[0]
        sets = {}          # group -> {(attribute, value): set(rids)}
        for attr, gids, values, cnts, packed in self.conn.execute(
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
        src_vals = self._source_values(src, params, qis + sas, rids)
        qit_rows = {}
        for row in self.conn.execute(sql.SQL("SELECT group_id, {} FROM {}").format(
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
            self._exact_l(name, g, entries, members, l, limits, out)

    def _exact_l(self, name, g, entries, members, l, limits, out):
        keys = list(entries)
        for size in range(1, l):
            combos = sum(1 for _ in itertools.islice(itertools.combinations(keys, size), EXACT_L_COMBINATIONS + 1))
            if combos > EXACT_L_COMBINATIONS:
                self.stats["anatomy_l_groups_too_large_for_exact"] += 1
                return
            for combo in itertools.combinations(keys, size):
                per = Counter(a for a, _ in combo)
                if any(per[a] > limits[a] for a in per):
                    continue
                if set().union(*(entries[c] for c in combo)) >= members:
                    out.append(("l", f"{name}: group {g} is emptied by deleting {size} values < L={l}"))
                    return
        self.stats["anatomy_l_groups_checked_exactly"] += 1

    def _source_values(self, src, params, cols, rids):
        rid = self._rid_column(src, params)
        q = sql.SQL("SELECT {}, {} FROM {} WHERE {} = ANY(%s)").format(
            sql.Identifier(rid), sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols),
            sql.SQL(src), sql.Identifier(rid))
        return {r[0]: dict(zip(cols, r[1:])) for r in self.conn.execute(q, [list(rids)])}

NULL = "\0NULL"


def _canon(v):
    """A released or source value as compared: numbers by value (a numeric(6,2) 15.00 is
    released as 15.0), SQL NULL as the NULL token."""
    if v is None:
        return NULL
    try:
        return _num(Decimal(v)) if re.fullmatch(r"-?\d+(\.\d+)?", v) else v
    except ArithmeticError:
        return v


def _band(v, low, width):
    start = low + ((v - low) // width) * width
    return f"[{_num(start)},{_num(start + width)})"


def _num(d):
    d = d.normalize()
    return format(d, "f") if d == d.to_integral() else str(d)


def _mapped(source, mapping):
    out = Counter()
    for v, n in source.items():
        out[mapping[v]] += n
    return out
