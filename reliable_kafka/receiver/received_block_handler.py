"""How a supervisor stores a received block (Spark's ``ReceivedBlockHandler``), and the
block-manager-only implementation."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from reliable_kafka.receiver.received_block import (
    ArrayBufferBlock,
    ByteBufferBlock,
    IteratorBlock,
    ReceivedBlock,
)
from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockStoreResult
from reliable_kafka.storage.block_format import check_block, encode_block
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_server import DEFAULT_FETCH_TIMEOUT_S
from reliable_kafka.storage.block_store import BlockStore, BlockStoreError
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util.daemon_pool import DaemonThreadPool

if TYPE_CHECKING:
    from reliable_kafka.receiver.block_replicator import BlockReplicator

logger = logging.getLogger(__name__)


class ReceivedBlockHandler(ABC):
    @abstractmethod
    def store_block(self, block_id: StreamBlockId, block: ReceivedBlock) -> ReceivedBlockStoreResult:
        """Store the block; returns only once it is stored, raises if it could not be."""

    @abstractmethod
    def cleanup_old_blocks(self, thresh_time_ms: int) -> None:
        """Delete what was stored before ``thresh_time_ms``."""

    def stop(self) -> None:  # noqa: B027 - most handlers hold nothing to release
        """Release threads and files; called once the receiver's last block is stored."""


def serialize_block(block: ReceivedBlock) -> tuple[bytes, int | None]:
    """The block's bytes in the block format, and its record count (None for raw bytes)."""
    match block:
        case ArrayBufferBlock(records):
            return encode_block(records), len(records)
        case IteratorBlock(iterator):
            records = list(iterator)
            return encode_block(records), len(records)
        case ByteBufferBlock(data, num_records):
            # Fail here, next to the receiver that made them, not at batch time in a Spark task.
            check_block(data)
            return bytes(data), num_records
    raise TypeError(f"unknown received block type {type(block).__name__}")


def put_or_raise(block_store: BlockStore, block_id: StreamBlockId, data: bytes, level: StorageLevel) -> None:
    """Put the block; storing again the same bytes under the same id is a success (a retry
    after a failure elsewhere, e.g. in the WAL, keeps one copy), other bytes are an error."""
    if not block_store.put(block_id, data, level):
        if block_store.get(block_id) == data:
            logger.debug("Block %s is already stored with the same data", block_id)
            return
        raise BlockStoreError(
            f"could not store block {block_id} with storage level {level.name}: a block with that id is "
            "already stored",
            block_id,
            level,
        )


class BlockManagerBasedBlockHandler(ReceivedBlockHandler):
    """Stores blocks in the block store only (no WAL): fast, lost if this process dies, unless
    the level has replication 2 and ``replicator`` keeps a second copy on a peer executor first
    (sent while the local copy is written, as the WAL handler writes its two).

    Without a replicator (the driver keeps the blocks: no peer exists) a replicated level keeps
    one copy, said once in a WARNING."""

    def __init__(
        self,
        block_store: BlockStore,
        storage_level: StorageLevel,
        replicator: BlockReplicator | None = None,
    ) -> None:
        self.block_store = block_store
        self.storage_level = storage_level
        self.replicator = replicator if storage_level.replication > 1 else None
        # Two, as the WAL handler's: the reliable receiver pushes from a generator per partition.
        self._pool = None if self.replicator is None else DaemonThreadPool(2, "BlockReplicator")
        if storage_level.replication > 1 and replicator is None:
            logger.warning(
                "Storage level %s asks for %d copies of each block, but blocks are kept in this process "
                "only, which has no peer to copy to: one copy is kept",
                storage_level.name,
                storage_level.replication,
            )

    def store_block(self, block_id: StreamBlockId, block: ReceivedBlock) -> ReceivedBlockStoreResult:
        data, num_records = serialize_block(block)
        if self.replicator is None or self._pool is None:
            put_or_raise(self.block_store, block_id, data, self.storage_level)
            return ReceivedBlockStoreResult(block_id, num_records, num_bytes=len(data))
        # Both copies before the report: the caller commits offsets once this returns. A local
        # failure raises at once; the retry under the same id finds the peer's copy and keeps it.
        replica = self._pool.submit(self.replicator.replicate, block_id, data, self.storage_level)
        put_or_raise(self.block_store, block_id, data, self.storage_level)
        # Bounded without a timeout here: each peer the replicator tries has its call timeout.
        return ReceivedBlockStoreResult(block_id, num_records, replica=replica.result(), num_bytes=len(data))

    def cleanup_old_blocks(self, thresh_time_ms: int) -> None:
        self.block_store.remove_blocks_older_than(thresh_time_ms)

    def stop(self) -> None:
        if self._pool is not None:
            # A push in flight ends within its call timeout; its block was not reported anyway.
            self._pool.shutdown(timeout_s=DEFAULT_FETCH_TIMEOUT_S)
