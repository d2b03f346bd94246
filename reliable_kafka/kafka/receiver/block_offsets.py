"""Which Kafka offsets each block holds (Spark's ``topicPartitionOffsetMap``/``blockOffsetMap``).

The block generator calls :meth:`BlockOffsetTracker.add` under its lock with every batch it
takes and :meth:`cut` under the same lock when it cuts a block, so a block's offsets are
exactly those of its records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterable

from reliable_kafka.kafka.client.offset_range import OffsetRange, merge_offset_ranges
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.storage.block_id import StreamBlockId


def next_offsets(ranges: Iterable[OffsetRange]) -> dict[TopicAndPartition, int]:
    """Per partition, the offset after the block's last record: what storing it lets one commit.

    The largest end, as a partition read again from an earlier offset has two ranges in one
    block, and blocks are stored in order, so everything below the largest end is stored.
    """
    return {TopicAndPartition(r.topic, r.partition): r.untilOffset for r in merge_offset_ranges([ranges])}


class BlockOffsetTracker:
    """Offsets of the block being filled, and of every cut block until it is pushed."""

    def __init__(self) -> None:
        # Per partition, the [from, until) spans of the buffer, in the order they were read.
        self._current: dict[TopicAndPartition, list[list[int]]] = {}
        self._blocks: dict[StreamBlockId, dict[TopicAndPartition, list[list[int]]]] = {}
        self._changed = threading.Condition()

    def add(self, tp: TopicAndPartition, first_offset: int, last_offset: int) -> None:
        """Records ``first_offset..last_offset`` of ``tp`` joined the buffer.

        One consumer's batches arrive in order and extend the partition's span (over gaps too:
        compacted topics skip offsets). A batch starting below the span's end comes from a new
        consumer of a partition that came back before the old one's records were pushed (a
        revoke flush that timed out); it starts a span of its own, so no range runs backwards.
        """
        with self._changed:
            spans = self._current.get(tp)
            if spans is None:
                self._current[tp] = [[first_offset, last_offset + 1]]
            elif first_offset < spans[-1][1]:
                spans.append([first_offset, last_offset + 1])
            else:
                spans[-1][1] = last_offset + 1

    def cut(self, block_id: StreamBlockId) -> None:
        with self._changed:
            self._blocks[block_id] = self._current
            self._current = {}

    def ranges(self, block_id: StreamBlockId) -> list[OffsetRange]:
        with self._changed:
            spans = self._blocks.get(block_id, {})
            return [
                OffsetRange(tp.topic, tp.partition, a, b)
                for tp, partition_spans in sorted(spans.items())
                for a, b in partition_spans
            ]

    def done(self, block_id: StreamBlockId) -> None:
        """The block is pushed (or given up on): forget it and wake :meth:`wait_until_pushed`."""
        with self._changed:
            self._blocks.pop(block_id, None)
            self._changed.notify_all()

    def _holds_any(self, tps: Collection[TopicAndPartition]) -> bool:
        if any(tp in self._current for tp in tps):
            return True
        return any(tp in spans for spans in self._blocks.values() for tp in tps)

    def wait_until_pushed(self, tps: Collection[TopicAndPartition], timeout_s: float) -> bool:
        """Wait until no buffered or queued block holds records of ``tps``; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self._holds_any(tps):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True
