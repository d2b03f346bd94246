"""Receiving data: ``Receiver``, its ``ReceiverSupervisor``, ``BlockGenerator``, ``RateLimiter``,
the block handlers, and the seam to the driver's receiver tracker.

The names are loaded on first use: ``kafka.client`` and the Structured Streaming source import
``receiver.fatal_error`` alone, without the receiver's machinery (pydantic settings, the WAL)."""

import importlib
from typing import Any

_LAZY_EXPORTS = {
    "ArrayBufferBlock": "reliable_kafka.receiver.received_block",
    "BlockGenerator": "reliable_kafka.receiver.block_generator",
    "BlockGeneratorListener": "reliable_kafka.receiver.block_generator",
    "BlockGeneratorState": "reliable_kafka.receiver.block_generator",
    "BlockGeneratorStateError": "reliable_kafka.receiver.block_generator",
    "BlockManagerBasedBlockHandler": "reliable_kafka.receiver.received_block_handler",
    "ByteBufferBlock": "reliable_kafka.receiver.received_block",
    "Clock": "reliable_kafka.util.clock",
    "IteratorBlock": "reliable_kafka.receiver.received_block",
    "ManualClock": "reliable_kafka.util.clock",
    "RateLimiter": "reliable_kafka.receiver.rate_limiter",
    "ReceivedBlock": "reliable_kafka.receiver.received_block",
    "ReceivedBlockHandler": "reliable_kafka.receiver.received_block_handler",
    "ReceivedBlockInfo": "reliable_kafka.receiver.tracker_endpoint",
    "ReceivedBlockStoreResult": "reliable_kafka.receiver.tracker_endpoint",
    "Receiver": "reliable_kafka.receiver.receiver",
    "ReceiverControl": "reliable_kafka.receiver.tracker_endpoint",
    "ReceiverState": "reliable_kafka.receiver.receiver_supervisor",
    "ReceiverSupervisor": "reliable_kafka.receiver.receiver_supervisor",
    "ReceiverTrackerEndpoint": "reliable_kafka.receiver.tracker_endpoint",
    "ReceiverTrackerError": "reliable_kafka.receiver.receiver_supervisor",
    "RecurringTimer": "reliable_kafka.util.recurring_timer",
    "SystemClock": "reliable_kafka.util.clock",
    "WriteAheadLogBasedBlockHandler": "reliable_kafka.receiver.wal_block_handler",
    "create_receiver_write_ahead_log": "reliable_kafka.receiver.wal_block_handler",
    "receiver_log_directory": "reliable_kafka.receiver.wal_block_handler",
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
