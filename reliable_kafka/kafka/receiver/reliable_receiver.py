"""Spark's ReliableKafkaReceiver: no data loss, because offsets follow stored blocks.

Each owned partition's consumer adds its batches to this receiver's own block generator, and
the listener below records, per block, which offsets it holds. A block is stored (block
manager and, with the WAL on, the write-ahead log) and reported before its offsets are
committed to the offset store (ZooKeeper, Kafka or both, as ``offsets.storage`` and
``dual.commit.enabled`` say); a block that cannot be stored in ``store_max_attempts`` attempts stops
the receiver, and nothing after it is ever committed. A crash therefore re-reads at most the
block that was stored but not yet committed, per partition.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping
from typing import Any

from reliable_kafka.kafka.client.offset_range import OffsetRange, block_metadata
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.receiver.block_offsets import BlockOffsetTracker, next_offsets
from reliable_kafka.kafka.receiver.consumer_group_receiver import (
    ConsumerGroupReceiver,
    OffsetTrackingListener,
)
from reliable_kafka.kafka.receiver.partition_consumer import DEFAULT_BATCH_SIZE, DEFAULT_POLL_TIMEOUT_S
from reliable_kafka.storage.block_format import EncodedBlock
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.storage_level import StorageLevel
from wal.failure_log import FailureLog, already_reported

logger = logging.getLogger(__name__)

DEFAULT_STORE_MAX_ATTEMPTS = 4
# On a rebalance, how long to let the revoked partitions' buffered records reach storage (and
# their offsets the offset store) before giving the partitions up; what misses it is read again by
# the next owner.
DEFAULT_FLUSH_ON_REVOKE_TIMEOUT_S = 10.0
# How often a commit waiting for a suspended ZooKeeper session looks whether the receiver stops.
_SESSION_WAIT_S = 1.0


class ReliableKafkaReceiver(ConsumerGroupReceiver):
    """Receiver-based Kafka input whose offsets are committed only for stored blocks.

    Arguments as :class:`ConsumerGroupReceiver`'s; auto commit is always off here.
    """

    def __init__(
        self,
        zookeeper_connect: str | None,
        group_id: str,
        topics: Mapping[str, int],
        kafka_params: Mapping[str, Any] | None = None,
        storage_level: StorageLevel | str = StorageLevel.MEMORY_AND_DISK_SER_2,
        *,
        store_max_attempts: int = DEFAULT_STORE_MAX_ATTEMPTS,
        consume_batch_size: int = DEFAULT_BATCH_SIZE,
        poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
        flush_on_revoke_timeout_s: float = DEFAULT_FLUSH_ON_REVOKE_TIMEOUT_S,
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
        if self.params.group.auto_commit_set_by_user and self.params.group.auto_commit_enable:
            logger.warning(
                "kafka param auto.commit.enable is true; ReliableKafkaReceiver commits offsets only for "
                "stored blocks, so auto commit is turned off"
            )
        # Off in the params too, so nothing that reads them (a rebalance hook, a subclass) can
        # commit offsets of records that are not stored yet.
        self.params = dataclasses.replace(
            self.params, group=dataclasses.replace(self.params.group, auto_commit_enable=False)
        )
        if store_max_attempts < 1:
            raise ValueError(f"store_max_attempts must be >= 1, got {store_max_attempts}")
        self.store_max_attempts = store_max_attempts
        self._flush_timeout_s = flush_on_revoke_timeout_s
        self._offsets = BlockOffsetTracker()
        self._store_failed = threading.Event()
        # Per partition, the offset after the last record stored (committed or not). Kept across
        # restarts: what was stored stays stored, so reading it again would only duplicate it.
        self._stored_until: dict[TopicAndPartition, int] = {}
        self._stored_lock = threading.Lock()
        self._commit_failures = FailureLog(logger, "committing offsets")
        self._stopping = threading.Event()

    # -- life cycle ---------------------------------------------------------------------------

    def on_start(self) -> None:
        self._offsets = BlockOffsetTracker()
        self._store_failed = threading.Event()
        self._stopping = threading.Event()
        # One offset tracker, shared by the listener and the revoke flush.
        self._start_consuming(
            _GeneratedBlockHandler(self, self._offsets),
            on_failure=self._consumer_failed,
            before_release=self._flush_revoked,
            stored_offsets=self.stored_offset,
        )

    def on_stop(self) -> None:
        # Consumers first, then the generator, whose final blocks are committed while the
        # partitions are still ours, then the group: a clean stop leaves nothing to re-read.
        connector, generator = self._connector, self._block_generator
        self._stopping.set()  # a commit waiting for ZooKeeper gives up: the stop must not wait
        if connector is not None:
            connector.stop_consumers()
        if generator is not None:
            generator.stop()
        if connector is not None:
            connector.shutdown()
        self._connector = None

    # -- data path ----------------------------------------------------------------------------

    def _consumer_failed(self, message: str, error: BaseException) -> None:
        self.restart(message, error)

    def _flush_revoked(self, positions: dict[TopicAndPartition, int | None]) -> None:
        generator = self._block_generator
        if generator is None or not generator.is_active():
            return  # stopping: the generator's stop pushes what is left
        if not self._offsets.wait_until_pushed(list(positions), self._flush_timeout_s):
            logger.warning(
                "records of %s were not stored within %s s of losing them; the next owner reads them again",
                ", ".join(map(str, positions)),
                self._flush_timeout_s,
            )

    def _store_block(self, block_id: StreamBlockId, block: EncodedBlock, ranges: list[OffsetRange]) -> bool:
        """Store with retries (``store_max_attempts`` in all); on failure stop the receiver."""
        error: BaseException | None = None
        metadata = block_metadata(ranges)
        for attempt in range(1, self.store_max_attempts + 1):
            try:
                # One id for every attempt: an attempt that left a copy behind is not a second block.
                self.store_bytes(block.data, metadata, block.num_records, block_id=block_id)
                return True
            except Exception as exc:
                error = exc
                # A store the write-ahead log gave up on has had its attempts logged there.
                logger.log(
                    logging.DEBUG if already_reported(exc) else logging.WARNING,
                    "storing block %s failed (attempt %d of %d): %r",
                    block_id,
                    attempt,
                    self.store_max_attempts,
                    exc,
                )
        # Nothing after a lost block may be committed, or its records would be skipped for good.
        self._store_failed.set()
        self.stop("Error while storing block into Spark", error)
        return False

    def stored_offset(self, tp: TopicAndPartition) -> int | None:
        """The offset after the last record of ``tp`` this receiver stored, None if none."""
        with self._stored_lock:
            return self._stored_until.get(tp)

    def _remember_stored(self, offsets: Mapping[TopicAndPartition, int]) -> None:
        with self._stored_lock:
            for tp, offset in offsets.items():
                self._stored_until[tp] = max(offset, self._stored_until.get(tp, offset))

    def _commit(self, offsets: Mapping[TopicAndPartition, int]) -> None:
        """Commit, waiting out a suspended ZooKeeper session.

        Giving up while the session may still come back would let the next block be stored
        uncommitted too, and a kill then re-reads both; waiting holds the push thread, so no
        block after this one is stored before this one's offsets are committed. A lost session
        ends the wait: its partitions are revoked, and their next consumer starts from
        :meth:`stored_offset`.
        """
        connector = self._connector
        if connector is None or not offsets:
            return
        while True:
            try:
                connector.offsets.commit(offsets)
            except Exception as exc:
                if connector.group.suspended and not self._stopping.is_set():
                    logger.info("ZooKeeper is away; the commit of %s waits for it", dict(offsets))
                    connector.group.wait_connected(_SESSION_WAIT_S)
                    continue
                # Only costs re-reading these records after a failure; the next block commits past them.
                where = ", ".join(f"{tp} at {offset}" for tp, offset in offsets.items())
                self._commit_failures.failed(exc, where)
            else:
                self._commit_failures.succeeded()
            return


class _GeneratedBlockHandler(OffsetTrackingListener):
    """Spark's GeneratedBlockHandler: offsets per block, store, then commit."""

    _receiver: ReliableKafkaReceiver

    def store(self, block_id: StreamBlockId, block: EncodedBlock, ranges: list[OffsetRange]) -> None:
        receiver = self._receiver
        if receiver._store_failed.is_set():
            logger.info("dropping block %s: an earlier block failed to store", block_id)
            return
        if receiver._store_block(block_id, block, ranges):
            offsets = next_offsets(ranges)
            # Remembered before committing: a commit refused after a session loss must not
            # make the partition's next consumer store these records again.
            receiver._remember_stored(offsets)
            receiver._commit(offsets)
