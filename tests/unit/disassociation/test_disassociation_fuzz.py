"""Fuzz and property tests of disassociation (paper 003).

* >= 1,000 random inputs (Zipf-skewed, tie-heavy, tiny, very long records, empty records, one
  code everywhere, fewer distinct codes than m, uniform, grouped, constrained): every release
  passes deid.verify.km AND an independent brute-force check written here in plain Python
  (sets, itertools.combinations, Counter).  On naive releases (each cluster one chunk) and on
  tampered releases the two must agree.
* HORPART equals a literal recursive Fig. 8 (with the documented lower-bound rules); the
  per-cluster VERPART equals a literal Fig. 9 with a brute-force k^m test, and equals the
  record chunks of the batched run (the per-cluster function is separable).
* Refining is complete: no aligned block of clusters keeps an item code it could share.
* Guarantee 1 itself, by enumerating reconstructions on tiny inputs.
"""

import itertools
from collections import Counter

import numpy as np
import pytest

from deid.errors import DeidError, VERIFICATION_FAILED
from deid.methods.disassociation.disassociate import constraint_ids, disassociate
from deid.methods.disassociation.horpart import horpart
from deid.methods.disassociation.verpart import verpart
from deid.verify.shared.km import RELEASE_FIELDS, verify_km

KINDS = ["zipf", "ties", "tiny", "long", "empty", "one_code", "few_codes", "uniform",
         "groups", "constrained"]
CASES_PER_KIND = 110                                   # 1,100 inputs


# -- random inputs ---------------------------------------------------------------------------

def _records(rng, n, D, lengths, weights=None):
    p = None if weights is None else weights / weights.sum()
    return [sorted(rng.choice(D, int(min(L, D)), replace=False, p=p).tolist())
            for L in lengths]


