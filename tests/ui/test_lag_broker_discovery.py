"""The lag tool and the status page find a ZooKeeper group's brokers on the listener that speaks
their ``security.protocol`` (issue 41, broker discovery): a secured cluster registers no PLAINTEXT
listener, and a client must never be handed one of another protocol. Registrations as Kafka 3.9
writes them; the endpoints are real listening sockets (discovery checks that they answer)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.client.zk.broker_discovery import NoBrokersError
from reliable_kafka.kafka.offsets.watched_group import WatchedGroup
from reliable_kafka.ui.lag import LagSource, close_clients, open_group_view
from reliable_kafka.ui.status_ui import lag_source_of


class _Registrations:
    """The kazoo calls the lag's group view makes on a ZooKeeper group with no offsets read."""

    logger = None  # not kazoo's: closing it needs no quieting

    def __init__(self, registrations: dict[str, bytes]) -> None:
        self._registrations = registrations

    def get_children(self, _path: str) -> list[str]:
        return list(self._registrations)

    def get(self, path: str) -> tuple[bytes, None]:
        return self._registrations[path.rsplit("/", 1)[1]], None

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def listening_ports() -> Iterator[tuple[int, int, int]]:
    """Three ports that accept connections: SCRAM/PLAIN, mTLS, OAUTHBEARER listeners."""
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in range(3)]
    try:
        ports = [s.getsockname()[1] for s in sockets]
        yield ports[0], ports[1], ports[2]
    finally:
        for s in sockets:
            s.close()


def _secured_broker(sasl_port: int, ssl_port: int, oauth_port: int) -> bytes:
    # Kafka 3.9's /brokers/ids/<id> of a broker with no PLAINTEXT listener at all.
    return json.dumps(
        {
            "features": {},
            "listener_security_protocol_map": {"SASL_SSL": "SASL_SSL", "SSL": "SSL", "OAUTH": "SASL_SSL"},
            "endpoints": [
                f"SASL_SSL://127.0.0.1:{sasl_port}",
                f"SSL://127.0.0.1:{ssl_port}",
                f"OAUTH://127.0.0.1:{oauth_port}",
            ],
            "jmx_port": -1,
            "port": -1,
            "host": None,
            "version": 5,
            "timestamp": "1764400000000",
        }
    ).encode()


def _brokers_asked(config: dict[str, str], registrations: _Registrations) -> str:
    source = LagSource(
        group="orders",
        topics=("events",),
        offsets_storage="zookeeper",
        client_config=config,
        zookeeper_connect="127.0.0.1:2181",
    )
    return _brokers_of(source, registrations)


def _brokers_of(source: LagSource, registrations: _Registrations) -> str:
    clients = open_group_view(source, lambda _source: registrations)  # type: ignore[arg-type,return-value]
    try:
        return clients[1].brokers
    finally:
        close_clients(clients)


def test_the_brokers_are_found_on_the_listener_of_the_configured_protocol(
    listening_ports: tuple[int, int, int],
) -> None:
    sasl, ssl, oauth = listening_ports
    registrations = _Registrations({"0": _secured_broker(sasl, ssl, oauth)})

    assert _brokers_asked({"security.protocol": "SSL"}, registrations) == f"127.0.0.1:{ssl}"
    scram = {
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    assert _brokers_asked(scram, registrations) == f"127.0.0.1:{sasl}"
    # Two listeners speak SASL_SSL (their mechanisms differ): the application's listener name picks.
    named = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "broker.listener.name": "OAUTH",
    }
    assert _brokers_asked(named, registrations) == f"127.0.0.1:{oauth}"


def test_no_listener_of_the_protocol_is_an_error_naming_what_is_registered(
    listening_ports: tuple[int, int, int],
) -> None:
    registrations = _Registrations({"0": _secured_broker(*listening_ports)})

    with pytest.raises(NoBrokersError) as refused:
        _brokers_asked({}, registrations)  # PLAINTEXT, librdkafka's default
    message = str(refused.value)
    assert "has a PLAINTEXT endpoint" in message
    assert f"SSL://127.0.0.1:{listening_ports[1]} (SSL)" in message
    assert "'security.protocol'" in message


def test_the_status_pages_lag_finds_the_brokers_on_the_streams_listener(
    listening_ports: tuple[int, int, int],
) -> None:
    """The stream's ``broker.listener.name`` is a key of ours, kept apart from librdkafka's."""
    sasl, ssl, oauth = listening_ports
    params = parse_kafka_params(
        {
            "zookeeper.connect": "127.0.0.1:2181",
            "group.id": "orders",
            "broker.listener.name": "OAUTH",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=alice",
        }
    )
    source = lag_source_of(WatchedGroup(params, ("events",), params.client_config, (0,)))

    registrations = _Registrations({"0": _secured_broker(sasl, ssl, oauth)})
    assert _brokers_of(source, registrations) == f"127.0.0.1:{oauth}"
