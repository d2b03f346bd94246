"""Segments on any fsspec filesystem (HDFS, S3, GCS, "memory", ...)."""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO

from wal.durability import FsyncPolicy, sync_call
from wal.errors import WriteAheadLogError
from wal.storage import SegmentWriter, Storage

if TYPE_CHECKING:
    import fsspec

logger = logging.getLogger(__name__)

_READ_BUFFER = 4 << 20
FILE_MODE = 0o600
DIR_MODE = 0o700

# Protocols whose open files hand flushed bytes to the store at once (local-like and HDFS-like).
# Every other store (S3, GCS, Azure, WebHDFS, HTTP, ...) buffers a block in process memory and
# uploads it only when the block fills or the file closes: there, only close publishes a write.
PUBLISHED_ON_FLUSH_PROTOCOLS = frozenset({"file", "local", "memory", "hdfs", "arrow_hdfs", "viewfs"})


# Stores whose chmod takes a canned ACL ("private", ...), not a mode: the bucket's policy rules there.
ACL_CHMOD_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs"})


def protocols_of(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def publishes_on_flush(fs: fsspec.AbstractFileSystem) -> bool:
    """True when a flushed write to a still-open file is in the store, not only in this process."""
    return any(p in PUBLISHED_ON_FLUSH_PROTOCOLS for p in protocols_of(fs))


def set_mode(fs: fsspec.AbstractFileSystem, path: str, mode: int) -> bool:
    """``chmod`` where the filesystem has one; False where it has none (permissions are then the
    store's: bucket policies, ACLs)."""
    chmod = getattr(fs, "chmod", None)
    if chmod is None or any(p in ACL_CHMOD_PROTOCOLS for p in protocols_of(fs)):
        return False
    # fsspec's WebHDFS sends the number as written and WebHDFS reads it as octal digits: 0o700
    # must travel as 700, not 448 (which WebHDFS refuses).
    argument = int(f"{mode:o}") if "webhdfs" in protocols_of(fs) else mode
    try:
        chmod(path, argument)
    except NotImplementedError:
        return False
    return True


@contextmanager
def _store_errors(action: str, path: str) -> Iterator[None]:
    """fsspec back ends raise their own exception types (botocore, aiohttp, ...); callers handle
    ``OSError`` (missing files, I/O) and ``WriteAheadLogError``, so everything else becomes the latter."""
    try:
        yield
    except (OSError, WriteAheadLogError):
        raise
    except Exception as exc:
        raise WriteAheadLogError(f"cannot {action} {path}: {type(exc).__name__}: {exc}") from exc


class _FsspecSegmentWriter(SegmentWriter):
    def __init__(
        self,
        path: str,
        file: BinaryIO,
        sync: Callable[[BinaryIO], None] | None,
        protect: Callable[[str], None] | None,
        published_on_flush: bool,
    ) -> None:
        super().__init__(path)
        self._file = file
        self._sync = sync
        self._protect = protect
        self._published_on_flush = published_on_flush

    def append(self, header: bytes, payload: bytes | memoryview) -> int:
        with _store_errors("append to", self.path):
            # One write call so a concurrent reader never sees a header without its payload.
            self._file.write(header + payload)
            self._file.flush()
            if self._sync is not None:
                self._sync(self._file)
        if self._published_on_flush:
            self._protect_once()
        offset = self.position
        self.position += len(header) + len(payload)
        return offset

    def close(self) -> None:
        with _store_errors("close", self.path):
            # On an object store this is the upload: it must succeed for the segment to exist.
            self._file.close()
        self._protect_once()

    def _protect_once(self) -> None:
        # The object exists only once its bytes reached the store, so permissions follow them.
        protect, self._protect = self._protect, None
        if protect is not None:
            protect(self.path)


def _os_sync(policy: FsyncPolicy) -> Callable[[BinaryIO], None] | None:
    """Per-write sync for fsspec files backed by a real descriptor (e.g. a local file through a
    wrapping filesystem); other files have no such call, flush (or close) is all they offer."""
    function = sync_call(policy)
    if function is None:
        return None

    def sync(file: BinaryIO) -> None:
        try:
            fd = file.fileno()
        except (AttributeError, OSError, ValueError):
            return
        function(fd)

    return sync


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
        with _store_errors("read", self._path):
            data = self._fs.cat_file(self._path, start=self._pos, end=end)
        n = len(data)
        buffer[:n] = data
        self._pos += n
        return n


class FsspecStorage(Storage):
    """Any fsspec filesystem; fsync only where the opened file has a real descriptor.

    ``published_on_flush`` (see ``PUBLISHED_ON_FLUSH_PROTOCOLS``) tells the log whether it may
    keep a segment open across writes; where it is False the log closes every segment after
    its write, as Spark requires on S3.

    Segments are created exclusively: with mode ``"xb"`` where the back end supports it,
    otherwise under a name with a random suffix no other writer can pick; an existing
    segment is never truncated.

    Owner-only: where the filesystem has a working ``chmod`` (e.g. WebHDFS), segments are
    set to 0o600 once their bytes reach the store and directories this log creates to 0o700.
    Elsewhere (S3, GCS, ...) permissions are the store's: bucket policies and ACLs.

    Errors other than ``OSError`` that a back end raises come out as ``WriteAheadLogError``.
    """

    def __init__(
        self, fs: fsspec.AbstractFileSystem, directory: str, policy: FsyncPolicy = FsyncPolicy.FSYNC
    ) -> None:
        super().__init__(directory.rstrip("/") or "/")
        self._fs = fs
        self._sync = _os_sync(policy)
        self._exclusive_mode = True
        self._directory_ready = False
        self._chmod_supported = True
        self.published_on_flush = publishes_on_flush(fs)

    def join(self, name: str) -> str:
        return f"{self.directory.rstrip('/')}/{name}"

    def contains(self, path: str) -> bool:
        parent, _, name = path.rpartition("/")
        return (parent or "/") == self.directory and name not in ("", ".", "..")

    def create_segment(self, path: str) -> SegmentWriter:
        with _store_errors("create", path):
            if not self._directory_ready:
                # Object stores create parents implicitly; made here they can get owner-only modes.
                self._make_directory()
                self._directory_ready = True
            try:
                path, file = self._create(path)
            except FileNotFoundError:
                self._make_directory()
                path, file = self._create(path)
        return _FsspecSegmentWriter(path, file, self._sync, self._protect_file, self.published_on_flush)

    def _create(self, path: str) -> tuple[str, BinaryIO]:
        if self._exclusive_mode:
            try:
                return path, self._fs.open(path, "xb")
            except (ValueError, NotImplementedError) as exc:
                # Only an unsupported mode lands here; FileExistsError is an OSError.
                logger.info(
                    "fsspec %s has no exclusive create (%s); segments get unique names instead",
                    type(self._fs).__name__,
                    exc,
                )
                self._exclusive_mode = False
        if self._fs.exists(path):
            raise FileExistsError(path)
        # Without "xb" an exists() check cannot stop a racing writer; a name nobody else can
        # choose can: "wb" then never truncates another writer's segment.
        unique = f"{path}.{uuid.uuid4().hex}"
        return unique, self._fs.open(unique, "wb")

    def _make_directory(self) -> None:
        existed = self._fs.exists(self.directory)
        self._fs.makedirs(self.directory, exist_ok=True)
        if not existed:
            self._apply_mode(self.directory, DIR_MODE)

    def _protect_file(self, path: str) -> None:
        with _store_errors("set permissions on", path):
            self._apply_mode(path, FILE_MODE)

    def _apply_mode(self, path: str, mode: int) -> None:
        # Once refused (or absent), permissions are the store's business.
        if self._chmod_supported:
            self._chmod_supported = set_mode(self._fs, path, mode)

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        with _store_errors("read", path):
            return bytes(self._fs.cat_file(path, start=offset, end=offset + size))

    def open_reader(self, path: str) -> tuple[BinaryIO, int]:
        with _store_errors("open", path):
            size = int(self._fs.size(path))
        reader = io.BufferedReader(_RangeReader(self._fs, path, size), buffer_size=_READ_BUFFER)
        return reader, size  # type: ignore[return-value]

    def list_entries(self) -> list[tuple[str, str]]:
        with _store_errors("list", self.directory):
            try:
                paths = self._fs.ls(self.directory, detail=False)
            except FileNotFoundError:
                return []
        return [(str(p).rstrip("/").rsplit("/", 1)[-1], str(p)) for p in paths]

    def delete(self, path: str) -> None:
        with _store_errors("delete", path):
            self._fs.rm_file(path)
