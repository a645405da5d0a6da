"""method => 'anatomy': (K,L)-anonymity over several sensitive attributes,
released as anatomy (paper 001, Def. 3 / Fig. 3), or as a generalized table.

Flow: snapshot -> methods.anatomy.anatomize (001 Figs. 5-8) -> staging table
-> QIT + one count table per sensitive attribute (set-based SQL) -> RID sets
and classes into the catalog -> independent verification (verify.py) of the
STORED RID sets and tables.
"""
import json
import time

import numpy as np

from . import catalog, copybin, datapath, method_support as ms, metrics, verify
from .errors import DeidError, INVALID_PARAMETER_VALUE
from .options import Option
from .release import Outcome, STORE_SCHEMA
from .sqltext import qualified, quote_ident

OPTIONS = (
    Option("column_l", "map_int", "column-wise limits L_i per sensitive attribute (001 Def. 7); "
           "needs l.", low=1, high=2 ** 31 - 1, example='{"column_l": {"treatment": 2}}'),
    Option("model", "choice", "'kl' (001 Def. 6) or 'exponential_l' (the baseline of 001).",
           choices=("kl", "exponential_l")),
    Option("output", "choice", "'anatomy' (QIT + one count table per sensitive attribute) or "
           "'generalized' (one table, QIs as group ranges).", choices=("anatomy", "generalized")),
)


def validate(k, l, opts):
    if k < 2:
        raise DeidError(INVALID_PARAMETER_VALUE, f"K must be at least 2 for anatomy, got {k}",
                        hint="K is the smallest group size; K = 1 would release every row alone.")
    if l is not None and l < 1:
        raise DeidError(INVALID_PARAMETER_VALUE, f"L must be at least 1, got {l}",
                        hint="L is the number of sensitive values an attacker must rule out.")
    if opts.get("model", "kl") not in ("kl", "exponential_l"):
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown model {opts['model']!r}",
                        hint="options.model is 'kl' (001 Def. 6) or 'exponential_l' (the baseline).")
    if opts.get("output", "anatomy") not in ("anatomy", "generalized"):
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown output {opts['output']!r}",
                        hint="options.output is 'anatomy' or 'generalized'.")
    cl = opts.get("column_l")
    if cl is not None:
        if not isinstance(cl, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in cl.values()):
            raise DeidError(INVALID_PARAMETER_VALUE, "options.column_l must map attributes to "
                            "integers >= 1", hint='e.g. {"column_l": {"treatment": 2}}')
        if l is None:
            raise DeidError(INVALID_PARAMETER_VALUE, "options.column_l needs l",
                            hint="Column-wise limits (001 Def. 7) refine an L requirement.")


def _columns(req):
    return (ms.columns_with_role(req, "quasi_identifier"), ms.columns_with_role(req, "sensitive"),
            ms.columns_with_role(req, "insensitive"))


def plan(db, req, rid):
    """Check the request's columns; what to read (by deid_owner, before anything is read)."""
    qis, sas, others = _columns(req)
    if not qis:
        raise DeidError(INVALID_PARAMETER_VALUE, "anatomy needs at least one quasi-identifier",
                        hint="Project a column whose role is quasi_identifier.")
    if req.l is not None and not sas:
        raise DeidError(INVALID_PARAMETER_VALUE, "L needs at least one sensitive attribute",
                        hint="Project a column whose role is sensitive, or leave l NULL.")
    column_l = req.options.get("column_l") or {}
    for a in column_l:
        if a not in sas:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"options.column_l names {a!r}, which is not a projected sensitive attribute",
                            hint="Sensitive attributes: " + ", ".join(sas) + ".")
    names = qis + sas + others
    reserved = {"group_id"} | ({"count"} & set(sas))
    clash = sorted(reserved & set(names))
    if clash:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f'column "{clash[0]}" clashes with a column of the anatomy tables',
                        hint="Release it under another name: a view over the source that renames it.")
    return ms.read_spec(req, names, rid)


