"""A ZooKeeper registering a broker at an address where nothing listens (issue 21): the receiver
fails at every start, and the logs, listeners and restart delays say so once, not every 2 s;
once the broker is registered where it listens, the receiver recovers. Real ZooKeeper and Kafka:
the registrations live in a chroot of the test's own, the broker is the local cluster's."""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import sys
from typing import Any

import pytest

from reliable_kafka.kafka import ReliableKafkaReceiver
from reliable_kafka.kafka.client.zk.paths import broker_path, topic_path
from reliable_kafka.local import LocalCluster
from reliable_kafka.scheduler.listener import StreamingListenerReceiverError
from reliable_kafka.settings import ReceiverSettings, StreamingSettings, WriteAheadLogSettings
from reliable_kafka.storage import StorageLevel
from reliable_kafka.ui.status_store import StreamingStatusStore
from tests.cluster_backends import unique_name
from tests.kafka.harness import FAST_GROUP_PARAMS, produce
from tests.support import wait_until
from tests.support.scheduler_fakes import FakeStream, FakeStreamingContext

# Brokers from ZooKeeper's /brokers/ids: every broker line that has ZooKeeper.
pytestmark = [pytest.mark.integration, pytest.mark.brokers("3.9", "0.9")]

RESTART_DELAY_MS = 200
MAX_RESTART_DELAY_MS = 1600
FAILED_STARTS = 6
SETTINGS = StreamingSettings(
    # In-process receivers (a fake stream's), so that the test sees both sides' log records.
    receiver=ReceiverSettings(
        block_interval_ms=100,
        restart_delay_ms=RESTART_DELAY_MS,
        max_restart_delay_ms=MAX_RESTART_DELAY_MS,
        placement="driver",
    ),
    wal=WriteAheadLogSettings(enable=False),
)
TRACKER_LOG = "reliable_kafka.scheduler.receiver_tracker"
LAUNCHER_LOG = "reliable_kafka.scheduler.receiver_launcher"
DISCOVERY_LOG = "reliable_kafka.kafka.client.zk.broker_discovery"
FAILED_START = "Receiver 0 failed (deregistered: Error starting receiver 0)"
FAILED_AGAIN = "Receiver 0 failed again (deregistered: Error starting receiver 0)"
RESTARTING = re.compile(r"Restarting Receiver 0 in ([\d.]+) s")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def unreachable(registration: bytes, port: int) -> bytes:
    """The broker's registration with every endpoint moved to ``port``, where nothing listens."""
    info = json.loads(registration)
    info["port"] = port
    info["endpoints"] = [re.sub(r":\d+$", f":{port}", endpoint) for endpoint in info["endpoints"]]
    return json.dumps(info).encode()


def chroot_with_unreachable_broker(admin_zk: Any, topic: str) -> tuple[str, bytes]:
    """A chroot whose only broker is registered at a closed port, and that knows ``topic``;
    returns it and the broker's real registration."""
    chroot = "/" + unique_name("unreachable")
    registration, _ = admin_zk.get(broker_path("0"))
    topic_registration, _ = admin_zk.get(topic_path(topic))
    admin_zk.create(chroot + broker_path("0"), unreachable(registration, closed_port()), makepath=True)
    admin_zk.create(chroot + topic_path(topic), topic_registration, makepath=True)
    return chroot, registration


def messages(caplog: pytest.LogCaptureFixture, logger: str, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == level]


