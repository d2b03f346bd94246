"""The columnar packed fetch (``_packed_fetch.fetch_columns``) and the exact range reader built on
it, against real brokers: the very keys, values, offsets, timestamps and timestamp types
confluent-kafka's messages give, ranges that end before the log does, and records Kafka no
longer has."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.packed_fetch import COLUMN_BUFFERS, PackedFetch
from reliable_kafka.kafka.client.packed_range_reader import PackedRangeReader, RangeColumns
from reliable_kafka.kafka.client.range_reader import LostOffsetsError, range_consumer, range_messages
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.local import LocalCluster
from reliable_kafka.sql import arrow_records
from reliable_kafka.sql.arrow_records import column_batches, record_batch
from tests.cluster_backends import unique_name
from tests.e2e.helpers import delete_records
from tests.support.producing import in_order_once

pytestmark = pytest.mark.integration

# Spark's Kafka schema without headers, as the source hands it to read_batches.
SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
)
# Within retention (7 days): a broker's retention check deletes records stamped long ago.
STAMP_MS = int(time.time()) * 1000 - 60_000


def _records() -> list[tuple[bytes | None, bytes | None]]:
    """Null and empty keys and values, and sizes across a few Arrow buffer boundaries."""
    records: list[tuple[bytes | None, bytes | None]] = [(None, None), (None, b""), (b"", None)]
    records += [(b"k" * size, b"v" * size) for size in (1, 7, 8, 9, 64, 70000)]
    records += [(None if i % 3 == 0 else str(i).encode(), f"value-{i}".encode()) for i in range(20)]
    # More records with keys than a fetch of the tests takes: a batch without a null key.
    records += [(str(i).encode(), f"value-{i}".encode()) for i in range(40)]
    return records


def _produce(cluster: LocalCluster, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    # Each record its own CreateTime, so that a column out of step shows.
    producer = Producer(in_order_once(cluster.client_config()))
    for i, (key, value) in enumerate(records):
        producer.produce(topic, value, key, partition=0, timestamp=STAMP_MS + i)
    assert producer.flush(60) == 0


def _topic(cluster: LocalCluster, name: str, records: list[tuple[bytes | None, bytes | None]]) -> str:
    topic = unique_name(name)
    cluster.create_topic(topic, 1)
    _produce(cluster, topic, records)
    return topic


def _params(cluster: LocalCluster) -> dict[str, Any]:
    return cluster.client_config(**{"group.id": unique_name("g")})


def _messages(cluster: LocalCluster, wanted: OffsetRange) -> list[Message]:
    consumer = range_consumer(_params(cluster))
    try:
        return list(range_messages(consumer, wanted, 30))
    finally:
        consumer.close()


def _as_messages_give(batch: RangeColumns) -> list[tuple[Any, ...]]:
    """(key, value, offset, (type, ms)) of each record kept, read back out of the raw buffers."""
    column = dict(zip(COLUMN_BUFFERS, batch.columns, strict=True))

    def binary(name: str) -> list[bytes | None]:
        ends = memoryview(column[f"{name}_offsets"] or b"").cast("q")
        validity, data = column[f"{name}_validity"], column[f"{name}_data"] or b""
        return [
            None
            if validity is not None and not validity[i >> 3] >> (i & 7) & 1
            else data[ends[i] : ends[i + 1]]
            for i in range(batch.fetched)
        ]

    offsets = memoryview(column["offset"] or b"").cast("q")
    stamps = memoryview(column["timestamp"] or b"").cast("q")
    kinds = memoryview(column["timestamp_type"] or b"").cast("i")
    rows = zip(binary("key"), binary("value"), offsets, stamps, kinds, strict=True)
    # confluent-kafka's timestamp types are librdkafka's (0, 1, 2); the columns hold Kafka's (-1, 0, 1).
    return [(key, value, offset, (kind + 1, ms)) for key, value, offset, ms, kind in rows][: batch.records]


def _message_rows(messages: list[Message]) -> list[tuple[Any, ...]]:
    return [(m.key(), m.value(), m.offset(), m.timestamp()) for m in messages]


@pytest.mark.brokers("3.9", "4")
def test_fetch_columns_gives_what_confluent_kafkas_messages_give(local_cluster: LocalCluster) -> None:
    records = _records()
    topic = _topic(local_cluster, "packed-columns", records)
    consumer = Consumer(
        local_cluster.client_config(**{"group.id": unique_name("g"), "enable.auto.commit": False})
    )
    consumer.list_topics(topic, timeout=10)
    fetch = PackedFetch.attach(consumer, TopicAndPartition(topic, 0))
    assert fetch is not None, "packed fetch is off here; the C extension should be built"
    fetched: list[tuple[Any, ...]] = []
    null_free = 0
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        for _ in range(300):
            batch = fetch.fetch_columns(16, 0.2)
            assert batch.errors == [] and fetch.serve_events() == []
            if batch.columns is not None:
                rows = _as_messages_give(RangeColumns(batch.columns, batch.records, batch.records))
                assert (batch.first_offset, batch.last_offset) == (rows[0][2], rows[-1][2])
                null_free += batch.columns[0] is None
                fetched += rows
            if len(fetched) >= len(records):
                break
    finally:
        fetch.close()
        consumer.close()
    assert fetched == _message_rows(_messages(local_cluster, OffsetRange(topic, 0, 0, len(records))))
    assert {row[3] for row in fetched} == {(1, STAMP_MS + i) for i in range(len(records))}  # CreateTime
    assert null_free, "a batch without a null key has no key validity bitmap"


@pytest.mark.brokers("3.9", "4")
def test_log_append_time_comes_as_kafka_s_type_1(local_cluster: LocalCluster) -> None:
    topic = unique_name("packed-columns-append-time")
    admin = AdminClient(local_cluster.client_config())
    (created,) = admin.create_topics(
        [NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime"})]
    ).values()
    created.result(timeout=30)
    local_cluster.wait_for_leaders(topic, 1)
    _produce(local_cluster, topic, [(b"k", b"v")])
    wanted = OffsetRange(topic, 0, 0, 1)
    (message,) = _messages(local_cluster, wanted)
    reader = PackedRangeReader.open(_params(local_cluster), TopicAndPartition(topic, 0))
    assert isinstance(reader, PackedRangeReader), reader
    try:
        (batch,) = list(reader.read(wanted, 30, 100))  # one record: one fetch
    finally:
        reader.close()
    assert _as_messages_give(batch) == _message_rows([message])
    assert message.timestamp()[0] == 2 and message.timestamp()[1] != STAMP_MS  # LogAppendTime
    (arrow,) = column_batches(batch, topic, 0, SCHEMA)
    assert arrow.column("timestampType").to_pylist() == [1]


@pytest.mark.brokers("3.9", "4")
def test_a_range_reads_exactly_its_records_though_the_log_goes_on(local_cluster: LocalCluster) -> None:
    records = _records()
    topic = _topic(local_cluster, "packed-range", records)
    reader = PackedRangeReader.open(_params(local_cluster), TopicAndPartition(topic, 0))
    assert isinstance(reader, PackedRangeReader), reader
    try:
        # Small fetches: ranges that start and end inside one; the same reader again and again.
        for start, until in [(3, 10), (0, 1), (10, len(records)), (5, 6), (0, len(records))]:
            wanted = OffsetRange(topic, 0, start, until)
            batches = list(reader.read(wanted, 30, 8))
            got = [row for batch in batches for row in _as_messages_give(batch)]
            assert got == _message_rows(_messages(local_cluster, wanted)), wanted
            assert [row[2] for row in got] == list(range(start, until))
            arrow = pa.Table.from_batches([b for f in batches for b in column_batches(f, topic, 0, SCHEMA)])
            messages = record_batch(_messages(local_cluster, wanted), topic, 0, SCHEMA)
            assert arrow.equals(pa.Table.from_batches([messages]))
    finally:
        reader.close()


@pytest.mark.brokers("3.9", "4")
def test_the_first_record_waited_for_comes_with_those_queued_behind_it(local_cluster: LocalCluster) -> None:
    """A range starts on an empty queue: the wait for its first record must not make that record
    a batch of its own (librdkafka queues a fetch response's records at once)."""
    topic = _topic(local_cluster, "packed-first-wait", [(None, f"value-{i}".encode()) for i in range(50)])
    reader = PackedRangeReader.open(_params(local_cluster), TopicAndPartition(topic, 0))
    assert isinstance(reader, PackedRangeReader), reader
    try:
        batches = list(reader.read(OffsetRange(topic, 0, 0, 50), 30, 1000))
    finally:
        reader.close()
    assert [batch.records for batch in batches] == [50]


def test_the_packed_columns_import_no_pandas() -> None:
    """pyarrow's scalar() and array() import pandas: a second of CPU on each new Python worker's
    first batch. The packed path builds its batches without them."""
    probe = "\n".join(
        [
            "import sys",
            "from array import array",
            "import pyarrow as pa",
            "from reliable_kafka.kafka.client.packed_range_reader import RangeColumns",
            "from reliable_kafka.sql.arrow_records import column_batches",
            "schema = pa.schema([('key', pa.binary()), ('value', pa.binary()), ('topic', pa.string()),",
            "    ('partition', pa.int32()), ('offset', pa.int64()),",
            "    ('timestamp', pa.timestamp('us', tz='UTC')), ('timestampType', pa.int32())])",
            "ends = array('q', [0, 1, 3]).tobytes()",
            "stamps = array('q', [1, 2]).tobytes()",
            "columns = (None, bytes(24), b'', None, ends, b'abc', array('q', [7, 8]).tobytes(), stamps,",
            "    array('i', [0, 0]).tobytes())",
            "(batch,) = column_batches(RangeColumns(columns, 2, 2), 't', 3, schema)",
            "assert batch.column('topic').to_pylist() == ['t', 't'], batch",
            "print('pandas' in sys.modules)",
        ]
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["False"], found.stdout


@pytest.mark.brokers("3.9", "4")
def test_records_kafka_no_longer_has_are_lost_offsets(local_cluster: LocalCluster) -> None:
    topic = _topic(local_cluster, "packed-range-lost", [(None, b"old")] * 5)
    assert delete_records(local_cluster, topic, 1) == {0: 5}
    _produce(local_cluster, topic, [(None, b"new")] * 3)
    reader = PackedRangeReader.open(_params(local_cluster), TopicAndPartition(topic, 0))
    assert isinstance(reader, PackedRangeReader), reader
    try:
        with pytest.raises(LostOffsetsError, match="Kafka no longer has them") as deleted:
            list(reader.read(OffsetRange(topic, 0, 2, 8), 30, 100))
        assert [(r.fromOffset, r.untilOffset) for r in deleted.value.lost] == [(2, 8)]
        # Past the log's end: the end-of-partition event says they are not there.
        with pytest.raises(LostOffsetsError, match="the log ends before them") as beyond:
            list(reader.read(OffsetRange(topic, 0, 5, 12), 30, 100))
        assert [(r.fromOffset, r.untilOffset) for r in beyond.value.lost] == [(8, 12)]
        # The reader goes on after a loss, as read_batches does for failOnDataLoss=false.
        batches = reader.read(OffsetRange(topic, 0, 5, 8), 30, 100)
        rows = [row[:3] for batch in batches for row in _as_messages_give(batch)]
        assert rows == [(None, b"new", offset) for offset in (5, 6, 7)]
    finally:
        reader.close()


def test_read_batches_reads_through_packed_fetch_and_messages_for_headers(
    local_cluster: LocalCluster, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packed path is the one taken without headers; the same batches come either way."""
    records = _records()
    topic = _topic(local_cluster, "packed-read-batches", records)
    wanted = OffsetRange(topic, 0, 2, len(records) - 4)
    opened: list[object] = []
    real_open = PackedRangeReader.open

    def recording_open(*args: Any) -> Any:
        opened.append(reader := real_open(*args))
        return reader

    monkeypatch.setattr(PackedRangeReader, "open", recording_open)
    packed = list(arrow_records.read_batches(_params(local_cluster), wanted, SCHEMA, fail_on_data_loss=True))
    assert len(opened) == 1 and isinstance(opened[0], PackedRangeReader)
    with_headers = SCHEMA.append(
        pa.field("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    )
    monkeypatch.setattr(arrow_records, "_fallbacks_logged", set())
    with caplog.at_level("INFO", logger=arrow_records.logger.name):
        by_messages = list(
            arrow_records.read_batches(_params(local_cluster), wanted, with_headers, fail_on_data_loss=True)
        )
    assert len(opened) == 1, "includeHeaders reads messages"
    assert "includeHeaders" in caplog.text
    assert pa.Table.from_batches(packed).equals(pa.Table.from_batches(by_messages).drop_columns(["headers"]))
    assert pa.Table.from_batches(packed).column("offset").to_pylist() == list(range(2, len(records) - 4))


def test_a_batch_is_cut_before_binary_s_2_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys and values are large_binary in the buffers and Spark's binary in the batches: no batch
    may hold more bytes of either than binary's int32 offsets reach (here: a limit of 10 bytes)."""
    monkeypatch.setattr(arrow_records, "BINARY_LIMIT", 10)
    values = [b"12345", b"123456", b"1234", b"1", b"12345678901"]
    ends = [0]
    for value in values:
        ends.append(ends[-1] + len(value))
    count = len(values)
    columns = (
        None,
        pa.array([0] * (count + 1), pa.int64()).buffers()[1].to_pybytes(),
        b"",
        None,
        pa.array(ends, pa.int64()).buffers()[1].to_pybytes(),
        b"".join(values),
        pa.array(range(count), pa.int64()).buffers()[1].to_pybytes(),
        pa.array([STAMP_MS] * count, pa.int64()).buffers()[1].to_pybytes(),
        pa.array([0] * count, pa.int32()).buffers()[1].to_pybytes(),
    )
    batches = list(column_batches(RangeColumns(columns, count, count), "t", 0, SCHEMA))
    assert [b.column("value").to_pylist() for b in batches] == [
        [b"12345"],
        [b"123456", b"1234"],
        [b"1"],
        [b"12345678901"],  # a record alone over the limit still goes, alone (Kafka's own limit is int32)
    ]
    assert all(b.column("value").type == pa.binary() for b in batches)