def run(db, req, frame):
    """001 Figs. 5-8 on the snapshot, then write, then verify what was stored."""
    from .methods import anatomy
    t_read, sql0 = time.perf_counter(), db.sql_seconds
    qis, sas, others = _columns(req)
    column_l = req.options.get("column_l") or {}
    ms.refuse_null_qis(frame, qis, req.options)
    sa_dicts = [datapath.value_dictionary(frame.columns[s]) for s in sas]
    qi = ms.qi_matrix(db, req, frame, qis)
    sa = (np.stack([codes for codes, _ in sa_dicts], axis=1) if sas
          else np.zeros((frame.n, 0), np.int64))
    result = anatomy.anatomize(qi, sa, req.k, req.l,
                               column_l={sas.index(a): v for a, v in column_l.items()} or None,
                               model=req.options.get("model", "kl"))
    t_method = time.perf_counter()
    group = result.group_id.astype(np.int64)
    order = np.argsort(group, kind="stable")         # rows by group, then row id (frame is by rid)
    labels = group_labels(db, req, frame, qis, group, result.n_groups, order)
    tables = []
    pairs = [ValuePairs(group, codes, len(dictionary) + 1, order) for codes, dictionary in sa_dicts]
    if req.options.get("output", "anatomy") == "anatomy":
        tables.append(write_qit(db, req, frame, group, order, qis + others))
        for s, p, (codes, dictionary) in zip(sas, pairs, sa_dicts):
            tables.append(write_counts(db, req, s, p, frame.columns[s], codes, dictionary))
    else:
        tables.append(write_generalized(db, req, frame, group, order, labels, qis, sas + others))
    write_rid_sets(db, req.release_id, sas, pairs, [d for _, d in sa_dicts], frame.rid)
    sizes = np.bincount(group, minlength=result.n_groups)
    record_classes(db, req, sizes, labels, qis)
    t_write = time.perf_counter()

    verification = verify_release(db, req, frame.rid, tables, sas, column_l)
    t_verify = time.perf_counter()
    return Outcome(tables=tables, rows=frame.n, groups=int(result.n_groups),
                   discernibility=float(metrics.discernibility(sizes)),
                   verification=verification,
                   metrics={"model": result.model, "min_group": int(sizes.min()),
                            "min_certified_l": int(result.certified_l.min()) if sas else None,
                            "quasi_identifiers": qis, "sensitive": sas,
                            "seconds": {"read": req.read_seconds, "method": t_method - t_read,
                                        "write": t_write - t_method, "verify": t_verify - t_write,
                                        "in_sql": db.sql_seconds - sql0 + req.read_sql_seconds}})


def column_defs(req, names):
    return ", ".join(f"{quote_ident(c)} {req.rel.columns[c].type}" for c in names)


def write_qit(db, req, frame, group, order, names):
    """The quasi-identifier table (001 Def. 3): group_id + the QIs in their own
    types, one row per source row, by group. Written with one binary COPY when
    every column has a direct binary form, else through a staging table."""
    name = f"{req.name}_qit"
    target = qualified(STORE_SCHEMA, name)
    fields = [datapath.binary_field(frame.columns[c], req.rel.columns[c], order) for c in names]
    if all(f is not None for f in fields):
        db.execute(f"CREATE TABLE {target} (group_id integer NOT NULL, {column_defs(req, names)})")
        datapath.copy_fields(db, target, ["group_id"] + names,
                             [copybin.Fixed(group[order], ">i4")] + fields)
        return name
    stage = qualified(STORE_SCHEMA, f"_stage_{req.release_id}")
    datapath.stage(db, stage, frame, [("group_id", group)], names)
    params = []
    cols = ", ".join(f"{datapath.decode_expr(j, frame.columns[c], req.rel.columns[c], params)}"
                     f" AS {quote_ident(c)}" for j, c in enumerate(names))
    db.execute(f"CREATE TABLE {target} AS SELECT s.group_id, {cols} FROM {stage} s"
               " ORDER BY s.group_id, s.rid", params, ["text[]"] * len(params))
    db.execute(f"DROP TABLE {stage}")
    return name


