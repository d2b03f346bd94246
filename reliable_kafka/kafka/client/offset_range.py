"""Spark's ``OffsetRange``: the Kafka offsets a block, or a batch, holds.

``untilOffset`` is exclusive, which is also the next offset to read, i.e. what a receiver
commits. Ranges travel with each block as plain data (``block_metadata``) so they cross the
tracker seam and the metadata write-ahead log without pickling; batch RDDs expose them with
pyspark.streaming.kafka's camelCase names, so user code ports unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo

# The block metadata entry a Kafka receiver fills with the block's offset ranges.
OFFSET_RANGES_KEY = "offset_ranges"


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records ``[fromOffset, untilOffset)`` of one Kafka partition (pyspark's old ``OffsetRange``)."""

    topic: str
    partition: int
    # pyspark.streaming.kafka's camelCase names, so user code ports unchanged.
    fromOffset: int
    untilOffset: int

    def count(self) -> int:
        return self.untilOffset - self.fromOffset

    def to_dict(self) -> dict[str, str | int]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "fromOffset": self.fromOffset,
            "untilOffset": self.untilOffset,
        }

    @classmethod
    def from_metadata(cls, value: Mapping[str, Any] | Sequence[Any]) -> OffsetRange:
        """From a dict (Spark's camelCase or snake_case keys) or a ``(topic, partition, from, until)``."""
        if isinstance(value, Mapping):
            from_offset = value.get("fromOffset", value.get("from_offset"))
            until_offset = value.get("untilOffset", value.get("until_offset"))
            topic, partition = value.get("topic"), value.get("partition")
        else:
            topic, partition, from_offset, until_offset = value
        if not isinstance(topic, str):
            raise ValueError(f"offset range topic must be a str, got {topic!r}")
        for name, number in (
            ("partition", partition),
            ("fromOffset", from_offset),
            ("untilOffset", until_offset),
        ):
            if not isinstance(number, int) or isinstance(number, bool):
                raise ValueError(f"offset range {name} must be an int, got {number!r}")
        return cls(topic, partition, from_offset, until_offset)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return (
            f"OffsetRange(topic: {self.topic}, partition: {self.partition}, "
            f"range: [{self.fromOffset} -> {self.untilOffset}])"
        )


def merge_offset_ranges(per_block: Iterable[Iterable[OffsetRange]]) -> list[OffsetRange]:
    """One range per topic-partition spanning every block's range of it, sorted."""
    merged: dict[tuple[str, int], OffsetRange] = {}
    for ranges in per_block:
        for r in ranges:
            key = (r.topic, r.partition)
            seen = merged.get(key)
            if seen is None:
                merged[key] = r
            else:
                merged[key] = OffsetRange(
                    r.topic,
                    r.partition,
                    min(seen.fromOffset, r.fromOffset),
                    max(seen.untilOffset, r.untilOffset),
                )
    return [merged[key] for key in sorted(merged)]


def block_metadata(ranges: Iterable[OffsetRange]) -> dict[str, Any]:
    """The metadata reported with a block: plain data, so it can cross the tracker seam."""
    return {OFFSET_RANGES_KEY: [r.to_dict() for r in ranges]}


def ranges_in_metadata(metadata: Mapping[str, Any] | None) -> list[OffsetRange]:
    """The offset ranges in one block's metadata (empty for blocks of other receivers)."""
    if not metadata:
        return []
    return [OffsetRange.from_metadata(entry) for entry in metadata.get(OFFSET_RANGES_KEY) or ()]


def offset_ranges_of_blocks(block_infos: Iterable[ReceivedBlockInfo]) -> list[OffsetRange]:
    """A batch's ``offsetRanges()``: each block's ``metadata["offset_ranges"]``, merged per
    topic-partition."""
    return merge_offset_ranges(ranges_in_metadata(info.metadata) for info in block_infos)
