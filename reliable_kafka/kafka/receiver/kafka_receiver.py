"""Spark's KafkaReceiver: the unreliable receiver, used when the write-ahead log is off.

Records are buffered in a block generator and stored a block at a time; offsets are committed
on a timer (``auto.commit.interval.ms``) as the 0.8 consumer's auto commit did, whatever has
been stored by then. A crash can therefore lose buffered records (committed but not stored)
or re-read some; use :class:`ReliableKafkaReceiver` for no loss.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from reliable_kafka.kafka.client.offset_range import OffsetRange, block_metadata
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.receiver.block_offsets import BlockOffsetTracker
from reliable_kafka.kafka.receiver.consumer_group_receiver import (
    ConsumerGroupReceiver,
    OffsetTrackingListener,
)
from reliable_kafka.kafka.receiver.partition_consumer import DEFAULT_BATCH_SIZE, DEFAULT_POLL_TIMEOUT_S
from reliable_kafka.storage.block_format import EncodedBlock
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.storage_level import StorageLevel
from wal.failure_log import FailureLog

logger = logging.getLogger(__name__)


class KafkaReceiver(ConsumerGroupReceiver):
    """Receiver-based Kafka input with 0.8-style periodic offset commits (at-most/at-least once)."""

    def __init__(
        self,
        zookeeper_connect: str | None,
        group_id: str,
        topics: Mapping[str, int],
        kafka_params: Mapping[str, Any] | None = None,
        storage_level: StorageLevel | str = StorageLevel.MEMORY_AND_DISK_SER_2,
        *,
        consume_batch_size: int = DEFAULT_BATCH_SIZE,
        poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
    ) -> None:
        super().__init__(
            zookeeper_connect,
            group_id,
            topics,
            kafka_params,
            storage_level,
            consume_batch_size=consume_batch_size,
            poll_timeout_s=poll_timeout_s,
        )
        self._committer: threading.Thread | None = None
        self._stop_committing = threading.Event()
        self._commit_failures = FailureLog(logger, "auto commit of offsets")

    def on_start(self) -> None:
        self._start_consuming(
            _BlockPusher(self, BlockOffsetTracker()),
            on_failure=self.restart,
            before_release=self._commit_positions if self.params.group.auto_commit_enable else None,
        )
        self._stop_committing = threading.Event()
        if self.params.group.auto_commit_enable:
            self._committer = threading.Thread(
                target=self._auto_commit, name="kafka-auto-commit", daemon=True
            )
            self._committer.start()

    def on_stop(self) -> None:
        self._stop_committing.set()
        if self._committer is not None:
            self._committer.join()
            self._committer = None
        connector, generator = self._connector, self._block_generator
        if connector is not None:
            connector.stop_consumers()
            if self.params.group.auto_commit_enable:
                # As the 0.8 consumer's shutdown did: commit what was consumed.
                self._commit_positions(connector.positions())
        if generator is not None:
            generator.stop()
        if connector is not None:
            connector.shutdown()
        self._connector = None

    def _auto_commit(self) -> None:
        interval_s = self.params.group.auto_commit_interval_ms / 1000.0
        while not self._stop_committing.wait(interval_s):
            connector = self._connector
            if connector is not None:
                self._commit_positions(connector.positions())

    def _commit_positions(self, positions: Mapping[TopicAndPartition, int | None]) -> None:
        offsets = {tp: offset for tp, offset in positions.items() if offset is not None}
        connector = self._connector
        if not offsets or connector is None:
            return
        try:
            connector.offsets.commit(offsets)
        except Exception as exc:
            where = ", ".join(f"{tp} at {offset}" for tp, offset in offsets.items())
            self._commit_failures.failed(exc, where)
        else:
            self._commit_failures.succeeded()


class _BlockPusher(OffsetTrackingListener):
    """Stores each block once, with its offset ranges as metadata; errors go to the tracker."""

    def store(self, block_id: StreamBlockId, block: EncodedBlock, ranges: list[OffsetRange]) -> None:
        self._receiver.store_bytes(block.data, block_metadata(ranges), block.num_records, block_id=block_id)