def make_case(rng, kind):
    k = int(rng.integers(2, 6))
    m = int(rng.integers(1, 4))
    if kind == "zipf" or kind == "constrained":
        D = int(rng.integers(5, 60))
        n = int(rng.integers(k, 150))
        recs = _records(rng, n, D, 1 + rng.geometric(0.3, n),
                        1.0 / np.arange(1, D + 1) ** rng.uniform(0.8, 2.0))
    elif kind == "ties":
        D = int(rng.integers(2, 7))
        n = int(rng.integers(k, 150))
        templates = _records(rng, 4, D, rng.integers(0, D + 1, 4))
        recs = [templates[i] for i in rng.integers(0, rng.integers(1, 5), n)]
        for i in rng.choice(n, n // 10, replace=False):
            recs[i] = _records(rng, 1, D, [rng.integers(0, D + 1)])[0]
    elif kind == "tiny":
        D = int(rng.integers(1, 5))
        n = k + int(rng.integers(0, 4))
        recs = _records(rng, n, D, rng.integers(0, D + 1, n))
    elif kind == "long":
        m = int(rng.integers(1, 3))
        D = int(rng.integers(30, 60))
        n = int(rng.integers(max(k, 6), 40))
        lengths = np.where(rng.random(n) < 0.3, rng.integers(20, 41, n), rng.integers(0, 6, n))
        recs = _records(rng, n, D, lengths, 1.0 / np.arange(1, D + 1))
        for i in rng.choice(n, min(n, k), replace=False):      # some identical long records
            recs[i] = list(range(min(D, 25)))
    elif kind == "empty":
        D = int(rng.integers(1, 20))
        n = int(rng.integers(k, 100))
        empty = rng.random(n) < rng.uniform(0.6, 1.0)
        recs = _records(rng, n, D, np.where(empty, 0, 1 + rng.geometric(0.4, n)))
    elif kind == "one_code":
        D = int(rng.integers(1, 10))
        n = int(rng.integers(k, 100))
        extra = rng.random() < 0.5
        recs = [sorted({0} | (set(r) if extra else set()))
                for r in _records(rng, n, D, rng.integers(0, 3, n))]
    elif kind == "few_codes":
        m = int(rng.integers(2, 5))
        D = int(rng.integers(1, m))
        n = int(rng.integers(k, 80))
        recs = _records(rng, n, D, rng.integers(0, D + 1, n))
    elif kind == "uniform":
        D = int(rng.integers(10, 40))
        n = int(rng.integers(k, 150))
        recs = _records(rng, n, D, rng.integers(0, 8, n))
    else:                                                        # groups
        D = int(rng.integers(10, 50))
        n = int(rng.integers(k, 150))
        groups = [rng.choice(D, int(rng.integers(2, 8)), replace=False) for _ in range(6)]
        recs = []
        for _ in range(n):
            g = groups[rng.integers(0, 6)]
            take = rng.choice(g, int(rng.integers(1, g.size + 1)), replace=False)
            noise = rng.choice(D, int(rng.integers(0, 2)), replace=False)
            recs.append(sorted(set(take.tolist()) | set(noise.tolist())))
    constraints = None
    if kind == "constrained" or rng.random() < 0.4:
        perm = rng.permutation(D)
        cuts = np.sort(rng.choice(np.arange(1, D + 1), int(rng.integers(1, min(D, 8) + 1)),
                                  replace=False))
        constraints = [perm[a:b].tolist() for a, b in zip(np.r_[0, cuts[:-1]], cuts)]
        constraints = [u for u in constraints if rng.random() < 0.8]
    draw = rng.random()
    max_cluster = None if draw < 0.4 else int(rng.integers(k, 4 * k + 1)) if draw < 0.8 \
        else int(rng.integers(4 * k, 20 * k))
    max_joint = [None, 1, 2, 4, 32][int(rng.integers(0, 5))]
    return recs, D, k, m, constraints, max_cluster, max_joint, int(rng.integers(0, 1000))


def csr(recs):
    offsets = np.cumsum([0] + [len(r) for r in recs]).astype(np.int64)
    codes = np.array([c for r in recs for c in r], dtype=np.int64)
    return offsets, codes


# -- an independent reading of the release -------------------------------------------------

def release_view(res):
    """The release as plain Python, sliced directly from the flat arrays."""
    f = {name: np.asarray(getattr(res, name)) for name in RELEASE_FIELDS}

    def part(name, i):                                   # entry i of the CSR pair `name`
        offs, vals = f[name + "_offsets"], f[name + "_codes" if name != "shared_cluster"
                                                 else "shared_cluster_ids"]
        return vals[offs[i]:offs[i + 1]].tolist()

    def subs(name, lo, hi):
        return [tuple(part(name, i)) for i in range(lo, hi)]

    clusters = [{"size": int(s), "chunks": [], "items": set(part("item", c)), "shared": []}
                for c, s in enumerate(f["cluster_size"])]
    for j, c in enumerate(f["chunk_cluster"].tolist()):
        clusters[c]["chunks"].append((part("chunk_domain", j), subs(
            "subrecord", f["chunk_subrecords"][j], f["chunk_subrecords"][j + 1])))
    shared = []
    for s in range(f["shared_cluster_offsets"].size - 1):
        shared.append({"clusters": part("shared_cluster", s),
                       "domain": part("shared_domain", s),
                       "subs": subs("shared_subrecord", f["shared_subrecords"][s],
                                    f["shared_subrecords"][s + 1])})
        for c in shared[-1]["clusters"]:
            clusters[c]["shared"].append(s)
    return {"clusters": clusters, "shared": shared,
            "membership": np.asarray(res.cluster_of_record).tolist()}


def brute_force_problems(view, recs, k, m):
    """Set of violated properties ('size', 'km', 'faithful'), by plain enumeration."""
    problems = set()
    members = {}
    for r, c in enumerate(view["membership"]):
        members.setdefault(c, []).append(set(recs[r]))
    clusters = view["clusters"]
    if set(members) - set(range(len(clusters))):
        return {"faithful"}
    for c, cl in enumerate(clusters):
        if len(members.get(c, [])) != cl["size"] or cl["size"] < k:
            problems.add("size")
    chunks = [subs for cl in clusters for _, subs in cl["chunks"]] + \
             [sh["subs"] for sh in view["shared"]]
    if not all(km_anonymous(subs, k, m) for subs in chunks):
        problems.add("km")

    def projection_list(records, dom, keep_empty):
        out = [tuple(sorted(r & set(dom))) for r in records]
        return sorted(p for p in out if p or keep_empty)

    for c, cl in enumerate(clusters):
        mine = members.get(c, [])
        places = [set(dom) for dom, _ in cl["chunks"]] + [cl["items"]] + \
                 [set(view["shared"][s]["domain"]) for s in cl["shared"]]
        flat = [t for p in places for t in p]
        have = set().union(*mine) if mine else set()
        own = set(cl["items"]).union(*[set(d) for d, _ in cl["chunks"]])
        if len(flat) != len(set(flat)) or not have <= set(flat) or not own <= have:
            problems.add("faithful")
        for dom, subs in cl["chunks"]:
            if len(subs) != len(mine) or projection_list(mine, dom, True) != \
                    sorted(tuple(sorted(s)) for s in subs) or \
                    set(dom) != {t for s in subs for t in s}:
                problems.add("faithful")
    for sh in view["shared"]:
        records = [r for c in sh["clusters"] for r in members.get(c, [])]
        subs = [tuple(sorted(s)) for s in sh["subs"]]
        if len(subs) > len(records) or projection_list(records, sh["domain"], False) != \
                sorted(s for s in subs if s) or set(sh["domain"]) != {t for s in subs
                                                                    for t in s}:
            problems.add("faithful")
    return problems


def verifier_verdict(release, offsets, codes, k, m):
    try:
        verify_km(release, offsets, codes, k, m)
        return True
    except DeidError as e:
        assert e.sqlstate == VERIFICATION_FAILED and e.hint
        return False


def as_fields(res):
    out = {name: np.array(getattr(res, name)) for name in RELEASE_FIELDS}
    out["cluster_of_record"] = np.array(res.cluster_of_record)
    return out


class FieldView:
    def __init__(self, fields):
        self.__dict__.update(fields)


def with_shared(fields, shared):
    """The release ``fields`` with its shared chunks replaced by ``shared`` (dicts of
    clusters, domain, subs as in release_view)."""
    f = dict(fields)
    f["shared_cluster_offsets"], f["shared_cluster_ids"] = csr([sh["clusters"] for sh in shared])
    f["shared_domain_offsets"], f["shared_domain_codes"] = csr([sh["domain"] for sh in shared])
    f["shared_subrecords"] = np.cumsum([0] + [len(sh["subs"]) for sh in shared])
    f["shared_subrecord_offsets"], f["shared_subrecord_codes"] = csr(
        [list(sub) for sh in shared for sub in sh["subs"]])
    return FieldView(f)


def naive_release(recs, membership):
    """Each cluster one record chunk holding whole records (no item or shared chunks)."""
    n_clusters = int(max(membership)) + 1
    f = {"cluster_size": np.bincount(membership, minlength=n_clusters),
         "cluster_of_record": np.asarray(membership),
         "item_offsets": np.zeros(n_clusters + 1, dtype=np.int64),
         "item_codes": np.zeros(0, dtype=np.int64)}
    doms, subs, chunk_cluster = [], [], []
    for c in range(n_clusters):
        mine = [recs[r] for r in range(len(recs)) if membership[r] == c]
        dom = sorted(set().union(*map(set, mine))) if mine else []
        if dom:
            chunk_cluster.append(c)
            doms.append(dom)
            subs.append(mine)
    f["chunk_cluster"] = np.array(chunk_cluster, dtype=np.int64)
    f["chunk_domain_offsets"], f["chunk_domain_codes"] = csr(doms)
    f["chunk_subrecords"] = np.cumsum([0] + [len(ch) for ch in subs]).astype(np.int64)
    f["subrecord_offsets"], f["subrecord_codes"] = csr([s for ch in subs for s in ch])
    return with_shared(f, [])


# -- literal references of Figs. 8 and 9 ------------------------------------------------------

def reference_horpart(recs, k, max_size, constraint_of):
    """Fig. 8 as a recursion on record index lists, with the lower-bound rules of horpart.py:
    split on the best code with k <= s <= |D| - k (tier: u's codes, constrained codes, any;
    then support, then code id); else cut into q pieces in lexicographic order of the first
    three codes.  Returns the clusters in depth-first order."""
    out = []

    def rec(D, u):
        if len(D) <= max_size:
            out.append(D)
            return
        support = Counter(t for r in D for t in recs[r])
        best = None
        for t, s in support.items():
            if k <= s <= len(D) - k:
                tier = 0 if (u >= 0 and constraint_of[t] == u) else (
                    1 if constraint_of[t] >= 0 else 2)
                key = (tier, -s, t)
                best = key if best is None or key < best else best
        if best is None:
            q = max(1, min(-(-len(D) // max_size), len(D) // k))
            ordered = sorted(D, key=lambda r: (tuple(recs[r][:3]) + (10**9,) * 3)[:3] + (r,))
            for p in range(q):
                out.append(sorted(r for i, r in enumerate(ordered) if i * q // len(D) == p))
            return
        a = best[2]
        rec([r for r in D if a in recs[r]], int(constraint_of[a]))
        rec([r for r in D if a not in recs[r]], -1)

    rec(list(range(len(recs))), -1)
    return out


def km_anonymous(subrecords, k, m):
    count = Counter(comb for sub in subrecords for j in range(1, m + 1)
                    for comb in itertools.combinations(sorted(sub), j))
    return all(v >= k for v in count.values())


def reference_verpart(records, k, m, constraint_of, lines_15_17=True):
    """Fig. 9 as written (line 12 by brute force; line 16 as in verpart.py)."""
    support = Counter(t for r in records for t in r)
    item = sorted(t for t, s in support.items() if s < k)
    frequent = [t for t, s in support.items() if s >= k]
    groups = {}
    for t in frequent:
        groups.setdefault(("u", constraint_of[t]) if constraint_of[t] >= 0 else ("c", t),
                          []).append(t)
    for g in groups.values():
        g.sort(key=lambda t: (-support[t], t))
    ordered = [t for g in sorted(groups.values(), key=lambda g: (-support[g[0]], g[0]))
               for t in g]
    remain, domains = ordered, []
    while remain:
        cur = []
        for t in remain:
            if km_anonymous([set(r) & set(cur + [t]) for r in records], k, m):
                cur.append(t)
        first = constraint_of[cur[0]]
        cur = [t for t in cur if not lines_15_17 or constraint_of[t] < 0 or
               constraint_of[t] == first or
               all(x in cur for x in remain if constraint_of[x] == constraint_of[t])]
        domains.append(sorted(cur))
        remain = [t for t in remain if t not in cur]
    return domains, item


# -- the fuzz run -----------------------------------------------------------------------------

def check_case(recs, D, k, m, constraints, max_cluster, max_joint, seed, rng):
    offsets, codes = csr(recs)
    res = disassociate(offsets, codes, D, k, m, max_cluster_size=max_cluster,
                       constraints=constraints, seed=seed, max_joint_clusters=max_joint)
    report = verify_km(res, offsets, codes, k, m)
    view = release_view(res)
    assert brute_force_problems(view, recs, k, m) == set()
    assert report["min_cluster_size"] >= k
    top = max(max_cluster or 2 * k, 2 * k - 1)
    assert max(c["size"] for c in view["clusters"]) <= top
    refine_complete(view, recs, k, max_joint)
    # HORPART = literal Fig. 8; VERPART per cluster = literal Fig. 9 = the batched chunks
    con = constraint_ids(constraints, D)
    ref = reference_horpart(recs, k, max_cluster or 2 * k, con)
    got = [sorted(np.flatnonzero(res.cluster_of_record == c).tolist())
           for c in range(res.n_clusters)]
    assert got == ref
    for c, cl in enumerate(view["clusters"]):
        mine = [recs[r] for r in got[c]]
        domains, item = verpart(*csr(mine), k, m, con)
        assert [d.tolist() for d in domains] == [dom for dom, _ in cl["chunks"]]
        if sum(len(r) for r in mine) <= 60:
            ref_domains, ref_item = reference_verpart(mine, k, m, con)
            assert [d.tolist() for d in domains] == ref_domains
            assert item.tolist() == ref_item
    # agreement with the verifier: naive releases and tampered releases
    membership = res.cluster_of_record.tolist()
    if rng.random() < 0.5 and len(recs) >= 2:
        membership = rng.integers(0, max(1, len(recs) // k), len(recs)).tolist()
        membership = np.unique(membership, return_inverse=True)[1].tolist()
    naive = naive_release(recs, membership)
    assert verifier_verdict(naive, offsets, codes, k, m) == \
        (brute_force_problems(release_view(naive), recs, k, m) == set())
    for tampered in tamperings(res, recs, D, rng):
        assert not verifier_verdict(tampered, offsets, codes, k, m)
        assert brute_force_problems(release_view(tampered), recs, k, m) != set()


def tamperings(res, recs, D, rng):
    fields = as_fields(res)
    out = []
    if fields["subrecord_codes"].size:                # drop one occurrence from a subrecord
        f = dict(fields)
        i = int(rng.integers(0, f["subrecord_codes"].size))
        f["subrecord_codes"] = np.delete(f["subrecord_codes"], i)
        sub = int(np.searchsorted(f["subrecord_offsets"], i, side="right") - 1)
        f["subrecord_offsets"] = f["subrecord_offsets"].copy()
        f["subrecord_offsets"][sub + 1:] -= 1
        out.append(FieldView(f))
    c = int(rng.integers(0, res.n_clusters))          # claim a code the cluster does not have
    have = {t for r in np.flatnonzero(res.cluster_of_record == c) for t in recs[r]}
    foreign = [t for t in range(D) if t not in have]
    if foreign:
        f = dict(fields)
        items = [set(f["item_codes"][f["item_offsets"][x]:f["item_offsets"][x + 1]].tolist())
                 for x in range(res.n_clusters)]
        items[c].add(foreign[0])
        f["item_offsets"], f["item_codes"] = csr([sorted(s) for s in items])
        out.append(FieldView(f))
    if res.n_clusters >= 2:                            # move a record to another cluster
        f = dict(fields)
        f["cluster_of_record"] = f["cluster_of_record"].copy()
        r = int(rng.integers(0, len(recs)))
        f["cluster_of_record"][r] = (f["cluster_of_record"][r] + 1) % res.n_clusters
        out.append(FieldView(f))
    return out


def refine_complete(view, recs, k, max_joint):
    """Refining is complete (refine.py's rule): in no aligned block of <= max_joint
    consecutive clusters do the occurrences of a code still in item chunks number >= k."""
    clusters = view["clusters"]
    members = {}
    for r, c in enumerate(view["membership"]):
        members.setdefault(c, []).append(recs[r])
    width = 2
    while width // 2 < len(clusters) and (max_joint is None or width <= max_joint):
        for lo in range(0, len(clusters), width):
            pooled = Counter(t for c in range(lo, min(lo + width, len(clusters)))
                             for r in members.get(c, []) for t in r
                             if t in clusters[c]["items"])
            assert all(s < k for s in pooled.values()), "refining left a shareable code"
        width *= 2


@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_verifier_and_brute_force_agree(kind):
    rng = np.random.default_rng(1000 + KINDS.index(kind))
    for _ in range(CASES_PER_KIND):
        recs, D, k, m, constraints, max_cluster, max_joint, seed = make_case(rng, kind)
        if len(recs) < k:
            continue
        check_case(recs, D, k, m, constraints, max_cluster, max_joint, seed, rng)


def test_fuzz_covers_at_least_1000_inputs():
    assert len(KINDS) * CASES_PER_KIND >= 1000


def test_larger_skewed_inputs():
    rng = np.random.default_rng(7)
    for n, D, k, m in ((3000, 200, 5, 2), (2000, 60, 3, 3), (1500, 40, 10, 1)):
        w = 1.0 / np.arange(1, D + 1) ** 1.1
        recs = _records(rng, n, D, 1 + rng.geometric(0.25, n), w)
        offsets, codes = csr(recs)
        res = disassociate(offsets, codes, D, k, m, seed=1)
        verify_km(res, offsets, codes, k, m)
        assert brute_force_problems(release_view(res), recs, k, m) == set()


def test_verpart_equals_literal_fig9_on_single_clusters():
    rng = np.random.default_rng(5)
    several = removal_mattered = 0
    for i in range(400):
        k = int(rng.integers(2, 4))
        m = int(rng.integers(1, 4)) if i % 4 == 0 else 2 + i % 2
        D, n = int(rng.integers(3, 10)), int(rng.integers(6, 30))
        w = 1.0 / np.arange(1, D + 1) ** rng.uniform(0, 1.0)
        recs = _records(rng, n, D, rng.integers(1, 2 + i % 4, n), w)
        perm = rng.permutation(D)
        cuts = np.sort(rng.choice(np.arange(1, D + 1), int(rng.integers(1, D + 1)),
                                  replace=False))
        constraints = [perm[a:b].tolist() for a, b in zip(np.r_[0, cuts[:-1]], cuts)
                       if rng.random() < 0.7]
        con = constraint_ids(constraints, D)
        domains, item = verpart(*csr(recs), k, m, con)
        ref_domains, ref_item = reference_verpart(recs, k, m, con)
        assert [d.tolist() for d in domains] == ref_domains
        assert item.tolist() == ref_item
        for d in domains:                             # every record chunk is k^m-anonymous
            assert km_anonymous([set(r) & set(d.tolist()) for r in recs], k, m)
        several += len(domains) >= 2
        removal_mattered += reference_verpart(recs, k, m, con, False)[0] != ref_domains
    assert several > 200 and removal_mattered > 25      # the test reaches both branches


def test_greedy_lines_15_17():
    from deid.methods.disassociation.verpart import greedy_chunks
    # codes in line-5 order: 0 (no constraint), 1 and 2 (constraint 5), 3 (constraint 6);
    # {0, 1, 3} fit together, 2 does not fit with 0: constraint 5 is only partly added and is
    # not the first code's, so 1 goes back; 3 (constraint 6, complete) stays
    masks = [0b0100, 0, 0b0001, 0]
    assert greedy_chunks([-1, 5, 5, 6], masks) == [0, 1, 1, 0]
    # the first code's own constraint may stay partly added
    assert greedy_chunks([5, 5, 5], [0b100, 0, 0b001]) == [0, 0, 1]
    # m = 1 (no pair masks): everything in one chunk
    assert greedy_chunks([1, -1, 2, 2], [0, 0, 0, 0]) == [0, 0, 0, 0]


def test_horpart_in_small_blocks_matches_reference(monkeypatch):
    from deid.methods.disassociation import horpart as hp
    rng = np.random.default_rng(3)
    monkeypatch.setattr(hp, "_CELL_BUDGET", 40)       # a few parts per block
    for _ in range(60):
        k = int(rng.integers(2, 5))
        D, n = int(rng.integers(3, 25)), int(rng.integers(k, 400))
        recs = _records(rng, n, D, rng.integers(0, 6, n), 1.0 / np.arange(1, D + 1))
        perm = rng.permutation(D)
        constraints = [perm[:D // 3].tolist(), perm[D // 3:D // 2].tolist()]
        con = constraint_ids(constraints, D)
        max_size = int(rng.integers(k, 3 * k + 1))
        offsets, codes = csr(recs)
        part = horpart(offsets, codes, D, k, max_size, con)
        got = [sorted(np.flatnonzero(part.cluster_of_record == c).tolist())
               for c in range(part.n_clusters)]
        assert got == reference_horpart(recs, k, max_size, con)
        assert min(len(c) for c in got) >= k


def test_verifier_accepts_other_layouts_and_rejects_overlaps():
    rng = np.random.default_rng(4)
    recs = _records(rng, 120, 30, 1 + rng.geometric(0.3, 120), 1.0 / np.arange(1, 31))
    offsets, codes = csr(recs)
    res = disassociate(offsets, codes, 30, 3, 2, seed=2)
    view, fields = release_view(res), as_fields(res)
    assert len(view["shared"]) >= 2
    # shared chunks may also store some of their empty subrecords (up to one per record)
    room = [sum(view["clusters"][c]["size"] for c in sh["clusters"]) - len(sh["subs"])
            for sh in view["shared"]]
    assert max(room) > 0
    padded = [dict(sh, subs=sh["subs"] + [()] * min(2, r))
              for sh, r in zip(view["shared"], room)]
    assert verifier_verdict(with_shared(fields, padded), offsets, codes, 3, 2)
    assert brute_force_problems(release_view(with_shared(fields, padded)), recs, 3, 2) == set()
    # a shared chunk that also names a cluster holding one of its codes elsewhere
    first = view["shared"][0]
    other = [c for c in range(res.n_clusters) if c not in first["clusters"] and set(
        first["domain"]) & {t for r in np.flatnonzero(res.cluster_of_record == c)
                            for t in recs[r]}]
    assert other
    wrong = [dict(first, clusters=sorted(first["clusters"] + [other[0]]))] + view["shared"][1:]
    assert not verifier_verdict(with_shared(fields, wrong), offsets, codes, 3, 2)
    assert brute_force_problems(release_view(with_shared(fields, wrong)), recs, 3, 2) != set()


# -- Guarantee 1 by enumeration ---------------------------------------------------------------

def distinct_arrangements(values):
    """Every distinct ordering of the multiset ``values``."""
    counts = Counter(values)
    keys = sorted(counts, key=repr)
    n = len(values)

    def rec(prefix):
        if len(prefix) == n:
            yield tuple(prefix)
            return
        for key in keys:
            if counts[key]:
                counts[key] -= 1
                prefix.append(key)
                yield from rec(prefix)
                prefix.pop()
                counts[key] += 1
    yield from rec([])


def guarantee_holds(view, cluster, S, k):
    """Whether some D' in I(D^A) has >= k records of ``cluster`` containing all of S.

    D' deals each record chunk's subrecords to the cluster's records in any order, each
    shared chunk's subrecords (stored non-empty ones plus implied empty ones) to the records
    of its joint cluster in any order, and each item-chunk code to any non-empty subset of the
    cluster's records.  Only the parts touching S matter, so subrecords are projected on S
    and the distinct arrangements of those projections are enumerated."""
    S = set(S)
    clusters = view["clusters"]
    size = clusters[cluster]["size"]
    choices = []                       # per relevant piece: list of tuples of sets per slot
    for dom, subs in clusters[cluster]["chunks"]:
        if S & set(dom):
            proj = [frozenset(set(s) & S) for s in subs]
            choices.append([a for a in distinct_arrangements(proj)])
    for s in clusters[cluster]["shared"]:
        sh = view["shared"][s]
        if not S & set(sh["domain"]):
            continue
        slots = sum(clusters[c]["size"] for c in sh["clusters"])
        proj = [frozenset(set(x) & S) for x in sh["subs"]]
        proj += [frozenset()] * (slots - len(proj))
        offset = sum(clusters[c]["size"] for c in sh["clusters"]
                     if sh["clusters"].index(c) < sh["clusters"].index(cluster))
        options = {a[offset:offset + size] for a in distinct_arrangements(proj)}
        choices.append(sorted(options, key=repr))
    for t in S & clusters[cluster]["items"]:
        subsets = []
        for mask in range(1, 1 << size):
            subsets.append(tuple(frozenset({t}) if mask >> i & 1 else frozenset()
                                 for i in range(size)))
        choices.append(subsets)
    for combo in itertools.product(*choices):
        have = [set() for _ in range(size)]
        for arrangement in combo:
            for i, part in enumerate(arrangement):
                have[i] |= part
        if sum(S <= h for h in have) >= k:
            return True
    return False


def guarantee_violations(view, recs, m, k):
    bad = []
    for r, rec in enumerate(recs):
        c = view["membership"][r]
        for j in range(1, m + 1):
            for S in itertools.combinations(rec, j):
                if not guarantee_holds(view, c, S, k):
                    bad.append((r, S))
    return bad


def test_guarantee_1_by_enumeration_on_tiny_inputs():
    rng = np.random.default_rng(99)
    checked = 0
    while checked < 150:
        k = int(rng.integers(2, 4))
        m = int(rng.integers(1, 4))
        D = int(rng.integers(1, 6))
        n = int(rng.integers(k, 9))
        recs = _records(rng, n, D, rng.integers(0, min(D, 3) + 1, n),
                        1.0 / np.arange(1, D + 1) ** rng.uniform(0, 2))
        offsets, codes = csr(recs)
        res = disassociate(offsets, codes, D, k, m, seed=int(rng.integers(0, 100)),
                           max_cluster_size=int(rng.integers(k, 2 * k + 1)),
                           max_joint_clusters=[None, 1, 2][int(rng.integers(0, 3))])
        view = release_view(res)
        assert guarantee_violations(view, recs, m, k) == []
        checked += 1


def test_guarantee_enumeration_detects_a_violation():
    # one cluster released as a single chunk of whole records: {0, 1} occurs once, and no
    # reconstruction can give it k = 2 records -- the enumeration must see that
    recs = [[0, 1], [0], [1], [0, 1, 2][:0]]
    view = release_view(naive_release(recs, [0, 0, 0, 0]))
    assert not guarantee_holds(view, 0, {0, 1}, 2)
    assert guarantee_holds(view, 0, {0}, 2)
    assert guarantee_violations(view, recs, 2, 2) == [(0, (0, 1))]
    # disassociated, the same records are safe
    res = disassociate(*csr(recs), 3, 2, 2, seed=0)
    assert guarantee_violations(release_view(res), recs, 2, 2) == []
