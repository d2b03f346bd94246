"""Kafka's own tooling sees the group: ``kafka-consumer-groups --describe``, of the broker's
version, shows the offsets the receiver committed with offsets.storage=kafka, and lag 0 after a
graceful stop."""

from __future__ import annotations

from typing import Any

import pytest

from reliable_kafka.kafka import ReliableKafkaReceiver
from reliable_kafka.local import LocalCluster
from reliable_kafka.storage import StorageLevel
from tests.cluster_backends import unique_name
from tests.kafka.harness import STORE_PARAMS, CommittedOffsets, RunningReceiver, produce
from tests.kafka.kafka_tools import describe_group
from tests.support import wait_until

# ZooKeeper membership, so not 4.x (no ZooKeeper there): Kafka-native membership brings that.
pytestmark = [pytest.mark.integration, pytest.mark.brokers("3.9")]

FAST_GROUP_PARAMS = {
    "auto.offset.reset": "smallest",
    "zookeeper.session.timeout.ms": "2000",
    "rebalance.backoff.ms": "300",
    "rebalance.max.retries": "30",
}


def test_kafka_consumer_groups_describes_the_committed_offsets_with_lag_zero_after_a_graceful_stop(
    local_cluster: LocalCluster, admin_zk: Any
) -> None:
    topic, group = unique_name("tooling"), unique_name("g")
    local_cluster.create_topic(topic, 3)
    sent = produce(local_cluster.client_config(), topic, 3, 500)
    ends = {(topic, p): len(values) for p, values in sent.items()}
    committed = CommittedOffsets("kafka", admin_zk, local_cluster.client_config(), group)
    receiver = ReliableKafkaReceiver(
        local_cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**local_cluster.client_config(), **FAST_GROUP_PARAMS, **STORE_PARAMS["kafka"]},
        StorageLevel.MEMORY_AND_DISK_SER,
    )
    running = RunningReceiver(receiver, None)
    try:
        wait_until(
            committed.reach(ends), timeout_s=60, what="every partition committed to its log end in Kafka"
        )
    finally:
        running.stop()
        committed.close()

    described = describe_group(local_cluster, group)
    assert sorted(described) == sorted(ends)
    for key, end in ends.items():
        row = described[key]
        assert (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == (str(end), str(end), "0"), row
