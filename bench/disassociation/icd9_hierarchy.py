"""The ICD-9-CM hierarchy code -> 3-digit category -> section -> chapter (003 Sec. 6.1 levels
1, 2, 3) for the codes of a data set, and 003's utility policies built from it.

    python bench/disassociation/icd9_hierarchy.py CODE...   # print ARX-style rows for deid.load_hierarchy

Chapters are the 17 public ICD-9-CM chapter ranges (001-139 ... 800-999).  Deviation: the
public *section* list (about 120 ranges such as 001-009, 010-018, ...) is not shipped here;
a section is approximated by the decade of 3-digit categories inside a chapter (e.g. 400-409
within 390-459), clipped to the chapter.  V and E codes form one chapter each (the two
supplementary classifications); the bench generator makes none.

Rows are ``code;category;section;chapter;*``, the format deid.load_hierarchy reads.
Policies (003 Sec. 6.1), each a list of disjoint code lists:
  * ``level_policy(codes, 1|2|3)``: one constraint per category / section / chapter;
  * ``similarity_policy(codes, s)``: constraints of s sibling codes (003 "sim s").  Our
    generated categories hold ~3 codes, so siblings are the codes of one *section*, taken in
    code order, s at a time; a remainder of fewer than s codes forms no constraint;
  * ``frequency_policy(offsets, codes, n_codes, support)``: 003 "sup p", frequent itemsets
    (support >= p % of records) of 1..4 codes; 003 does not say how it made them disjoint,
    so we take them greedily, larger itemsets first, then higher support, skipping any that
    overlaps one already taken.
"""
import sys

import numpy as np

CHAPTERS = [(1, 139), (140, 239), (240, 279), (280, 289), (290, 319), (320, 389), (390, 459),
            (460, 519), (520, 579), (580, 629), (630, 679), (680, 709), (710, 739),
            (740, 759), (760, 779), (780, 799), (800, 999)]


def chapter_of(category):
    for lo, hi in CHAPTERS:
        if lo <= category <= hi:
            return f"{lo:03d}-{hi:03d}"
    raise ValueError(f"no ICD-9 chapter holds category {category}")


def section_of(category):
    for lo, hi in CHAPTERS:
        if lo <= category <= hi:
            a = max(lo, category // 10 * 10)
            b = min(hi, category // 10 * 10 + 9)
            return f"{a:03d}-{b:03d}"
    raise ValueError(f"no ICD-9 chapter holds category {category}")


SUPPLEMENTARY = {"V": ("V01-V91", 2), "E": ("E000-E999", 3)}   # chapter, digits after the letter


def ancestors(code):
    """(category, section, chapter) labels of an ICD-9 code such as '401.9', 'V45.81' or
    'E880.9' (V and E codes: the two supplementary classifications as chapters)."""
    head = code.split(".")[0]
    if head[:1] in SUPPLEMENTARY:
        chapter, digits = SUPPLEMENTARY[head[0]]
        n = int(head[1:])
        lo = n // 10 * 10
        return head, f"S{head[0]}{lo:0{digits}d}-{head[0]}{lo + 9:0{digits}d}", "C" + chapter
    cat = int(head)
    return f"{cat:03d}", "S" + section_of(cat), "C" + chapter_of(cat)


def rows(codes):
    """ARX-style hierarchy rows value;level1;level2;level3;* for deid.load_hierarchy."""
    return "\n".join(";".join((c,) + ancestors(c) + ("*",)) for c in sorted(set(codes)))


def level_policy(names, level):
    """003 hierarchy-based policy: code ids grouped by their ancestor at ``level`` (1..3)."""
    key = [ancestors(n)[level - 1] for n in names]
    groups = {}
    for i, g in enumerate(key):
        groups.setdefault(g, []).append(i)
    return [groups[g] for g in sorted(groups)]


def similarity_policy(names, size):
    """003 "sim size": constraints of ``size`` sibling codes (same section, code order)."""
    out = []
    for group in level_policy(names, 2):
        group = sorted(group, key=lambda i: names[i])
        out += [group[i:i + size] for i in range(0, len(group) - size + 1, size)]
    return out


def frequent_itemsets(offsets, codes, n_codes, min_count, max_size=4):
    """{itemset tuple: support} of 1..max_size codes with support >= min_count (Apriori with
    numpy intersections; fine for a few hundred frequent codes)."""
    n = offsets.size - 1
    row = np.repeat(np.arange(n), np.diff(offsets))
    by_code = [np.sort(row[codes == c]) for c in range(n_codes)]
    level = {(c,): by_code[c] for c in range(n_codes) if by_code[c].size >= min_count}
    singles = sorted(c for (c,) in level)
    out = {q: r.size for q, r in level.items()}
    for _ in range(max_size - 1):
        nxt = {}
        for q, r in level.items():
            for c in singles:
                if c > q[-1] and all(q[:j] + q[j + 1:] + (c,) in level or len(q) == 1
                                     for j in range(len(q))):
                    both = np.intersect1d(r, by_code[c], assume_unique=True)
                    if both.size >= min_count:
                        nxt[q + (c,)] = both
        level = nxt
        out.update({q: r.size for q, r in level.items()})
    return out


def frequency_policy(offsets, codes, n_codes, support_pct, max_size=4):
    """003 "sup p": disjoint frequent itemsets (see the module docstring)."""
    min_count = int(np.ceil(support_pct / 100 * (offsets.size - 1)))
    fi = frequent_itemsets(offsets, codes, n_codes, min_count, max_size)
    taken, out = set(), []
    for q in sorted(fi, key=lambda q: (-len(q), -fi[q], q)):
        if not taken & set(q):
            out.append(list(q))
            taken |= set(q)
    return out


if __name__ == "__main__":
    print(rows(sys.argv[1:]))
