"""An attacker on several releases of one source, with nothing of deid: it reads what a
deid_reader reads (the released tables) and knows the quasi-identifiers of the patients it
targets (here: every row of the source at the time of each release) and each release's
selection predicate (it asked for it, or read it in the release's description).

Five attacks:

- linear: released totals over selections (a release's row count, a count table's sum)
  add and subtract. With the rows each release selected, the cells are the rows selected
  by exactly the same releases; every integer combination of the releases with
  coefficients in -2..2 has as support a union of cells. A support of 0 < n < k rows (k:
  the largest of the releases whose rows it holds) is a success: those rows' values are
  the combination of the released ones.
- intersection (anatomy): a patient with quasi-identifiers q is in one of the groups whose
  quasi-identifier table lists q (in the release's own columns); the sensitive values it
  may have are those the count tables give those groups. Intersected over every release
  holding the patient, fewer than the largest l of those releases is a success (each
  release alone gave at least its l).
- k^m by generalization (disassociation's AA model): a patient's two released records,
  placed through the public code hierarchy, narrow each other; fewer than k records that
  may be the patient's, given at most m of its codes, is a success (km_joint).

Imports the standard library, numpy and psycopg only (tests/security/test_fuzz_sample.py checks).
"""
import itertools
from collections import Counter, defaultdict
from fractions import Fraction

from psycopg import sql

COEFFICIENTS = (-2, -1, 1, 2)


# ------------------------------------------------------------------ linear
def cells(selections):
    """{membership signature (tuple of bools): set of row ids} over the rows of any selection."""
    rows = set().union(*selections) if selections else set()
    out = defaultdict(set)
    for r in rows:
        out[tuple(r in s for s in selections)].add(r)
    return out


def linear(selections, ks):
    """The smallest support of fewer than k rows that a combination of the selections' totals
    isolates, as (rows, k, coefficients), or None."""
    found = None
    c = cells(selections)
    for coef in _combinations(len(selections)):
        support = set()
        for sig, members in c.items():
            if sum(a for a, inside in zip(coef, sig) if inside) != 0:
                support |= members
        if not support:
            continue
        k = max(kk for kk, s in zip(ks, selections) if s & support)
        if len(support) < k and (found is None or len(support) < len(found[0])):
            found = (support, k, coef)
    return found or _spanned_cell(c, selections, ks)


def _combinations(n):
    """Coefficient vectors, -2..2 for up to four releases, -1..1 beyond (3^6 = 729)."""
    values = (-2, -1, 0, 1, 2) if n <= 4 else (-1, 0, 1)
    for coef in itertools.product(values, repeat=n):
        if any(coef):
            yield coef


def _spanned_cell(c, selections, ks):
    """A small cell whose indicator lies in the rational span of the selections' rows (over
    the cells): isolated by some combination, whatever its coefficients."""
    sigs = list(c)
    matrix = [[Fraction(int(sig[i])) for sig in sigs] for i in range(len(selections))]
    basis = _row_basis(matrix)
    for j, sig in enumerate(sigs):
        members = c[sig]
        k = max(kk for kk, inside in zip(ks, sig) if inside)
        if 0 < len(members) < k:
            target = [Fraction(int(i == j)) for i in range(len(sigs))]
            if _in_span(basis, target):
                return (members, k, "span")
    return None


def _row_basis(rows):
    basis = []
    for row in rows:
        v = _reduce(basis, list(row))
        if any(v):
            basis.append(v)
    return basis


def _reduce(basis, v):
    for b in basis:
        p = next(i for i, x in enumerate(b) if x)
        if v[p]:
            f = v[p] / b[p]
            v = [x - f * y for x, y in zip(v, b)]
    return v


def _in_span(basis, target):
    return not any(_reduce(basis, target))


# ------------------------------------------------------------------ intersection (anatomy)
def anatomy_candidates(reader, qit, counts, qis, sensitive):
    """{quasi-identifier tuple: set of values} a patient with it may have in this release,
    read from the release's quasi-identifier table and one count table."""
    groups = defaultdict(set)
    q = sql.SQL("SELECT {}, group_id FROM {}").format(
        sql.SQL(", ").join(map(sql.Identifier, qis)), sql.SQL(qit))
    for row in reader.execute(q).fetchall():
        groups[tuple(_norm(v) for v in row[:-1])].add(row[-1])
    values = defaultdict(set)
    q = sql.SQL("SELECT group_id, {} FROM {} WHERE count > 0").format(
        sql.Identifier(sensitive), sql.SQL(counts))
    for g, v in reader.execute(q).fetchall():
        values[g].add(_norm(v))
    return {key: set().union(*(values[g] for g in gs)) for key, gs in groups.items()}