class ValuePairs:
    """The distinct (group, value) pairs of one sensitive attribute, the rows
    holding each (001 Theorem 3's RID sets) and their counts.

    `order` sorts the rows by (group, row id); a stable sort on the combined
    key then orders them by (group, value, row id)."""

    def __init__(self, group, codes, width, order):
        key = group[order] * width + codes[order]
        s = np.argsort(key, kind="stable")
        self.rows = order[s]
        key = key[s]
        start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, int)
        self.group, self.code = key[start] // width, key[start] % width
        self.count = np.diff(np.r_[start, len(key)])


def pair_counts(group, codes, width):
    """Distinct (group, code) pairs and how many rows hold each (counted in a
    histogram when the pair space is small, else by sorting)."""
    key = group * width + codes
    bins = (int(group.max()) + 1) * width if len(group) else 0
    if bins <= 4 * len(key) + (1 << 16):
        counts = np.bincount(key, minlength=bins)
        key = np.flatnonzero(counts)
        counts = counts[key]
    else:
        key, counts = np.unique(key, return_counts=True)
    return key // width, key % width, counts


def write_counts(db, req, attribute, pairs, col, row_codes, dictionary):
    """One sensitive table (001 Def. 3): group_id, value, count -- counted in
    numpy, written in the attribute's own type (one binary COPY, or through a
    small staging table for types without a direct binary form)."""
    name = table_name(req.name, attribute)
    target = qualified(STORE_SCHEMA, name)
    meta = req.rel.columns[attribute]
    value = datapath.dictionary_field(col, meta, pairs.code, dictionary, row_codes)
    if value is not None:
        db.execute(f"CREATE TABLE {target} (group_id integer NOT NULL,"
                   f" {quote_ident(attribute)} {meta.type}, count bigint NOT NULL)")
        datapath.copy_fields(db, target, ["group_id", attribute, "count"],
                             [copybin.Fixed(pairs.group, ">i4"), value,
                              copybin.Fixed(pairs.count, ">i8")])
        return name
    small = qualified(STORE_SCHEMA, f"_counts_{req.release_id}")
    datapath.write_table(db, small, [("group_id", pairs.group.astype(np.int32)), ("code", pairs.code),
                                     ("count", pairs.count.astype(np.int64))])
    db.execute(f"CREATE TABLE {target} AS SELECT s.group_id,"
               f" ($1::text[])[s.code + 1]::{meta.type} AS {quote_ident(attribute)},"
               f" s.count FROM {small} s ORDER BY 1, 2", [dictionary], ["text[]"])
    db.execute(f"DROP TABLE {small}")
    return name


VERIFY_HINT = ("Nothing was released. The stored release differs from what the method computed: "
               "report it with the request (deid.release keeps no row of a failed request).")
RID_CHUNK = 1 << 16          # RIDs per deid.rid_set row (a chunk ends at an entry boundary)


def write_rid_sets(db, release_id, attributes, pairs, dictionaries, rid):
    """deid.rid_set (001 Theorem 3), one binary COPY per attribute: its entries
    (one per group and value: the group, the value, the size of its RID set)
    and the RID sets concatenated, each sorted (ValuePairs orders rows by
    group, value, row id), cut into chunks of about RID_CHUNK RIDs."""
    for attribute, p, dictionary in zip(attributes, pairs, dictionaries):
        entries = rid_chunks(p.count)
        chunks = len(entries)
        rids_per_chunk = np.bincount(np.repeat(np.arange(chunks), entries), weights=p.count,
                                     minlength=chunks).astype(np.int64)
        datapath.copy_fields(db, "deid.rid_set", ["release_id", "attribute", "chunk", "group_ids",
                                                  "value_list", "rid_counts", "rids"],
                             [copybin.Fixed(np.full(chunks, release_id, np.int64), ">i8"),
                              copybin.Text(np.zeros(chunks, np.int64), [attribute]),
                              copybin.Fixed(np.arange(chunks), ">i4"),
                              copybin.Array(entries, copybin.Fixed(p.group, ">i4"), copybin.INT4OID),
                              copybin.Array(entries, copybin.Text(p.code, dictionary), copybin.TEXTOID),
                              copybin.Array(entries, copybin.Fixed(p.count, ">i4"), copybin.INT4OID),
                              copybin.Array(rids_per_chunk, copybin.Fixed(rid[p.rows], ">i8"),
                                            copybin.INT8OID)])


