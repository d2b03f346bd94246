"""kazoo's connection warnings name the ZooKeeper server (issue 10, item 7)."""

from __future__ import annotations

import logging
import socket

import pytest

from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.client.zk.client import connect_zookeeper


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_warnings_name_the_server(caplog: pytest.LogCaptureFixture) -> None:
    port = closed_port()
    params = parse_kafka_params(
        {"zookeeper.connect": f"127.0.0.1:{port}", "group.id": "g", "zookeeper.connection.timeout.ms": "1000"}
    )
    caplog.set_level(logging.WARNING, logger="kazoo.client")
    with pytest.raises(ConnectionError):
        connect_zookeeper(params.zookeeper)
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert refused, "kazoo logged no refused connection"
    assert all(f"(ZooKeeper 127.0.0.1:{port})" in line for line in refused)
