"""The two sides of a receiver input stream (``dstream.receiver_input_dstream``) and the tracker.

:class:`ReceiverInputStream`: what the scheduler uses of the stream. A protocol, not an import:
the scheduler comes before the DStreams in the package's layering (``tests/test_import_graph.py``),
and the context, the composition root, hands it the streams. :class:`ReceivedBlockSource`: what
the stream uses of the receiver tracker, which the context attaches to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from reliable_kafka.receiver.descriptor import ReceiverDescriptor
    from reliable_kafka.receiver.receiver import Receiver
    from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo
    from reliable_kafka.storage.block_id import StreamBlockId
    from reliable_kafka.storage.block_store import BlockStore


class ReceiverInputStream(Protocol):
    @property
    def id(self) -> int: ...

    def receiver_descriptor(self) -> ReceiverDescriptor:
        """How to build the stream's receiver on an executor (no pickled objects)."""
        ...

    def get_receiver(self) -> Receiver:
        """A new receiver, for a launch in this process."""
        ...

    def preferred_location(self) -> str | None:
        """The host the receiver should run on; None: any."""
        ...

    @property
    def previous_launches(self) -> int:
        """Launches of this stream's receiver before this driver's first: 1 for a stream restored
        from a checkpoint, whose source the driver before reached; 0 for a new one."""
        ...


class ReceivedBlockSource(Protocol):
    @property
    def block_store(self) -> BlockStore | None:
        """The driver's block store (driver placement); None: executors keep the blocks."""
        ...

    @property
    def block_fetch_secret(self) -> bytes | None:
        """What batches need to fetch blocks that executors keep."""
        ...

    def get_blocks_of_batch_and_stream(self, time_ms: int, stream_id: int) -> list[ReceivedBlockInfo]: ...

    def remove_blocks(self, block_ids: Sequence[StreamBlockId]) -> None: ...

    def send_rate_update(self, stream_id: int, new_rate: int) -> None: ...