def rid_chunks(counts, limit=RID_CHUNK):
    """Entries per chunk: consecutive entries, a new chunk once a chunk holds
    `limit` RIDs or more (so a chunk exceeds `limit` only by its last entry)."""
    if len(counts) == 0:
        return np.zeros(0, np.int64)
    before = np.cumsum(counts) - counts            # RIDs before each entry
    chunk = before // limit                         # chunk of each entry's first RID
    _, entries = np.unique(chunk, return_counts=True)
    return entries.astype(np.int64)


def write_generalized(db, req, frame, group, order, labels, qis, rest):
    """options.output = 'generalized': one table, QIs replaced by their group's
    generalized value (001 Def. 2), next to the sensitive values."""
    name = req.name
    gl = qualified(STORE_SCHEMA, f"_labels_{req.release_id}")
    codes, dicts = zip(*[factorize(labels[q]) for q in qis])
    datapath.write_table(db, gl, [("group_id", np.arange(len(codes[0]), dtype=np.int64))] +
                         [(f"l{j}", c) for j, c in enumerate(codes)])
    stage = qualified(STORE_SCHEMA, f"_stage_{req.release_id}")
    datapath.stage(db, stage, frame, [("group_id", group)], rest)
    params, lab = [], []
    for j, q in enumerate(qis):
        params.append(list(dicts[j]))
        lab.append(f"(${len(params)}::text[])[g.l{j} + 1] AS {quote_ident(q)}")
    lab += [f"{datapath.decode_expr(j, frame.columns[c], req.rel.columns[c], params)} AS {quote_ident(c)}"
            for j, c in enumerate(rest)]
    db.execute(f"CREATE TABLE {qualified(STORE_SCHEMA, name)} AS SELECT s.group_id, {', '.join(lab)}"
               f" FROM {stage} s JOIN {gl} g ON g.group_id = s.group_id ORDER BY s.group_id, s.rid",
               params, ["text[]"] * len(params))
    db.execute(f"DROP TABLE {stage}")
    db.execute(f"DROP TABLE {gl}")
    return name


def table_name(release, attribute):
    name = f"{release}_{attribute}"
    if len(name.encode()) > 63:
        raise DeidError(INVALID_PARAMETER_VALUE, f"release table name {name!r} is too long",
                        hint="Choose a shorter release name.")
    return name


def factorize(values):
    uniq, codes = np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)
    return codes.astype(np.int64), [str(u) for u in uniq]


def _fmt_array(col, v):
    """Text of numbers (vectorised): dates as ISO dates, integers without a point."""
    if col.kind == "date":
        return np.datetime_as_string(v.astype(np.int64).astype("datetime64[D]")).tolist()
    if col.kind == "int":
        return v.astype(np.int64).astype(str).tolist()
    return [f"{x:g}" for x in v.tolist()]


def group_labels(db, req, frame, qis, group, n_groups, order):
    """Per group and QI, the generalized value (001 Def. 2): a range for numbers,
    the lowest common hierarchy ancestor or the value set for categories.
    `order` sorts the rows by group."""
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    out = {}
    for q in qis:
        col = frame.columns[q]
        meta = req.rel.columns[q]
        if col.kind == "category":
            h = catalog.hierarchy(db, meta.hierarchy) if meta.hierarchy else None
            g, c, _ = pair_counts(group, col.values, len(col.dictionary) + 1)
            first = np.searchsorted(g, np.arange(n_groups)).tolist()
            distinct = np.bincount(g, minlength=n_groups).tolist()
            texts, codes = list(col.dictionary) + ["NULL"], c.tolist()
            labels = []
            for f, d in zip(first, distinct):
                seg = codes[f:f + d]
                if d == 1:
                    labels.append(texts[seg[0]])
                elif h is not None:
                    labels.append(category_label(col, h, seg))
                else:
                    labels.append("{" + ",".join(texts[x] for x in seg) + "}")
        else:
            vals, nulls = col.values[order].astype(float), col.null[order]
            lo = np.minimum.reduceat(np.where(nulls, np.inf, vals), bounds[:-1])
            hi = np.maximum.reduceat(np.where(nulls, -np.inf, vals), bounds[:-1])
            anynull = (np.maximum.reduceat(nulls.astype(np.int8), bounds[:-1]) > 0).tolist()
            finite = np.isfinite(lo)
            lo_s = _fmt_array(col, np.where(finite, lo, 0))
            hi_s = _fmt_array(col, np.where(finite, hi, 0))
            labels = [("NULL" if not ok else a if a == b else f"[{a}-{b}]") + (" or NULL" if nn and ok else "")
                      for ok, a, b, nn in zip(finite.tolist(), lo_s, hi_s, anynull)]
        out[q] = labels
    return out


