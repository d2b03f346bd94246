"""Exact offset ranges of one partition read as Arrow-ready column buffers, through the
partition's own queue (:mod:`~reliable_kafka.kafka.client.packed_fetch`): no ``Message`` per record.

What :func:`~reliable_kafka.kafka.client.range_reader.range_messages` reads, with the same
contract: every record of ``[fromOffset, untilOffset)`` in offset order (compacted-away offsets
simply absent), :class:`~reliable_kafka.kafka.client.range_reader.LostOffsetsError` for records
Kafka no longer has (or that did not come within the quiet time), ``AccessRefusedError`` when
Kafka refuses the client. Records past ``untilOffset`` that came in the same fetch are left out by
:attr:`RangeColumns.records` (the buffers hold them; the caller slices). Headers are not read:
a caller that needs them reads messages.

The consumer is a plain confluent-kafka ``Consumer`` (packed fetch reads only that exact type,
by address), configured as :func:`~reliable_kafka.kafka.client.range_reader.range_consumer_config`
says; its error callback and logs are served between fetches.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from confluent_kafka import Consumer, KafkaException, TopicPartition

from reliable_kafka.kafka.client.access_refusal import AccessRefusals
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.packed_fetch import COLUMN_BUFFERS, PackedFetch, available
from reliable_kafka.kafka.client.range_reader import (
    POLL_S,
    LostOffsetsError,
    range_consumer_config,
    read_ends,
    read_fails,
)
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

_OFFSETS = COLUMN_BUFFERS.index("offset")


class RangeColumns(NamedTuple):
    """The first ``records`` of the ``fetched`` records whose buffers ``columns`` holds
    (:data:`~reliable_kafka.kafka.client.packed_fetch.COLUMN_BUFFERS`): those in the range."""

    columns: tuple[bytes | None, ...]
    fetched: int
    records: int


class PackedRangeReader:
    """Exact ranges of one partition, one range at a time. Not thread-safe."""

    def __init__(
        self, consumer: Consumer, refusals: AccessRefusals, fetch: PackedFetch, tp: TopicAndPartition
    ) -> None:
        self.consumer = consumer
        self._refusals = refusals
        self._fetch = fetch
        self._tp = tp

    @classmethod
    def open(cls, kafka_params: Mapping[str, Any], tp: TopicAndPartition) -> PackedRangeReader | str:
        """A reader of ``tp``, or why packed fetch cannot read it here (then nothing is left open)."""
        if not available():
            return "packed fetch is off in this process (its reason is logged once)"
        config, refusals = range_consumer_config(kafka_params)
        consumer = Consumer(config)
        fetch = PackedFetch.attach(consumer, tp)
        if fetch is None:
            consumer.close()
            return "confluent-kafka's consumer could not be read by address (logged above)"
        return cls(consumer, refusals, fetch, tp)

    def read(self, wanted: OffsetRange, timeout_s: float, max_records: int) -> Iterator[RangeColumns]:
        """The records of ``wanted``, up to ``max_records`` per fetch. The quiet time that counts
        as loss runs only while waiting on Kafka, not while the caller works on a batch."""
        topic, partition = wanted.topic, wanted.partition
        if TopicAndPartition(topic, partition) != self._tp:
            raise ValueError(f"a reader of {self._tp} asked for {topic} [{partition}]")
        self.consumer.assign([TopicPartition(topic, partition, wanted.fromOffset)])
        next_offset = wanted.fromOffset
        deadline = time.monotonic() + timeout_s
        try:
            while next_offset < wanted.untilOffset:
                missing = OffsetRange(topic, partition, next_offset, wanted.untilOffset)
                ended = read_ends(self._refusals, deadline, timeout_s, missing)
                if ended is not None:
                    raise ended
                batch = self._fetch.fetch_columns(max_records, POLL_S)
                if batch.columns is not None:
                    offsets = memoryview(batch.columns[_OFFSETS]).cast("q")
                    # Records at or past untilOffset came in the same fetch: the range is complete.
                    kept = bisect.bisect_left(offsets, wanted.untilOffset)
                    next_offset = offsets[kept - 1] + 1 if kept else next_offset
                    if kept < batch.records:
                        next_offset = wanted.untilOffset
                    if kept:
                        yield RangeColumns(batch.columns, batch.records, kept)
                        deadline = time.monotonic() + timeout_s
                # The errors that came with the batch's records (an end-of-partition event after
                # the range's last record, which is no loss) count only while records are missing.
                for error in [*batch.errors, *self._fetch.serve_events()]:
                    if next_offset >= wanted.untilOffset:
                        break
                    failed = read_fails(
                        error, self._refusals, OffsetRange(topic, partition, next_offset, wanted.untilOffset)
                    )
                    if failed is not None:
                        raise failed
                    # otherwise a transport error: librdkafka retries
        except KafkaException as exc:
            missing = OffsetRange(topic, partition, next_offset, wanted.untilOffset)
            raise LostOffsetsError([missing], f"reading them failed: {exc}") from exc
        finally:
            self.consumer.unassign()

    def close(self) -> None:
        self._fetch.close()
        self.consumer.close()
