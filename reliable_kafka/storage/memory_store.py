"""Serialized blocks in memory under a fixed byte budget (Spark's ``MemoryStore``, without LRU).

Nothing is ever evicted to make room: a put that does not fit is refused and the block manager
decides where the block goes instead. Not thread-safe; the block manager holds the lock.
"""

from __future__ import annotations

from reliable_kafka.storage.block_id import StreamBlockId


class MemoryStore:
    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"memory budget must be >= 0 bytes, got {max_bytes}")
        self.max_bytes = max_bytes
        self.used_bytes = 0
        self._blocks: dict[StreamBlockId, bytes] = {}

    @property
    def free_bytes(self) -> int:
        return self.max_bytes - self.used_bytes

    def try_put(self, block_id: StreamBlockId, data: bytes) -> bool:
        if len(data) > self.free_bytes:
            return False
        self._blocks[block_id] = data
        self.used_bytes += len(data)
        return True

    def get(self, block_id: StreamBlockId) -> bytes | None:
        return self._blocks.get(block_id)

    def remove(self, block_id: StreamBlockId) -> bool:
        data = self._blocks.pop(block_id, None)
        if data is None:
            return False
        self.used_bytes -= len(data)
        return True

    def clear(self) -> None:
        self._blocks.clear()
        self.used_bytes = 0
