"""Stores each block in the block store AND the receiver's write-ahead log, in parallel
(Spark's ``WriteAheadLogBasedBlockHandler``)."""

from __future__ import annotations

import logging
from concurrent.futures import FIRST_EXCEPTION, wait

from reliable_kafka.receiver.received_block import ReceivedBlock
from reliable_kafka.receiver.received_block_handler import ReceivedBlockHandler, put_or_raise, serialize_block
from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockStoreResult
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_store import BlockStore
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util import instruments
from reliable_kafka.util.clock import Clock, SystemClock
from reliable_kafka.util.daemon_pool import DaemonThreadPool
from reliable_kafka.util.filesystems import FilesystemOptions
from reliable_kafka.util.wal_at import write_ahead_log_at
from wal import WriteAheadLog

logger = logging.getLogger(__name__)

DEFAULT_BLOCK_STORE_TIMEOUT_S = 30.0
# Spark's words, raised by the driver (ReceiverTracker) and by a supervisor started without one.
RECEIVER_WAL_WITHOUT_CHECKPOINT = (
    "Cannot enable receiver write-ahead log without checkpoint directory set. "
    "Please use streamingContext.checkpoint() to set the checkpoint directory. "
    "See documentation for more details."
)


def receiver_log_directory(checkpoint_dir: str, stream_id: int) -> str:
    """Spark's layout: ``<checkpoint>/receivedData/<streamId>`` (a path or an fsspec URL)."""
    return f"{checkpoint_dir.rstrip('/')}/receivedData/{stream_id}"


def create_receiver_write_ahead_log(
    checkpoint_dir: str,
    stream_id: int,
    *,
    rolling_interval_s: int = 60,
    max_failures: int = 3,
    close_file_after_write: bool = False,
    fsync: bool = True,
    filesystem_options: FilesystemOptions | None = None,
) -> WriteAheadLog:
    """``filesystem_options``: how to reach a remote checkpoint directory (None: as this process
    was configured, ``filesystems.configure``)."""
    return write_ahead_log_at(
        receiver_log_directory(checkpoint_dir, stream_id),
        filesystem_options,
        rolling_interval_s=rolling_interval_s,
        max_failures=max_failures,
        close_file_after_write=close_file_after_write,
        fsync=fsync,
    )


def effective_storage_level(storage_level: StorageLevel) -> StorageLevel:
    """The WAL already keeps a durable copy, so replicas are pointless; blocks are bytes anyway."""
    if storage_level.deserialized:
        logger.warning(
            "Storage level serialization %s is not supported when write ahead log is enabled, "
            "change to serialization false",
            storage_level.deserialized,
        )
    if storage_level.replication > 1:
        logger.warning(
            "Storage level replication %d is unnecessary when write ahead log is enabled, "
            "change to replication 1",
            storage_level.replication,
        )
    return StorageLevel(storage_level.use_disk, storage_level.use_memory, deserialized=False, replication=1)


class WriteAheadLogBasedBlockHandler(ReceivedBlockHandler):
    """Serializes a block once, then writes the same bytes to the block store and the WAL on two
    threads; returns the WAL handle once both are done, or raises ``TimeoutError`` naming the
    block after ``block_store_timeout_s``. Takes ownership of ``write_ahead_log`` (closed on stop).
    """

    def __init__(
        self,
        block_store: BlockStore,
        stream_id: int,
        storage_level: StorageLevel,
        write_ahead_log: WriteAheadLog,
        *,
        block_store_timeout_s: float = DEFAULT_BLOCK_STORE_TIMEOUT_S,
        clock: Clock | None = None,
    ) -> None:
        self.block_store = block_store
        self.stream_id = stream_id
        self.storage_level = effective_storage_level(storage_level)
        self.write_ahead_log = write_ahead_log
        self.block_store_timeout_s = block_store_timeout_s
        self._clock = clock or SystemClock()
        self._pool = DaemonThreadPool(2, f"WriteAheadLogBasedBlockHandler-{stream_id}")

    def store_block(self, block_id: StreamBlockId, block: ReceivedBlock) -> ReceivedBlockStoreResult:
        data, num_records = serialize_block(block)
        in_block_store = self._pool.submit(put_or_raise, self.block_store, block_id, data, self.storage_level)
        # Timed here, not inside wal/, which stays free of this package.
        in_log = self._pool.submit(
            instruments.timed,
            instruments.WAL_WRITE_SECONDS,
            self.write_ahead_log.write,
            data,
            self._clock.get_time_ms(),
        )
        done, pending = wait(
            (in_block_store, in_log), self.block_store_timeout_s, return_when=FIRST_EXCEPTION
        )
        # A failure of either is final; the other's result no longer matters.
        for future in done:
            if (error := future.exception()) is not None:
                raise error
        if pending:
            waiting_for = " and ".join(
                name
                for name, future in (("block store", in_block_store), ("write-ahead log", in_log))
                if future in pending
            )
            raise TimeoutError(
                f"storing block {block_id} timed out after {self.block_store_timeout_s} s "
                f"waiting for the {waiting_for}"
            )
        return ReceivedBlockStoreResult(block_id, num_records, in_log.result(), num_bytes=len(data))

    def cleanup_old_blocks(self, thresh_time_ms: int) -> None:
        self.write_ahead_log.clean(thresh_time_ms, wait_for_completion=False)
        self.block_store.remove_blocks_older_than(thresh_time_ms)

    def stop(self) -> None:
        # Let writes in flight finish (each is bounded by the store timeout) before closing the log.
        self._pool.shutdown(timeout_s=self.block_store_timeout_s)
        self.write_ahead_log.close()
