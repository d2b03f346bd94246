"""KafkaReceiver (the unreliable one): blocks stored as they come, offsets auto-committed on a timer."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from reliable_kafka.kafka import KafkaReceiver, ReliableKafkaReceiver
from reliable_kafka.storage import StorageLevel
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.kafka.harness import RunningReceiver, assert_exactly_once, committed_offset, offsets_reach, produce
from tests.support import wait_until

# The ZooKeeper receiver protocol on the legacy broker too (the 4.x broker has no ZooKeeper).
pytestmark = pytest.mark.brokers("3.9", "0.9")


@pytest.mark.integration
def test_records_are_stored_and_offsets_auto_committed_every_interval(
    kafka_cluster: ClusterUnderTest,
) -> None:
    topic, group = unique_name("auto"), unique_name("g")
    kafka_cluster.create_topic(topic, 2)
    sent = produce(kafka_cluster.client_config(), topic, 2, 500)
    receiver = KafkaReceiver(
        kafka_cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**kafka_cluster.client_config(), "auto.offset.reset": "smallest", "auto.commit.interval.ms": "300"},
        StorageLevel.MEMORY_AND_DISK_SER,
    )
    running = RunningReceiver(receiver, None)
    zk = kafka_cluster.zookeeper_client()
    try:
        # The timer commits while the receiver runs, not only on stop.
        wait_until(
            offsets_reach(zk, group, {(topic, 0): 500, (topic, 1): 500}), timeout_s=30, what="auto commit"
        )
    finally:
        running.stop()
        zk.stop()
        zk.close()
    assert_exactly_once(running.records(), {(topic, p): sent[p] for p in (0, 1)})


@pytest.mark.integration
def test_without_auto_commit_nothing_is_committed(kafka_cluster: ClusterUnderTest) -> None:
    topic, group = unique_name("noauto"), unique_name("g")
    kafka_cluster.create_topic(topic, 1)
    produce(kafka_cluster.client_config(), topic, 1, 100)
    receiver = KafkaReceiver(
        kafka_cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**kafka_cluster.client_config(), "auto.offset.reset": "smallest", "auto.commit.enable": "false"},
        StorageLevel.MEMORY_ONLY,
    )
    running = RunningReceiver(receiver, None)
    try:
        wait_until(lambda: running.tracker.record_count() == 100, timeout_s=30, what="100 records stored")
    finally:
        running.stop()
    zk = kafka_cluster.zookeeper_client()
    try:
        assert committed_offset(zk, group, topic, 0) is None
    finally:
        zk.stop()
        zk.close()


def test_receivers_validate_their_arguments_naming_the_key(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"auto\.offset\.reset"):
        ReliableKafkaReceiver("zk:2181", "g", {"t": 1}, {"auto.offset.reset": "oldest"})
    with pytest.raises(ValueError, match="consumer threads"):
        KafkaReceiver("zk:2181", "g", {"t": 0})
    with pytest.raises(ValueError, match="at least one topic"):
        ReliableKafkaReceiver("zk:2181", "g", {})
    with pytest.raises(ValueError, match="contradicts"):
        ReliableKafkaReceiver("zk:2181", "g", {"t": 1}, {"zookeeper.connect": "other:2181"})
    caplog.set_level(logging.WARNING)
    receiver = ReliableKafkaReceiver("zk:2181", "g", {"t": 1}, {"auto.commit.enable": "true"})
    assert "auto commit is turned off" in caplog.text
    assert receiver.params.group.auto_commit_enable is False
    # Off by default too (the 0.8 default is on).
    assert ReliableKafkaReceiver("zk:2181", "g", {"t": 1}).params.group.auto_commit_enable is False
    assert KafkaReceiver("zk:2181", "g", {"t": 1}).params.group.auto_commit_enable is True
    assert receiver.params.consumer_config("b:9092")["enable.auto.commit"] is False
