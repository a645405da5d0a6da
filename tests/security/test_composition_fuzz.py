"""A fixed-seed sample of the composition fuzzer (tests/fuzz/sequences.py; `make fuzz-sequences`
runs 1,000 sequences per method): sequences of 2-6 releases of one source -- random and
crafted selections (trackers, all rows but one, the same again), methods, quasi-identifier
sets, k, l and seeds, rows appended between releases, from a requester with SELECT or with
a policy only. A deid_reader then attacks them with tests/fuzz/check_composition.py (which
imports nothing of deid): no combination of released totals, per-group counts, per-cluster
moments or chunk supports may isolate fewer than k rows, no intersection of groups, classes or
clusters may leave a patient a crowd of fewer than k rows, no intersection of anatomy releases
fewer than l values, no two k^m generalizations (disassociation's AA model) of a patient's
record fewer than k candidate records for m known codes.
"""
import pytest

from fuzz import sequences

N = 3            # sequences per method
SEED = 32


@pytest.fixture(scope="module")
def sample(admin, url):
    return sequences.run(url, N, SEED)


def test_every_method_gets_its_sequences(sample):
    for method in ("anatomy", "generalization", "condensation", "disassociation"):
        assert sample["methods"][method]["sequences"] == N, sample["methods"]
    assert sum(c.get("releases", 0) for c in sample["methods"].values()) >= 4 * N


def test_no_attack_succeeds(sample):
    assert sample["successes"] == {}, sample["examples"]


def test_policy_refusals_are_uniform(sample):
    assert not [r for r in sample["refusals"] if "NOT UNIFORM" in r], sample["refusals"]


def test_the_checker_finds_what_the_rule_stops(admin, url):
    """With the override on every request (a requester with SELECT), the same kind of
    sequences give the attacker successes: the checker is not blind."""
    found = sequences.run(url, 3, SEED, override=True)
    assert found["successes"], found["methods"]


METHODS = ("anatomy", "generalization", "condensation", "disassociation")


@pytest.fixture(scope="module")
def regrouped(admin, url):
    """Every release of all rows by one method, its parameters drawn anew each time."""
    return sequences.run(url, 3, SEED, regroup=True)


def test_regrouping_is_refused_or_harmless(regrouped):
    assert regrouped["successes"] == {}, regrouped["examples"]
    assert regrouped["attacks"].get("crowds", 0) >= 1, regrouped


def test_the_checker_finds_something_for_every_method(admin, url):
    """With the override, regroupings and the ordinary sequences give the attacker a crowd or
    a cell below k (or anatomy values below l) for every method: each attack is armed where
    the rule refuses. (Disassociation's regroupings of the same records are nested -- a finer
    split of the same clusters, harmless -- so its successes come from selections and rows
    added between releases.)"""
    found = dict(sequences.run(url, 3, SEED, override=True, regroup=True)["successes"])
    found.update(sequences.run(url, 3, SEED, override=True)["successes"])
    for method in METHODS:
        assert any(s.startswith(method + ":") for s in found), found


# Disassociation's AA model (k^m by generalization over a public code hierarchy): two releases
# of the same four records at crossing cuts, each 2^2-anonymous alone. The first keeps c0 and
# c1 and generalizes c4, c5 to g1; the second the reverse. A reader who knows that a patient
# has c0 and c4 finds two candidate records in each release, and one in both.
AA_PARENT = {"c0": "g0", "c1": "g0", "c4": "g1", "c5": "g1", "g0": "*", "g1": "*", "*": None}
AA_RECORDS = {1: ["c0", "c4"], 2: ["c0", "c5"], 3: ["c1", "c4"], 4: ["c1", "c5"]}


def _aa_release(cut):
    return [sorted({cut.get(c, c) for c in codes}) for codes in AA_RECORDS.values()]


def test_the_aa_attack_places_records_and_narrows_crossing_cuts():
    from fuzz import check_composition as cc
    first = cc.aa_images(_aa_release({"c4": "g1", "c5": "g1"}), AA_RECORDS, AA_PARENT)
    second = cc.aa_images(_aa_release({"c0": "g0", "c1": "g0"}), AA_RECORDS, AA_PARENT)
    assert first[0][1] == frozenset({"c0", "g1"}) and second[0][1] == frozenset({"g0", "c4"})
    hit = cc.km_joint(AA_RECORDS, [(*first, 2, 2), (*second, 2, 2)])
    assert hit is not None and hit[2] == 1 and set(hit[1]) == set(AA_RECORDS[hit[0]]), hit
    # the same cut twice, or a coarser one (everything to the root): nothing narrower
    same = cc.aa_images(_aa_release({"c4": "g1", "c5": "g1"}), AA_RECORDS, AA_PARENT)
    root = cc.aa_images([["*"]] * 4, AA_RECORDS, AA_PARENT)
    assert cc.km_joint(AA_RECORDS, [(*first, 2, 2), (*same, 2, 2), (*root, 2, 2)]) is None
    # released records that no cut of the hierarchy gives: the reader places nothing
    assert cc.aa_images([["c0", "g0"]] * 4, AA_RECORDS, AA_PARENT) is None


AA_SEED = 35     # its disassociation sequences are all of the AA model


def test_aa_releases_are_placed_and_attacked(admin, url):
    """Re-releases of all records by k^m generalization, k and m drawn anew: the reader places
    every release's records through the public hierarchy and links a patient's records
    across them; no patient keeps fewer than k candidates."""
    found = sequences.run(url, 2, AA_SEED, regroup=True, methods=("disassociation",))
    assert found["attacks"].get("km_joint", 0) >= 1, found
    assert not found["attacks"].get("km_unplaced"), found
    assert found["successes"] == {}, found["examples"]
