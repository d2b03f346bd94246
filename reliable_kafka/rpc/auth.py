"""Mutual HMAC-SHA256 challenge-response over a fresh socket, before any other frame.

    server -> client   {"v": 1, "nonce": Ns}
    client -> server   {"nonce": Nc, "proof": HMAC(secret, CLIENT_LABEL | Ns | Nc)}
    server -> client   {"ok": True, "proof": HMAC(secret, SERVER_LABEL | Ns | Nc)}  or  {"ok": False}

Each side contributes a fresh 32-byte nonce, so no proof can be replayed on another connection,
and the two directions use different labels, so a proof cannot be reflected back to its sender.
Handshake frames are capped at a few hundred bytes: an unauthenticated peer gets no large buffers.
The secret itself never crosses the wire and never appears in a log line, repr or exception.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import time
from typing import Any

from reliable_kafka.rpc.errors import AuthenticationError, FrameError
from reliable_kafka.rpc.framing import FrameReader, write_frame

VERSION = 1
NONCE_BYTES = 32
MIN_SECRET_BYTES = 16
DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
HANDSHAKE_MAX_FRAME_BYTES = 512
_CLIENT_LABEL = b"reliable-kafka rpc v1 client proof\x00"
_SERVER_LABEL = b"reliable-kafka rpc v1 server proof\x00"


def new_secret() -> bytes:
    """A fresh per-context secret: 32 random bytes."""
    return secrets.token_bytes(32)


class Secret:
    """Holds the shared secret so that no repr, log line or traceback shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes | Secret) -> None:
        if isinstance(value, Secret):
            value = value._value
        if not isinstance(value, bytes | bytearray):
            raise TypeError(f"the secret must be bytes, got {type(value).__name__}")
        if len(value) < MIN_SECRET_BYTES:
            raise ValueError(f"the secret must be at least {MIN_SECRET_BYTES} bytes")
        self._value = bytes(value)

    def __repr__(self) -> str:
        return "Secret(<hidden>)"

    def __reduce__(self) -> Any:
        # A secret must not be pickled along with whatever holds it.
        raise TypeError("a Secret cannot be pickled")

    def proof(self, label: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
        return hmac.new(self._value, label + server_nonce + client_nonce, hashlib.sha256).digest()


def server_handshake(
    sock: socket.socket, secret: Secret, timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S
) -> None:
    """Authenticate the client on ``sock``; AuthenticationError, FrameError or OSError (incl.
    TimeoutError once ``timeout_s`` has passed in all) otherwise."""
    sock.settimeout(timeout_s)
    reader = FrameReader(sock, HANDSHAKE_MAX_FRAME_BYTES, deadline=time.monotonic() + timeout_s)
    server_nonce = secrets.token_bytes(NONCE_BYTES)
    write_frame(sock, {"v": VERSION, "nonce": server_nonce}, HANDSHAKE_MAX_FRAME_BYTES)
    hello = _expect_map(reader.read_frame(), ("nonce", "proof"))
    client_nonce, client_proof = _nonce(hello["nonce"]), _proof(hello["proof"])
    expected = secret.proof(_CLIENT_LABEL, server_nonce, client_nonce)
    if not hmac.compare_digest(expected, client_proof):
        write_frame(sock, {"ok": False}, HANDSHAKE_MAX_FRAME_BYTES)
        raise AuthenticationError("the client's proof does not match the shared secret")
    proof = secret.proof(_SERVER_LABEL, server_nonce, client_nonce)
    write_frame(sock, {"ok": True, "proof": proof}, HANDSHAKE_MAX_FRAME_BYTES)


def client_handshake(
    sock: socket.socket, secret: Secret, timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S
) -> None:
    """Authenticate to the server on ``sock`` and check that it holds the secret too (within
    ``timeout_s`` in all)."""
    sock.settimeout(timeout_s)
    reader = FrameReader(sock, HANDSHAKE_MAX_FRAME_BYTES, deadline=time.monotonic() + timeout_s)
    challenge = _expect_map(reader.read_frame(), ("v", "nonce"))
    if challenge["v"] != VERSION:
        raise FrameError(f"unsupported handshake version {challenge['v']!r}")
    server_nonce = _nonce(challenge["nonce"])
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    proof = secret.proof(_CLIENT_LABEL, server_nonce, client_nonce)
    write_frame(sock, {"nonce": client_nonce, "proof": proof}, HANDSHAKE_MAX_FRAME_BYTES)
    answer = _expect_map(reader.read_frame(), ("ok",))
    if answer["ok"] is not True:
        raise AuthenticationError("the server refused our proof: the secrets differ")
    server_proof = _proof(answer.get("proof"))
    expected = secret.proof(_SERVER_LABEL, server_nonce, client_nonce)
    if not hmac.compare_digest(expected, server_proof):
        raise AuthenticationError("the server's proof does not match the shared secret")


def _expect_map(value: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict) or any(key not in value for key in keys):
        raise FrameError(f"unexpected handshake message (expected a map with {', '.join(keys)})")
    return value


def _nonce(value: Any) -> bytes:
    if not isinstance(value, bytes) or len(value) != NONCE_BYTES:
        raise FrameError("handshake nonce is not 32 bytes")
    return value


def _proof(value: Any) -> bytes:
    if not isinstance(value, bytes) or len(value) != hashlib.sha256().digest_size:
        raise FrameError("handshake proof is not an HMAC-SHA256 digest")
    return value
