"""Receiving data: ``Receiver``, its ``ReceiverSupervisor``, ``BlockGenerator``, ``RateLimiter``,
the block handlers, and the seam to the driver's receiver tracker."""

from reliable_kafka.receiver.block_generator import (
    BlockGenerator,
    BlockGeneratorListener,
    BlockGeneratorState,
    BlockGeneratorStateError,
)
from reliable_kafka.receiver.rate_limiter import RateLimiter
from reliable_kafka.receiver.received_block import (
    ArrayBufferBlock,
    ByteBufferBlock,
    IteratorBlock,
    ReceivedBlock,
)
from reliable_kafka.receiver.received_block_handler import BlockManagerBasedBlockHandler, ReceivedBlockHandler
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.receiver.receiver_supervisor import (
    ReceiverState,
    ReceiverSupervisor,
    ReceiverTrackerError,
)
from reliable_kafka.receiver.tracker_endpoint import (
    ReceivedBlockInfo,
    ReceivedBlockStoreResult,
    ReceiverControl,
    ReceiverTrackerEndpoint,
)
from reliable_kafka.receiver.wal_block_handler import (
    WriteAheadLogBasedBlockHandler,
    create_receiver_write_ahead_log,
    receiver_log_directory,
)
from reliable_kafka.util.clock import Clock, ManualClock, SystemClock
from reliable_kafka.util.recurring_timer import RecurringTimer

__all__ = [
    "ArrayBufferBlock",
    "BlockGenerator",
    "BlockGeneratorListener",
    "BlockGeneratorState",
    "BlockGeneratorStateError",
    "BlockManagerBasedBlockHandler",
    "ByteBufferBlock",
    "Clock",
    "IteratorBlock",
    "ManualClock",
    "RateLimiter",
    "ReceivedBlock",
    "ReceivedBlockHandler",
    "ReceivedBlockInfo",
    "ReceivedBlockStoreResult",
    "Receiver",
    "ReceiverControl",
    "ReceiverState",
    "ReceiverSupervisor",
    "ReceiverTrackerEndpoint",
    "ReceiverTrackerError",
    "RecurringTimer",
    "SystemClock",
    "WriteAheadLogBasedBlockHandler",
    "create_receiver_write_ahead_log",
    "receiver_log_directory",
]