def _norm(v):
    return None if v is None else str(v)


def intersection(patients, releases):
    """patients: {row id: {column: value}}; releases: list of (ids it holds, qis, l,
    candidates by qi tuple). The first patient whose candidates, intersected over the
    releases holding it, number fewer than their largest l while each alone gave at least
    its l: (row id, candidates, l), or None."""
    for rid, known in patients.items():
        sets, ls = [], []
        for ids, qis, l, cand in releases:
            if rid not in ids or not l:
                continue
            allowed = cand.get(tuple(_norm(known[c]) for c in qis))
            if allowed is None or len(allowed) < l:
                sets = None                 # a single release's matter, not composition's
                break
            sets.append(allowed)
            ls.append(l)
        if sets and len(sets) >= 2:
            left = set.intersection(*sets)
            if len(left) < max(ls):
                return rid, left, max(ls)
    return None


# ------------------------------------------------------------------ groups: linear and crowds
# A grouped release publishes statistics per group (anatomy's per-group value counts,
# generalization's rows per class, condensation's per-cluster moments, disassociation's chunk
# supports per cluster). Over the releases publishing a statistic of one attribute, every
# integer combination of their groups' statistics is that statistic over a union of cells of
# the groupings' common refinement; a cell of 0 < n < k rows whose indicator lies in the
# span of the groups' indicators is isolated (its rows' values are read off). Decided over
# GF(p), p = 2^31 - 1 (a 0/1 matrix's rational span, up to a vanishing chance).
P = 2147483647


def refinement(groupings):
    """groupings: [{row id: label}]. {signature: set of row ids}, a signature holding each
    grouping's label of the row (None where it does not hold the row)."""
    rows = set().union(*groupings) if groupings else set()
    out = defaultdict(set)
    for r in rows:
        out[tuple(g.get(r) for g in groupings)].add(r)
    return out


def linear_groups(groupings, ks):
    """The smallest cell of fewer than k rows (k: the largest of the releases holding it) that
    the groups' statistics isolate, as (rows, k), or None."""
    import numpy as np
    c = refinement(groupings)
    sigs = list(c)
    whole = _whole_groups(groupings)
    small = [j for j, s in enumerate(sigs)
             if len(c[s]) < max(k for k, lab in zip(ks, s) if lab is not None)
             and frozenset(c[s]) not in whole]
    if not small or len(groupings) < 2:
        return None
    vectors = {}
    for i in range(len(groupings)):
        for j, s in enumerate(sigs):
            if s[i] is not None:
                vectors.setdefault((i, s[i]), set()).add(j)
    m = np.zeros((len(vectors), len(sigs)), np.int64)
    for row, cols in enumerate(vectors.values()):
        m[row, list(cols)] = 1
    basis, pivots = _echelon(m)
    for j in sorted(small, key=lambda j: len(c[sigs[j]])):
        target = np.zeros(len(sigs), np.int64)
        target[j] = 1
        if _reduces_to_zero(basis, pivots, target):
            s = sigs[j]
            return c[s], max(k for k, lab in zip(ks, s) if lab is not None)
    return None


def _whole_groups(groupings):
    """Every group of every release as a set of rows: a cell that is one release's whole group
    is that release's own matter (its model, e.g. generalization's k per source system), not
    the composition's."""
    out = set()
    for g in groupings:
        members = defaultdict(set)
        for r, lab in g.items():
            members[lab].add(r)
        out.update(frozenset(m) for m in members.values())
    return out


def _echelon(m):
    """Row echelon form of m over GF(P): (rows, pivot column per row)."""
    import numpy as np
    m = m % P
    rows, pivots, r = [], [], 0
    for col in range(m.shape[1]):
        nz = np.flatnonzero(m[r:, col]) + r if r < m.shape[0] else []
        if len(nz) == 0:
            continue
        p = int(nz[0])
        m[[r, p]] = m[[p, r]]
        m[r] = m[r] * pow(int(m[r, col]), P - 2, P) % P
        f = m[:, col].copy()
        f[r] = 0
        nzr = np.flatnonzero(f)
        if nzr.size:
            m[nzr] = (m[nzr] - (f[nzr, None] * m[r]) % P) % P
        rows.append(m[r].copy())
        pivots.append(col)
        r += 1
        if r == m.shape[0]:
            break
    return rows, pivots


