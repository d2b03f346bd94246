"""Segments on any fsspec filesystem (HDFS, S3, GCS, "memory", ...)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, BinaryIO

from wal.storage import SegmentWriter, Storage

if TYPE_CHECKING:
    import fsspec

_READ_BUFFER = 4 << 20


class _FsspecSegmentWriter(SegmentWriter):
    def __init__(self, path: str, file: BinaryIO) -> None:
        super().__init__(path)
        self._file = file

    def append(self, header: bytes, payload: bytes) -> int:
        # One write call so a concurrent reader never sees a header without its payload.
        self._file.write(header + payload)
        # fsspec has no fsync; flush is as far as a remote store lets us push per write.
        self._file.flush()
        offset = self.position
        self.position += len(header) + len(payload)
        return offset

    def close(self) -> None:
        self._file.close()


class _RangeReader(io.RawIOBase):
    """Sequential reads served by ``cat_file`` ranges.

    Some fsspec back ends (e.g. "memory") hand out the very object the writer appends
    to; ranged reads never move the writer's position.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, path: str, size: int) -> None:
        super().__init__()
        self._fs = fs
        self._path = path
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        end = min(self._pos + len(buffer), self._size)
        if end <= self._pos:
            return 0
        data = self._fs.cat_file(self._path, start=self._pos, end=end)
        n = len(data)
        buffer[:n] = data
        self._pos += n
        return n


class FsspecStorage(Storage):
    """Any fsspec filesystem. Permissions are the store's business; fsync is not available.

    Object stores (S3, GCS) publish a file only when it is closed: use
    ``close_file_after_write=True`` there, as Spark recommends.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, directory: str) -> None:
        super().__init__(directory.rstrip("/") or "/")
        self._fs = fs

    def join(self, name: str) -> str:
        return f"{self.directory.rstrip('/')}/{name}"

    def create_segment(self, path: str) -> SegmentWriter:
        if self._fs.exists(path):
            raise FileExistsError(path)
        try:
            file = self._fs.open(path, "wb")
        except FileNotFoundError:
            self._fs.makedirs(self.directory, exist_ok=True)
            file = self._fs.open(path, "wb")
        return _FsspecSegmentWriter(path, file)

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        return bytes(self._fs.cat_file(path, start=offset, end=offset + size))

    def open_reader(self, path: str) -> tuple[BinaryIO, int]:
        size = int(self._fs.size(path))
        reader = io.BufferedReader(_RangeReader(self._fs, path, size), buffer_size=_READ_BUFFER)
        return reader, size  # type: ignore[return-value]

    def list_entries(self) -> list[tuple[str, str]]:
        try:
            paths = self._fs.ls(self.directory, detail=False)
        except FileNotFoundError:
            return []
        return [(str(p).rstrip("/").rsplit("/", 1)[-1], str(p)) for p in paths]

    def delete(self, path: str) -> None:
        self._fs.rm_file(path)
