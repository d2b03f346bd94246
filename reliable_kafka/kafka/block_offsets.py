"""Which Kafka offsets each block holds (Spark's ``topicPartitionOffsetMap``/``blockOffsetMap``).

The block generator calls :meth:`BlockOffsetTracker.add` under its lock with every batch it
takes and :meth:`cut` under the same lock when it cuts a block, so a block's offsets are
exactly those of its records. Ranges are Spark's ``OffsetRange``: ``until`` is exclusive,
which is also the next offset to read, i.e. what gets committed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reliable_kafka.kafka.zk_paths import TopicAndPartition
from reliable_kafka.storage.block_id import StreamBlockId

OFFSET_RANGES_KEY = "offset_ranges"


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one partition (Spark's ``OffsetRange``)."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def count(self) -> int:
        return self.until_offset - self.from_offset

    def to_dict(self) -> dict[str, Any]:
        # Spark's (and pyspark.streaming.kafka's) camelCase names, as the batch RDDs expose them.
        return {
            "topic": self.topic,
            "partition": self.partition,
            "fromOffset": self.from_offset,
            "untilOffset": self.until_offset,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OffsetRange:
        return cls(str(d["topic"]), int(d["partition"]), int(d["fromOffset"]), int(d["untilOffset"]))


def block_metadata(ranges: Iterable[OffsetRange]) -> dict[str, Any]:
    """The metadata reported with a block: plain data, so it can cross the tracker seam."""
    return {OFFSET_RANGES_KEY: [r.to_dict() for r in ranges]}


def offset_ranges_of(metadata: Mapping[str, Any] | None) -> list[OffsetRange]:
    """The offset ranges in a block's metadata (empty for blocks of other receivers)."""
    if not metadata:
        return []
    return [OffsetRange.from_dict(d) for d in metadata.get(OFFSET_RANGES_KEY) or ()]


class BlockOffsetTracker:
    """Offsets of the block being filled, and of every cut block until it is pushed."""

    def __init__(self) -> None:
        self._current: dict[TopicAndPartition, list[int]] = {}
        self._blocks: dict[StreamBlockId, dict[TopicAndPartition, list[int]]] = {}
        self._changed = threading.Condition()

    def add(self, tp: TopicAndPartition, first_offset: int, last_offset: int) -> None:
        """Records ``first_offset..last_offset`` of ``tp`` joined the buffer (batches arrive in order)."""
        with self._changed:
            span = self._current.get(tp)
            if span is None:
                self._current[tp] = [first_offset, last_offset + 1]
            else:
                span[1] = last_offset + 1

    def cut(self, block_id: StreamBlockId) -> None:
        with self._changed:
            self._blocks[block_id] = self._current
            self._current = {}

    def ranges(self, block_id: StreamBlockId) -> list[OffsetRange]:
        with self._changed:
            spans = self._blocks.get(block_id, {})
            return [OffsetRange(tp.topic, tp.partition, a, b) for tp, (a, b) in sorted(spans.items())]

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
