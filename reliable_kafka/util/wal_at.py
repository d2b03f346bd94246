"""A write-ahead log at a URL: the local disk natively, HDFS/S3/... through fsspec with the options
that say how to reach them (``util/filesystems.py``)."""

from __future__ import annotations

from typing import Any

from reliable_kafka.util.filesystems import FilesystemOptions, locate
from wal import FileBasedWriteAheadLog


def write_ahead_log_at(
    url: str, options: FilesystemOptions | None = None, **kwargs: Any
) -> FileBasedWriteAheadLog:
    """``FileBasedWriteAheadLog`` in ``url``; ``options`` default to what this process was told
    (``filesystems.configure``). Record handles name paths within the filesystem, so a reader
    opens the log through the same URL's filesystem (see ``BlockPartition``)."""
    location = locate(url, options)
    return FileBasedWriteAheadLog(location.path, filesystem=location.fs, **kwargs)
