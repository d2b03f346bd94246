"""Exact offset ranges of one partition read as block chunks, through the partition's own queue
(:mod:`~reliable_kafka.kafka.client.packed_fetch`): no ``Message`` per record.

What :func:`~reliable_kafka.kafka.client.range_reader.range_messages` reads, with the same
contract: every record of ``[fromOffset, untilOffset)`` in offset order (compacted-away offsets
simply absent), :class:`~reliable_kafka.kafka.client.range_reader.LostOffsetsError` for records
Kafka no longer has (or that did not come within the quiet time), ``AccessRefusedError`` when
Kafka refuses the client. The records come as the chunks a receiver's blocks hold, packed in C
(``PackedFetch.fetch``) and unpacked to their columns ``(topic, partition, keys, values,
offsets)``: what the batch read chain decodes a chunk at a time (``dstream.chunk_decoding``).
Records past ``untilOffset`` that came in the same fetch are cut off.

With ``with_metadata`` each chunk also holds each record's ``timestamps``, ``timestamp types``
(``None``, ``"CreateTime"`` or ``"LogAppendTime"``; the timestamp is ``None`` with ``None``) and
``headers`` (a list of ``(name, value bytes or None)``, empty for none), after those five columns:
what a ``messageHandler``'s ``KafkaMessageAndMetadata`` carries.

The consumer is a plain confluent-kafka ``Consumer`` (packed fetch reads only that exact type,
by address), configured as :func:`~reliable_kafka.kafka.client.range_reader.range_consumer_config`
says; its error callback and logs are served between fetches.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator, Mapping
from typing import Any

import msgpack
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from reliable_kafka.kafka.client.access_refusal import AccessRefusals
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.packed_fetch import PackedFetch, RecordMetadata, available
from reliable_kafka.kafka.client.range_reader import (
    POLL_S,
    LostOffsetsError,
    range_consumer_config,
    read_ends,
    read_fails,
)
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

# Kafka's timestamp types (-1 none, 0, 1) by the Java client's names, as the handler sees them.
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}

ChunkColumns = tuple[Any, ...]


class ChunkRangeReader:
    """Exact ranges of one partition, one range at a time. Not thread-safe."""

    def __init__(
        self, consumer: Consumer, refusals: AccessRefusals, fetch: PackedFetch, tp: TopicAndPartition
    ) -> None:
        self.consumer = consumer
        self._refusals = refusals
        self._fetch = fetch
        self._tp = tp

    @classmethod
    def open(
        cls, kafka_params: Mapping[str, Any], tp: TopicAndPartition, *, with_metadata: bool = False
    ) -> ChunkRangeReader | str:
        """A reader of ``tp`` (of its records' metadata too, with ``with_metadata``), or why packed
        fetch cannot read it here (then nothing is left open)."""
        if not available():
            return "packed fetch is off in this process (its reason is logged once)"
        config, refusals = range_consumer_config(kafka_params)
        consumer = Consumer(config)
        fetch = PackedFetch.attach(consumer, tp)
        why_not = None
        if fetch is None:
            why_not = "confluent-kafka's consumer could not be read by address (logged above)"
        elif with_metadata and not fetch.reads_metadata:
            fetch.close()
            why_not = "the packed fetch extension was built before fetch_with_metadata: rebuild it"
        if why_not is not None:
            consumer.close()
            return why_not
        assert fetch is not None
        return cls(consumer, refusals, fetch, tp)

    def read(
        self, wanted: OffsetRange, timeout_s: float, max_records: int, *, with_metadata: bool = False
    ) -> Iterator[ChunkColumns]:
        """The records of ``wanted`` as chunk columns, up to ``max_records`` per chunk. The quiet
        time that counts as loss runs only while waiting on Kafka, not while the caller works on
        a chunk."""
        topic, partition, until = wanted.topic, wanted.partition, wanted.untilOffset
        if TopicAndPartition(topic, partition) != self._tp:
            raise ValueError(f"a reader of {self._tp} asked for {topic} [{partition}]")
        self.consumer.assign([TopicPartition(topic, partition, wanted.fromOffset)])
        next_offset = wanted.fromOffset
        deadline = time.monotonic() + timeout_s
        try:
            while next_offset < until:
                missing = OffsetRange(topic, partition, next_offset, until)
                ended = read_ends(self._refusals, deadline, timeout_s, missing)
                if ended is not None:
                    raise ended
                # No more than the range still misses: without gaps in the log (compaction,
                # transaction markers) a fetch then takes nothing past the range's end.
                chunk, errors = self._take(min(max_records, until - next_offset), with_metadata)
                if chunk is not None:
                    if chunk[4][-1] >= until:
                        # Records at or past untilOffset came in the same fetch: the range is complete.
                        chunk = _cut(chunk, bisect.bisect_left(chunk[4], until))
                        next_offset = until
                    else:
                        next_offset = chunk[4][-1] + 1
                    if chunk[4]:
                        yield chunk
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

    def _take(self, max_records: int, with_metadata: bool) -> tuple[ChunkColumns | None, list[KafkaError]]:
        """One fetch: its records as chunk columns (None when it held none), and its errors."""
        if not with_metadata:
            batch = self._fetch.fetch(max_records, POLL_S)
            return (None if batch.chunk is None else _columns(batch.chunk.data, None)), batch.errors
        batch, metadata = self._fetch.fetch_with_metadata(max_records, POLL_S)
        return (None if batch.chunk is None else _columns(batch.chunk.data, metadata)), batch.errors

    def close(self) -> None:
        self._fetch.close()
        self.consumer.close()


def _columns(data: bytes, metadata: RecordMetadata | None) -> ChunkColumns:
    """A packed chunk's columns ``(topic, partition, keys, values, offsets)``, then the metadata's."""
    chunk = msgpack.unpackb(data, raw=False, use_list=False)
    if metadata is None:
        return chunk
    types = tuple(map(TIMESTAMP_TYPES.get, metadata.timestamp_types))
    return (*chunk, tuple(metadata.timestamps), types, tuple(metadata.headers))


def _cut(chunk: ChunkColumns, kept: int) -> ChunkColumns:
    return (chunk[0], chunk[1], *(column[:kept] for column in chunk[2:]))
