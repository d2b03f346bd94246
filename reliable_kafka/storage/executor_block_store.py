"""The block store of a receiver task on an executor: every block is a file, so any Python worker
on the same host (a batch task of this executor or, when Spark placed it there, of another
executor on the host) reads it straight from its path; the driver only ever learns the path.

Memory levels go to a tmpfs directory (``/dev/shm`` where there is a writable one), counted
against ``memory_budget_bytes``: the bytes stay in RAM without living in the receiver's heap, and
die with the machine like Spark's memory store. Disk levels, and memory blocks that do not fit
when the level allows disk, go to the executor's local directory (what Spark gives its Python
workers as ``SPARK_LOCAL_DIRS``, i.e. the executor's own block manager directory, removed with
the executor). A level that leaves a block nowhere to go fails with :class:`BlockStoreError`.

Each store owns one directory per tier, named after the application and stream, its pid and a
random suffix (two receivers, or a restarted receiver next to the remains of its predecessor, never
share one), created 0o700 on first use and removed by :meth:`ExecutorBlockStore.close`; those of
processes that ended without closing are removed when the next store starts on the host. Files are
0o600 and appear under their final name only when complete (written under a temporary name,
then renamed). Not durable on purpose (no fsync): this is a cache; the WAL is what survives.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_manager import DEFAULT_MEMORY_BUDGET_BYTES
from reliable_kafka.storage.block_store import BlockStoreError
from reliable_kafka.storage.disk_store import DiskStore
from reliable_kafka.storage.orphan_dirs import owned_prefix, remove_orphans
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util import instruments
from reliable_kafka.util.clock import wall_clock_ms

logger = logging.getLogger(__name__)

# Only ever a parent for mkdtemp (random name, 0o700, created exclusively): no predictable path.
_SHARED_MEMORY = Path("/dev/shm")  # noqa: S108
_DIR_MODE = 0o700
_FILE_MODE = 0o600
# Directory names carry the store's name; keep them to characters every filesystem takes.
_UNSAFE_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9._-]+")


def read_block_file(path: str | os.PathLike[str]) -> bytes | None:
    """A block's bytes by the path its store reported, or None if the block is gone (removed,
    or its store closed); works in any process of the same user on the same host."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return None


def default_local_dir() -> Path:
    """Spark's local directory for this process: the first usable entry of ``SPARK_LOCAL_DIRS``
    (Spark sets it for Python workers), else the system temporary directory."""
    for entry in os.environ.get("SPARK_LOCAL_DIRS", "").split(","):
        if entry and os.path.isdir(entry) and os.access(entry, os.W_OK | os.X_OK):
            return Path(entry)
    return Path(tempfile.gettempdir())


def default_memory_dir(local_dir: Path) -> Path:
    """``/dev/shm`` when this process may create directories there, else ``local_dir``."""
    if _SHARED_MEMORY.is_dir() and os.access(_SHARED_MEMORY, os.W_OK | os.X_OK):
        return _SHARED_MEMORY
    return local_dir


@dataclass(frozen=True, slots=True)
class _StoredBlock:
    path: Path
    level: StorageLevel
    size: int
    stored_at_ms: int
    in_memory: bool


