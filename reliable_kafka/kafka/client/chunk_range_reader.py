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

The consumer and the loop over a range are :mod:`~reliable_kafka.kafka.client.packed_range_loop`'s.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from typing import Any

import msgpack
from confluent_kafka import KafkaError

from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.packed_fetch import RecordMetadata
from reliable_kafka.kafka.client.packed_range_loop import PackedRangeLoop, open_packed
from reliable_kafka.kafka.client.range_reader import POLL_S
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

# Kafka's timestamp types (-1 none, 0, 1) by the Java client's names, as the handler sees them.
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}

ChunkColumns = tuple[Any, ...]


class ChunkRangeReader(PackedRangeLoop[ChunkColumns]):
    """Exact ranges of one partition, one range at a time, as block chunks. Not thread-safe."""

    _with_metadata = False

    @classmethod
    def open(
        cls, kafka_params: Mapping[str, Any], tp: TopicAndPartition, *, with_metadata: bool = False
    ) -> ChunkRangeReader | str:
        """A reader of ``tp`` (of its records' metadata too, with ``with_metadata``), or why packed
        fetch cannot read it here (then nothing is left open)."""
        opened = open_packed(kafka_params, tp)
        if isinstance(opened, str):
            return opened
        consumer, _, fetch = opened
        if with_metadata and not fetch.reads_metadata:
            fetch.close()
            consumer.close()
            return "the packed fetch extension was built before fetch_with_metadata: rebuild it"
        return cls(*opened, tp)

    def read(
        self, wanted: OffsetRange, timeout_s: float, max_records: int, *, with_metadata: bool = False
    ) -> Iterator[ChunkColumns]:
        """The records of ``wanted`` as chunk columns, up to ``max_records`` per chunk. The quiet
        time that counts as loss runs only while waiting on Kafka, not while the caller works on
        a chunk."""
        self._with_metadata = with_metadata
        return self._read(wanted, timeout_s, max_records)

    def _take(self, max_records: int, until: int) -> tuple[ChunkColumns | None, int | None, list[KafkaError]]:
        if self._with_metadata:
            batch, metadata = self._fetch.fetch_with_metadata(max_records, POLL_S)
        else:
            batch, metadata = self._fetch.fetch(max_records, POLL_S), None
        if batch.chunk is None:
            return None, None, batch.errors
        chunk = _columns(batch.chunk.data, metadata)
        offsets = chunk[4]
        if offsets[-1] < until:
            return chunk, offsets[-1] + 1, batch.errors
        # Records at or past untilOffset came in the same fetch: the range is complete.
        kept = bisect.bisect_left(offsets, until)
        return (_cut(chunk, kept) if kept else None), until, batch.errors


def _columns(data: bytes, metadata: RecordMetadata | None) -> ChunkColumns:
    """A packed chunk's columns ``(topic, partition, keys, values, offsets)``, then the metadata's."""
    chunk = msgpack.unpackb(data, raw=False, use_list=False)
    if metadata is None:
        return chunk
    types = tuple(map(TIMESTAMP_TYPES.get, metadata.timestamp_types))
    return (*chunk, tuple(metadata.timestamps), types, tuple(metadata.headers))


def _cut(chunk: ChunkColumns, kept: int) -> ChunkColumns:
    return (chunk[0], chunk[1], *(column[:kept] for column in chunk[2:]))
