"""Exact offset ranges of one partition read as Arrow-ready column buffers, through the
partition's own queue (:mod:`~reliable_kafka.kafka.client.packed_fetch`): no ``Message`` per record.

What :func:`~reliable_kafka.kafka.client.range_reader.range_messages` reads, with the same
contract: every record of ``[fromOffset, untilOffset)`` in offset order (compacted-away offsets
simply absent), :class:`~reliable_kafka.kafka.client.range_reader.LostOffsetsError` for records
Kafka no longer has (or that did not come within the quiet time), ``AccessRefusedError`` when
Kafka refuses the client. Records past ``untilOffset`` that came in the same fetch are left out by
:attr:`RangeColumns.records` (the buffers hold them; the caller slices). Headers are not read:
a caller that needs them reads messages.

The consumer and the loop over a range are :mod:`~reliable_kafka.kafka.client.packed_range_loop`'s.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from confluent_kafka import KafkaError

from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.packed_fetch import COLUMN_BUFFERS
from reliable_kafka.kafka.client.packed_range_loop import PackedRangeLoop, open_packed
from reliable_kafka.kafka.client.range_reader import POLL_S
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

_OFFSETS = COLUMN_BUFFERS.index("offset")


class RangeColumns(NamedTuple):
    """The first ``records`` of the ``fetched`` records whose buffers ``columns`` holds
    (:data:`~reliable_kafka.kafka.client.packed_fetch.COLUMN_BUFFERS`): those in the range."""

    columns: tuple[bytes | None, ...]
    fetched: int
    records: int


class PackedRangeReader(PackedRangeLoop[RangeColumns]):
    """Exact ranges of one partition, one range at a time, as column buffers. Not thread-safe."""

    @classmethod
    def open(cls, kafka_params: Mapping[str, Any], tp: TopicAndPartition) -> PackedRangeReader | str:
        """A reader of ``tp``, or why packed fetch cannot read it here (then nothing is left open)."""
        opened = open_packed(kafka_params, tp)
        return opened if isinstance(opened, str) else cls(*opened, tp)

    def read(self, wanted: OffsetRange, timeout_s: float, max_records: int) -> Iterator[RangeColumns]:
        """The records of ``wanted``, up to ``max_records`` per fetch. The quiet time that counts
        as loss runs only while waiting on Kafka, not while the caller works on a batch."""
        return self._read(wanted, timeout_s, max_records)

    def _take(self, max_records: int, until: int) -> tuple[RangeColumns | None, int | None, list[KafkaError]]:
        batch = self._fetch.fetch_columns(max_records, POLL_S)
        if batch.columns is None:
            return None, None, batch.errors
        offsets = memoryview(batch.columns[_OFFSETS]).cast("q")
        # Records at or past untilOffset came in the same fetch: the range is complete.
        kept = bisect.bisect_left(offsets, until)
        after = until if kept < batch.records else offsets[kept - 1] + 1
        return (RangeColumns(batch.columns, batch.records, kept) if kept else None), after, batch.errors
