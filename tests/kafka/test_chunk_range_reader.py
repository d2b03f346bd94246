"""The direct stream's read path on real brokers: exact ranges read by packed fetch as block
chunks (``ChunkRangeReader``, ``_packed_fetch.fetch_with_metadata``) give what confluent-kafka's
messages give, record for record, metadata included; and a KafkaRDD partition decodes those
chunks (default decoders from the columns, a ``messageHandler`` per record built from them, a bad
value named) without reading a single ``Message``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from reliable_kafka import KafkaMessageAndMetadata
from reliable_kafka.dstream.batch_rdd import SKIP_RECORD
from reliable_kafka.kafka.client import packed_fetch, range_reader
from reliable_kafka.kafka.client.chunk_range_reader import ChunkRangeReader
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.range_reader import LostOffsetsError, range_consumer, range_messages
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct import kafka_rdd
from reliable_kafka.kafka.direct.kafka_rdd import _ReadRanges, encode_range_partition
from reliable_kafka.kafka.direct.message_and_metadata import record_metadata
from reliable_kafka.kafka.kafka_utils import KafkaRecordDecoder
from reliable_kafka.kafka.receiver.decode_errors import RecordDecodeError
from reliable_kafka.local import LocalCluster
from reliable_kafka.storage.block_format import rows_of_chunk
from tests.cluster_backends import unique_name
from tests.e2e.helpers import delete_records, produce

pytestmark = pytest.mark.integration

# Within retention (7 days): a broker's retention check deletes records stamped long ago.
STAMP_MS = int(time.time()) * 1000 - 60_000
HEADERS = [("trace", b"t1"), ("empty", None)]


def _records() -> list[tuple[bytes | None, bytes | None, int]]:
    """Null and empty keys and values, and a few sizes (``(key, value, partition)``)."""
    records: list[tuple[bytes | None, bytes | None, int]] = [(None, None, 0), (None, b"", 0), (b"", None, 0)]
    records += [(b"k" * size, b"v" * size, 0) for size in (1, 255, 256, 70000)]
    records += [(None if i % 3 == 0 else str(i).encode(), f"value-{i}".encode(), 0) for i in range(40)]
    return records


def _topic(cluster: LocalCluster, name: str, records: list[tuple[bytes | None, bytes | None, int]]) -> str:
    topic = unique_name(name)
    cluster.create_topic(topic, 1)
    legacy = cluster.kafka == "0.9"  # no timestamps before 0.10, no headers before 0.11
    produce(cluster, topic, records, **({} if legacy else {"timestamp": STAMP_MS, "headers": HEADERS}))  # type: ignore[arg-type]
    return topic


def _params(cluster: LocalCluster) -> dict[str, Any]:
    return cluster.client_config(**{"group.id": unique_name("g")})


def _message_rows(cluster: LocalCluster, wanted: OffsetRange) -> list[tuple[Any, ...]]:
    """What the direct stream read from confluent-kafka's messages before: each record's five
    fields, then its timestamp, timestamp type and headers."""
    consumer = range_consumer(_params(cluster))
    try:
        return [
            (m.key(), m.value(), m.topic(), m.partition(), m.offset(), *record_metadata(m))
            for m in range_messages(consumer, wanted, 30)
        ]
    finally:
        consumer.close()


def _open(cluster: LocalCluster, topic: str) -> ChunkRangeReader:
    reader = ChunkRangeReader.open(_params(cluster), TopicAndPartition(topic, 0))
    assert isinstance(reader, ChunkRangeReader), f"packed fetch is off here: {reader}"
    return reader


@pytest.mark.brokers("3.9", "4", "0.9")
def test_a_range_read_in_chunks_is_the_range_read_record_by_record(local_cluster: LocalCluster) -> None:
    records = _records()
    topic = _topic(local_cluster, "chunk-range", records)
    reader = _open(local_cluster, topic)
    try:
        # Small chunks: ranges that start and end inside one; the same reader again and again.
        for start, until in [(3, 10), (0, 1), (10, len(records)), (5, 6), (0, len(records))]:
            wanted = OffsetRange(topic, 0, start, until)
            expected = _message_rows(local_cluster, wanted)
            assert [row[4] for row in expected] == list(range(start, until))
            with_metadata = [
                row
                for chunk in reader.read(wanted, 30, 8, with_metadata=True)
                for row in rows_of_chunk(chunk)
            ]
            assert with_metadata == expected, wanted
            plain = [row for chunk in reader.read(wanted, 30, 8) for row in rows_of_chunk(chunk)]
            assert plain == [row[:5] for row in expected], wanted
    finally:
        reader.close()
    if local_cluster.kafka == "0.9":
        assert expected[0][5:] == (None, None, [])
    else:
        assert expected[0][5:] == (STAMP_MS, "CreateTime", HEADERS)


@pytest.mark.brokers("3.9", "4")
def test_records_kafka_no_longer_has_are_lost_offsets(local_cluster: LocalCluster) -> None:
    topic = _topic(local_cluster, "chunk-range-lost", [(None, b"old", 0)] * 5)
    assert delete_records(local_cluster, topic, 1) == {0: 5}
    produce(local_cluster, topic, [(None, b"new", 0)] * 3)
    reader = _open(local_cluster, topic)
    try:
        with pytest.raises(LostOffsetsError, match="Kafka no longer has them") as deleted:
            list(reader.read(OffsetRange(topic, 0, 2, 8), 30, 100))
        assert [(r.fromOffset, r.untilOffset) for r in deleted.value.lost] == [(2, 8)]
        # Past the log's end: the end-of-partition event says they are not there.
        with pytest.raises(LostOffsetsError, match="the log ends before them") as beyond:
            list(reader.read(OffsetRange(topic, 0, 5, 12), 30, 100, with_metadata=True))
        assert [(r.fromOffset, r.untilOffset) for r in beyond.value.lost] == [(8, 12)]
    finally:
        reader.close()


@pytest.fixture
def no_messages(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Reading a confluent-kafka ``Message`` fails the test: the direct stream reads chunks."""

    def refused(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the direct stream read confluent-kafka messages")

    monkeypatch.setattr(range_reader, "range_messages", refused)
    monkeypatch.setattr(kafka_rdd, "range_messages", refused)
    yield


def _partition(cluster: LocalCluster, decoder: Any, wanted: OffsetRange) -> list[Any]:
    """One KafkaRDD partition of ``wanted`` computed here, as an executor computes it."""
    return list(_ReadRanges(decoder)(0, [encode_range_partition(_params(cluster), wanted)]))


@pytest.mark.brokers("3.9", "4", "0.9")
def test_a_kafka_rdd_partition_decodes_chunks_not_messages(
    local_cluster: LocalCluster, no_messages: None
) -> None:
    records = [(f"k{i}".encode(), f"v{i}".encode(), 0) for i in range(30)]
    topic = _topic(local_cluster, "chunk-rdd", records)
    wanted = OffsetRange(topic, 0, 4, 27)

    assert _partition(local_cluster, KafkaRecordDecoder(), wanted) == [
        (f"k{i}", f"v{i}") for i in range(4, 27)
    ]
    assert _partition(local_cluster, None, wanted) == [(*records[i][:2], topic, 0, i) for i in range(4, 27)]

    def handler(m: KafkaMessageAndMetadata) -> tuple[Any, ...]:
        return m.topic, m.partition, m.offset, m.key, m.message, m.timestamp, m.timestampType, m.headers

    handled = _partition(
        local_cluster, KafkaRecordDecoder(valueDecoder=bytes.upper, messageHandler=handler), wanted
    )
    legacy = local_cluster.kafka == "0.9"
    metadata = (None, None, []) if legacy else (STAMP_MS, "CreateTime", HEADERS)
    assert handled == [(topic, 0, i, f"k{i}", f"V{i}".encode(), *metadata) for i in range(4, 27)]


@pytest.mark.brokers("3.9")
def test_a_value_that_does_not_decode_is_named_or_skipped_within_its_chunk(
    local_cluster: LocalCluster, no_messages: None
) -> None:
    records = [(None, b"ok", 0), (None, b"\xff bad", 0), (None, b"fine", 0)]
    topic = _topic(local_cluster, "chunk-rdd-bad", records)
    wanted = OffsetRange(topic, 0, 0, 3)

    with pytest.raises(RecordDecodeError, match=rf"{topic}.*\b1\b"):
        _partition(local_cluster, KafkaRecordDecoder(), wanted)
    skipping = KafkaRecordDecoder(decode_errors="skip")
    assert _partition(local_cluster, skipping, wanted) == [(None, "ok"), (None, "fine")]
    # A handler leaves a record out by returning SKIP_RECORD, before touching its value.
    handler = KafkaRecordDecoder(messageHandler=lambda m: SKIP_RECORD if m.offset == 1 else m.message)
    assert _partition(local_cluster, handler, wanted) == ["ok", "fine"]


def test_packed_fetch_off_reads_the_same_chunks_from_messages(
    local_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without packed fetch (no C extension, an unverified confluent-kafka) the same chunks come
    from confluent-kafka's messages."""
    records = _records()
    topic = _topic(local_cluster, "chunk-range-off", records)
    wanted = OffsetRange(topic, 0, 2, len(records) - 3)
    params = _params(local_cluster)
    packed = list(kafka_rdd.read_chunks(params, wanted, with_metadata=True))
    monkeypatch.setattr(
        ChunkRangeReader, "open", classmethod(lambda _cls, *_args, **_kwargs: "off for this test")
    )
    by_messages = list(kafka_rdd.read_chunks(params, wanted, with_metadata=True))
    assert [row for chunk in by_messages for row in rows_of_chunk(chunk)] == _message_rows(
        local_cluster, wanted
    )
    assert [row for chunk in packed for row in rows_of_chunk(chunk)] == _message_rows(local_cluster, wanted)
    assert list(kafka_rdd.read_records(params, wanted)) == [
        row[:5] for row in _message_rows(local_cluster, wanted)
    ]


def test_an_extension_built_before_fetch_with_metadata_reads_a_handler_s_ranges_from_messages(
    local_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout updated without rebuilding the extension: plain ranges still come by packed
    fetch, a handler's from confluent-kafka's messages, the same records either way."""
    topic = _topic(local_cluster, "chunk-range-stale", [(b"k", b"v", 0)] * 3)
    monkeypatch.setattr(packed_fetch, "_c_fetch_with_metadata", None)
    params, tp = _params(local_cluster), TopicAndPartition(topic, 0)
    assert "rebuild it" in str(ChunkRangeReader.open(params, tp, with_metadata=True))
    plain = ChunkRangeReader.open(params, tp)
    assert isinstance(plain, ChunkRangeReader)
    plain.close()
    wanted = OffsetRange(topic, 0, 1, 3)
    rows = [
        row
        for chunk in kafka_rdd.read_chunks(params, wanted, with_metadata=True)
        for row in rows_of_chunk(chunk)
    ]
    assert rows == _message_rows(local_cluster, wanted)
