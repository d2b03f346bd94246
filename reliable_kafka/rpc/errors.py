"""The errors of the RPC transport; every one is an :class:`RpcError`."""

from __future__ import annotations


class RpcError(Exception):
    """Base of every error raised by :mod:`reliable_kafka.rpc`."""


class FrameError(RpcError):
    """A frame that is too large, truncated, not msgpack, or not the expected shape."""


class AuthenticationError(RpcError):
    """The peer did not prove it holds the shared secret (or refused our proof)."""


class ConnectionClosed(RpcError):
    """The connection is closed, or closed while a call waited for its reply."""


class CallTimeout(RpcError, TimeoutError):
    """No reply arrived within the call's timeout; the connection stays open."""


class RemoteError(RpcError):
    """The peer's handler raised: its exception's type name and message (never its traceback,
    which could carry data of the peer's process)."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message
