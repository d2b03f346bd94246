"""A zkQuorum that no server answers (issue 42, item 3): one line of ours per connection attempt
and none of kazoo's, then the error naming the quorum reaches ``awaitTermination`` within
``zookeeper.connection.timeout.ms``, and the receiver is not launched again. In-process receivers
on a tracker of a fake context (no Spark: nothing here needs it)."""

from __future__ import annotations

import logging
import socket

import pytest

from reliable_kafka.kafka import KafkaReceiver
from reliable_kafka.kafka.client.params import parse_kafka_params
from reliable_kafka.kafka.client.zk.client import ZooKeeperUnreachableError
from reliable_kafka.kafka.receiver.consumer_connector import ConsumerConnector
from reliable_kafka.receiver.fatal_error import FatalReceiverError
from reliable_kafka.storage import StorageLevel
from tests.support import wait_until
from tests.support.scheduler_fakes import FakeStream, FakeStreamingContext, quick_settings

ZK_LOG = "reliable_kafka.kafka.client.zk.client"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_quorum_logs_a_line_per_retry_and_ends_the_stream_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quorum = f"127.0.0.1:{closed_port()}"

    def make() -> KafkaReceiver:
        params = {"zookeeper.connection.timeout.ms": "1500", "bootstrap.servers": "127.0.0.1:9"}
        return KafkaReceiver(quorum, "g", {"events": 1}, params, StorageLevel.MEMORY_ONLY)

    caplog.set_level(logging.INFO, logger="reliable_kafka")
    # Last: the capture's handler takes the level of the last call.
    caplog.set_level(logging.DEBUG, logger="kazoo.client.masked")
    ssc = FakeStreamingContext([FakeStream(0, make)], quick_settings())
    tracker = ssc.receiver_tracker()
    tracker.start()
    try:
        wait_until(lambda: ssc.errors, what="the error to reach awaitTermination")
        wait_until(tracker.all_receivers_stopped, what="the receiver to stop for good")
    finally:
        tracker.stop(graceful=False)

    (error,) = ssc.errors
    assert isinstance(error, FatalReceiverError)
    assert str(error).startswith(
        "Receiver 0 ended its stream: reliable_kafka.receiver.fatal_error.FatalReceiverError: "
        f"could not connect to ZooKeeper at {quorum} within 1500 ms (zookeeper.connection.timeout.ms): "
        "socket connection error: Connection refused ("
    )
    assert tracker.launch_count(0) == 1
    kazoo = [r for r in caplog.records if r.name.startswith("kazoo")]
    attempts = [r for r in kazoo if r.getMessage().startswith("Connecting")]
    ours = [r.getMessage() for r in caplog.records if r.name == ZK_LOG]
    assert len(attempts) >= 2
    assert len(attempts) - 1 <= len(ours) <= len(attempts)  # the close may cut the last one short
    assert all(line.startswith("connecting to ZooKeeper failed") for line in ours)
    # Everything at WARNING and above: our line per attempt, then the one ERROR of the end.
    loud = [(r.name, r.levelno) for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [(ZK_LOG, logging.WARNING)] * len(ours) + [
        ("reliable_kafka.scheduler.receiver_tracker", logging.ERROR)
    ]


@pytest.mark.parametrize("first_contact", [True, False], ids=["never-reached", "reached-before"])
def test_only_a_quorum_the_stream_never_reached_ends_it(first_contact: bool) -> None:
    """At a later launch, or a restart after a connection, an unreachable ZooKeeper is an outage:
    the start fails as any failed start does, and the receiver is started again."""
    params = parse_kafka_params(
        {
            "zookeeper.connect": f"127.0.0.1:{closed_port()}",
            "group.id": "g",
            "zookeeper.connection.timeout.ms": "300",
            "bootstrap.servers": "127.0.0.1:9",
        }
    )
    connector = ConsumerConnector(
        params,
        {"events": 1},
        sink=lambda *_: None,
        on_failure=lambda *_: None,
        first_contact=first_contact,
    )
    expected = FatalReceiverError if first_contact else ZooKeeperUnreachableError
    with pytest.raises(expected) as raised:
        connector.start()
    if first_contact:
        assert isinstance(raised.value.__cause__, ZooKeeperUnreachableError)
    else:
        assert not isinstance(raised.value, FatalReceiverError)
    assert not connector.zookeeper_reached