def category_label(col, h, codes):
    values = [col.dictionary[c] if c < len(col.dictionary) else None for c in codes]
    if len(values) == 1:
        return "NULL" if values[0] is None else values[0]
    if h is not None and h.kind == "member" and None not in values:
        level_vals = set(values)
        for level in range(len(h.members) - 1):
            level_vals = {h.members[level].get(v) for v in level_vals}
            if len(level_vals) == 1:
                return next(iter(level_vals))
    return "{" + ",".join("NULL" if v is None else v for v in values) + "}"


def record_classes(db, req, sizes, labels, qis):
    """deid.equivalence_class: per group its size and generalized values, one
    binary COPY (jsonb's binary form is a version byte, 1, then the text)."""
    G = len(sizes)
    encoded = {}
    parts = []
    for q in qis:                                   # each distinct label is JSON-encoded once
        parts.append([encoded.setdefault(x, json.dumps(x)) for x in labels[q]])
    keys = [json.dumps(q) + ": " for q in qis]
    generalized = ["\x01{" + ", ".join(k + v for k, v in zip(keys, values)) + "}"
                   for values in zip(*parts)] if qis else ["\x01{}"] * G
    datapath.copy_fields(db, "deid.equivalence_class",
                         ["release_id", "class_id", "cardinality", "generalized"],
                         [copybin.Fixed(np.full(G, req.release_id, np.int64), ">i8"),
                          copybin.Fixed(np.arange(G), ">i4"), copybin.Fixed(sizes, ">i8"),
                          copybin.Text(np.arange(G), generalized)])


def read_rid_sets(db, release_id):
    """The stored RID sets, flattened to one entry per group, attribute and
    value (001 Theorem 3): per entry its group, attribute, value hash and RID
    count, and all RIDs concatenated. Values are identified by hashtext(): a
    collision can only merge two values, which makes the verifier stricter (a
    duplicate entry it refuses), never more lenient."""
    rows = db.query(
        "SELECT attribute AS a,"
        " string_agg(int4send(cardinality(group_ids)), ''::bytea ORDER BY chunk) AS ng,"
        " string_agg(int4send(cardinality(value_list)), ''::bytea ORDER BY chunk) AS nv,"
        " string_agg(int4send(cardinality(rid_counts)), ''::bytea ORDER BY chunk) AS nc,"
        " string_agg(int4send(cardinality(rids)), ''::bytea ORDER BY chunk) AS nr,"
        " string_agg(array_send(group_ids), ''::bytea ORDER BY chunk) AS g,"
        " string_agg((SELECT string_agg(int4send(coalesce(hashtext(v), -2147483648)), ''::bytea)"
        "             FROM unnest(r.value_list) AS v), ''::bytea ORDER BY chunk) AS v,"
        " string_agg(array_send(rid_counts), ''::bytea ORDER BY chunk) AS c,"
        " string_agg(array_send(rids), ''::bytea ORDER BY chunk) AS r"
        " FROM deid.rid_set r WHERE release_id = $1 GROUP BY attribute", [release_id], ["bigint"])
    groups, attrs, values, counts, flat = [], [], [], [], []
    for r in rows:
        packed = {k: np.frombuffer(r[k] or b"", ">i4").astype(np.int64)
                  for k in ("ng", "nv", "nc", "nr", "v")}
        entries = packed["nc"]
        if not (np.array_equal(packed["ng"], entries) and np.array_equal(packed["nv"], entries)
                and packed["v"].size == entries.sum()):
            raise DeidError("DE002", f"deid.rid_set of attribute {r['a']!r}: group_ids, value_list "
                                     "and rid_counts differ in length", hint=VERIFY_HINT)
        n = unpack_arrays(r["c"], entries, width=4)
        per_chunk = np.bincount(np.repeat(np.arange(len(entries)), entries), weights=n,
                                minlength=len(entries)).astype(np.int64)
        if not np.array_equal(per_chunk, packed["nr"]):
            raise DeidError("DE002", f"deid.rid_set of attribute {r['a']!r}: rid_counts do not "
                                     "add up to the RIDs stored", hint=VERIFY_HINT)
        groups.append(unpack_arrays(r["g"], entries, width=4))
        values.append(packed["v"])
        attrs.append(np.full(len(n), r["a"]))
        counts.append(n)
        flat.append(unpack_arrays(r["r"], packed["nr"]))
    cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dt))
    return (cat(groups, np.int64), cat(attrs, object), cat(values, np.int64),
            cat(counts, np.int64), cat(flat, np.int64))


