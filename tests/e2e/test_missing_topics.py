"""A topic createStream names that Kafka does not have (issue 42, item 3): an error to
``awaitTermination`` naming it once it has been missing for ``missing.topic.timeout.ms``, the
receiver not launched again; with auto-creation on (the consumer's ``allow.auto.create.topics``
and the brokers' ``auto.create.topics.enable``) one WARNING, then the records once it exists.
Real ZooKeeper, Kafka and Spark; contexts on the session's SparkContext."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from pyspark import SparkContext

from reliable_kafka import KafkaUtils, StorageLevel, StreamingContext
from reliable_kafka.receiver.fatal_error import FatalReceiverError
from reliable_kafka.settings import ReceiverSettings, StreamingSettings
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.conftest import BATCH_S, e2e_settings
from tests.e2e.helpers import produce
from tests.support import wait_until

pytestmark = pytest.mark.integration

BOUND_MS = 2000


def topic_exists(cluster: ClusterUnderTest, topic: str) -> bool:
    # All topics, not the one by name: asking for it by name could create it.
    return topic in AdminClient(cluster.client_config()).list_topics(timeout=30).topics


def zk_quorum(cluster: ClusterUnderTest) -> str | None:
    """ZooKeeper membership where the broker has one (3.9), else Kafka's group coordinator (4)."""
    return cluster.zookeeper_connect if cluster.has_zookeeper else None


@pytest.mark.brokers("3.9", "4")
def test_a_missing_topic_fails_await_termination_naming_it_and_its_receiver_is_not_launched_again(
    kafka_cluster: ClusterUnderTest, make_ssc: Any
) -> None:
    topic = unique_name("missing")
    ssc = make_ssc(wal=False, checkpoint=False)
    stream = KafkaUtils.createStream(
        ssc,
        zk_quorum(kafka_cluster),
        unique_name("group"),
        {topic: 1},
        {**kafka_cluster.client_config(), "missing.topic.timeout.ms": str(BOUND_MS)},
    )
    stream.foreachRDD(lambda rdd: rdd.count())
    ssc.start()

    with pytest.raises(FatalReceiverError, match=f"topic '{topic}' does not exist") as raised:
        ssc.awaitTerminationOrTimeout(60)
    assert "missing.topic.timeout.ms" in str(raised.value)
    tracker = ssc.scheduler.receiver_tracker
    wait_until(tracker.all_receivers_stopped, what="the receiver's job to end for good")
    assert tracker.launch_count(stream.id) == 1
    assert not topic_exists(kafka_cluster, topic)


def test_with_auto_creation_one_warning_then_the_records_once_the_topic_exists(
    local_cluster: ClusterUnderTest, spark_context: SparkContext, caplog: pytest.LogCaptureFixture
) -> None:
    """In-process receivers (driver placement), so that this process sees every line they log."""
    topic = unique_name("autocreated")
    defaults = e2e_settings(wal=False)
    settings = StreamingSettings(
        receiver=ReceiverSettings(**{**defaults.receiver.model_dump(), "placement": "driver"}),
        jobs=defaults.jobs,
    )
    caplog.set_level(logging.INFO)
    ssc = StreamingContext(spark_context, BATCH_S, settings)
    try:
        stream = KafkaUtils.createStream(
            ssc,
            local_cluster.zookeeper_connect,
            unique_name("group"),
            {topic: 1},
            {
                **local_cluster.client_config(),
                "auto.offset.reset": "smallest",
                "allow.auto.create.topics": "true",
                "missing.topic.timeout.ms": str(BOUND_MS),
            },
            # One copy: no warning that a driver's blocks have no peer to keep a second.
            storageLevel=StorageLevel.MEMORY_AND_DISK,
        )
        seen: list[str] = []
        lock = threading.Lock()

        def keep(rdd: Any) -> None:
            values = rdd.map(lambda kv: kv[1]).collect()
            with lock:
                seen.extend(values)

        stream.foreachRDD(keep)
        ssc.start()
        wait_until(lambda: topic_exists(local_cluster, topic), timeout_s=60, what="the brokers to create it")
        produce(local_cluster, topic, [(None, f"m{i}".encode(), 0) for i in range(10)])
        wait_until(lambda: len(seen) >= 10, timeout_s=60, what="the records of the created topic")
        assert not ssc.awaitTerminationOrTimeout(0.1), "the stream stopped"
    finally:
        ssc.stop(stopSparkContext=False)

    assert sorted(seen) == sorted(f"m{i}" for i in range(10))
    # One WARNING at most: the brokers may create the topic on the very request that first asks
    # for it, and then the receiver never sees it missing (seen in a full run).
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) <= 1, [f"{r.name}: {r.getMessage()}" for r in warnings]
    for warning in warnings:
        assert f"topic '{topic}' does not exist" in warning.getMessage()
        assert "allow.auto.create.topics" in warning.getMessage()
