"""Producing, reading offsets back and waiting, for the end-to-end tests (real ZooKeeper, Kafka, Spark)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kazoo.exceptions import NoNodeError

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.paths import offset_path
from tests.cluster_backends import ClusterUnderTest
from tests.support.producing import produce_acked


def produce(
    cluster: ClusterUnderTest,
    topic: str,
    messages: Iterable[tuple[bytes | None, bytes, int]],
    **record_fields: Any,
) -> dict[int, int]:
    """Send ``(key, value, partition)`` messages to ``cluster`` (see :func:`produce_acked`)."""
    return produce_acked(cluster.client_config(**{"linger.ms": 5}), topic, messages, **record_fields)


def committed_offsets(cluster: ClusterUnderTest, group: str, topic: str, partitions: int) -> dict[int, int]:
    """What the receiver committed at /consumers/<group>/offsets/<topic>/<p>, or, on a cluster
    without ZooKeeper, in the group coordinator (absent partitions left out)."""
    if not cluster.has_zookeeper:
        return kafka_committed_offsets(cluster, group, topic, partitions)
    zk = cluster.zookeeper_client()
    try:
        offsets: dict[int, int] = {}
        for partition in range(partitions):
            try:
                data, _ = zk.get(offset_path(group, TopicAndPartition(topic, partition)))
            except NoNodeError:
                continue
            offsets[partition] = int(data.decode("utf-8"))
        return offsets
    finally:
        zk.stop()
        zk.close()


def commit_in_kafka(cluster: ClusterUnderTest, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit through the group coordinator as a simple (non-subscribed) consumer of ``group``."""
    consumer = Consumer(cluster.client_config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def kafka_committed_offsets(
    cluster: ClusterUnderTest, group: str, topic: str, partitions: int
) -> dict[int, int]:
    consumer = Consumer(cluster.client_config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        answers = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        consumer.close()
    return {a.partition: a.offset for a in answers if a.offset >= 0}


def log_end_offsets(cluster: ClusterUnderTest, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer(cluster.client_config(**{"group.id": "e2e-watermarks", "enable.auto.commit": False}))
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def delete_records(cluster: ClusterUnderTest, topic: str, partitions: int) -> dict[int, int]:
    """Every record of ``topic`` up to its log end deleted, as retention deletes them (the log
    start moves up to the log end); the new log start offsets."""
    admin = AdminClient(cluster.client_config())
    futures = admin.delete_records([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
    return {tp.partition: future.result(timeout=30).low_watermark for tp, future in futures.items()}


def group_params(cluster: ClusterUnderTest) -> tuple[str, dict[str, str]]:
    """The zkQuorum and the group's timeouts: ZooKeeper membership where the cluster has one (3.9),
    else (4.x, KRaft) Kafka's group coordinator, with no ZooKeeper anywhere.

    A killed driver's group membership must expire quickly for the next run to own the
    partitions (its start-up takes longer than this), yet a live run's session must survive a
    loaded 2-core machine: a lost session is a failure of its own, not the kill's.
    """
    if cluster.has_zookeeper:
        return cluster.zookeeper_connect, {"zookeeper.session.timeout.ms": "6000"}
    return "", {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}
