"""Segments on the local filesystem through raw file descriptors: one writev (+ fsync) per record."""

from __future__ import annotations

import contextlib
import os
from typing import BinaryIO

from wal.durability import FsyncPolicy, sync_call
from wal.storage import SegmentWriter, Storage

FILE_MODE = 0o600
DIR_MODE = 0o700
_READ_BUFFER = 1 << 20
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_DONTNEED = getattr(os, "POSIX_FADV_DONTNEED", None)  # None where there is no posix_fadvise


class _LocalSegmentWriter(SegmentWriter):
    def __init__(self, path: str, fd: int, policy: FsyncPolicy) -> None:
        super().__init__(path)
        self._fd = fd
        self._sync = sync_call(policy)

    def append(self, header: bytes, payload: bytes | memoryview) -> int:
        # One writev per record: no concatenation copy, no seek, no fstat; we track the offset.
        total = len(header) + len(payload)
        written = os.writev(self._fd, (header, payload))
        if written != total:
            self._write_rest(memoryview(header + bytes(payload))[written:])
        offset = self.position
        if self._sync is not None:
            self._sync(self._fd)
            self._drop_from_page_cache(offset, total)
        self.position += total
        return offset

    def _drop_from_page_cache(self, offset: int, length: int) -> None:
        """Synced pages are clean: let the kernel reuse them for the next records at once rather
        than grow the page cache with a log read back only after a failure (PostgreSQL advises
        the same for its WAL). Where page-cache growth is slow (VMs that back guest memory lazily,
        as on our 2-core test machines) it bounded a receiver's WAL writes at ~400 MB/s; reusing
        pages, ~1.6 GB/s. Advice only: a filesystem that refuses it changes nothing."""
        if _DONTNEED is None:
            return
        with contextlib.suppress(OSError):
            os.posix_fadvise(self._fd, offset, length, _DONTNEED)

    def _write_rest(self, rest: memoryview) -> None:
        # Short writes happen on signals or a nearly full disk; finish the frame or raise.
        while rest:
            n = os.write(self._fd, rest)
            rest = rest[n:]

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


class LocalStorage(Storage):
    """Local disk through os-level file descriptors; files 0o600, directories we create 0o700."""

    def __init__(self, directory: str, policy: FsyncPolicy) -> None:
        super().__init__(os.path.abspath(directory))
        self._policy = policy

    def join(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def contains(self, path: str) -> bool:
        # abspath folds "..": "<dir>/../elsewhere/log-1-2" is not inside.
        return os.path.isabs(path) and os.path.dirname(os.path.abspath(path)) == self.directory

    def create_segment(self, path: str) -> SegmentWriter:
        try:
            fd = os.open(path, _OPEN_FLAGS, FILE_MODE)
        except FileNotFoundError:
            # First write, or someone removed the directory: (re)create it and try once more.
            self._make_directory()
            fd = os.open(path, _OPEN_FLAGS, FILE_MODE)
        try:
            if self._policy is not FsyncPolicy.NONE:
                # The new name must survive a power loss too, not only the bytes inside it.
                _fsync_directory(self.directory)
        except BaseException:
            os.close(fd)
            raise
        return _LocalSegmentWriter(path, fd, self._policy)

    def _make_directory(self) -> None:
        # os.makedirs applies `mode` to the leaf only; create each missing level owner-only.
        missing = []
        path = self.directory
        while not os.path.isdir(path):
            missing.append(path)
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
        for level in reversed(missing):
            try:
                os.mkdir(level, DIR_MODE)
            except FileExistsError:
                continue
            if self._policy is not FsyncPolicy.NONE:
                _fsync_directory(os.path.dirname(level))

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        fd = os.open(path, _READ_FLAGS)
        try:
            # A damaged handle can claim gigabytes; pread would allocate all of it before reading.
            size = max(0, min(size, os.fstat(fd).st_size - offset))
            data = os.pread(fd, size, offset)
            if len(data) == size or not data:
                return data
            chunks = [data]
            got = len(data)
            while got < size:
                more = os.pread(fd, size - got, offset + got)
                if not more:
                    break
                chunks.append(more)
                got += len(more)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def open_reader(self, path: str) -> tuple[BinaryIO, int]:
        reader = open(path, "rb", buffering=_READ_BUFFER)  # noqa: SIM115 - caller closes it
        try:
            size = os.fstat(reader.fileno()).st_size
        except BaseException:
            reader.close()
            raise
        return reader, size

    def list_entries(self) -> list[tuple[str, str]]:
        try:
            with os.scandir(self.directory) as entries:
                # Directories are never segments; d_type makes this check free on most filesystems.
                return [(e.name, e.path) for e in entries if e.is_file(follow_symlinks=False)]
        except FileNotFoundError:
            return []

    def delete(self, path: str) -> None:
        os.unlink(path)


def _fsync_directory(directory: str) -> None:
    fd = os.open(directory, _READ_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
