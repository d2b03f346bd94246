"""pyspark 2.4's Kafka value classes: its attributes, equality, hashing and text, and its exports."""

from __future__ import annotations

import pickle

import pytest

import reliable_kafka
import reliable_kafka.kafka
from reliable_kafka import Broker, KafkaMessageAndMetadata, OffsetRange, TopicAndPartition, utf8_decoder

# pyspark.streaming.kafka.__all__ in Spark 2.4.
PYSPARK_24_EXPORTS = (
    "Broker",
    "KafkaMessageAndMetadata",
    "KafkaUtils",
    "OffsetRange",
    "TopicAndPartition",
    "utf8_decoder",
)


@pytest.mark.parametrize("package", [reliable_kafka, reliable_kafka.kafka], ids=lambda m: m.__name__)
def test_the_package_exports_what_pyspark_24_did(package: object) -> None:
    for name in PYSPARK_24_EXPORTS:
        assert name in package.__all__  # type: ignore[attr-defined]
        assert getattr(package, name) is getattr(reliable_kafka.kafka, name)


def test_offset_range() -> None:
    r = OffsetRange("t", 1, 5, 9)
    assert (r.topic, r.partition, r.fromOffset, r.untilOffset) == ("t", 1, 5, 9)
    assert r == OffsetRange("t", 1, 5, 9)
    assert r != OffsetRange("t", 1, 5, 10)
    assert r != ("t", 1, 5, 9)  # as in 2.4: only another OffsetRange is equal
    assert len({r, OffsetRange("t", 1, 5, 9)}) == 1
    assert str(r) == "OffsetRange(topic: t, partition: 1, range: [5 -> 9])"
    assert "fromOffset=5" in repr(r)


def test_topic_and_partition() -> None:
    tp = TopicAndPartition("t", 3)
    assert tp == TopicAndPartition("t", 3)
    assert tp != TopicAndPartition("t", 4)
    # 2.4 hashed (topic, partition): fromOffsets dicts keyed either way find each other.
    assert hash(tp) == hash(("t", 3))
    assert {tp: 7}[TopicAndPartition("t", 3)] == 7
    assert (tp.topic, tp.partition, tp._topic, tp._partition) == ("t", 3, "t", 3)


def test_broker() -> None:
    b = Broker("kafka-1", 9092)
    assert b == Broker("kafka-1", 9092) and b != Broker("kafka-1", 9093)
    assert hash(b) == hash(Broker("kafka-1", 9092))
    assert (b.host, b.port, b._host, b._port) == ("kafka-1", 9092, "kafka-1", 9092)
    for host, port in (("", 1), ("h", 0), ("h", "9092"), (None, 1)):
        with pytest.raises(TypeError, match="Broker"):
            Broker(host, port)  # type: ignore[arg-type]


def test_message_and_metadata() -> None:
    m = KafkaMessageAndMetadata("t", 0, 42, b"k", b"v")
    assert (m.topic, m.partition, m.offset, m.key, m.message) == ("t", 0, 42, "k", "v")
    assert (m._rawKey, m._rawMessage) == (b"k", b"v")
    m._set_key_decoder(lambda b: b.upper())
    m._set_value_decoder(len)
    assert (m.key, m.message) == (b"K", 1)
    # The payload stays out of the text (it lands in logs), as in 2.4.
    assert (
        str(m) == repr(m) == "KafkaMessageAndMetadata(topic: t, partition: 0, offset: 42, key and message...)"
    )
    # A handler may return the object itself: it crosses pickle without its (closure) decoders.
    copy = pickle.loads(pickle.dumps(m))
    assert (copy.topic, copy.offset, copy.key, copy.message) == ("t", 42, "k", "v")
    # Beyond 2.4: what the broker keeps, None or empty where it keeps nothing.
    assert (m.timestamp, m.timestampType, m.headers) == (None, None, [])
    stamped = KafkaMessageAndMetadata(
        "t", 0, 7, None, b"v", timestamp=5, timestampType="LogAppendTime", headers=[("h", b"1")]
    )
    copy = pickle.loads(pickle.dumps(stamped))
    assert (copy.timestamp, copy.timestampType, copy.headers) == (5, "LogAppendTime", [("h", b"1")])
    assert m != KafkaMessageAndMetadata("t", 0, 42, b"k", b"v")  # identity, as in 2.4
    assert utf8_decoder(None) is None and utf8_decoder("é".encode()) == "é"
