"""Dictionary codes from hashtext() values (hashcodes: codes_from_hashes, distinct_hashes)."""
import numpy as np
import pytest

from deid.read.hashcodes import codes_from_hashes, perfect_slots
from deid.errors import DeidError


@pytest.mark.parametrize("distinct", [1, 2, 7, 900, 3000])
def test_codes_match_the_dictionary_position(distinct):
    """Small dictionaries use a collision-free table of hash bits, large ones a
    binary search; both give each row its value's position, NULL rows len(dict)."""
    rng = np.random.default_rng(distinct)
    dh = np.unique(rng.integers(-2**31, 2**31, distinct)).astype(np.int32)
    rng.shuffle(dh)                                   # dictionary order is not hash order
    idx = rng.integers(0, len(dh), 20_000)
    null = rng.random(idx.size) < 0.05
    hashes = np.where(null, 0, dh[idx]).astype(np.int32)
    codes = codes_from_hashes("c", hashes, list(dh), null)
    assert np.array_equal(codes, np.where(null, len(dh), idx))
    assert (perfect_slots(dh) is not None) == (distinct <= 1000)


@pytest.mark.parametrize("distinct", [5, 3000])
def test_a_value_missing_from_the_dictionary_is_a_retry_error(distinct):
    dh = np.arange(distinct, dtype=np.int32) * 7919
    hashes = np.array([dh[1], 123456789, dh[0]], np.int32)
    with pytest.raises(DeidError) as e:
        codes_from_hashes("c", hashes, list(dh), np.zeros(3, bool))
    assert e.value.sqlstate == "40001"


@pytest.mark.parametrize("n, distinct, low_bits_shared", [
    (0, 1, False), (1, 1, False), (1000, 3, False), (5000, 200, True), (20000, 15000, False),
    (3000, 2000, True)])
def test_distinct_hashes(n, distinct, low_bits_shared):
    """hashcodes.distinct_hashes: every row's index into the distinct 64-bit hashes, a row holding
    each (the first) -- also when many hashes share their low bits (the slot table's collisions),
    for the read's big-endian field and with the slots given."""
    from deid.read.hashcodes import distinct_hashes
    rng = np.random.default_rng(n + distinct)
    values = rng.integers(-2 ** 63, 2 ** 63 - 1, size=distinct, dtype=np.int64)
    if low_bits_shared:
        values = (values & ~np.int64(0xFFFF)) | np.int64(0x1234)
    h = values[rng.integers(0, distinct, size=n)]
    for form in (h, h.astype(">i8")):                    # native, or the read's big-endian field
        for slot in (None, (h & 0xFFFF).astype(np.intp)):
            d, rows, index = distinct_hashes(form, slot=slot)
            assert d.dtype == np.int64
            assert sorted(d.tolist()) == sorted(set(h.tolist()))
            assert np.array_equal(h[rows], d)
            assert np.array_equal(index.take(d), h)
            # the first row holding each hash
            assert all(int(np.flatnonzero(h == v)[0]) == r for v, r in zip(d.tolist()[:50], rows.tolist()[:50]))


def test_low_16_bits_of_packed_rows():
    """hashcodes.low_16_bits: the low 16 bits of a big-endian 8-byte field of packed rows."""
    from deid.read.hashcodes import low_16_bits
    from deid.read.parallel_pass import layout as _layout
    rng = np.random.default_rng(3)
    layout = _layout([">i8", ">i4", ">i8"])
    rows = np.zeros(1000, layout)
    rows["f0"] = rng.integers(-2 ** 63, 2 ** 63 - 1, size=1000, dtype=np.int64)
    rows["f2"] = rng.integers(-2 ** 63, 2 ** 63 - 1, size=1000, dtype=np.int64)
    buf = rows.tobytes()
    joined = np.frombuffer(buf, np.uint8).copy()     # the parallel parts' joined buffer
    for i in (0, 2):
        assert np.array_equal(low_16_bits(buf, layout, i, 1000), rows[f"f{i}"].astype(np.int64) & 0xFFFF)
        assert np.array_equal(low_16_bits(joined, layout, i, 1000), rows[f"f{i}"] & 0xFFFF)
    assert low_16_bits(b"", layout, 0, 0) is None


def test_distinct_hash_first_seen_after_the_head():
    """A hash whose first row comes after distinct_hashes's head of rows still gets its first row."""
    from deid.read.hashcodes import distinct_hashes
    h = np.full(4 * (1 << 16) + 10, 77, np.int64)
    h[-5:] = [5, 6, 5, 77, 6]
    d, rows, index = distinct_hashes(h)
    assert d.tolist() == [5, 6, 77] and rows.tolist() == [len(h) - 5, len(h) - 4, 0]
    assert np.array_equal(index.take(d), h)
