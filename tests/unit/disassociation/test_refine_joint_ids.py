"""Refining's joint clusters (003 Fig. 10) numbered by the first appearance of their cluster
lists: the hashed numbering equals the one by each list's bytes, also when lists share a
hash key (then it falls back to the bytes)."""
import numpy as np

from deid.methods.disassociation import refine


def lists(rng, n):
    sizes = rng.integers(1, 5, n)
    pool = [np.sort(rng.choice(30, s, replace=False)) for s in sizes[:max(n // 4, 1)]]
    chosen = [pool[i] for i in rng.integers(0, len(pool), n)]
    return np.concatenate(chosen).astype(np.int64), np.array([c.size for c in chosen], np.int64)


def test_hashed_numbering_is_the_exact_one():
    rng = np.random.default_rng(2)
    values, sizes = lists(rng, 400)
    got, first = refine._joint_ids(values, sizes)
    want, want_first = refine._joint_ids_exact(values, sizes)
    assert got.tolist() == want.tolist() and first.tolist() == want_first.tolist()
    assert got[0] == 0 and len(set(got.tolist())) < 400


def test_a_shared_key_falls_back_to_the_bytes(monkeypatch):
    rng = np.random.default_rng(4)
    values, sizes = lists(rng, 100)
    monkeypatch.setattr(refine, "_weights", lambda n: np.zeros(max(n, 1), np.uint64))
    got, first = refine._joint_ids(values, sizes)       # every list of one length: one key
    want, want_first = refine._joint_ids_exact(values, sizes)
    assert got.tolist() == want.tolist() and first.tolist() == want_first.tolist()
