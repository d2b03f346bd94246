"""The driver's metadata write-ahead log: where it lives under the checkpoint directory and how it
is built (Spark's ``WriteAheadLogUtils.createLogForDriver``)."""

from __future__ import annotations

from reliable_kafka.settings import WriteAheadLogSettings
from reliable_kafka.util.wal_at import write_ahead_log_at
from wal import BatchedWriteAheadLog, WriteAheadLog

METADATA_LOG_DIRECTORY = "receivedBlockMetadata"


def checkpoint_dir_to_log_dir(checkpoint_dir: str) -> str:
    """Spark's ``ReceivedBlockTracker.checkpointDirToLogDir``: ``<checkpoint>/receivedBlockMetadata``."""
    return f"{checkpoint_dir.rstrip('/')}/{METADATA_LOG_DIRECTORY}"


def create_driver_write_ahead_log(
    checkpoint_dir: str, settings: WriteAheadLogSettings, *, after_stop: bool = False
) -> WriteAheadLog:
    """Spark's ``WriteAheadLogUtils.createLogForDriver``, with group commit when allowed.

    ``after_stop``: the log for the few events that follow a tracker stop (the batches a graceful
    stop still runs): one file per write, so it holds no thread and no open file.
    """
    # On a remote checkpoint, reached as StreamingContext.checkpoint recorded for this process.
    log: WriteAheadLog = write_ahead_log_at(
        checkpoint_dir_to_log_dir(checkpoint_dir),
        rolling_interval_s=settings.driver_rolling_interval_s,
        max_failures=settings.driver_max_failures,
        close_file_after_write=settings.driver_close_file_after_write or after_stop,
        fsync=settings.fsync,
    )
    if settings.driver_allow_batching and not after_stop:
        log = BatchedWriteAheadLog(log, close_timeout_s=settings.driver_batching_timeout_ms / 1000)
    return log
