"""Driver recovery without a checkpoint (BEHAVIOURS.md, "Driver: trackers and jobs"): a driver that
died after allocating a batch but before writing its first checkpoint leaves that batch pending in
the metadata log; a fresh start with the same checkpoint directory must still run its records
(read back from the receiver WAL) and let cleanup move past it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark import SparkContext

from reliable_kafka.checkpoint import read_checkpoint
from reliable_kafka.context import StreamingContext
from reliable_kafka.dstream.receiver_input_dstream import ReceiverInputDStream
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo, ReceivedBlockStoreResult
from reliable_kafka.receiver.wal_block_handler import receiver_log_directory
from reliable_kafka.scheduler.driver_write_ahead_log import checkpoint_dir_to_log_dir
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker
from reliable_kafka.scheduler.receiver_tracker import ReceiverTracker
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.storage.block_format import encode_block
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.util.clock import ManualClock
from tests.streaming.fakes import batch_ms, processed
from tests.support import wait_until
from tests.support.scheduler_fakes import CounterReceiver
from wal import FileBasedWriteAheadLog

OLD_BATCH_MS = 1_000_000
RESTART_MS = 2_000_000  # the new driver starts 1000 s later, on a grid of its own


class ReceivedStream(ReceiverInputDStream):
    def get_receiver(self) -> Receiver:
        return CounterReceiver()


def settings() -> StreamingSettings:
    return StreamingSettings(wal={"enable": True, "fsync": False}, receiver={"placement": "driver"})


def old_driver_allocates_a_batch_and_dies(checkpoint: str, records: list[int]) -> None:
    """What the killed driver left behind: the block in its receiver's WAL, its addition and the
    allocation of batch OLD_BATCH_MS in the metadata log, and no checkpoint file."""
    receiver_log = FileBasedWriteAheadLog(receiver_log_directory(checkpoint, 0), fsync=False)
    handle = receiver_log.write(encode_block(records), OLD_BATCH_MS - 500)
    receiver_log.close()
    block = ReceivedBlockInfo(
        0, len(records), None, ReceivedBlockStoreResult(StreamBlockId(0, 1), len(records), handle)
    )
    tracker = ReceivedBlockTracker.create(
        [0], checkpoint, settings().wal, recover_from_write_ahead_log=True, now_ms=lambda: OLD_BATCH_MS
    )
    tracker.add_block(block)
    tracker.allocate_blocks_to_batch(OLD_BATCH_MS)
    tracker.stop()


def metadata_segments(checkpoint: str) -> list[str]:
    return sorted(
        p.name for p in Path(checkpoint_dir_to_log_dir(checkpoint)).iterdir() if p.name.startswith("log-")
    )


def test_a_fresh_start_runs_the_batch_a_dead_driver_allocated_and_cleanup_moves_past_it(
    spark_context: SparkContext, tmp_path: Path
) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    ssc = StreamingContext(
        spark_context,
        1,
        settings(),
        clock=(clock := ManualClock(RESTART_MS)),
        receiver_tracker_factory=lambda ssc: ReceiverTracker(
            ssc, skip_receiver_launch=True, listener_bus=ssc.listener_bus, clock=ssc.clock
        ),
    )
    ssc.checkpoint(checkpoint)
    old_driver_allocates_a_batch_and_dies(checkpoint, records := list(range(25)))
    assert read_checkpoint(checkpoint) is None
    old_segments = metadata_segments(checkpoint)
    batches: dict[int, list[Any]] = {}

    def keep(time: datetime, rdd: Any) -> None:
        batches[batch_ms(time)] = rdd.collect()

    ReceivedStream(ssc).foreachRDD(keep)
    ssc.start()
    try:
        tracker = ssc.scheduler.receiver_tracker
        assert isinstance(tracker, ReceiverTracker)
        first = RESTART_MS + 1000
        for time_ms in (first, first + 1000, first + 2000):
            clock.set_time(time_ms)
            wait_until(lambda t=time_ms: processed(ssc, t), what=f"batch {time_ms}")
        assert batches[first] == records
        assert batches[first + 1000] == batches[first + 2000] == []
        assert tracker.pending_batch_times() == []
        allocated = tracker.received_block_tracker.allocated_batch_times()
        assert allocated and min(allocated) > OLD_BATCH_MS
        # The old run's metadata log segments are cleaned, not pinned by a batch that never ran.
        wait_until(
            lambda: not set(old_segments) & set(metadata_segments(checkpoint)), what="old metadata cleaned"
        )
    finally:
        ssc.stop(stopSparkContext=False)
