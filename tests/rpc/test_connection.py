"""Calls and notifications both ways over real authenticated connections."""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.rpc import (
    AuthenticationError,
    CallTimeout,
    Connection,
    ConnectionClosed,
    FrameError,
    RemoteError,
    RpcError,
    connect,
    new_secret,
)
from reliable_kafka.rpc.framing import write_frame
from tests.rpc.helpers import (
    PATIENCE_S,
    authenticated_raw_socket,
    connected,
    echo_handler,
    read_until_closed,
    running_server,
    self_signed_tls,
    warnings_from,
)
from tests.support import wait_for_event, wait_until


def test_a_remote_exception_comes_back_as_remote_error(secret: bytes) -> None:
    with running_server(secret) as server, connected(server, secret) as connection:
        with pytest.raises(RemoteError) as info:
            connection.call("fail", 7)
        assert (info.value.type_name, info.value.message) == ("ValueError", "refused 7")
        with pytest.raises(RemoteError, match="LookupError"):
            connection.call("no-such-method", None)
        assert connection.call("echo", "the connection survives") == "the connection survives"


def test_concurrent_calls_get_their_own_replies(secret: bytes) -> None:
    with running_server(secret) as server, connected(server, secret) as connection:
        results: dict[int, Any] = {}

        def caller(n: int) -> None:
            results[n] = [connection.call("echo", [n, i]) for i in range(50)]

        threads = [threading.Thread(target=caller, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(PATIENCE_S)
        assert results == {n: [[n, i] for i in range(50)] for n in range(8)}


def test_the_server_calls_the_client_and_a_handler_calls_back_over_its_own_connection(secret: bytes) -> None:
    """Driver -> executor 'stop' whose handling sends 'deregister' back and waits for the reply."""
    deregistered = threading.Event()

    def server_handler(connection: Connection, method: str, body: Any) -> Any:
        if method == "deregister":
            deregistered.set()
            return f"bye {body}"
        if method == "start":
            # A call handled on the server that calls the client, which calls the server again.
            return connection.call("nested", body)
        raise LookupError(method)

    def client_handler(connection: Connection, method: str, body: Any) -> Any:
        if method == "stop":
            return connection.call("deregister", body)
        if method == "nested":
            return ["nested", connection.call("deregister", body)]
        raise LookupError(method)

    with running_server(secret, server_handler) as server, connected(server, secret, handler=client_handler):
        wait_until(lambda: server.connections(), what="the server to see the client")
        [to_client] = server.connections()
        assert to_client.call("stop", 3) == "bye 3"
        assert deregistered.is_set()
    with (
        running_server(secret, server_handler) as server,
        connected(server, secret, handler=client_handler) as c,
    ):
        assert c.call("start", 4) == ["nested", "bye 4"]


def test_a_notification_handler_may_call_back_and_notifications_keep_their_order(secret: bytes) -> None:
    received: list[Any] = []
    done = threading.Event()

    def server_handler(connection: Connection, method: str, body: Any) -> Any:
        if method == "deregister":
            return True
        raise LookupError(method)

    def client_handler(connection: Connection, method: str, body: Any) -> Any:
        if method == "rate":
            received.append(body)
        elif method == "stop":
            received.append(("stop", connection.call("deregister", body)))
            done.set()

    with running_server(secret, server_handler) as server, connected(server, secret, handler=client_handler):
        wait_until(lambda: server.connections(), what="the server to see the client")
        [to_client] = server.connections()
        for rate in range(100):
            to_client.notify("rate", rate)
        to_client.notify("stop", "now")
        wait_for_event(done, what="the stop notification")
    assert received == [*range(100), ("stop", True)]


def test_a_failing_notification_handler_is_logged_and_the_connection_lives_on(
    secret: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    seen = threading.Event()

    def handler(connection: Connection, method: str, body: Any) -> Any:
        if method == "boom":
            raise RuntimeError("handler bug")
        if method == "echo":
            return body
        seen.set()
        return None

    with running_server(secret, handler) as server, connected(server, secret) as connection:
        connection.notify("boom", None)
        connection.notify("after", None)
        wait_for_event(seen, what="the notification after the failing one")
        assert connection.call("echo", 1) == 1
    assert any("boom" in r.getMessage() for r in warnings_from(caplog))


def test_calls_waiting_when_the_connection_closes_fail_with_connection_closed(secret: bytes) -> None:
    entered = threading.Event()
    release = threading.Event()

    def handler(connection: Connection, method: str, body: Any) -> Any:
        entered.set()
        release.wait(PATIENCE_S)
        return body

    closed_with: list[BaseException | None] = []
    with running_server(secret, handler) as server:
        connection = connect(*server.address, secret, on_closed=closed_with.append)
        outcome: list[BaseException] = []

        def waiting_call() -> None:
            try:
                connection.call("slow", 1, timeout_s=None)
            except BaseException as exc:
                outcome.append(exc)

        caller = threading.Thread(target=waiting_call)
        caller.start()
        wait_for_event(entered, what="the call to reach the server")
        connection.close()
        caller.join(PATIENCE_S)
        release.set()
        connection.join(PATIENCE_S)
        assert [type(e) for e in outcome] == [ConnectionClosed]
        assert closed_with == [None]  # closed by us: no cause, called once
        connection.close()
        assert closed_with == [None]
        with pytest.raises(ConnectionClosed):
            connection.call("echo", 1)
        with pytest.raises(ConnectionClosed):
            connection.notify("echo", 1)


def test_the_server_going_away_fails_calls_and_reports_the_cause(secret: bytes) -> None:
    entered = threading.Event()
    closed = threading.Event()

    def handler(connection: Connection, method: str, body: Any) -> Any:
        entered.set()
        closed.wait(PATIENCE_S)  # answers only after the server closed the connection
        return body

    causes: list[BaseException | None] = []

    def on_closed(cause: BaseException | None) -> None:
        causes.append(cause)
        closed.set()

    server = running_server(secret, handler)
    with server as srv:
        connection = connect(*srv.address, secret, on_closed=on_closed)
        outcome: list[BaseException] = []
        caller = threading.Thread(target=lambda: _capture(outcome, connection.call, "slow", 1, None))
        caller.start()
        wait_for_event(entered, what="the call to reach the server")
    # Leaving the block stopped the server and closed its end.
    wait_for_event(closed, what="the client to notice")
    caller.join(PATIENCE_S)
    connection.join(PATIENCE_S)
    assert [type(e) for e in outcome] == [ConnectionClosed]
    [cause] = causes
    assert isinstance(cause, ConnectionClosed | OSError)


def _capture(into: list[BaseException], fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except BaseException as exc:
        into.append(exc)


def test_a_call_times_out_and_the_connection_stays_usable(secret: bytes) -> None:
    release = threading.Event()

    def handler(connection: Connection, method: str, body: Any) -> Any:
        if method == "hang":
            release.wait(PATIENCE_S)
        return body

    with running_server(secret, handler) as server, connected(server, secret) as connection:
        with pytest.raises(CallTimeout):
            connection.call("hang", 1, timeout_s=0.05)
        release.set()
        assert connection.call("echo", 2) == 2  # the late reply to "hang" is dropped


def test_values_that_cannot_be_encoded_fail_the_call_only(secret: bytes) -> None:
    def handler(connection: Connection, method: str, body: Any) -> Any:
        return object() if method == "bad-reply" else body

    with running_server(secret, handler) as server, connected(server, secret) as connection:
        with pytest.raises(FrameError):
            connection.call("echo", {1, 2})
        with pytest.raises(RemoteError, match="FrameError"):
            connection.call("bad-reply", None)
        assert connection.call("echo", 3) == 3


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (struct.pack(">I", 2**31), "exceeds the limit"),
        (struct.pack(">I", 2) + b"\xc1\xc1", "not msgpack"),
        (None, "must be an array"),
        (["not", "a", "message"], "must be an array starting with its kind"),
        ([9, 1, "m", None], "malformed message of kind 9"),
        ([0, "id", "m", None], "malformed message of kind 0"),
    ],
)
def test_a_bad_frame_closes_its_connection_only_and_is_logged_once(
    secret: bytes, caplog: pytest.LogCaptureFixture, frame: Any, reason: str
) -> None:
    stop = threading.Event()
    failures: list[BaseException] = []
    calls = 0

    with running_server(secret) as server, connected(server, secret) as live:

        def keep_calling() -> None:
            nonlocal calls
            while not stop.is_set():
                try:
                    assert live.call("echo", calls) == calls
                    calls += 1
                except BaseException as exc:
                    failures.append(exc)
                    return

        caller = threading.Thread(target=keep_calling)
        caller.start()
        wait_until(lambda: calls > 10, what="the live connection to be busy")
        with authenticated_raw_socket(server, secret) as bad:
            if isinstance(frame, bytes):
                bad.sendall(frame)
            else:
                write_frame(bad, frame)
            read_until_closed(bad)
        wait_until(lambda: warnings_from(caplog), what="the bad frame to be logged")
        before = calls
        wait_until(lambda: calls > before + 10, what="more calls on the live connection")
        stop.set()
        caller.join(PATIENCE_S)
        assert failures == []
        assert not live.closed
    [warning] = warnings_from(caplog)
    assert reason in warning.getMessage()
    assert "127.0.0.1:" in warning.getMessage()
    assert warning.exc_info is None


def test_a_peer_that_vanishes_mid_frame_closes_that_connection(secret: bytes) -> None:
    with running_server(secret) as server, connected(server, secret) as live:
        bad = authenticated_raw_socket(server, secret)
        wait_until(lambda: len(server.connections()) == 2, what="both connections")
        bad.sendall(struct.pack(">I", 100) + b"\x00" * 10)
        bad.close()
        wait_until(lambda: len(server.connections()) == 1, what="the server to drop the broken one")
        assert live.call("echo", 1) == 1


def test_stop_closes_every_connection_and_reports_each(secret: bytes) -> None:
    closed: list[Connection] = []
    server = running_server(secret, echo_handler, on_connection_closed=closed.append)
    with server as srv:
        clients = [connect(*srv.address, secret) for _ in range(3)]
        wait_until(lambda: len(srv.connections()) == 3, what="three connections")
    assert len(closed) == 3
    for client in clients:
        wait_until(lambda client=client: client.closed, what="the client to see the close")
        client.join(PATIENCE_S)


def test_tls_carries_the_same_protocol(secret: bytes, tmp_path: Path) -> None:
    server_context, client_context = self_signed_tls(tmp_path)
    with running_server(secret, ssl_context=server_context, handshake_timeout_s=0.5) as server:
        with connected(server, secret, ssl_context=client_context, server_hostname="localhost") as c:
            assert c.call("echo", b"x" * 3_000_000) == b"x" * 3_000_000
        # Plain text to a TLS server is garbage to it, and a wrong secret inside TLS is still refused.
        # (Both sides wait for the other to speak first until the server's handshake timeout.)
        with pytest.raises((OSError, RpcError)):
            connect(*server.address, secret, timeout_s=PATIENCE_S)

        with pytest.raises(AuthenticationError):
            connect(*server.address, new_secret(), ssl_context=client_context, server_hostname="localhost")


def test_connect_to_a_closed_port_is_an_os_error(secret: bytes) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(OSError):
        connect("127.0.0.1", port, secret)
