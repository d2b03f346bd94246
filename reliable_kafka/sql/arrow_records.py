"""One partition's exact range read into Arrow record batches, on an executor.

The range is read as a direct stream's task reads one (``kafka.client.range_reader``): a
consumer assigned to exactly ``[fromOffset, untilOffset)``, which never jumps to another offset,
and :class:`~reliable_kafka.kafka.client.range_reader.LostOffsetsError` for records Kafka no
longer has.

Where packed fetch can read the partition (``kafka.client.packed_range_reader``), its records
come as column buffers built in C without the GIL, and the arrays are made over those very
buffers (no copy, no Python object per record). Keys and values come as Arrow's large_binary
(int64 offsets) and are cast to Spark's binary per record batch, which reuses their data; a
batch is cut short so neither column passes binary's 2 GiB. Otherwise (packed fetch off here,
or ``includeHeaders``, whose headers only confluent-kafka's messages hold) the columns are built
with ``map`` over confluent-kafka's C accessors of one ``Message`` per record; the reason is
logged once per process.

``failOnDataLoss``: records Kafka no longer has fail the task with an error naming the topic,
partition and range (true, the default), or are skipped with a WARNING naming them (false).
"""

from __future__ import annotations

import functools
import logging
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, Message, TopicPartition

from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.packed_fetch import COLUMN_BUFFERS
from reliable_kafka.kafka.client.packed_range_reader import PackedRangeReader, RangeColumns
from reliable_kafka.kafka.client.range_reader import (
    DEFAULT_REREAD_TIMEOUT_S,
    LostOffsetsError,
    RangeConsumer,
    range_consumer,
    range_messages,
)
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

logger = logging.getLogger(__name__)

# Records per record batch: what a task holds as messages at once, and Spark's default
# spark.sql.execution.arrow.maxRecordsPerBatch.
BATCH_RECORDS = 10_000
_WATERMARK_TIMEOUT_S = 10.0
# The most bytes one column of Arrow's binary (int32 offsets) holds.
BINARY_LIMIT = 2**31 - 1
_fallbacks_logged: set[str] = set()


class DataLossError(RuntimeError):
    """Records of a batch's range that Kafka no longer has, with failOnDataLoss=true."""


def read_batches(
    kafka_params: Mapping[str, Any],
    wanted: OffsetRange,
    schema: pa.Schema,
    *,
    fail_on_data_loss: bool,
) -> Iterator[pa.RecordBatch]:
    """The records of ``wanted`` as record batches of ``schema`` (Spark's Kafka schema as Arrow,
    with ``headers`` when the schema has them)."""
    if wanted.count() <= 0:
        return
    if "headers" in schema.names:
        _log_fallback("includeHeaders: the headers are read from confluent-kafka's messages")
    else:
        reader = PackedRangeReader.open(kafka_params, TopicAndPartition(wanted.topic, wanted.partition))
        if isinstance(reader, PackedRangeReader):
            try:
                yield from _past_losses(
                    lambda piece: _packed_batches(reader, piece, schema),
                    reader.consumer,
                    wanted,
                    fail_on_data_loss,
                )
            finally:
                reader.close()
            return
        _log_fallback(reader)
    consumer = range_consumer(kafka_params)
    try:
        yield from _past_losses(
            lambda piece: _message_batches(consumer, piece, schema), consumer, wanted, fail_on_data_loss
        )
    finally:
        consumer.close()


def _log_fallback(reason: str) -> None:
    if reason not in _fallbacks_logged:
        _fallbacks_logged.add(reason)
        logger.info("reliable-kafka source: records are read as messages, one object each (%s)", reason)


