"""KafkaRDD without a broker: its partitions' descriptors, the pieces a range is read in, and
``offsetRanges()`` kept through pipelined steps (2.4 found them among narrow ancestors)."""

from __future__ import annotations

from pyspark import SparkContext

from reliable_kafka import OffsetRange
from reliable_kafka.kafka.direct.kafka_rdd import (
    KafkaRDD,
    decode_range_partition,
    encode_range_partition,
    pieces,
    with_offset_ranges,
)

PARAMS = {"metadata.broker.list": "127.0.0.1:9", "group.id": "g"}


def test_descriptor_round_trip_is_plain_data() -> None:
    r = OffsetRange("t", 2, 5, 9)
    assert decode_range_partition(encode_range_partition(PARAMS, r)) == (PARAMS, r)


def test_a_range_is_read_in_pieces() -> None:
    assert list(pieces(OffsetRange("t", 0, 5, 30), size=10)) == [
        OffsetRange("t", 0, 5, 15),
        OffsetRange("t", 0, 15, 25),
        OffsetRange("t", 0, 25, 30),
    ]
    assert list(pieces(OffsetRange("t", 0, 5, 5))) == []


def test_offset_ranges_survive_pipelined_steps_only(spark_context: SparkContext) -> None:
    ranges = [OffsetRange("t", 0, 0, 3), OffsetRange("t", 1, 4, 4)]
    rdd = KafkaRDD(spark_context, PARAMS, ranges)
    assert rdd.getNumPartitions() == 2 and rdd.offsetRanges() == ranges
    mapped = with_offset_ranges(rdd.map(lambda kv: kv[1]).filter(bool).mapPartitions(iter))
    assert mapped is not None and mapped.offsetRanges() == ranges  # type: ignore[attr-defined]
    assert with_offset_ranges(rdd) is rdd
    shuffled = with_offset_ranges(rdd.map(lambda kv: (kv, 1)).reduceByKey(max))
    assert not hasattr(shuffled, "offsetRanges")
    assert with_offset_ranges(None) is None
    assert KafkaRDD(spark_context, PARAMS, []).collect() == []
