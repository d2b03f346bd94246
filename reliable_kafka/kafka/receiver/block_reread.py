"""A block read again from Kafka, when its write-ahead log record is unreadable (torn, corrupt,
or its segment gone): every block knows its exact offset ranges, so the records are still in
the partitions' logs unless retention removed them.

Registered as the ``kafka`` kind of :mod:`reliable_kafka.storage.block_recovery`; the recovery
source the Kafka input stream attaches to a block is :func:`recovery_source`. Runs on the
executors, reading through :mod:`reliable_kafka.kafka.client.range_reader`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.range_reader import (
    DEFAULT_REREAD_TIMEOUT_S,
    LostOffsetsError,
    range_consumer,
    read_range,
)
from reliable_kafka.storage.block_format import PackedChunk, encode_chunks
from reliable_kafka.storage.block_recovery import register_block_recovery

logger = logging.getLogger(__name__)

KIND = "kafka"


def recovery_source(kafka_params: Mapping[str, Any], ranges: Sequence[OffsetRange]) -> dict[str, Any]:
    """What an executor needs to read ``ranges`` again: plain data for the batch descriptor."""
    return {
        "kind": KIND,
        "module": __name__,
        "kafka_params": {str(k): v for k, v in kafka_params.items()},
        "ranges": [[r.topic, r.partition, r.fromOffset, r.untilOffset] for r in ranges],
    }


def reread_block(source: Mapping[str, Any], timeout_s: float = DEFAULT_REREAD_TIMEOUT_S) -> bytes:
    ranges = [OffsetRange.from_metadata(entry) for entry in source["ranges"]]
    consumer = range_consumer(source["kafka_params"])
    chunks: list[PackedChunk] = []
    lost: list[OffsetRange] = []
    reasons: list[str] = []
    try:
        for wanted in ranges:
            if wanted.count() <= 0:
                continue
            try:
                chunks.extend(read_range(consumer, wanted, timeout_s))
            except LostOffsetsError as exc:
                lost.extend(exc.lost)
                reasons.append(exc.reason)
    finally:
        consumer.close()
    if lost:
        raise LostOffsetsError(lost, "; ".join(dict.fromkeys(reasons)))
    logger.info(
        "read %d records of %s again from Kafka",
        sum(c.num_records for c in chunks),
        ", ".join(f"{r.topic}/{r.partition} [{r.fromOffset}, {r.untilOffset})" for r in ranges),
    )
    return encode_chunks(chunks)


register_block_recovery(KIND, reread_block)
