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

from reliable_kafka.kafka.block_offsets import BlockOffsetTracker
from reliable_kafka.kafka.consumer_connector import ZookeeperConsumerConnector
from reliable_kafka.kafka.offset_range import block_metadata
from reliable_kafka.kafka.params import KafkaParams, parse_kafka_params
from reliable_kafka.kafka.partition_consumer import DEFAULT_BATCH_SIZE, DEFAULT_POLL_TIMEOUT_S
from reliable_kafka.kafka.reliable_receiver import validate_topics
from reliable_kafka.kafka.zk_paths import TopicAndPartition
from reliable_kafka.receiver.block_generator import BlockGenerator, BlockGeneratorListener
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.storage.block_format import PackedChunk, encode_chunks
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.storage_level import StorageLevel

logger = logging.getLogger(__name__)


class KafkaReceiver(Receiver):
    """Receiver-based Kafka input with 0.8-style periodic offset commits (at-most/at-least once)."""

    def __init__(
        self,
        zookeeper_connect: str,
        group_id: str,
        topics: Mapping[str, int],
        kafka_params: Mapping[str, Any] | None = None,
        storage_level: StorageLevel | str = StorageLevel.MEMORY_AND_DISK_SER_2,
        *,
        consume_batch_size: int = DEFAULT_BATCH_SIZE,
        poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
    ) -> None:
        super().__init__(storage_level)
        self.params: KafkaParams = parse_kafka_params(
            kafka_params or {}, zookeeper_connect=zookeeper_connect, group_id=group_id
        )
        self.topics = validate_topics(topics)
        self._batch_size = consume_batch_size
        self._poll_timeout_s = poll_timeout_s
        self._connector: ZookeeperConsumerConnector | None = None
        self._block_generator: BlockGenerator | None = None
        self._committer: threading.Thread | None = None
        self._stop_committing = threading.Event()

    @property
    def connector(self) -> ZookeeperConsumerConnector:
        if self._connector is None:
            raise RuntimeError("the receiver is not started")
        return self._connector

    def on_start(self) -> None:
        self._block_generator = self.supervisor.create_block_generator(_BlockPusher(self))
        self._block_generator.start()
        self._connector = ZookeeperConsumerConnector(
            self.params,
            self.topics,
            sink=self._add_records,
            on_failure=self.restart,
            before_release=self._commit_positions if self.params.group.auto_commit_enable else None,
            batch_size=self._batch_size,
            poll_timeout_s=self._poll_timeout_s,
        )
        self._connector.start()
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

    def _add_records(self, tp: TopicAndPartition, chunk: PackedChunk, first: int, last: int) -> None:
        generator = self._block_generator
        assert generator is not None
        generator.add_data_with_callback(chunk, (tp, first, last), chunk.num_records)

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
            logger.warning("auto commit of %s failed: %r", offsets, exc)


class _BlockPusher(BlockGeneratorListener):
    """Stores each block once, with its offset ranges as metadata; errors go to the tracker."""

    def __init__(self, receiver: KafkaReceiver) -> None:
        self._receiver = receiver
        self._offsets = BlockOffsetTracker()

    def on_add_data(self, data: Any, metadata: Any) -> None:
        tp, first, last = metadata
        self._offsets.add(tp, first, last)

    def on_generate_block(self, block_id: StreamBlockId) -> None:
        self._offsets.cut(block_id)

    def on_push_block(self, block_id: StreamBlockId, records: list[Any]) -> None:
        chunks: list[PackedChunk] = records  # what the consumers added: packed chunks
        try:
            self._receiver.store_bytes(
                encode_chunks(chunks),
                block_metadata(self._offsets.ranges(block_id)),
                sum(chunk.num_records for chunk in chunks),
            )
        finally:
            self._offsets.done(block_id)

    def on_error(self, message: str, error: BaseException) -> None:
        self._receiver.report_error(message, error)
