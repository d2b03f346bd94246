"""Spark's FileBasedWriteAheadLog: rolling, time-named segment files of CRC-framed records."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from wal.api import RecordHandle, WriteAheadLog
from wal.durability import FsyncPolicy
from wal.errors import CorruptRecordError, SegmentNotFoundError, WriteAheadLogClosedError, WriteAheadLogError
from wal.failure_log import FailureLog
from wal.filesystem import open_storage
from wal.framing import HEADER_SIZE, FrameError, decode_header, encode_header, verify_payload
from wal.recovery import read_segments, read_segments_parallel
from wal.segments import SegmentInfo, parse_segment_name, segment_basename, segment_name, segments_in_order
from wal.storage import SegmentWriter

if TYPE_CHECKING:
    import fsspec

logger = logging.getLogger(__name__)

# Names collide only when a crashed/failed run left a segment starting at the same millisecond.
_MAX_NAME_PROBES = 10_000
# The directories whose forced close_file_after_write this process has warned of.
_FORCED_CLOSE_WARNED: set[str] = set()
_FORCED_CLOSE_WARNED_LOCK = threading.Lock()


class FileBasedWriteAheadLog(WriteAheadLog):
    """Records appended to ``log-<start_ms>-<end_ms>`` segments in ``log_directory``.

    A write whose ``time_ms`` is past the current segment's end starts a new segment spanning
    ``rolling_interval_s``. A log never appends to a segment it did not create, so after a
    crash it continues in a new segment instead of after a possibly torn tail.

    ``fsync``: ``True``/``FsyncPolicy.FSYNC`` (default) syncs every write, ``FsyncPolicy.FDATASYNC``
    syncs data only, ``False``/``FsyncPolicy.NONE`` only hands bytes to the OS. On fsspec
    filesystems a write is flushed, and synced only where the opened file has a real descriptor;
    on stores that publish only on close, the close that ends every write is the upload.
    Files are 0o600 and directories this log creates 0o700: natively on local disks, through
    ``chmod`` on fsspec filesystems that have one; elsewhere (S3, GCS, ...) permissions are
    the store's (bucket policies, ACLs).
    ``close_file_after_write``: one segment per write, recovered in parallel. On fsspec stores
    where a flushed write is not yet in the store (anything but the protocols in
    ``wal.fsspec_storage.PUBLISHED_ON_FLUSH_PROTOCOLS``: S3, GCS, Azure, WebHDFS, ...) it is
    forced on, with one warning at the first write, as Spark requires it on S3: there a write
    returns only after its segment was closed, i.e. uploaded.
    If closing a rolled-over segment fails, ``write`` raises ``WriteAheadLogError`` naming that
    segment (its records may be lost) and does not write the new record.
    A failed write is retried up to ``max_failures`` attempts in all, each in a fresh segment.
    With one segment per write, a failed attempt's segment is deleted first: a remote store may
    report a failure after the bytes landed (an upload whose answer timed out, a permission
    change refused after the upload), and its record must not be recovered twice, nor at all
    once the write was reported failed. Where the delete fails, or in a shared segment (a
    failed fsync), recovery may return that record twice, which at-least-once delivery tolerates.

    A restarted log starts its first segment after every segment already in the directory,
    so ``read_all`` returns records in write order even if the clock went backwards.
    ``read`` accepts only handles naming a file directly inside ``log_directory``.

    ``write``/``clean``/``close`` are thread-safe; ``read``/``read_all`` take no lock and also
    work after ``close``; ``clean`` after ``close`` is ignored. Nothing touches the disk before
    the first write.
    """

    def __init__(
        self,
        log_directory: str,
        *,
        rolling_interval_s: int = 60,
        max_failures: int = 3,
        fsync: bool | FsyncPolicy = FsyncPolicy.FSYNC,
        close_file_after_write: bool = False,
        filesystem: fsspec.AbstractFileSystem | None = None,
        recovery_threads: int = 8,
    ) -> None:
        if rolling_interval_s <= 0:
            raise ValueError(f"rolling_interval_s must be positive, got {rolling_interval_s}")
        if max_failures < 1:
            raise ValueError(f"max_failures must be at least 1, got {max_failures}")
        if recovery_threads < 1:
            raise ValueError(f"recovery_threads must be at least 1, got {recovery_threads}")
        self._policy = FsyncPolicy.coerce(fsync)
        self._storage = open_storage(log_directory, filesystem, self._policy)
        self._interval_ms = rolling_interval_s * 1000
        self._max_failures = max_failures
        self._close_after_write = close_file_after_write or not self._storage.published_on_flush
        self._must_warn_forced_close = self._close_after_write and not close_file_after_write
        self._recovery_threads = recovery_threads
        self._lock = threading.Lock()
        self._writer: SegmentWriter | None = None
        self._writer_end_ms = -1
        self._last_start_ms = -1
        self._closed = False
        self._cleaner: ThreadPoolExecutor | None = None
        self._clean_refused = False
        self._write_failures = FailureLog(
            logger, f"write-ahead log write to {self.log_directory}", shared=True
        )
        # A store down for a while fails every clean in a row, and the writes beside them: one
        # traceback for the streak, as the writes have, not one per batch.
        self._clean_failures = FailureLog(
            logger, f"write-ahead log clean of {self.log_directory}", shared=True
        )

    @property
    def log_directory(self) -> str:
        """The directory as the storage sees it (absolute for local paths)."""
        return self._storage.directory

    # ------------------------------------------------------------ write

    def write(self, record: bytes, time_ms: int) -> RecordHandle:
        if type(record) is not bytes:
            # len() of a memoryview counts items, not bytes: frame the flat bytes instead.
            try:
                record = memoryview(record).cast("B")  # type: ignore[assignment]
            except TypeError as exc:
                raise TypeError(f"record must be contiguous bytes-like, got {type(record).__name__}") from exc
        # Segment names carry the time; anything else would make a file recovery cannot parse.
        if not isinstance(time_ms, int):
            raise TypeError(f"time_ms must be an int, got {type(time_ms).__name__}")
        if time_ms < 0:
            raise ValueError(f"time_ms must not be negative, got {time_ms}")
        # Checksumming needs no lock; doing it outside keeps the critical section to the syscalls.
        header = encode_header(record)
        with self._lock:
            if self._closed:
                raise WriteAheadLogClosedError(f"write to closed write-ahead log {self.log_directory}")
            if self._writer is not None and time_ms > self._writer_end_ms:
                # Outside the retry loop: this failure is the old segment's, not the new record's.
                self._close_rolled_writer(self._writer)
            if self._must_warn_forced_close:
                self._must_warn_forced_close = False
                self._warn_forced_close_once()
            failures = 0
            while True:
                writer: SegmentWriter | None = None
                try:
                    writer = self._writer_for(time_ms)
                    offset = writer.append(header, record)
                    if self._close_after_write:
                        self._close_writer()
                    self._write_failures.succeeded()
                    return RecordHandle(writer.path, offset, len(record))
                except Exception as exc:
                    # Never retry on the same file: after a failed fsync Linux may drop the dirty
                    # pages and report success on the next fsync; a fresh segment is honest.
                    failures += 1
                    self._abandon_writer()
                    left = ""
                    if self._close_after_write and writer is not None:
                        left = self._discard_failed_segment(writer.path)
                    if failures >= self._max_failures:
                        self._write_failures.failed(exc, f"attempt {failures} of {failures}, giving up{left}")
                        raise WriteAheadLogError(
                            f"write to {self.log_directory} failed after {failures} attempts: {exc}"
                        ) from exc
                    self._write_failures.failed(
                        exc, f"attempt {failures} of {self._max_failures}, retrying in a new segment{left}"
                    )

    def _writer_for(self, time_ms: int) -> SegmentWriter:
        writer = self._writer
        if writer is not None:
            return writer
        if self._last_start_ms < 0:
            # A restarted process may see an earlier clock; its segments must still sort last.
            self._last_start_ms = max((s.start_ms for s in self._list_segments()), default=-1)
        # Strictly increasing starts keep segment order == write order, even for equal or
        # backwards times (close-after-write, retries); end >= time keeps clean() safe.
        start = max(time_ms, self._last_start_ms + 1)
        for _ in range(_MAX_NAME_PROBES):
            end = start + self._interval_ms
            try:
                writer = self._storage.create_segment(self._storage.join(segment_name(start, end)))
            except FileExistsError:
                start += 1
                continue
            self._writer, self._writer_end_ms, self._last_start_ms = writer, end, start
            logger.debug("write-ahead log opened segment %s", writer.path)
            return writer
        raise WriteAheadLogError(f"no free segment name near log-{time_ms} in {self.log_directory}")

    def _warn_forced_close_once(self) -> None:
        # Once per process and directory: a receiver relaunched on the same log, or a log opened
        # per batch read, would otherwise repeat it.
        with _FORCED_CLOSE_WARNED_LOCK:
            if self.log_directory in _FORCED_CLOSE_WARNED:
                return
            _FORCED_CLOSE_WARNED.add(self.log_directory)
        logger.warning(
            "write-ahead log %s: this store publishes a file only when it is closed; "
            "closing every segment after its write (close_file_after_write forced on)",
            self.log_directory,
        )

    def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def _close_rolled_writer(self, writer: SegmentWriter) -> None:
        self._writer = None
        try:
            writer.close()
        except Exception as exc:
            logger.error("could not close write-ahead log segment %s", writer.path, exc_info=True)
            raise WriteAheadLogError(
                f"closing write-ahead log segment {writer.path} failed, records acknowledged in it "
                f"may be lost: {exc}"
            ) from exc

    def _discard_failed_segment(self, path: str) -> str:
        """Delete the one-record segment of a failed write attempt (it may have landed); what
        the attempt's failure line adds if that failed too ("" if not)."""
        try:
            self._storage.delete(path)
        except FileNotFoundError:
            pass  # nothing landed
        except Exception as exc:
            # Said in the attempt's one line: a second line per attempt doubles an outage's log.
            return f"; its segment {path} could not be deleted, recovery may read its record ({exc!r})"
        return ""

    def _abandon_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception as exc:
                # The write's own failure is logged with its traceback; this is its echo.
                logger.warning("could not close abandoned write-ahead log segment %s: %r", writer.path, exc)

    # ------------------------------------------------------------ read

    def read(self, handle: RecordHandle) -> bytes:
        path = handle.path
        if not self._storage.contains(path) or parse_segment_name(segment_basename(path)) is None:
            raise WriteAheadLogError(
                f"handle path {handle.path!r} is not a segment of write-ahead log {self.log_directory}"
            )
        try:
            data = self._storage.read_range(handle.path, handle.offset, HEADER_SIZE + handle.length)
        except FileNotFoundError:
            raise SegmentNotFoundError(handle.path) from None
        except OSError as exc:
            raise WriteAheadLogError(f"cannot read {handle}: {exc}") from exc
        try:
            length, crc = decode_header(data)
            if length != handle.length:
                raise CorruptRecordError(
                    handle.path,
                    handle.offset,
                    f"length mismatch: handle says {handle.length}, frame {length}",
                )
            payload = data[HEADER_SIZE:]
            verify_payload(length, crc, payload)
        except FrameError as exc:
            raise CorruptRecordError(handle.path, handle.offset, exc.reason) from None
        return payload

    def read_all(self) -> Iterator[bytes]:
        """Every intact record of every segment, oldest segment first (including the one being written)."""
        paths = [segment.path for segment in self._list_segments()]
        if self._close_after_write:
            return read_segments_parallel(self._storage, paths, self._recovery_threads)
        return read_segments(self._storage, paths)

    def _list_segments(self) -> list[SegmentInfo]:
        try:
            return segments_in_order(self._storage.list_entries())
        except OSError as exc:
            raise WriteAheadLogError(
                f"cannot list write-ahead log directory {self.log_directory}: {exc}"
            ) from exc

    # ------------------------------------------------------------ clean / close

    def clean(self, thresh_time_ms: int, wait_for_completion: bool) -> None:
        """Delete segments whose end time is before ``thresh_time_ms``, never the one being written."""
        with self._lock:
            if self._closed:
                # As Spark: a cleanup racing with shutdown is dropped, not turned into an error in
                # whatever timer thread asked for it. The next process's clean deletes the same files.
                logger.warning(
                    "clean(%d) on closed write-ahead log %s ignored", thresh_time_ms, self.log_directory
                )
                return
            if self._cleaner is None:
                self._cleaner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wal-clean")
            try:
                task: Future[None] = self._cleaner.submit(self._delete_older_than, thresh_time_ms)
            except RuntimeError:
                # concurrent.futures takes no new work once the interpreter exits; a writer still
                # running then (its owner did not close it) must not fail every batch for it.
                # Dropped as a clean racing with close is: the next process deletes the same files.
                if not self._clean_refused:
                    logger.warning(
                        "write-ahead log %s: cleaning refused, the interpreter is exiting", self.log_directory
                    )
                    self._clean_refused = True
                return
        if wait_for_completion:
            task.result()

    def _delete_older_than(self, thresh_time_ms: int) -> None:
        try:
            segments = self._list_segments()
        except WriteAheadLogError as exc:
            self._clean_failures.failed(exc, "listing its segments")
            return
        # Snapshot the open segment AFTER listing: anything listed that is not open now was
        # created before the listing, and is never reopened, so it is safe to delete.
        with self._lock:
            current = self._writer.path if self._writer is not None else None
        expired = [s for s in segments if s.end_ms < thresh_time_ms and s.path != current]
        logger.info(
            "write-ahead log clean: deleting %d segment(s) ending before %d", len(expired), thresh_time_ms
        )
        failed: list[tuple[str, Exception]] = []
        for segment in expired:
            try:
                self._storage.delete(segment.path)
            except FileNotFoundError:
                logger.debug("write-ahead log segment %s already gone", segment.path)
            except Exception as exc:
                # Left for the next clean, which lists it again; the others still go.
                failed.append((segment.path, exc))
        if failed:
            path, first = failed[0]
            self._clean_failures.failed(
                first, f"deleting {len(failed)} of {len(expired)} segment(s), {path} first"
            )
        else:
            self._clean_failures.succeeded()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            cleaner, self._cleaner = self._cleaner, None
            try:
                self._close_writer()
            except Exception:
                logger.warning("error closing write-ahead log segment", exc_info=True)
        if cleaner is not None:
            # Deletions already asked for finish; a restart would only have to redo them.
            cleaner.shutdown(wait=True)
