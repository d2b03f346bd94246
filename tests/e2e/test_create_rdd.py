"""``KafkaUtils.createRDD`` (pyspark 2.4's): exactly the records of the given ranges, on real brokers."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark import SparkContext

from reliable_kafka import Broker, KafkaMessageAndMetadata, KafkaUtils, OffsetRange, TopicAndPartition
from reliable_kafka.kafka import LostOffsetsError
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.helpers import delete_records, produce


def direct_params(cluster: ClusterUnderTest) -> dict[str, Any]:
    """The cluster's client settings under 2.4's key name for the brokers."""
    params: dict[str, Any] = dict(cluster.client_config())
    params["metadata.broker.list"] = params.pop("bootstrap.servers")
    return params


@pytest.mark.brokers("3.9", "4", "0.9")
def test_create_rdd_returns_exactly_the_ranges(
    local_cluster: ClusterUnderTest, spark_context: SparkContext
) -> None:
    topic = unique_name("create-rdd")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(f"k{i}".encode(), f"v{i}".encode(), i % 2) for i in range(100)])
    ranges = [OffsetRange(topic, 0, 10, 30), OffsetRange(topic, 1, 0, 50), OffsetRange(topic, 0, 0, 0)]

    rdd = KafkaUtils.createRDD(spark_context, direct_params(local_cluster), ranges)

    assert rdd.offsetRanges() == ranges
    assert rdd.getNumPartitions() == 3
    expected = [(f"k{2 * o}", f"v{2 * o}") for o in range(10, 30)]
    expected += [(f"k{2 * o + 1}", f"v{2 * o + 1}") for o in range(50)]
    assert rdd.collect() == expected  # in range order, each range in offset order

    def handler(m: KafkaMessageAndMetadata) -> tuple[str, int, int, Any, Any]:
        return m.topic, m.partition, m.offset, m.key, m.message

    leaders = {TopicAndPartition(topic, 1): Broker("127.0.0.1", 9)}  # only a preferred host
    handled = KafkaUtils.createRDD(
        spark_context,
        direct_params(local_cluster),
        [OffsetRange(topic, 1, 48, 50)],
        leaders,
        valueDecoder=lambda b: b.upper(),
        messageHandler=handler,
    ).collect()
    assert handled == [(topic, 1, 48, "k97", b"V97"), (topic, 1, 49, "k99", b"V99")]


@pytest.mark.brokers("3.9", "4", "0.9")
def test_message_handler_sees_timestamps_and_headers(
    local_cluster: ClusterUnderTest, spark_context: SparkContext
) -> None:
    """What the broker keeps of each record: its timestamp from 0.10, its headers from 0.11."""
    topic = unique_name("create-rdd-meta")
    local_cluster.create_topic(topic, partitions=1)
    legacy = local_cluster.kafka == "0.9"
    created = 1_700_000_000_123
    headers = [("trace", b"t1"), ("empty", None)]
    fields: dict[str, Any] = {} if legacy else {"timestamp": created, "headers": headers}
    produce(local_cluster, topic, [(b"k", f"v{i}".encode(), 0) for i in range(3)], **fields)

    def handler(m: KafkaMessageAndMetadata) -> tuple[int, int | None, str | None, list[Any]]:
        return m.offset, m.timestamp, m.timestampType, m.headers

    handled = KafkaUtils.createRDD(
        spark_context, direct_params(local_cluster), [OffsetRange(topic, 0, 1, 3)], messageHandler=handler
    ).collect()

    if legacy:
        assert handled == [(1, None, None, []), (2, None, None, [])]
    else:
        assert handled == [(1, created, "CreateTime", headers), (2, created, "CreateTime", headers)]
    # Without a handler the elements stay (key, value) pairs.
    plain = KafkaUtils.createRDD(spark_context, direct_params(local_cluster), [OffsetRange(topic, 0, 0, 1)])
    assert plain.collect() == [("k", "v0")]


def test_create_rdd_names_bad_ranges(local_cluster: ClusterUnderTest, spark_context: SparkContext) -> None:
    """Beyond the log end, an unknown topic or partition, and records retention removed: each an
    error on the driver naming the range, before any task runs."""
    topic = unique_name("create-rdd-bad")
    local_cluster.create_topic(topic, partitions=1)
    produce(local_cluster, topic, [(None, b"x", 0)] * 10)
    params = direct_params(local_cluster)

    with pytest.raises(ValueError, match=r"beyond the end of its partition's log, offset 10"):
        KafkaUtils.createRDD(spark_context, params, [OffsetRange(topic, 0, 5, 11)])
    with pytest.raises(ValueError, match=r"has no partition 3"):
        KafkaUtils.createRDD(spark_context, params, [OffsetRange(topic, 3, 0, 1)])
    with pytest.raises(ValueError, match=r"topic 'no-such-topic-x' does not exist"):
        KafkaUtils.createRDD(spark_context, params, [OffsetRange("no-such-topic-x", 0, 0, 1)])

    delete_records(local_cluster, topic, 1)
    with pytest.raises(LostOffsetsError, match=rf"records lost: {topic}/0 \[5, 10\)"):
        KafkaUtils.createRDD(spark_context, params, [OffsetRange(topic, 0, 5, 10)])
    # An empty range at the log's new start is fine.
    assert KafkaUtils.createRDD(spark_context, params, [OffsetRange(topic, 0, 10, 10)]).collect() == []


def test_create_rdd_argument_errors(spark_context: SparkContext) -> None:
    """pyspark 2.4's type checks, and clear errors for what 2.4 left to the JVM."""
    params = {"metadata.broker.list": "127.0.0.1:9"}
    good = [OffsetRange("t", 0, 0, 1)]
    cases: list[tuple[tuple[Any, ...], type[Exception], str]] = [
        ((spark_context, "not a dict", good), TypeError, "kafkaParams should be dict"),
        ((spark_context, {}, good), ValueError, "metadata.broker.list"),
        ((spark_context, params, tuple(good)), TypeError, "offsetRanges should be list"),
        ((spark_context, params, [("t", 0, 0, 1)]), TypeError, "OffsetRange objects"),
        ((spark_context, params, [OffsetRange("t", 0, 5, 4)]), ValueError, "fromOffset <= untilOffset"),
        ((spark_context, params, good, {"t": 1}), TypeError, "leaders should map"),
        ((object(), params, good), TypeError, "SparkContext"),
        ((spark_context, {**params, "no.such.key": 1}, good), ValueError, "no.such.key"),
    ]
    for args, error, message in cases:
        with pytest.raises(error, match=message):
            KafkaUtils.createRDD(*args)
    with pytest.raises(TypeError, match="keyDecoder should be callable"):
        KafkaUtils.createRDD(spark_context, params, good, None, "utf8")
