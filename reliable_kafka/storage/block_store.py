"""The one interface through which received blocks are stored (Spark's block manager seam).

Today the in-process :class:`~reliable_kafka.storage.block_manager.BlockManager` implements it;
later, on executors, blocks may live elsewhere (e.g. a shared filesystem), behind the same calls.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.storage_level import StorageLevel


class BlockStoreError(Exception):
    """A block could not be stored; names the block and, where it matters, the storage level."""

    def __init__(self, message: str, block_id: StreamBlockId, level: StorageLevel | None = None) -> None:
        super().__init__(message)
        self.block_id = block_id
        self.level = level


@runtime_checkable
class BlockStore(Protocol):
    def put(self, block_id: StreamBlockId, data: bytes, level: StorageLevel) -> bool:
        """Store serialized bytes; False (and nothing changed) if the block is already stored.
        Raises :class:`BlockStoreError` if the level gives it no place to go."""
        ...

    def get(self, block_id: StreamBlockId) -> bytes | None:
        """The block's bytes, or None if it is not (or no longer) stored."""
        ...

    def contains(self, block_id: StreamBlockId) -> bool: ...

    def remove(self, block_id: StreamBlockId) -> bool:
        """True if the block was stored and is now gone."""
        ...

    def remove_blocks_older_than(self, thresh_time_ms: int) -> list[StreamBlockId]:
        """Remove blocks stored before ``thresh_time_ms`` (wall clock); returns their ids."""
        ...

    def close(self) -> None: ...
