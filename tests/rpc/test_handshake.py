"""The handshake on real sockets: who gets in, who is turned away, and that the server goes on."""

from __future__ import annotations

import logging
import socket
import struct
import threading

import pytest

from reliable_kafka.rpc import AuthenticationError, RpcServer, connect, new_secret
from reliable_kafka.rpc.auth import Secret, client_handshake, server_handshake
from reliable_kafka.rpc.framing import FrameReader, write_frame
from tests.rpc.helpers import (
    PATIENCE_S,
    connected,
    raw_socket,
    read_until_closed,
    running_server,
    warnings_from,
)
from tests.support import wait_until


def test_new_secrets_are_32_random_bytes() -> None:
    first, second = new_secret(), new_secret()
    assert len(first) == 32
    assert first != second


def test_short_or_non_bytes_secrets_are_refused_without_echoing_them() -> None:
    with pytest.raises(ValueError, match="at least 16 bytes") as info:
        Secret(b"short-secret")
    assert "short-secret" not in str(info.value)
    with pytest.raises(TypeError):
        Secret("a str is not a secret")  # type: ignore[arg-type]


def test_the_secret_never_shows_in_reprs_or_logs(secret: bytes, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    assert secret.hex() not in repr(Secret(secret))
    with running_server(secret) as server:
        assert repr(secret) not in repr(server)
        with connected(server, secret) as connection:
            assert connection.call("echo", "hi") == "hi"
            assert repr(secret) not in repr(connection)
        with pytest.raises(AuthenticationError):
            connect(*server.address, new_secret())
    for text in (caplog.text, *(str(r.args) for r in caplog.records)):
        assert secret.hex() not in text
        assert repr(secret)[2:-1] not in text


def test_a_client_with_the_secret_gets_in(secret: bytes) -> None:
    with running_server(secret) as server, connected(server, secret) as connection:
        assert connection.call("echo", {"a": [1, 2]}) == {"a": [1, 2]}
        assert not connection.closed
        wait_until(lambda: len(server.connections()) == 1, what="the server to list the connection")


def test_a_client_with_another_secret_is_refused_and_logged_once(
    secret: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with running_server(secret) as server:
        with pytest.raises(AuthenticationError, match="secrets differ"):
            connect(*server.address, new_secret())
        wait_until(lambda: warnings_from(caplog), what="the rejection to be logged")
        assert server.connections() == []
        with connected(server, secret) as connection:  # and the server still serves
            assert connection.call("echo", 1) == 1
    [warning] = warnings_from(caplog)
    assert "rejected 127.0.0.1:" in warning.getMessage()
    assert "AuthenticationError" in warning.getMessage()


def test_a_client_refuses_a_server_that_does_not_know_the_secret(secret: bytes) -> None:
    """The server proves itself too: an impostor that accepts any client proof is caught."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def impostor() -> None:
        sock, _ = listener.accept()
        with sock:
            reader = FrameReader(sock, 512)
            write_frame(sock, {"v": 1, "nonce": b"n" * 32})
            reader.read_frame()
            write_frame(sock, {"ok": True, "proof": b"p" * 32})
            sock.recv(1)

    thread = threading.Thread(target=impostor)
    thread.start()
    try:
        with pytest.raises(AuthenticationError, match="server's proof does not match"):
            connect("127.0.0.1", port, secret)
    finally:
        thread.join(PATIENCE_S)
        listener.close()


def test_handshake_functions_work_over_a_socket_pair(secret: bytes) -> None:
    a, b = socket.socketpair()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            server_handshake(a, Secret(secret), PATIENCE_S)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    client_handshake(b, Secret(secret), PATIENCE_S)
    thread.join(PATIENCE_S)
    a.close()
    b.close()
    assert errors == []


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "exceeds the limit"),  # "GET " is a ~1.2 GB length
        (struct.pack(">I", 2**31), "2147483648 exceeds the limit"),
        (struct.pack(">I", 3) + b"\xc1\xc1\xc1", "not msgpack"),
        (struct.pack(">I", 1) + b"\x01", "unexpected handshake message"),
    ],
)
def test_garbage_instead_of_a_handshake_closes_that_socket_only(
    secret: bytes, caplog: pytest.LogCaptureFixture, payload: bytes, reason: str
) -> None:
    with running_server(secret) as server, connected(server, secret) as live:
        with raw_socket(server) as sock:
            sock.sendall(payload)
            read_until_closed(sock)  # the challenge, then the server hangs up
        wait_until(lambda: warnings_from(caplog), what="the rejection to be logged")
        assert live.call("echo", "still here") == "still here"
    [warning] = warnings_from(caplog)
    assert reason in warning.getMessage()
    assert "127.0.0.1:" in warning.getMessage()
    assert warning.exc_info is None  # one line, no traceback


def test_a_silent_peer_is_dropped_after_the_handshake_timeout(
    secret: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with running_server(secret, handshake_timeout_s=0.2) as server:
        with raw_socket(server) as sock:
            read_until_closed(sock)  # returns only because the server gives up on us
        wait_until(lambda: warnings_from(caplog), what="the timeout to be logged")
        with connected(server, secret) as connection:
            assert connection.call("echo", 2) == 2
    [warning] = warnings_from(caplog)
    assert "handshake timed out" in warning.getMessage()


def test_a_client_times_out_on_a_silent_server(secret: bytes) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        with pytest.raises(TimeoutError):
            connect("127.0.0.1", listener.getsockname()[1], secret, timeout_s=0.2)
    finally:
        listener.close()


def test_stop_closes_sockets_still_in_their_handshake(secret: bytes) -> None:
    server = RpcServer(secret, lambda c, m, b: None).start()
    sock = raw_socket(server)
    try:
        assert sock.recv(4)  # the challenge's header: the handshake is under way
        server.stop()
        read_until_closed(sock)  # returns once the server closed our socket
    finally:
        sock.close()


def test_a_peer_trickling_bytes_is_dropped_when_the_whole_handshake_times_out(
    secret: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """Each byte arrives well within a per-read timeout; the handshake as a whole still ends."""
    with running_server(secret, handshake_timeout_s=0.3) as server, raw_socket(server) as sock:
        assert sock.recv(4)
        trickle = struct.pack(">I", 400) + b"\x00" * 400
        try:
            for byte in trickle:
                sock.sendall(bytes([byte]))
                threading.Event().wait(0.02)
        except OSError:
            pass  # the server hung up on us: what this test waits for
        wait_until(lambda: warnings_from(caplog), what="the timeout to be logged")
    [warning] = warnings_from(caplog)
    assert "handshake timed out" in warning.getMessage()