def _past_losses(
    read_piece: Callable[[OffsetRange], Iterator[pa.RecordBatch]],
    consumer: Consumer,
    wanted: OffsetRange,
    fail_on_data_loss: bool,
) -> Iterator[pa.RecordBatch]:
    """The batches ``read_piece`` reads of ``wanted``, going on past records Kafka no longer has
    where failOnDataLoss allows it."""
    next_offset = wanted.fromOffset
    while next_offset < wanted.untilOffset:
        piece = OffsetRange(wanted.topic, wanted.partition, next_offset, wanted.untilOffset)
        try:
            yield from read_piece(piece)
            next_offset = wanted.untilOffset
        except LostOffsetsError as lost:
            next_offset = _past_the_loss(consumer, lost, fail_on_data_loss)


def _message_batches(
    consumer: RangeConsumer, piece: OffsetRange, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    messages: list[Message] = []
    try:
        for message in range_messages(consumer, piece, DEFAULT_REREAD_TIMEOUT_S):
            messages.append(message)
            if len(messages) == BATCH_RECORDS:
                yield record_batch(messages, piece.topic, piece.partition, schema)
                messages = []
    except LostOffsetsError:
        # What came before the gap is read: failOnDataLoss decides about the gap alone.
        if messages:
            yield record_batch(messages, piece.topic, piece.partition, schema)
        raise
    if messages:
        yield record_batch(messages, piece.topic, piece.partition, schema)


def _packed_batches(
    reader: PackedRangeReader, piece: OffsetRange, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    for fetched in reader.read(piece, DEFAULT_REREAD_TIMEOUT_S, BATCH_RECORDS):
        yield from column_batches(fetched, piece.topic, piece.partition, schema)


def _past_the_loss(consumer: Consumer, lost: LostOffsetsError, fail_on_data_loss: bool) -> int:
    """Where reading goes on after ``lost``: the log's start now, past the records retention
    removed; raises when failOnDataLoss says so, or when the log starts no later than the gap
    (Kafka has them, they did not come: no loss to skip)."""
    (gap,) = lost.lost
    described = f"{gap.topic} partition {gap.partition} offsets [{gap.fromOffset}, {gap.untilOffset})"
    if fail_on_data_loss:
        raise DataLossError(
            f"{described}: Kafka no longer has these records ({lost.reason}). Some data may have "
            'been lost; set option failOnDataLoss to "false" to skip them with a warning instead'
        ) from lost
    log_start, _ = consumer.get_watermark_offsets(
        TopicPartition(gap.topic, gap.partition), timeout=_WATERMARK_TIMEOUT_S, cached=False
    )
    if log_start <= gap.fromOffset:
        raise lost
    resumed = min(int(log_start), gap.untilOffset)
    logger.warning(
        "%s: Kafka no longer has offsets [%d, %d) (%s); skipped, as failOnDataLoss=false says",
        described,
        gap.fromOffset,
        resumed,
        lost.reason,
    )
    return resumed


def record_batch(
    messages: Sequence[Message], topic: str, partition: int, schema: pa.Schema
) -> pa.RecordBatch:
    """Spark's Kafka columns of ``messages``, in ``schema``'s order and types."""
    count = len(messages)
    topics, partitions = _constant_columns(topic, partition, count)
    stamps = list(map(Message.timestamp, messages))  # (type, ms) pairs, built in C
    columns: dict[str, pa.Array] = {
        "key": pa.array(list(map(Message.key, messages)), pa.binary()),
        "value": pa.array(list(map(Message.value, messages)), pa.binary()),
        "topic": topics,
        "partition": partitions,
        "offset": pa.array(list(map(Message.offset, messages)), pa.int64()),
        # Milliseconds to Spark's microseconds, in Arrow.
        "timestamp": pc.multiply(pa.array([ms for _, ms in stamps], pa.int64()), 1000).cast(
            schema.field("timestamp").type
        ),
        # librdkafka's NOT_AVAILABLE/CREATE_TIME/LOG_APPEND_TIME (0, 1, 2) are Kafka's -1, 0, 1.
        "timestampType": pa.array([kind - 1 for kind, _ in stamps], pa.int32()),
    }
    if "headers" in schema.names:
        columns["headers"] = pa.array(
            [_headers(h) for h in map(Message.headers, messages)], schema.field("headers").type
        )
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


def _constant_columns(topic: str, partition: int, count: int) -> tuple[pa.Array, pa.Array]:
    """The topic and partition columns of ``count`` records: slices of arrays made once per
    partition (arrays are immutable), not new ones for every batch."""
    topics, partitions = _repeated(topic, partition, max(count, BATCH_RECORDS))
    return topics.slice(0, count), partitions.slice(0, count)


@functools.lru_cache(maxsize=64)
def _repeated(topic: str, partition: int, count: int) -> tuple[pa.Array, pa.Array]:
    # Made from buffers: pyarrow's scalar() and array() import pandas (to check for its types),
    # a second of CPU on the first batch of each new Python worker, which nothing else here needs.
    name = topic.encode()
    ends = array("i", [len(name) * i for i in range(count + 1)])
    return (
        pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(ends), pa.py_buffer(name * count)]),
        pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(array("i", [partition]) * count)]),
    )


