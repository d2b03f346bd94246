"""The in-process block manager: serialized blocks in memory, spilling to local disk by level."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_store import BlockStoreError
from reliable_kafka.storage.disk_store import DiskStore
from reliable_kafka.storage.memory_store import MemoryStore
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util import instruments
from reliable_kafka.util.clock import wall_clock_ms

logger = logging.getLogger(__name__)

DEFAULT_MEMORY_BUDGET_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _BlockInfo:
    level: StorageLevel
    size: int
    stored_at_ms: int
    in_memory: bool


class BlockManager:
    """Implements :class:`~reliable_kafka.storage.block_store.BlockStore` for one process.

    A put goes to memory when the level allows it and it fits the budget, else to disk when the
    level allows that, else fails with :class:`BlockStoreError` naming the block and the level.
    There is one copy whatever ``level.replication`` says: this process has no peers to copy to.
    Disk reads and writes run outside the lock so that one slow spill does not stall other puts.
    """

    def __init__(
        self,
        *,
        memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES,
        local_dir: str | Path | None = None,
        now_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._memory = MemoryStore(memory_budget_bytes)
        self._disk = DiskStore(local_dir)
        self._now_ms = now_ms
        self._lock = threading.Lock()
        self._blocks: dict[StreamBlockId, _BlockInfo] = {}
        # Ids whose disk write is in flight: taken, but not readable yet.
        self._pending: set[StreamBlockId] = set()
        self._closed = False
        instruments.BLOCK_STORES.track(self)

    @property
    def memory_used_bytes(self) -> int:
        return self._memory.used_bytes

    @property
    def stored_bytes(self) -> int:
        """Bytes of every block held, in memory or on disk (for the status page's metrics)."""
        with self._lock:
            return sum(info.size for info in self._blocks.values())

    @property
    def memory_budget_bytes(self) -> int:
        return self._memory.max_bytes

    @property
    def disk_directory(self) -> Path | None:
        """The owner-only spill directory, or None until the first block goes to disk."""
        return self._disk.directory

    def put(self, block_id: StreamBlockId, data: bytes, level: StorageLevel) -> bool:
        if not isinstance(data, bytes):
            raise TypeError(f"block {block_id} must be bytes, got {type(data).__name__}")
        with self._lock:
            if self._closed:
                raise BlockStoreError(f"cannot store block {block_id}: the block manager is closed", block_id)
            if block_id in self._blocks or block_id in self._pending:
                logger.warning("Block %s already exists on this machine; not re-adding it", block_id)
                return False
            if level.use_memory and self._memory.try_put(block_id, data):
                self._blocks[block_id] = _BlockInfo(level, len(data), self._now_ms(), in_memory=True)
                return True
            if not level.use_disk:
                raise BlockStoreError(
                    f"block {block_id} ({len(data)} bytes) does not fit in memory "
                    f"({self._memory.free_bytes} of {self._memory.max_bytes} bytes free) and storage level "
                    f"{level.name} does not allow disk",
                    block_id,
                    level,
                )
            self._pending.add(block_id)
        try:
            self._disk.put(block_id, data)
        except OSError as exc:
            with self._lock:
                self._pending.discard(block_id)
            message = f"could not write block {block_id} to local disk: {exc}"
            raise BlockStoreError(message, block_id, level) from exc
        with self._lock:
            self._pending.discard(block_id)
            closed = self._closed
            if not closed:
                self._blocks[block_id] = _BlockInfo(level, len(data), self._now_ms(), in_memory=False)
        if closed:
            # Closed while writing: the file went with the directory, or goes now.
            self._disk.remove(block_id)
            raise BlockStoreError(f"cannot store block {block_id}: the block manager is closed", block_id)
        if level.use_memory:
            logger.info("Block %s (%d bytes) did not fit in memory; stored on disk", block_id, len(data))
        return True

    def get(self, block_id: StreamBlockId) -> bytes | None:
        with self._lock:
            info = self._blocks.get(block_id)
            if info is None:
                return None
            if info.in_memory:
                return self._memory.get(block_id)
        # A concurrent remove may delete the file first; that reads as "not stored".
        return self._disk.get(block_id)

    def contains(self, block_id: StreamBlockId) -> bool:
        with self._lock:
            return block_id in self._blocks

    def remove(self, block_id: StreamBlockId) -> bool:
        with self._lock:
            info = self._blocks.pop(block_id, None)
            if info is None:
                return False
            if info.in_memory:
                self._memory.remove(block_id)
                return True
        self._disk.remove(block_id)
        return True

    def remove_blocks_older_than(self, thresh_time_ms: int) -> list[StreamBlockId]:
        with self._lock:
            old = [block_id for block_id, info in self._blocks.items() if info.stored_at_ms < thresh_time_ms]
            on_disk = []
            for block_id in old:
                if self._blocks.pop(block_id).in_memory:
                    self._memory.remove(block_id)
                else:
                    on_disk.append(block_id)
        for block_id in on_disk:
            self._disk.remove(block_id)
        if old:
            logger.debug("Removed %d blocks stored before %d", len(old), thresh_time_ms)
        return old

    def close(self) -> None:
        """Drop every block and delete the spill directory; later puts fail."""
        with self._lock:
            self._closed = True
            self._blocks.clear()
            self._memory.clear()
        self._disk.close()
