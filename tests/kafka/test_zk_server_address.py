"""A ZooKeeper that cannot be reached: one line of ours per connection attempt, naming the server
(issue 10, item 7), none of kazoo's (issue 42, item 3), and an error naming the quorum and why."""

from __future__ import annotations

import logging
import re
import socket

import pytest

from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.client.zk.client import ZooKeeperUnreachableError, connect_zookeeper

OURS = "reliable_kafka.kafka.client.zk.client"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_quorum_logs_one_line_per_attempt_and_fails_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = closed_port()
    params = parse_kafka_params(
        {"zookeeper.connect": f"127.0.0.1:{port}", "group.id": "g", "zookeeper.connection.timeout.ms": "1000"}
    )
    caplog.set_level(logging.INFO, logger=OURS)
    # Last: the capture's handler takes the level of the last call.
    caplog.set_level(logging.DEBUG, logger="kazoo.client.masked")
    with pytest.raises(ZooKeeperUnreachableError) as raised:
        connect_zookeeper(params.zookeeper)

    attempts = [r for r in caplog.records if r.name.startswith("kazoo") and "Connecting to" in r.getMessage()]
    ours = [r.getMessage() for r in caplog.records if r.name == OURS]
    assert len(attempts) >= 2, "kazoo made fewer than two attempts in 1 s"
    # One line per failed attempt; the close may cut the last attempt short of failing.
    assert len(attempts) - 1 <= len(ours) <= len(attempts)
    first, *again = ours
    refused = "socket connection error: Connection refused"
    assert first == f"connecting to ZooKeeper failed (127.0.0.1:{port}): {refused}"
    assert again == [
        f"connecting to ZooKeeper failed again (127.0.0.1:{port}), {n} failures in a row: the same error"
        for n in range(2, len(ours) + 1)
    ]
    kazoo = [r for r in caplog.records if r.name.startswith("kazoo") and r.levelno >= logging.WARNING]
    assert kazoo == []
    assert re.fullmatch(
        re.escape(
            f"could not connect to ZooKeeper at 127.0.0.1:{port} within 1000 ms "
            "(zookeeper.connection.timeout.ms): socket connection error: Connection refused ("
        )
        + r"\d+ attempts\)",
        str(raised.value),
    ), str(raised.value)
