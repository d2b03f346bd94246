"""What the scheduler uses of a receiver input stream (``dstream.receiver_input_dstream``).

A protocol, not an import: the scheduler comes before the DStreams in the package's layering
(``tests/test_import_graph.py``), and the context, the composition root, hands it the streams.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from reliable_kafka.receiver.descriptor import ReceiverDescriptor
    from reliable_kafka.receiver.receiver import Receiver


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
