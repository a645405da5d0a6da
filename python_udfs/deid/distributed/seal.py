"""Sealed bytes between deid's definers on the nodes and the coordinator (docs/sharding.md,
"the policy requester"): a generalization's class tables hold counts below k, and travel
through the caller's PL/Proxy session, so for a requester without SELECT they are sealed
under a key the caller never sees and opened only inside the coordinator's definer.

Standard library only (no compiled code in the server):

    run key     K_run = HMAC-SHA256(warehouse key, "classes" || run): one key per run, so a
                table sealed for one run opens in no other
    keystream   SHAKE-256(K_enc || nonce), XORed with the plaintext (K_enc, K_mac: HMAC of
                K_run with "enc" and "mac", a key for each job); the nonce is 16 random bytes
    tag         HMAC-SHA256(K_mac, version || nonce || purpose || node || ciphertext),
                compared in constant time: a forged, truncated or altered table, one sealed
                for another purpose or another node, fails with DE002 before anything of it
                is used

sealed = version (1 byte) || nonce (16) || len(node) (2) || node || ciphertext || tag (32).
The node's name is authenticated, not secret: the coordinator opens one table per node and
refuses a node named twice (a table replayed as another node's would count its rows twice).
"""
import hashlib
import hmac
import secrets
import struct
from typing import Dict, Iterable, Tuple

import numpy as np

from ..errors import DeidError, VERIFICATION_FAILED

VERSION = b"\x01"
NONCE = 16
TAG = 32
HINT = ("A node's sealed table was altered on its way to the coordinator, or belongs to another "
        "run; run the request again through deid.anonymize_request on the coordinator.")


def run_key(key: bytes, run: str) -> bytes:
    return hmac.new(key, b"classes" + run.encode(), hashlib.sha256).digest()


def _subkeys(key: bytes, run: str) -> Tuple[bytes, bytes]:
    k = run_key(key, run)
    return (hmac.new(k, b"enc", hashlib.sha256).digest(),
            hmac.new(k, b"mac", hashlib.sha256).digest())


def _xor(data: bytes, enc: bytes, nonce: bytes) -> bytes:
    stream = hashlib.shake_256(enc + nonce).digest(len(data)) if data else b""
    return (np.frombuffer(data, np.uint8) ^ np.frombuffer(stream, np.uint8)).tobytes()


def _tag(mac: bytes, nonce: bytes, purpose: str, node: bytes, body: bytes) -> bytes:
    # every variable-length field with its length: no boundary can move under one tag
    head = (VERSION + nonce + struct.pack(">H", len(purpose.encode())) + purpose.encode()
            + struct.pack(">H", len(node)) + node)
    return hmac.new(mac, head + body, hashlib.sha256).digest()


def seal(key: bytes, run: str, purpose: str, node: str, payload: bytes) -> bytes:
    """`payload` encrypted and authenticated for the coordinator's definer of `run`."""
    enc, mac = _subkeys(key, run)
    nonce = secrets.token_bytes(NONCE)
    name = node.encode()
    body = _xor(bytes(payload), enc, nonce)
    return (VERSION + nonce + struct.pack(">H", len(name)) + name + body
            + _tag(mac, nonce, purpose, name, body))


def open_one(key: bytes, run: str, purpose: str, sealed: bytes) -> Tuple[str, bytes]:
    """(node, payload) of one sealed table; DE002 for anything not sealed by deid for this
    run and purpose."""
    sealed = bytes(sealed or b"")
    if len(sealed) < 1 + NONCE + 2 + TAG or sealed[:1] != VERSION:
        raise refused()
    nonce = sealed[1:1 + NONCE]
    (n,) = struct.unpack(">H", sealed[1 + NONCE:3 + NONCE])
    start = 3 + NONCE + n
    if len(sealed) < start + TAG:
        raise refused()
    name, body, tag = sealed[3 + NONCE:start], sealed[start:-TAG], sealed[-TAG:]
    enc, mac = _subkeys(key, run)
    if not hmac.compare_digest(tag, _tag(mac, nonce, purpose, name, body)):
        raise refused()
    return name.decode(), _xor(body, enc, nonce)


def open_all(key: bytes, run: str, purpose: str, sealed: Iterable[bytes],
             nodes: int) -> Dict[str, bytes]:
    """{node: payload} of exactly `nodes` tables, each node once."""
    out: Dict[str, bytes] = {}
    for s in sealed:
        node, payload = open_one(key, run, purpose, s)
        if node in out:
            raise refused()
        out[node] = payload
    if len(out) != nodes:
        raise refused()
    return out


def refused() -> DeidError:
    return DeidError(VERIFICATION_FAILED, "a sealed class table does not open", hint=HINT)