def unpack_arrays(buf, counts, width=8):
    """The elements of concatenated ``array_send`` images of one-dimensional
    int8[] (width 8) or int4[] (width 4) arrays without NULLs (header 20
    bytes -- 12 for an empty array -- then (int4 length, value) per element),
    as one int64 array.  Raises DE002 if the images are not exactly that."""
    counts = np.asarray(counts, dtype=np.int64)
    buf = buf or b""
    head = np.where(counts > 0, 20, 12)
    sizes = head + (4 + width) * counts
    if int(sizes.sum()) != len(buf):
        raise DeidError("DE002", "deid.rid_set holds arrays of an unexpected shape",
                        hint="rid_counts and rids must be one-dimensional arrays without NULLs")
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    starts = np.cumsum(sizes) - sizes
    before = np.cumsum(counts) - counts
    # element j of the whole stream, i-th of entry e: its length word at
    # starts[e] + head[e] + (4 + width) i, its value 4 bytes later
    word = (4 + width) * np.arange(total, dtype=np.int64) + \
        np.repeat(starts + head - (4 + width) * before, counts)
    lengths = np.ndarray((len(buf) - 3,), dtype=">i4", buffer=buf, strides=(1,))[word]
    if np.any(lengths != width):
        raise DeidError("DE002", "deid.rid_set holds NULL or malformed array elements", hint=VERIFY_HINT)
    every = np.ndarray((len(buf) - width + 1,), dtype=f">i{width}", buffer=buf, strides=(1,))
    return every[word + 4].astype(np.int64)


def verify_release(db, req, all_rids, tables, sas, column_l):
    """Independent checks on what was stored, before commit."""
    out = {}
    if sas:
        g, a, v, n, flat = read_rid_sets(db, req.release_id)
        out["kl"] = verify.check_kl(g, a, v, flat, req.k,
                                    req.l if req.options.get("model", "kl") == "kl" else None,
                                    column_l or None, rid_counts=n)
        first = a == sas[0]
        out["partition"] = verify.check_partition(flat[np.repeat(first, n)], all_rids)
    counts = db.query(f"SELECT string_agg(int8send(c), ''::bytea) AS c FROM (SELECT count(*) AS c"
                      f" FROM {qualified(STORE_SCHEMA, tables[0])} GROUP BY group_id) s")[0]["c"]
    sizes = np.frombuffer(counts or b"", ">i8").astype(np.int64)
    out["sizes"] = verify.check_group_sizes(np.repeat(np.arange(len(sizes)), sizes), req.k)
    if int(sizes.sum()) != len(all_rids):
        raise DeidError("DE002", "the release table does not hold every row of the snapshot",
                        detail=f"release table {int(sizes.sum())} rows, snapshot {len(all_rids)}",
                        hint=VERIFY_HINT)
    return json.loads(json.dumps(out, default=lambda x: x.item() if hasattr(x, "item") else str(x)))