def _reduces_to_zero(basis, pivots, v):
    for b, p in zip(basis, pivots):
        if v[p]:
            v = (v - (int(v[p]) * b) % P) % P
    return not v.any()


def crowds(groupings, ks):
    """Intersection over releases of one method: a patient's crowd is the rows sharing its
    group in every release holding it (the cell of the refinement); fewer than the largest k
    of those releases is a success. (rows, k) or None."""
    whole = _whole_groups(groupings)
    for s, rows in sorted(refinement(groupings).items(), key=lambda x: len(x[1])):
        k = max(k for k, lab in zip(ks, s) if lab is not None)
        if sum(lab is not None for lab in s) >= 2 and len(rows) < k and \
                frozenset(rows) not in whole:
            return rows, k
    return None


# ------------------------------------------------------------------ generalization's classes
def generalization_classes(released, source, hierarchies):
    """A reader who knows the patients' quasi-identifiers and the (public) hierarchies puts
    each selected row in its class: per quasi-identifier, the level whose image of the
    selected rows' values is the released column (002: whole columns at one level).
    released: {column: Counter of released values}; source: {row id: {column: value}};
    hierarchies: {column: [mapping value -> label, one per level]}. {row id: class}."""
    maps = {}
    for col, seen in released.items():
        for f in [lambda v: v] + hierarchies.get(col, []):
            image = Counter(_label(f, rowv[col]) for rowv in source.values())
            if image == seen:
                maps[col] = f
                break
        else:
            return None                     # a level the reader cannot place: no attack
    return {rid: tuple(_label(maps[c], v[c]) for c in sorted(maps)) for rid, v in source.items()}


def _label(f, v):
    out = f(v)
    return None if out is None else str(out)


# ------------------------------------------------------------------ k^m by generalization (AA)
# disassociation's model 'generalization' (Apriori Anonymization, Terrovitis et al., VLDB 2008)
# releases each record's codes mapped through one cut of a public code hierarchy, in random
# order and without an id. Each release alone is k^m-anonymous: a reader who knows at most m
# of a patient's codes finds at least k released records that may be the patient's. Two such
# releases of the same records at different cuts (other k, m, or records added) are finer
# together than either: a record's two images narrow each other.
def aa_images(released, records, parent):
    """A reader places each record of an AA release: the cut is the set of released labels
    (a code's label is its nearest ancestor-or-self among them), a record's image the set of
    its codes' labels. released: the released code sets; records: {row id: codes} (the rows
    the release holds); parent: {label: its parent's label} of the public hierarchy.
    ({row id: image}, {code: label}), or None when the images are not exactly the released
    records (a cut the reader cannot place: no attack)."""
    labels = set().union(*(set(s) for s in released)) if released else set()
    cut = {}
    for codes in records.values():
        for c in codes:
            x = c
            while x is not None and x not in labels:
                x = parent.get(x) if parent.get(x) != x else None
            if x is None:
                return None
            cut[c] = x
    images = {rid: frozenset(cut[c] for c in codes) for rid, codes in records.items()}
    if Counter(images.values()) != Counter(frozenset(s) for s in released):
        return None
    return images, cut


def km_joint(records, releases):
    """releases: [(images, cut, k, m)] of AA releases (aa_images). A reader who knows at most
    m codes of a patient held by two of them (m the smaller of theirs), and links the
    patient's two released records, keeps the records whose images cover the itemset's image
    in both. Over the rows both hold, fewer than the larger k such records while each
    release alone left at least its k, and fewer than either alone, is a success:
    (row id, itemset, candidates, k), or None."""
    for a, b in itertools.combinations(releases, 2):
        hit = _km_pair(records, a, b)
        if hit:
            return hit
    return None


def _km_pair(records, a, b):
    (ia, ca, ka, ma), (ib, cb, kb, mb) = a, b
    common = [r for r in ia if r in ib]
    seen = set()
    for rid in common:
        codes = sorted(set(records[rid]), key=str)
        for size in range(1, min(ma, mb, len(codes)) + 1):
            for itemset in itertools.combinations(codes, size):
                key = (frozenset(ca[c] for c in itemset), frozenset(cb[c] for c in itemset))
                if key in seen:
                    continue
                seen.add(key)
                in_a = {r for r in common if key[0] <= ia[r]}
                in_b = {r for r in common if key[1] <= ib[r]}
                both = len(in_a & in_b)
                if len(in_a) >= ka and len(in_b) >= kb and both < min(len(in_a), len(in_b)) \
                        and both < max(ka, kb):
                    return rid, itemset, both, max(ka, kb)
    return None
