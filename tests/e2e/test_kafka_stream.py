"""pyspark 2.4's Kafka tests, against real ZooKeeper, Kafka and Spark, with the WAL off and on."""

from __future__ import annotations

import itertools
import os
import threading
from collections import Counter
from typing import Any

import pytest

from reliable_kafka import KafkaUtils
from reliable_kafka.kafka import KafkaMessageAndMetadata
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.helpers import committed_offsets, produce
from tests.support import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("wal", [False, True], ids=["wal-off", "wal-on"])
def test_kafka_stream(kafka_cluster: ClusterUnderTest, make_ssc: Any, wal: bool) -> None:
    """pyspark's ``test_kafka_stream``: what countByValue counts over the batches is what was sent."""
    topic = unique_name("topic")
    send_data = {"a": 3, "b": 5, "c": 10}
    kafka_cluster.create_topic(topic)
    produce(kafka_cluster, topic, [(None, k.encode(), 0) for k, n in send_data.items() for _ in range(n)])

    ssc = make_ssc(wal=wal)
    stream = KafkaUtils.createStream(
        ssc,
        kafka_cluster.zookeeper_connect,
        unique_name("test-streaming-consumer"),
        {topic: 1},
        {"auto.offset.reset": "smallest", **kafka_cluster.client_config()},
    )
    result: Counter[str] = Counter()
    lock = threading.Lock()

    def add(rdd: Any) -> None:
        counted = rdd.collect()
        with lock:
            for value, count in counted:
                result[value] += count

    stream.map(lambda kv: kv[1]).countByValue().foreachRDD(add)
    ssc.start()
    wait_until(
        lambda: sum(result.values()) >= sum(send_data.values()), timeout_s=120, what="every message counted"
    )
    ssc.stop(stopSparkContext=False, stopGraceFully=True)

    assert dict(result) == send_data


def test_decoders_run_on_executors_and_batches_expose_offset_ranges(
    local_cluster: ClusterUnderTest, make_ssc: Any
) -> None:
    """Blocks keep the raw bytes; keyDecoder/valueDecoder run in the Python workers when a batch is
    computed, and each batch RDD's offsetRanges() covers exactly the records it holds."""
    topic, group = unique_name("decoders"), unique_name("group")
    local_cluster.create_topic(topic, partitions=2)
    sent = produce(local_cluster, topic, [(str(i).encode(), f"v{i}".encode(), i % 2) for i in range(200)])

    ssc = make_ssc(wal=True)
    stream = KafkaUtils.createStream(
        ssc,
        local_cluster.zookeeper_connect,
        group,
        {topic: 2},
        {"auto.offset.reset": "smallest", **local_cluster.client_config()},
        keyDecoder=lambda b: int(b),
        valueDecoder=lambda b: (os.getpid(), b.decode("utf-8")),
    )
    records: list[tuple[int, tuple[int, str]]] = []
    ranges: list[Any] = []
    lock = threading.Lock()

    def keep(rdd: Any) -> None:
        batch = rdd.collect()
        batch_ranges = rdd.offsetRanges()
        assert sum(r.count() for r in batch_ranges) == len(batch)
        with lock:
            records.extend(batch)
            ranges.extend(batch_ranges)

    stream.foreachRDD(keep)
    ssc.start()
    wait_until(lambda: len(records) >= 200, timeout_s=120, what="200 records")
    ssc.stop(stopSparkContext=False, stopGraceFully=True)

    assert sorted(key for key, _ in records) == list(range(200))
    assert all(value == f"v{key}" for key, (_, value) in records)
    assert os.getpid() not in {pid for _, (pid, _) in records}, "a decoder ran on the driver"
    for partition, count in sent.items():
        covered = sorted((r.fromOffset, r.untilOffset) for r in ranges if r.partition == partition)
        assert covered[0][0] == 0 and covered[-1][1] == count
        assert all(a[1] == b[0] for a, b in itertools.pairwise(covered)), covered
    assert committed_offsets(local_cluster, group, topic, 2) == sent


def test_message_handler_sees_topic_partition_offset(local_cluster: ClusterUnderTest, make_ssc: Any) -> None:
    """pyspark's ``messageHandler`` (from createDirectStream): elements are what it returns. WAL off:
    the KafkaReceiver, which commits what it consumed when it stops."""
    topic, group = unique_name("handler"), unique_name("group")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(b"k", f"m{i}".encode(), i % 2) for i in range(20)])

    def handler(m: KafkaMessageAndMetadata) -> tuple[str, int, int, str, str]:
        return m.topic, m.partition, m.offset, m.key, m.message

    ssc = make_ssc(wal=False)
    stream = KafkaUtils.createStream(
        ssc,
        local_cluster.zookeeper_connect,
        group,
        {topic: 1},
        {"auto.offset.reset": "smallest", **local_cluster.client_config()},
        messageHandler=handler,
    )
    seen: list[tuple[str, int, int, str, str]] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.collect()))
    ssc.start()
    wait_until(lambda: len(seen) >= 20, timeout_s=120, what="20 records")
    ssc.stop(stopSparkContext=False, stopGraceFully=True)

    expected = {(topic, i % 2, i // 2, "k", f"m{i}") for i in range(20)}
    assert sorted(seen) == sorted(expected)
    assert committed_offsets(local_cluster, group, topic, 2) == {0: 10, 1: 10}
