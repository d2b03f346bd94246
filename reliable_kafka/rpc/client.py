"""Opening an authenticated connection to an :class:`~reliable_kafka.rpc.server.RpcServer`."""

from __future__ import annotations

import contextlib
import socket
import ssl

from reliable_kafka.rpc import sockets
from reliable_kafka.rpc.auth import Secret, client_handshake
from reliable_kafka.rpc.connection import DEFAULT_MAX_CALL_THREADS, ClosedCallback, Connection, Handler
from reliable_kafka.rpc.framing import DEFAULT_MAX_FRAME_BYTES
from reliable_kafka.rpc.server import format_address


def connect(
    host: str,
    port: int,
    secret: bytes | Secret,
    handler: Handler | None = None,
    *,
    timeout_s: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    on_closed: ClosedCallback | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_call_threads: int = DEFAULT_MAX_CALL_THREADS,
    name: str = "rpc-client",
) -> Connection:
    """Connect, authenticate both ways and start reading; ``handler`` serves the server's calls.

    ``timeout_s`` bounds the TCP connect and each step of the (TLS and secret) handshake.
    Raises AuthenticationError when the secrets differ, FrameError when the server speaks
    something else, OSError (incl. TimeoutError) for network failures.
    """
    checked = Secret(secret)
    raw = socket.create_connection((host, port), timeout=timeout_s)
    sock = raw
    try:
        sockets.configure(raw)
        if ssl_context is not None:
            hostname = server_hostname if server_hostname is not None else host
            sock = ssl_context.wrap_socket(raw, server_hostname=hostname)
        client_handshake(sock, checked, timeout_s)
        sock.settimeout(None)
    except BaseException:
        with contextlib.suppress(OSError):
            sock.close()
        raise
    connection = Connection(
        sock,
        handler,
        peer=format_address(host, port),
        max_frame_bytes=max_frame_bytes,
        on_closed=on_closed,
        name=name,
        max_call_threads=max_call_threads,
    )
    return connection.start()
