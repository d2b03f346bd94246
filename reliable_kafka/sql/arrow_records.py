"""One partition's exact range read into Arrow record batches, on an executor.

The range is read as a direct stream's task reads one (``kafka.client.range_reader``): a
consumer assigned to exactly ``[fromOffset, untilOffset)``, which never jumps to another offset,
and :class:`~reliable_kafka.kafka.client.range_reader.LostOffsetsError` for records Kafka no
longer has. The columns are built with ``map`` over confluent-kafka's C accessors and handed to
pyarrow whole, so no Python bytecode runs per record and Spark receives Arrow, not rows.

Why not the packed fetch (``kafka.client.packed_fetch``), which reads without a ``Message`` per
record: its layout carries key, value and offset only, and Spark's Kafka schema has each
record's timestamp and timestamp type (and, with ``includeHeaders``, its headers), which only
the messages hold.

``failOnDataLoss``: records Kafka no longer has fail the task with an error naming the topic,
partition and range (true, the default), or are skipped with a WARNING naming them (false).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message, TopicPartition

from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.range_reader import (
    DEFAULT_REREAD_TIMEOUT_S,
    LostOffsetsError,
    RangeConsumer,
    range_consumer,
    range_messages,
)

logger = logging.getLogger(__name__)

# Records per record batch: what a task holds as messages at once, and Spark's default
# spark.sql.execution.arrow.maxRecordsPerBatch.
BATCH_RECORDS = 10_000
_WATERMARK_TIMEOUT_S = 10.0


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
    consumer = range_consumer(kafka_params)
    try:
        next_offset = wanted.fromOffset
        while next_offset < wanted.untilOffset:
            piece = OffsetRange(wanted.topic, wanted.partition, next_offset, wanted.untilOffset)
            messages: list[Message] = []
            try:
                for message in range_messages(consumer, piece, DEFAULT_REREAD_TIMEOUT_S):
                    messages.append(message)
                    if len(messages) == BATCH_RECORDS:
                        yield record_batch(messages, wanted.topic, wanted.partition, schema)
                        messages = []
                next_offset = wanted.untilOffset
            except LostOffsetsError as lost:
                next_offset = _past_the_loss(consumer, lost, fail_on_data_loss)
            if messages:
                yield record_batch(messages, wanted.topic, wanted.partition, schema)
    finally:
        consumer.close()


def _past_the_loss(consumer: RangeConsumer, lost: LostOffsetsError, fail_on_data_loss: bool) -> int:
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
    stamps = list(map(Message.timestamp, messages))  # (type, ms) pairs, built in C
    columns: dict[str, pa.Array] = {
        "key": pa.array(list(map(Message.key, messages)), pa.binary()),
        "value": pa.array(list(map(Message.value, messages)), pa.binary()),
        "topic": pa.array([topic] * count, pa.string()),
        "partition": pa.array([partition] * count, pa.int32()),
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


def _headers(headers: list[tuple[str, bytes | None]] | None) -> list[dict[str, Any]] | None:
    return None if headers is None else [{"key": key, "value": value} for key, value in headers]
