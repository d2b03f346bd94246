"""Spark's BatchedWriteAheadLog: group commit on top of any other write-ahead log."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

from wal.aggregate import aggregate, deaggregate
from wal.api import RecordHandle, WriteAheadLog
from wal.commit_queue import CommitQueue, PendingWrite
from wal.errors import (
    CorruptRecordError,
    UnsupportedOperationError,
    WriteAheadLogClosedError,
    WriteAheadLogError,
)
from wal.failure_log import FailureLog

logger = logging.getLogger(__name__)

# A batch waits for stragglers at most as long as the previous write took, and never more
# than this: a writer that went away costs at most one extra write's latency, once.
_MAX_GATHER_S = 0.002


class BatchedWriteAheadLog(WriteAheadLog):
    """Concurrent writes become one write of the wrapped log: one aggregate, one fsync.

    Each ``write`` blocks until its batch is durable and returns the handle of the whole
    aggregate (all writers of a batch get the same handle). The aggregate is stamped with
    the largest time in it, so ``clean`` never drops it while any of its records is young.
    Within a batch, records are ordered by time (stable for equal times).

    As in Spark, ``read(handle)`` is unsupported (the handle names a batch, not a record);
    use ``read_batch(handle)`` for all records of that batch, or ``read_all()``.
    If the commit thread dies (e.g. ``SystemExit`` from the wrapped log), the batch in flight
    and every queued write fail with ``WriteAheadLogError`` and later writes raise
    ``WriteAheadLogClosedError``; no writer waits forever.
    ``close`` fails writes still queued with ``WriteAheadLogClosedError``, waits up to
    ``close_timeout_s`` for the batch in flight, and closes the wrapped log.
    """

    def __init__(
        self,
        wrapped: WriteAheadLog,
        *,
        close_timeout_s: float = 30.0,
        max_batch_records: int = 1024,
        max_batch_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        if max_batch_records < 1 or max_batch_bytes < 1:
            raise ValueError("max_batch_records and max_batch_bytes must be positive")
        self._wrapped = wrapped
        self._close_timeout_s = close_timeout_s
        self._max_records = max_batch_records
        self._max_bytes = max_batch_bytes
        self._queue = CommitQueue()
        self._close_lock = threading.Lock()
        self._closed = False
        self._in_flight: list[PendingWrite] = []
        self._last_batch_size = 1
        self._last_write_s = 0.0
        self._write_failures = FailureLog(logger, "batched write-ahead log write")
        self._thread = threading.Thread(target=self._run, name="wal-batched-writer", daemon=True)
        self._thread.start()

    @property
    def wrapped(self) -> WriteAheadLog:
        return self._wrapped

    def write(self, record: bytes, time_ms: int) -> RecordHandle:
        if type(record) is not bytes:
            if not isinstance(record, bytearray | memoryview):
                # Fail this caller alone instead of poisoning the whole batch at aggregation time.
                raise TypeError(f"record must be bytes-like, got {type(record).__name__}")
            record = bytes(record)
        if not isinstance(time_ms, int):
            raise TypeError(f"time_ms must be an int, got {type(time_ms).__name__}")
        pending = PendingWrite(record, time_ms)
        if not self._queue.put(pending):
            raise WriteAheadLogClosedError("write to closed batched write-ahead log")
        pending.done.acquire()
        error = pending.error
        if error is not None:
            # A fresh exception per writer: one instance raised in many threads tangles tracebacks.
            if isinstance(error, WriteAheadLogClosedError):
                raise WriteAheadLogClosedError(str(error))
            raise WriteAheadLogError(f"batched write failed: {error}") from error
        assert pending.handle is not None
        return pending.handle

    # ------------------------------------------------------------ commit thread

    def _run(self) -> None:
        try:
            while True:
                batch = self._queue.take(
                    self._last_batch_size, self._last_write_s, self._max_records, self._max_bytes
                )
                if not batch:
                    return
                self._last_batch_size = len(batch)
                self._commit(batch)
        finally:
            # Whatever stopped this thread, nobody may wait for it: fail what is queued, refuse more.
            for pending in self._queue.close():
                pending.resolve(None, WriteAheadLogError("batched write-ahead log commit thread stopped"))
            self._close_wrapped()

    def _commit(self, batch: list[PendingWrite]) -> None:
        self._in_flight = batch
        try:
            batch.sort(key=lambda p: p.time_ms)
            started = time.monotonic()
            handle = self._wrapped.write(aggregate([p.record for p in batch]), batch[-1].time_ms)
            self._last_write_s = min(time.monotonic() - started, _MAX_GATHER_S)
        except BaseException as exc:
            self._write_failures.failed(exc, f"{len(batch)} record(s)")
            for pending in batch:
                pending.resolve(None, exc)
            if not isinstance(exc, Exception):
                raise  # SystemExit and the like end the thread; _run fails everything after it
        else:
            self._write_failures.succeeded()
            for pending in batch:
                pending.resolve(handle, None)
        finally:
            self._in_flight = []

    def _close_wrapped(self) -> None:
        try:
            self._wrapped.close()
        except Exception:
            logger.warning("error closing the wrapped write-ahead log", exc_info=True)

    # ------------------------------------------------------------ read / clean / close

    def read(self, handle: RecordHandle) -> bytes:
        raise UnsupportedOperationError(
            "read() is not supported on a batched write-ahead log: a handle names a whole batch; "
            "use read_batch() or read_all()"
        )

    def read_batch(self, handle: RecordHandle) -> list[bytes]:
        """Every record of the batch a handle (as returned by ``write``) points at."""
        try:
            return deaggregate(self._wrapped.read(handle))
        except ValueError as exc:
            raise CorruptRecordError(handle.path, handle.offset, str(exc)) from None

    def read_all(self) -> Iterator[bytes]:
        for data in self._wrapped.read_all():
            try:
                records = deaggregate(data)
            except ValueError:
                # The frame checksum passed, so this is a foreign record, not disk damage.
                logger.error("skipping a write-ahead log record that is not a batch", exc_info=True)
                continue
            yield from records

    def clean(self, thresh_time_ms: int, wait_for_completion: bool) -> None:
        self._wrapped.clean(thresh_time_ms, wait_for_completion)

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        for pending in self._queue.close():
            _fail_closed(pending)
        self._thread.join(self._close_timeout_s)
        if self._thread.is_alive():
            # The wrapped log is stuck. Its writers get an error (their records may still land,
            # which at-least-once tolerates); the thread closes the wrapped log when it returns.
            logger.error("batched write-ahead log writer did not stop within %.1f s", self._close_timeout_s)
            for pending in list(self._in_flight):
                _fail_closed(pending)


def _fail_closed(pending: PendingWrite) -> None:
    pending.resolve(
        None,
        WriteAheadLogClosedError(
            f"batched write-ahead log closed before the write with time {pending.time_ms} was done"
        ),
    )
