"""Blocks as files in an owner-only local directory (Spark's ``DiskStore``)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import uuid
from pathlib import Path

from reliable_kafka.storage.block_id import StreamBlockId

logger = logging.getLogger(__name__)

_FILE_MODE = 0o600


class DiskStoreClosedError(OSError):
    """The store is closed: it writes nothing and creates no directory any more."""


class DiskStore:
    """One file per block under ``<parent>/blockmgr-<random>`` (0o700), files 0o600.

    The directory is created on the first put, so a block manager that never spills leaves no
    trace. Files are written under a temporary name and renamed, so a reader never sees half a
    block. Not durable on purpose (no fsync): this is a cache; the WAL is what survives crashes.
    Not thread-safe for the same block id; the block manager serialises those. Once closed,
    a put fails with :class:`DiskStoreClosedError` instead of creating the directory again.
    """

    def __init__(self, parent_dir: str | Path | None = None, prefix: str = "blockmgr-") -> None:
        self._parent_dir = Path(parent_dir) if parent_dir is not None else None
        self._prefix = prefix
        self._dir: Path | None = None
        self._dir_lock = threading.Lock()
        self._closed = False

    @property
    def directory(self) -> Path | None:
        return self._dir

    def _directory(self) -> Path:
        with self._dir_lock:
            if self._closed:
                raise DiskStoreClosedError("the local block directory is closed")
            if self._dir is None:
                if self._parent_dir is not None:
                    self._parent_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
                # mkdtemp creates the directory 0o700 whatever the umask or the parent's mode.
                self._dir = Path(tempfile.mkdtemp(prefix=self._prefix, dir=self._parent_dir))
                logger.info("Created local block directory %s", self._dir)
            return self._dir

    def _path(self, block_id: StreamBlockId) -> Path:
        return self._directory() / block_id.name

    def put(self, block_id: StreamBlockId, data: bytes) -> Path:
        """Write the block's file; returns its path (readable by any process of this user)."""
        path = self._path(block_id)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _FILE_MODE)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if self._closed:
            # Closed while writing, maybe after close() listed the directory: delete what
            # this write left, so the directory goes too.
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                path.parent.rmdir()
            raise DiskStoreClosedError(f"the local block directory closed while writing {block_id}")
        return path

    def get(self, block_id: StreamBlockId) -> bytes | None:
        if self._dir is None:
            return None
        try:
            return (self._dir / block_id.name).read_bytes()
        except FileNotFoundError:
            return None

    def remove(self, block_id: StreamBlockId) -> bool:
        if self._dir is None:
            return False
        try:
            (self._dir / block_id.name).unlink()
        except FileNotFoundError:
            return False
        return True

    def close(self) -> None:
        with self._dir_lock:
            self._closed = True
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                logger.info("Deleted local block directory %s", self._dir)
                self._dir = None