def _headers(headers: list[tuple[str, bytes | None]] | None) -> list[dict[str, Any]] | None:
    return None if headers is None else [{"key": key, "value": value} for key, value in headers]


def column_batches(
    fetched: RangeColumns, topic: str, partition: int, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Spark's Kafka columns (no headers) of the records of ``fetched``, as arrays over its very
    buffers: at most :data:`BATCH_RECORDS` records per batch, and under :data:`BINARY_LIMIT`
    bytes of keys and of values."""
    raw = dict(zip(COLUMN_BUFFERS, fetched.columns, strict=True))
    buffer = {name: None if data is None else pa.py_buffer(data) for name, data in raw.items()}
    length = fetched.fetched
    arrays = {
        "key": pa.Array.from_buffers(
            pa.large_binary(), length, [buffer["key_validity"], buffer["key_offsets"], buffer["key_data"]]
        ),
        "value": pa.Array.from_buffers(
            pa.large_binary(),
            length,
            [buffer["value_validity"], buffer["value_offsets"], buffer["value_data"]],
        ),
        "offset": pa.Array.from_buffers(pa.int64(), length, [None, buffer["offset"]]),
        # Milliseconds as they are; cast to Spark's microseconds per batch.
        "timestamp": pa.Array.from_buffers(
            pa.timestamp("ms", tz=schema.field("timestamp").type.tz), length, [None, buffer["timestamp"]]
        ),
        "timestampType": pa.Array.from_buffers(pa.int32(), length, [None, buffer["timestamp_type"]]),
    }
    key_ends, value_ends = (
        memoryview(raw[name] or b"").cast("q") for name in ("key_offsets", "value_offsets")
    )
    start = 0
    while start < fetched.records:
        stop = min(fetched.records, start + BATCH_RECORDS)
        while stop - start > 1 and (
            key_ends[stop] - key_ends[start] > BINARY_LIMIT
            or value_ends[stop] - value_ends[start] > BINARY_LIMIT
        ):
            stop = start + (stop - start) // 2
        piece = {name: array.slice(start, stop - start) for name, array in arrays.items()}
        yield _column_batch(piece, topic, partition, schema)
        start = stop


def _column_batch(
    piece: dict[str, pa.Array], topic: str, partition: int, schema: pa.Schema
) -> pa.RecordBatch:
    count = len(piece["offset"])
    topics, partitions = _constant_columns(topic, partition, count)
    columns = {
        # Casting large_binary to binary makes new offsets and keeps the data buffer.
        "key": piece["key"].cast(pa.binary()),
        "value": piece["value"].cast(pa.binary()),
        "topic": topics,
        "partition": partitions,
        "offset": piece["offset"],
        "timestamp": piece["timestamp"].cast(schema.field("timestamp").type),
        "timestampType": piece["timestampType"],
    }
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)
