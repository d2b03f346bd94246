"""Shared pieces of the RPC tests: servers that always stop, raw sockets, waiting for events."""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import ssl
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.rpc import Connection, RpcServer, connect
from reliable_kafka.rpc.auth import Secret, client_handshake
from tests.support import DEFAULT_TIMEOUT_S

# Liveness bound for things that must happen; never a measure of speed.
PATIENCE_S = DEFAULT_TIMEOUT_S


def echo_handler(connection: Connection, method: str, body: Any) -> Any:
    if method == "echo":
        return body
    if method == "fail":
        raise ValueError(f"refused {body!r}")
    raise LookupError(method)


@contextlib.contextmanager
def running_server(
    secret: bytes, handler: Callable[[Connection, str, Any], Any] = echo_handler, **kwargs: Any
) -> Iterator[RpcServer]:
    server = RpcServer(secret, handler, **kwargs).start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def connected(server: RpcServer, secret: bytes, **kwargs: Any) -> Iterator[Connection]:
    connection = connect(*server.address, secret, **kwargs)
    try:
        yield connection
    finally:
        connection.close()
        connection.join(PATIENCE_S)


def raw_socket(server: RpcServer) -> socket.socket:
    sock = socket.create_connection(server.address, timeout=PATIENCE_S)
    return sock


def authenticated_raw_socket(server: RpcServer, secret: bytes) -> socket.socket:
    """A socket past the handshake, on which the test writes whatever bytes it likes."""
    sock = raw_socket(server)
    client_handshake(sock, Secret(secret), PATIENCE_S)
    sock.settimeout(PATIENCE_S)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the socket (times out after PATIENCE_S)."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass  # a close with our unread bytes still queued on the server's side
    return b"".join(chunks)


def warnings_from(
    caplog: pytest.LogCaptureFixture, logger_prefix: str = "reliable_kafka"
) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith(logger_prefix)]


def self_signed_tls(directory: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """Server and client TLS contexts for a certificate made now for localhost/127.0.0.1."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip(
            "no openssl executable to make a self-signed certificate (cryptography is not a dependency)"
        )
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cafile=str(cert))
    return server_context, client_context
