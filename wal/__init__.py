"""Standalone write-ahead log (Spark Streaming's WAL, rebuilt): no Spark, Kafka or reliable_kafka imports.

Public API::

    RecordHandle(path: str, offset: int, length: int)     # frozen; .to_dict(), RecordHandle.from_dict(d)
    WriteAheadLog (ABC, context manager)
        write(record: bytes, time_ms: int) -> RecordHandle
        read(handle: RecordHandle) -> bytes
        read_all() -> Iterator[bytes]
        clean(thresh_time_ms: int, wait_for_completion: bool) -> None
        close() -> None
    FileBasedWriteAheadLog(log_directory: str, *, rolling_interval_s: int = 60, max_failures: int = 3,
                           fsync: bool | FsyncPolicy = FsyncPolicy.FSYNC,
                           close_file_after_write: bool = False,
                           filesystem: fsspec.AbstractFileSystem | None = None,
                           recovery_threads: int = 8)
    BatchedWriteAheadLog(wrapped: WriteAheadLog, *, close_timeout_s: float = 30.0,
                         max_batch_records: int = 1024, max_batch_bytes: int = 16 MiB)
        + read_batch(handle) -> list[bytes]   (read() raises UnsupportedOperationError, as Spark)
    FsyncPolicy.FSYNC | FDATASYNC | NONE       # fsync=True/False mean FSYNC/NONE
    WriteAheadLogError > CorruptRecordError(path, offset, reason), SegmentNotFoundError(path),
                         WriteAheadLogClosedError, UnsupportedOperationError

On-disk record frame: see ``wal.framing``; batch aggregate: see ``wal.aggregate``.
"""

from wal.api import RecordHandle, WriteAheadLog
from wal.batched import BatchedWriteAheadLog
from wal.durability import FsyncPolicy
from wal.errors import (
    CorruptRecordError,
    SegmentNotFoundError,
    UnsupportedOperationError,
    WriteAheadLogClosedError,
    WriteAheadLogError,
)
from wal.file_based import FileBasedWriteAheadLog

__all__ = [
    "BatchedWriteAheadLog",
    "CorruptRecordError",
    "FileBasedWriteAheadLog",
    "FsyncPolicy",
    "RecordHandle",
    "SegmentNotFoundError",
    "UnsupportedOperationError",
    "WriteAheadLog",
    "WriteAheadLogClosedError",
    "WriteAheadLogError",
]