def test_an_unreachable_broker_is_logged_and_reported_once_restarts_back_off_and_the_receiver_recovers(
    local_cluster: LocalCluster, admin_zk: Any, caplog: pytest.LogCaptureFixture
) -> None:
    topic, group = unique_name("unreachable"), unique_name("g")
    local_cluster.create_topic(topic, partitions=1)
    chroot, registration = chroot_with_unreachable_broker(admin_zk, topic)
    legacy = {k: v for k, v in local_cluster.client_config().items() if k != "bootstrap.servers"}

    def make() -> ReliableKafkaReceiver:
        # No bootstrap.servers: the brokers come from the chroot's /brokers/ids.
        return ReliableKafkaReceiver(
            local_cluster.zookeeper_connect + chroot,
            group,
            {topic: 1},
            {**legacy, **FAST_GROUP_PARAMS},
            StorageLevel.MEMORY_AND_DISK_SER,
        )

    caplog.set_level(logging.INFO, logger="reliable_kafka")
    ssc = FakeStreamingContext([FakeStream(0, make)], SETTINGS)
    tracker = ssc.receiver_tracker()
    tracker.start()
    try:
        wait_until(
            lambda: tracker.failure_streak(0) >= FAILED_STARTS,
            timeout_s=120,
            what=f"{FAILED_STARTS} failed starts",
        )

        # The driver: the cause in full once, then one short line per failed start with the count.
        failures = messages(caplog, TRACKER_LOG, logging.WARNING)
        assert len(failures) >= FAILED_STARTS
        first, *again = failures
        assert first.startswith(f"{FAILED_START}: ")
        assert "NoBrokersError: no live Kafka broker" in first
        assert "broker 0: no endpoint reachable" in first
        assert again == [
            f"{FAILED_AGAIN}, {n} failures in a row: the same error" for n in range(2, len(failures) + 1)
        ]
        # The receiver side: through logging, at WARNING, under its logger's name.
        discovery = messages(caplog, DISCOVERY_LOG, logging.WARNING)
        assert any("no endpoint reachable" in line for line in discovery)

        # The restart delays as the launcher waited them: doubled per failed start, capped.
        delays = [
            round(float(m.group(1)) * 1000)
            for r in caplog.records
            if r.name == LAUNCHER_LOG and (m := RESTARTING.match(r.getMessage()))
        ]
        assert len(delays) >= FAILED_STARTS - 1
        assert delays == [min(RESTART_DELAY_MS << i, MAX_RESTART_DELAY_MS) for i in range(len(delays))]

        # The listeners hear of it once; the status page shows it as the last error.
        (reported,) = ssc.bus.of_type(StreamingListenerReceiverError)
        assert "no endpoint reachable" in reported.receiver_info.last_error
        store = StreamingStatusStore(1000)
        for event in ssc.bus.events:
            getattr(store, event.listener_method)(event)
        (status,) = store.snapshot().receivers
        assert status.info.last_error_message == "Error starting receiver 0"
        assert "NoBrokersError" in status.info.last_error

        # The broker registered where it listens: the next start works and stores a block.
        caplog.clear()
        admin_zk.set(chroot + broker_path("0"), registration)
        produce(local_cluster.client_config(), topic, 1, 20)
        wait_until(
            lambda: tracker.failure_streak(0) == 0, timeout_s=120, what="the receiver to store a block again"
        )
        # A start already under way when the broker moved may still fail: only one recovery line.
        lines = messages(caplog, TRACKER_LOG, logging.WARNING)
        assert [line for line in lines if not line.startswith(FAILED_AGAIN)] == [lines[-1]]
        assert lines[-1].startswith("Receiver 0 succeeded again after ")
        assert tracker.restart_delay_ms(0) == RESTART_DELAY_MS
        assert len(ssc.bus.of_type(StreamingListenerReceiverError)) == 1
    finally:
        tracker.stop(graceful=False)
    assert tracker.all_receivers_stopped()


# A Python worker as Spark starts it: no logging configuration at all.
_WORKER = """
import sys
from kazoo.client import KazooClient
from reliable_kafka.kafka.client.zk.broker_discovery import NoBrokersError, discover_bootstrap_servers
from reliable_kafka.receiver.receiver_task import receiver_task_logging

zk = KazooClient(hosts=sys.argv[1])
zk.start(30)
try:
    with receiver_task_logging(3):
        try:
            discover_bootstrap_servers(zk)
        except NoBrokersError:
            pass
finally:
    zk.stop()
    zk.close()
"""


def test_a_receiver_task_logs_through_logging_with_time_level_logger_and_stream_id(
    local_cluster: LocalCluster, admin_zk: Any
) -> None:
    topic = unique_name("unreachable")
    local_cluster.create_topic(topic, partitions=1)
    chroot, _ = chroot_with_unreachable_broker(admin_zk, topic)
    worker = subprocess.run(
        [sys.executable, "-c", _WORKER, local_cluster.zookeeper_connect + chroot],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    (line,) = [line for line in worker.stderr.splitlines() if "no endpoint reachable" in line]
    assert re.match(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING reliable_kafka\.kafka\.client\.zk\.broker_discovery "
        r"\[receiver 3\]: broker discovery: broker 0: no endpoint reachable",
        line,
    ), line
