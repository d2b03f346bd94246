"""What the two packed readers of exact ranges share: the consumer they open, and the loop that
reads one range through the partition's own queue with the range reader's rules.

:class:`~reliable_kafka.kafka.client.packed_range_reader.PackedRangeReader` (Arrow-ready column
buffers, for the Structured Streaming source) and
:class:`~reliable_kafka.kafka.client.chunk_range_reader.ChunkRangeReader` (block chunks, for the
direct stream's tasks) differ only in what one fetch gives: each says so in ``_take``. The loop
keeps :func:`~reliable_kafka.kafka.client.range_reader.range_messages`' contract: every record of
``[fromOffset, untilOffset)`` in offset order, ``LostOffsetsError`` for records Kafka no longer has
(or that did not come within the quiet time), ``AccessRefusedError`` when Kafka refuses the client.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from reliable_kafka.kafka.client.access_refusal import AccessRefusals
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.packed_fetch import PackedFetch, available
from reliable_kafka.kafka.client.range_reader import (
    LostOffsetsError,
    range_consumer_config,
    read_ends,
    read_fails,
)
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

Fetched = TypeVar("Fetched")


def open_packed(
    kafka_params: Mapping[str, Any], tp: TopicAndPartition
) -> tuple[Consumer, AccessRefusals, PackedFetch] | str:
    """A range consumer of ``tp`` with packed fetch attached, or why packed fetch cannot read it
    here (then nothing is left open)."""
    if not available():
        return "packed fetch is off in this process (its reason is logged once)"
    config, refusals = range_consumer_config(kafka_params)
    consumer = Consumer(config)
    fetch = PackedFetch.attach(consumer, tp)
    if fetch is None:
        consumer.close()
        return "confluent-kafka's consumer could not be read by address (logged above)"
    return consumer, refusals, fetch


class PackedRangeLoop(Generic[Fetched]):
    """Exact ranges of one partition, one range at a time. Not thread-safe."""

    def __init__(
        self, consumer: Consumer, refusals: AccessRefusals, fetch: PackedFetch, tp: TopicAndPartition
    ) -> None:
        self.consumer = consumer
        self._refusals = refusals
        self._fetch = fetch
        self._tp = tp

    def _take(self, max_records: int, until: int) -> tuple[Fetched | None, int | None, list[KafkaError]]:
        """One fetch of at most ``max_records``: what of it is in the range (None: nothing), the
        offset to read next (``until`` once a record at or past it came; None when the fetch
        held no record), and the errors that came with it."""
        raise NotImplementedError

    def _read(self, wanted: OffsetRange, timeout_s: float, max_records: int) -> Iterator[Fetched]:
        """The records of ``wanted``, up to ``max_records`` per fetch. The quiet time that counts
        as loss runs only while waiting on Kafka, not while the caller works on what it got."""
        topic, partition, until = wanted.topic, wanted.partition, wanted.untilOffset
        if TopicAndPartition(topic, partition) != self._tp:
            raise ValueError(f"a reader of {self._tp} asked for {topic} [{partition}]")
        self.consumer.assign([TopicPartition(topic, partition, wanted.fromOffset)])
        next_offset = wanted.fromOffset
        deadline = time.monotonic() + timeout_s
        try:
            while next_offset < until:
                ended = read_ends(
                    self._refusals, deadline, timeout_s, OffsetRange(topic, partition, next_offset, until)
                )
                if ended is not None:
                    raise ended
                # No more than the range still misses: without gaps in the log (compaction,
                # transaction markers) a fetch then takes nothing past the range's end.
                fetched, after, errors = self._take(min(max_records, until - next_offset), until)
                if after is not None:
                    next_offset = after
                if fetched is not None:
                    yield fetched
                    deadline = time.monotonic() + timeout_s
                # The errors that came with the batch's records (an end-of-partition event after
                # the range's last record, which is no loss) count only while records are missing.
                for error in [*errors, *self._fetch.serve_events()]:
                    if next_offset >= until:
                        break
                    failed = read_fails(
                        error, self._refusals, OffsetRange(topic, partition, next_offset, until)
                    )
                    if failed is not None:
                        raise failed
                    # otherwise a transport error: librdkafka retries
        except KafkaException as exc:
            missing = OffsetRange(topic, partition, next_offset, until)
            raise LostOffsetsError([missing], f"reading them failed: {exc}") from exc
        finally:
            self.consumer.unassign()

    def close(self) -> None:
        self._fetch.close()
        self.consumer.close()
