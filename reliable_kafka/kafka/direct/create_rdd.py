"""``KafkaUtils.createRDD``'s checks and build: pyspark 2.4's argument rules, then Spark's
``checkOffsets`` on the driver, so that a bad range fails before any task runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark import SparkContext

from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct.broker import Broker
from reliable_kafka.kafka.direct.kafka_cluster import KafkaCluster
from reliable_kafka.kafka.direct.kafka_rdd import Decoder, KafkaRDD
from reliable_kafka.kafka.direct.params import direct_kafka_params

MAX_RETRIES_KEY = "spark.streaming.kafka.maxRetries"


def checked_ranges(offset_ranges: Any) -> list[OffsetRange]:
    if not isinstance(offset_ranges, list):
        raise TypeError(f"offsetRanges should be list, got {type(offset_ranges).__name__}")
    for r in offset_ranges:
        if not isinstance(r, OffsetRange):
            raise TypeError(f"offsetRanges should hold OffsetRange objects, got {r!r}")
        if r.fromOffset < 0 or r.untilOffset < r.fromOffset:
            raise ValueError(f"{r}: offsets must satisfy 0 <= fromOffset <= untilOffset")
    return list(offset_ranges)


def checked_leaders(leaders: Any) -> dict[TopicAndPartition, Broker]:
    if leaders is None:
        return {}
    if not isinstance(leaders, Mapping):
        raise TypeError(f"leaders should be dict (TopicAndPartition -> Broker), got {type(leaders).__name__}")
    for tp, broker in leaders.items():
        if not isinstance(broker, Broker) or not isinstance(tp, tuple):
            raise TypeError(f"leaders should map TopicAndPartition to Broker, got {tp!r}: {broker!r}")
    return {TopicAndPartition(*tp): broker for tp, broker in leaders.items()}


def max_retries(sc: SparkContext) -> int:
    raw = sc.getConf().get(MAX_RETRIES_KEY, "1") or "1"
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{MAX_RETRIES_KEY}={raw!r}: expected a whole number") from None
    if value < 0:
        raise ValueError(f"{MAX_RETRIES_KEY}={raw!r}: must not be negative")
    return value


def create_rdd(sc: Any, kafka_params: Any, offset_ranges: Any, leaders: Any, decoder: Decoder) -> KafkaRDD:
    if not isinstance(sc, SparkContext):
        raise TypeError(f"sc should be a pyspark SparkContext, got {type(sc).__name__}")
    params = direct_kafka_params(kafka_params)
    ranges = checked_ranges(offset_ranges)
    leader_of = checked_leaders(leaders)
    cluster = KafkaCluster(params.params, max_retries(sc))
    try:
        cluster.check_ranges(ranges)
    finally:
        cluster.close()
    return KafkaRDD(sc, params.params, ranges, decoder=decoder, leaders=leader_of)