class ExecutorBlockStore:
    """Implements :class:`~reliable_kafka.storage.block_store.BlockStore` with one file per block.

    ``name`` identifies the application and stream (e.g. ``"<app id>-stream-3"``). A put goes to
    the memory directory when the level allows memory and the block fits the budget, else to the
    local directory when the level allows disk, else fails naming the block and the level; a
    memory write the tmpfs itself refuses (full) also falls back to disk when the level allows.
    One copy whatever ``level.replication`` says; deserialized levels store the same bytes.
    File I/O runs outside the lock so that one slow write does not stall other calls.
    """

    def __init__(
        self,
        name: str,
        *,
        memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES,
        local_dir: str | os.PathLike[str] | None = None,
        memory_dir: str | os.PathLike[str] | None = None,
        now_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        if memory_budget_bytes < 0:
            raise ValueError(f"memory budget must be >= 0 bytes, got {memory_budget_bytes}")
        disk_parent = Path(local_dir) if local_dir is not None else default_local_dir()
        memory_parent = Path(memory_dir) if memory_dir is not None else default_memory_dir(disk_parent)
        prefix = f"reliable-kafka-{_UNSAFE_NAME_CHARACTERS.sub('_', name)}-"
        self.name = name
        remove_orphans(memory_parent, "mem")
        remove_orphans(disk_parent, "disk")
        self._memory_dir = DiskStore(memory_parent, owned_prefix(prefix + "mem-"))
        self._disk_dir = DiskStore(disk_parent, owned_prefix(prefix + "disk-"))
        self._memory_budget = memory_budget_bytes
        self._memory_used = 0
        self._now_ms = now_ms
        self._lock = threading.Lock()
        self._blocks: dict[StreamBlockId, _StoredBlock] = {}
        # Ids whose write is in flight: taken, but not readable yet.
        self._pending: set[StreamBlockId] = set()
        self._closed = False
        instruments.BLOCK_STORES.track(self)

    @property
    def stored_bytes(self) -> int:
        """Bytes of every block held (reported to the driver's metrics by the receiver task)."""
        with self._lock:
            return sum(block.size for block in self._blocks.values())

    @property
    def memory_budget_bytes(self) -> int:
        return self._memory_budget

    @property
    def memory_used_bytes(self) -> int:
        """Bytes of memory-directory blocks, including writes in flight (reserved first)."""
        with self._lock:
            return self._memory_used

    @property
    def memory_directory(self) -> Path | None:
        """This store's directory in the memory tier, or None until a block went there."""
        return self._memory_dir.directory

    @property
    def disk_directory(self) -> Path | None:
        """This store's directory on local disk, or None until a block went there."""
        return self._disk_dir.directory

    def put(self, block_id: StreamBlockId, data: bytes, level: StorageLevel) -> bool:
        if not isinstance(data, bytes):
            raise TypeError(f"block {block_id} must be bytes, got {type(data).__name__}")
        size = len(data)
        with self._lock:
            if self._closed:
                raise BlockStoreError(f"cannot store block {block_id}: the block store is closed", block_id)
            if block_id in self._blocks or block_id in self._pending:
                # A receiver retries a failed store with the same id: an earlier attempt put it.
                logger.info("Block %s already exists on this machine; not re-adding it", block_id)
                return False
            in_memory = level.use_memory and size <= self._memory_budget - self._memory_used
            if in_memory:
                self._memory_used += size
            elif not level.use_disk:
                raise BlockStoreError(
                    f"block {block_id} ({size} bytes) does not fit in memory "
                    f"({self._memory_budget - self._memory_used} of {self._memory_budget} bytes free) "
                    f"and storage level {level.name} does not allow disk",
                    block_id,
                    level,
                )
            self._pending.add(block_id)
        try:
            path, in_memory = self._write(block_id, data, level, in_memory)
        except BaseException:
            with self._lock:
                self._pending.discard(block_id)
            raise
        with self._lock:
            self._pending.discard(block_id)
            closed = self._closed
            if not closed:
                self._blocks[block_id] = _StoredBlock(path, level, size, self._now_ms(), in_memory)
        if closed:
            # Closed while writing: the file went with the directory, or goes now.
            path.unlink(missing_ok=True)
            raise BlockStoreError(f"cannot store block {block_id}: the block store is closed", block_id)
        return True

    def _write(
        self, block_id: StreamBlockId, data: bytes, level: StorageLevel, in_memory: bool
    ) -> tuple[Path, bool]:
        """Write to the chosen tier; returns the path and whether it is in the memory tier."""
        if in_memory:
            try:
                return self._memory_dir.put(block_id, data), True
            except OSError as exc:
                with self._lock:
                    # close() already zeroed the books; the reservation is gone with them.
                    if not self._closed:
                        self._memory_used -= len(data)
                if not level.use_disk:
                    raise BlockStoreError(
                        f"could not write block {block_id} to the memory directory and storage level "
                        f"{level.name} does not allow disk: {exc}",
                        block_id,
                        level,
                    ) from exc
                logger.warning("Memory directory refused block %s (%s); storing it on disk", block_id, exc)
        try:
            path = self._disk_dir.put(block_id, data)
        except OSError as exc:
            raise BlockStoreError(
                f"could not write block {block_id} to local disk: {exc}", block_id, level
            ) from exc
        if level.use_memory:
            logger.info("Block %s (%d bytes) did not fit in memory; stored on disk", block_id, len(data))
        return path, False

    def get(self, block_id: StreamBlockId) -> bytes | None:
        path = self.path_of(block_id)
        # A concurrent remove may delete the file first; that reads as "not stored".
        return None if path is None else read_block_file(path)

    def path_of(self, block_id: StreamBlockId) -> str | None:
        """The file holding a stored block (readable by other processes of this user on this
        host until the block is removed), or None if the block is not stored."""
        with self._lock:
            stored = self._blocks.get(block_id)
        return None if stored is None else str(stored.path)

    def contains(self, block_id: StreamBlockId) -> bool:
        with self._lock:
            return block_id in self._blocks

    def remove(self, block_id: StreamBlockId) -> bool:
        with self._lock:
            stored = self._forget(block_id)
        if stored is None:
            return False
        stored.path.unlink(missing_ok=True)
        return True

    def remove_blocks_older_than(self, thresh_time_ms: int) -> list[StreamBlockId]:
        with self._lock:
            old = [
                block_id for block_id, stored in self._blocks.items() if stored.stored_at_ms < thresh_time_ms
            ]
            paths = [stored.path for stored in map(self._forget, old) if stored is not None]
        for path in paths:
            path.unlink(missing_ok=True)
        if old:
            logger.debug("Removed %d blocks stored before %d", len(old), thresh_time_ms)
        return old

    def _forget(self, block_id: StreamBlockId) -> _StoredBlock | None:
        """Drop a block from the books (the caller holds the lock and deletes the file)."""
        stored = self._blocks.pop(block_id, None)
        if stored is not None and stored.in_memory:
            self._memory_used -= stored.size
        return stored

    def close(self) -> None:
        """Drop every block and delete this store's directories; later puts fail."""
        with self._lock:
            self._closed = True
            self._blocks.clear()
            self._memory_used = 0
        self._memory_dir.close()
        self._disk_dir.close()
