"""The ApiVersionRequest probe against stand-in brokers on loopback (the real 0.9 broker's answer
is tested in tests/e2e/test_direct_stream.py)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from reliable_kafka.kafka.client.broker_protocol_probe import (
    PRE_010_FALLBACK,
    answers_api_versions,
    api_versions_request,
    legacy_protocol_params,
)

Behaviour = Callable[[socket.socket, bytes], None]


def modern(conn: socket.socket, request: bytes) -> None:
    correlation_id = struct.unpack(">i", request[8:12])[0]
    body = struct.pack(">ihi", correlation_id, 0, 0)  # no error, no api versions listed
    conn.sendall(struct.pack(">i", len(body)) + body)


def dropping(conn: socket.socket, _request: bytes) -> None:
    conn.close()


def silent(conn: socket.socket, _request: bytes) -> None:
    conn.recv(1)  # as a 0.9 broker: the connection stays open, the request is never answered


legacy = silent


@pytest.fixture
def broker() -> Iterator[Callable[[Behaviour], int]]:
    servers: list[socket.socket] = []

    def start(behaviour: Behaviour) -> int:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def serve() -> None:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # closed at the end of a test that made no probe
            with conn:
                request = conn.recv(1024)
                behaviour(conn, request)

        threading.Thread(target=serve, daemon=True).start()
        return int(server.getsockname()[1])

    yield start
    for server in servers:
        server.close()


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return int(server.getsockname()[1])


def test_the_request_is_api_versions_v0() -> None:
    request = api_versions_request()
    size, key, version = struct.unpack(">ihh", request[:8])
    assert (size, key, version) == (len(request) - 4, 18, 0)


def test_an_answer_means_a_modern_broker_and_silence_an_old_one(
    broker: Callable[[Behaviour], int],
) -> None:
    assert answers_api_versions("127.0.0.1", broker(modern)) is True
    assert answers_api_versions("127.0.0.1", broker(silent), timeout_s=0.5) is False
    assert answers_api_versions("127.0.0.1", broker(dropping)) is False
    assert answers_api_versions("127.0.0.1", closed_port()) is None


def test_old_brokers_get_the_legacy_protocol_settings(broker: Callable[[Behaviour], int]) -> None:
    servers = f"127.0.0.1:{closed_port()},127.0.0.1:{broker(legacy)}"  # the first one is down
    assert legacy_protocol_params(servers, {}, timeout_s=0.5) == {
        "api.version.request": False,
        "broker.version.fallback": PRE_010_FALLBACK,
    }
    assert legacy_protocol_params(f"127.0.0.1:{broker(modern)}", {}) == {}
    assert legacy_protocol_params(f"127.0.0.1:{closed_port()}", {}) == {}


@pytest.mark.parametrize(
    "params",
    [{"broker.version.fallback": "0.9.0.1"}, {"api.version.request": True}, {"security.protocol": "SSL"}],
)
def test_the_users_settings_and_secured_connections_are_not_probed(
    broker: Callable[[Behaviour], int], params: dict[str, object]
) -> None:
    assert legacy_protocol_params(f"127.0.0.1:{broker(legacy)}", params) == {}
