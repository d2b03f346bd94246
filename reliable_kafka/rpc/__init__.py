"""The authenticated socket transport between the driver and executors: msgpack frames, a
mutual HMAC handshake per connection (optionally inside TLS), calls and notifications both ways.

    new_secret() -> bytes
    RpcServer(secret, handler, *, host, port, ssl_context, max_frame_bytes, on_connection_closed, name)
        .start() .address .connections() .stop()
    connect(host, port, secret, handler=None, *, timeout_s, ssl_context, server_hostname,
            on_closed, max_frame_bytes) -> Connection
    Connection.call(method, body, timeout_s=30.0) .notify(method, body) .close() .closed .peer
    Handler = Callable[[Connection, str, Any], Any]
    RpcError > FrameError, AuthenticationError, ConnectionClosed, CallTimeout, RemoteError
"""

from reliable_kafka.rpc.auth import new_secret
from reliable_kafka.rpc.client import connect
from reliable_kafka.rpc.connection import Connection, Handler
from reliable_kafka.rpc.errors import (
    AuthenticationError,
    CallTimeout,
    ConnectionClosed,
    FrameError,
    RemoteError,
    RpcError,
)
from reliable_kafka.rpc.framing import DEFAULT_MAX_FRAME_BYTES
from reliable_kafka.rpc.server import RpcServer

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "AuthenticationError",
    "CallTimeout",
    "Connection",
    "ConnectionClosed",
    "FrameError",
    "Handler",
    "RemoteError",
    "RpcError",
    "RpcServer",
    "connect",
    "new_secret",
]
