"""distributed/seal.py: a class table sealed on a node opens only in a definer holding the
warehouse key, for the same run, purpose and node; the sealed bytes show nothing of the
table (no count in clear), and every forgery -- a flipped bit, a truncation, another run,
another purpose, a node's name moved into the body, a table replayed as a second node's --
is refused with DE002 before anything of it is used."""
import os

import pytest

from deid.distributed import seal
from deid.errors import DeidError

KEY = b"k" * 40
PAYLOAD = bytes(range(256)) * 5 + b"counts 1 2 3 4"


def refused(fn, *args):
    with pytest.raises(DeidError) as e:
        fn(*args)
    assert e.value.sqlstate == "DE002" and e.value.hint
    return e


def test_a_sealed_table_opens_for_its_run_purpose_and_node():
    s = seal.seal(KEY, "run1", "classes", "db:5433", PAYLOAD)
    assert seal.open_one(KEY, "run1", "classes", s) == ("db:5433", PAYLOAD)
    assert seal.seal(KEY, "run1", "classes", "n", b"") and \
        seal.open_one(KEY, "run1", "classes", seal.seal(KEY, "run1", "classes", "n", b"")) == ("n", b"")


def test_the_sealed_bytes_show_nothing_of_the_table():
    a, b = (seal.seal(KEY, "run1", "classes", "n", PAYLOAD) for _ in range(2))
    assert a != b                                   # a fresh nonce each time
    assert PAYLOAD[:16] not in a and b"counts" not in a
    zeros = seal.seal(KEY, "run1", "classes", "n", bytes(4096))
    body = zeros[1 + seal.NONCE + 2 + 1:-seal.TAG]
    assert body.count(0) < 64                       # the keystream, not the zeros


def test_every_forgery_is_refused():
    s = seal.seal(KEY, "run1", "classes", "node0", PAYLOAD)
    for i in (0, 5, 1 + seal.NONCE, 1 + seal.NONCE + 3, len(s) // 2, len(s) - 1):
        flipped = bytearray(s)
        flipped[i] ^= 1
        refused(seal.open_one, KEY, "run1", "classes", bytes(flipped))
    for cut in (0, 1, 20, len(s) - 1):
        refused(seal.open_one, KEY, "run1", "classes", s[:cut])
    refused(seal.open_one, KEY, "run2", "classes", s)
    refused(seal.open_one, KEY, "run1", "stored", s)
    refused(seal.open_one, b"x" * 40, "run1", "classes", s)
    refused(seal.open_one, KEY, "run1", "classes", None)
    refused(seal.open_one, KEY, "run1", "classes", os.urandom(len(s)))


def test_a_node_name_cannot_be_moved_into_the_body():
    s = seal.seal(KEY, "run1", "classes", "node01", PAYLOAD)
    head = 1 + seal.NONCE
    moved = bytearray(s)
    moved[head:head + 2] = (5).to_bytes(2, "big")   # "node0" + "1" taken as the body's
    refused(seal.open_one, KEY, "run1", "classes", bytes(moved))


def test_the_coordinator_opens_each_node_once_and_all_of_them():
    a = seal.seal(KEY, "run1", "classes", "node0", b"a")
    b = seal.seal(KEY, "run1", "classes", "node1", b"b")
    assert seal.open_all(KEY, "run1", "classes", [a, b], 2) == {"node0": b"a", "node1": b"b"}
    replayed = seal.seal(KEY, "run1", "classes", "node0", b"a")
    refused(seal.open_all, KEY, "run1", "classes", [a, replayed], 2)
    refused(seal.open_all, KEY, "run1", "classes", [a], 2)
