"""The events of the ``ReceivedBlockTracker``'s metadata log (Spark's
``ReceivedBlockTrackerLogEvent``s, plus two of ours) and their byte format.

Events are msgpack maps behind a 4-byte magic (``b"RKE\\x01"``, "reliable-kafka event",
version 1), with the writer's checkpoint lease epoch under ``lease`` (absent in older logs); never
pickle, since the log is read back by a later process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo

EVENT_MAGIC = b"RKE\x01"


@dataclass(frozen=True, slots=True)
class AllocatedBlocks:
    """The blocks of one batch, per stream (every tracked stream has an entry, maybe empty)."""

    stream_id_to_allocated_blocks: dict[int, list[ReceivedBlockInfo]] = field(default_factory=dict)

    def get_blocks_of_stream(self, stream_id: int) -> list[ReceivedBlockInfo]:
        return list(self.stream_id_to_allocated_blocks.get(stream_id, ()))

    def to_wire(self) -> list[list[Any]]:
        # Pairs, not a map: msgpack map keys are strings by convention and ours are ints.
        return [
            [stream_id, [info.to_dict() for info in infos]]
            for stream_id, infos in self.stream_id_to_allocated_blocks.items()
        ]

    @classmethod
    def from_wire(cls, pairs: Sequence[Sequence[Any]]) -> AllocatedBlocks:
        return cls(
            {int(stream_id): [ReceivedBlockInfo.from_dict(d) for d in infos] for stream_id, infos in pairs}
        )


@dataclass(frozen=True, slots=True)
class BlockAdditionEvent:
    received_block_info: ReceivedBlockInfo


@dataclass(frozen=True, slots=True)
class BatchAllocationEvent:
    time_ms: int
    allocated_blocks: AllocatedBlocks


@dataclass(frozen=True, slots=True)
class BatchCompletionEvent:
    """Ours, not Spark's: lets a restarted driver tell finished batches from ones to run again."""

    time_ms: int


@dataclass(frozen=True, slots=True)
class BatchCleanupEvent:
    times_ms: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BatchDeallocationEvent:
    """Ours, not Spark's: these allocated, never-completed batches will not run under their own
    time, so their blocks go back to the front of the unallocated queues for the next batch."""

    times_ms: tuple[int, ...]


ReceivedBlockTrackerLogEvent = (
    BlockAdditionEvent
    | BatchAllocationEvent
    | BatchCompletionEvent
    | BatchCleanupEvent
    | BatchDeallocationEvent
)


class EventFormatError(ValueError):
    """Bytes in the metadata log that are not an event of this format."""


def encode_event(event: ReceivedBlockTrackerLogEvent, lease_epoch: int | None = None) -> bytes:
    """``lease_epoch``: the writing driver's checkpoint lease epoch, kept beside the event (key
    ``lease``) so that a reader can tell which driver wrote it; decoding ignores it."""
    match event:
        case BlockAdditionEvent(info):
            body: dict[str, Any] = {"type": "add", "info": info.to_dict()}
        case BatchAllocationEvent(time_ms, allocated):
            body = {"type": "allocate", "time": time_ms, "blocks": allocated.to_wire()}
        case BatchCompletionEvent(time_ms):
            body = {"type": "complete", "time": time_ms}
        case BatchCleanupEvent(times_ms):
            body = {"type": "cleanup", "times": list(times_ms)}
        case BatchDeallocationEvent(times_ms):
            body = {"type": "deallocate", "times": list(times_ms)}
        case _:
            raise TypeError(f"not a tracker event: {type(event).__name__}")
    if lease_epoch is not None:
        body["lease"] = lease_epoch
    return EVENT_MAGIC + msgpack.packb(body, use_bin_type=True)


def decode_event(data: bytes) -> ReceivedBlockTrackerLogEvent:
    if data[: len(EVENT_MAGIC)] != EVENT_MAGIC:
        raise EventFormatError(f"not a tracker event: magic {bytes(data[:4])!r}")
    try:
        # Block metadata is the receiver's: its maps may have int keys.
        body = msgpack.unpackb(data[len(EVENT_MAGIC) :], raw=False, use_list=True, strict_map_key=False)
        match body["type"]:
            case "add":
                return BlockAdditionEvent(ReceivedBlockInfo.from_dict(body["info"]))
            case "allocate":
                return BatchAllocationEvent(int(body["time"]), AllocatedBlocks.from_wire(body["blocks"]))
            case "complete":
                return BatchCompletionEvent(int(body["time"]))
            case "cleanup":
                return BatchCleanupEvent(tuple(int(t) for t in body["times"]))
            case "deallocate":
                return BatchDeallocationEvent(tuple(int(t) for t in body["times"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise EventFormatError(f"corrupt tracker event: {exc}") from exc
    raise EventFormatError(f"unknown tracker event type {body['type']!r}")
