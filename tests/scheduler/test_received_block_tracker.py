"""ReceivedBlockTracker (BEHAVIOURS.md, "Driver: trackers and jobs"): allocation, metadata WAL,
recovery and cleanup, against real write-ahead log files."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from reliable_kafka.checkpoint_lease import CheckpointLeaseLostError
from reliable_kafka.scheduler.driver_write_ahead_log import checkpoint_dir_to_log_dir
from reliable_kafka.scheduler.received_block_events import (
    EVENT_MAGIC,
    AllocatedBlocks,
    BatchAllocationEvent,
    BatchCleanupEvent,
    BatchCompletionEvent,
    BatchDeallocationEvent,
    BlockAdditionEvent,
    decode_event,
    encode_event,
)
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker
from reliable_kafka.settings import WriteAheadLogSettings
from tests.support import ManualClock
from tests.support.scheduler_fakes import block_ids, block_info
from wal import FileBasedWriteAheadLog, RecordHandle, WriteAheadLog, WriteAheadLogError
from wal.failure_log import mark_reported

STREAMS = [0, 1]


def wal_settings(*, batching: bool = True) -> WriteAheadLogSettings:
    # 1 s segments so that cleanup has whole segments to delete; fsync off keeps the tests quick.
    return WriteAheadLogSettings(driver_allow_batching=batching, driver_rolling_interval_s=1, fsync=False)


def tracker_on(
    checkpoint: Path | None, clock: ManualClock, *, recover: bool = True, batching: bool = True
) -> ReceivedBlockTracker:
    return ReceivedBlockTracker.create(
        STREAMS,
        None if checkpoint is None else str(checkpoint),
        wal_settings(batching=batching),
        recover_from_write_ahead_log=recover,
        now_ms=clock,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000)


@pytest.fixture
def tracker(tmp_path: Path, clock: ManualClock) -> Iterator[ReceivedBlockTracker]:
    t = tracker_on(tmp_path, clock)
    yield t
    t.stop()


def test_added_blocks_stay_unallocated_until_a_batch_takes_them_all(tracker: ReceivedBlockTracker) -> None:
    s0 = [block_info(0) for _ in range(5)]
    s1 = [block_info(1) for _ in range(3)]
    for info in [*s0, *s1]:
        assert tracker.add_block(info)

    assert tracker.has_unallocated_received_blocks()
    assert block_ids(tracker.get_unallocated_blocks(0)) == block_ids(s0)
    assert tracker.get_blocks_of_batch(1000) == {}

    tracker.allocate_blocks_to_batch(1000)

    assert block_ids(tracker.get_blocks_of_batch_and_stream(1000, 0)) == block_ids(s0)
    assert block_ids(tracker.get_blocks_of_batch_and_stream(1000, 1)) == block_ids(s1)
    assert not tracker.has_unallocated_received_blocks()
    assert tracker.get_unallocated_blocks(0) == []


def test_an_empty_batch_gets_an_empty_list_per_stream(tracker: ReceivedBlockTracker) -> None:
    tracker.allocate_blocks_to_batch(1000)
    assert tracker.get_blocks_of_batch(1000) == {0: [], 1: []}
    assert tracker.get_blocks_of_batch_and_stream(1000, 0) == []


def test_allocating_at_or_before_the_last_allocated_time_does_nothing(tracker: ReceivedBlockTracker) -> None:
    first = block_info(0)
    tracker.add_block(first)
    tracker.allocate_blocks_to_batch(2000)
    late = [block_info(0), block_info(1)]
    for info in late:
        tracker.add_block(info)

    tracker.allocate_blocks_to_batch(2000)
    tracker.allocate_blocks_to_batch(1000)

    assert tracker.allocated_batch_times() == [2000]
    assert block_ids(tracker.get_blocks_of_batch_and_stream(2000, 0)) == [first.block_id]
    assert tracker.get_blocks_of_batch(1000) == {}
    assert tracker.has_unallocated_received_blocks()

    tracker.allocate_blocks_to_batch(3000)
    assert block_ids(tracker.get_blocks_of_batch_and_stream(3000, 0)) == [late[0].block_id]
    assert block_ids(tracker.get_blocks_of_batch_and_stream(3000, 1)) == [late[1].block_id]


class DelegatingLog(WriteAheadLog):
    """A real log underneath; subclasses change what its writes report."""

    def __init__(self, wrapped: WriteAheadLog) -> None:
        self.wrapped = wrapped

    def write(self, record: bytes, time_ms: int) -> RecordHandle:
        return self.wrapped.write(record, time_ms)

    def read(self, handle: RecordHandle) -> bytes:
        return self.wrapped.read(handle)

    def read_all(self) -> Iterator[bytes]:
        return self.wrapped.read_all()

    def clean(self, thresh_time_ms: int, wait_for_completion: bool) -> None:
        self.wrapped.clean(thresh_time_ms, wait_for_completion)

    def close(self) -> None:
        self.wrapped.close()


class FailingAllocationLog(DelegatingLog):
    """A real log whose batch-allocation writes fail while ``failing`` is set."""

    def __init__(self, wrapped: WriteAheadLog) -> None:
        super().__init__(wrapped)
        self.failing = False

    def write(self, record: bytes, time_ms: int) -> RecordHandle:
        if self.failing and isinstance(decode_event(record), BatchAllocationEvent):
            raise WriteAheadLogError("disk full")
        return self.wrapped.write(record, time_ms)


def test_failed_allocation_write_leaves_blocks_unallocated_and_the_next_allocation_succeeds(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = FailingAllocationLog(FileBasedWriteAheadLog(str(tmp_path / "log"), fsync=False))
    tracker = ReceivedBlockTracker(STREAMS, log, now_ms=clock)
    blocks = [block_info(0) for _ in range(3)]
    for info in blocks:
        tracker.add_block(info)

    log.failing = True
    tracker.allocate_blocks_to_batch(1000)
    assert tracker.get_blocks_of_batch(1000) == {}
    assert block_ids(tracker.get_unallocated_blocks(0)) == block_ids(blocks)
    assert tracker.last_allocated_batch_time is None

    log.failing = False
    tracker.allocate_blocks_to_batch(2000)
    assert block_ids(tracker.get_blocks_of_batch_and_stream(2000, 0)) == block_ids(blocks)
    assert not tracker.has_unallocated_received_blocks()

    # What the log holds agrees: a restarted tracker sees batch 2000 only.
    recovered = ReceivedBlockTracker(STREAMS, log, recover_from_write_ahead_log=True, now_ms=clock)
    assert recovered.allocated_batch_times() == [2000]
    assert block_ids(recovered.get_blocks_of_batch_and_stream(2000, 0)) == block_ids(blocks)
    tracker.stop()


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
def test_recovery_restores_unallocated_blocks_allocated_and_pending_batches(
    tmp_path: Path, clock: ManualClock, batching: bool
) -> None:
    handle = RecordHandle(str(tmp_path / "receivedData" / "0" / "log-1-2"), 0, 42)
    tracker = tracker_on(tmp_path, clock, batching=batching)
    batch1 = [block_info(0, handle=handle, metadata={"offset_ranges": [["t", 0, 0, 10]]}), block_info(1)]
    for info in batch1:
        tracker.add_block(info)
    tracker.allocate_blocks_to_batch(1000)
    clock.advance(1000)
    batch2 = [block_info(0), block_info(0)]
    for info in batch2:
        tracker.add_block(info)
    tracker.allocate_blocks_to_batch(2000)
    tracker.mark_batch_completed(1000)
    unallocated = [block_info(1), block_info(0, num_records=None)]
    for info in unallocated:
        tracker.add_block(info)
    tracker.stop()

    restarted = tracker_on(tmp_path, clock, batching=batching)
    try:
        assert restarted.allocated_batch_times() == [1000, 2000]
        assert restarted.get_blocks_of_batch(1000) == {0: [batch1[0]], 1: [batch1[1]]}
        assert restarted.get_blocks_of_batch(2000) == {0: batch2, 1: []}
        assert restarted.pending_batch_times() == [2000]
        assert restarted.get_unallocated_blocks(0) == [unallocated[1]]
        assert restarted.get_unallocated_blocks(1) == [unallocated[0]]
        assert restarted.last_allocated_batch_time == 2000
        # The replayed batch time keeps its recovered blocks; the next batch takes the rest.
        restarted.allocate_blocks_to_batch(2000)
        assert restarted.get_blocks_of_batch(2000) == {0: batch2, 1: []}
        restarted.allocate_blocks_to_batch(3000)
        assert restarted.get_blocks_of_batch(3000) == {0: [unallocated[1]], 1: [unallocated[0]]}
    finally:
        restarted.stop()


def test_recovery_reads_a_log_written_with_the_other_batching_setting(
    tmp_path: Path, clock: ManualClock
) -> None:
    tracker = tracker_on(tmp_path, clock, batching=False)
    blocks = [block_info(0) for _ in range(3)]
    for info in blocks:
        tracker.add_block(info)
    tracker.stop()

    restarted = tracker_on(tmp_path, clock, batching=True)
    assert block_ids(restarted.get_unallocated_blocks(0)) == block_ids(blocks)
    restarted.add_block(extra := block_info(0))
    restarted.stop()

    again = tracker_on(tmp_path, clock, batching=False)
    assert block_ids(again.get_unallocated_blocks(0)) == [*block_ids(blocks), extra.block_id]
    again.stop()


def test_without_recovery_the_log_is_not_replayed(tmp_path: Path, clock: ManualClock) -> None:
    tracker = tracker_on(tmp_path, clock)
    tracker.add_block(block_info(0))
    tracker.stop()
    fresh = tracker_on(tmp_path, clock, recover=False)
    assert not fresh.has_unallocated_received_blocks()
    fresh.stop()


def segment_files(checkpoint: Path) -> list[str]:
    log_dir = Path(checkpoint_dir_to_log_dir(str(checkpoint)))
    return sorted(p.name for p in log_dir.iterdir() if p.name.startswith("log-"))


def test_cleanup_drops_old_batches_deletes_old_segments_and_survives_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    tracker = tracker_on(tmp_path, clock)
    for batch_time in (1000, 2000, 3000, 4000):
        clock.now_ms = batch_time
        tracker.add_block(block_info(0))
        tracker.allocate_blocks_to_batch(batch_time)
        tracker.mark_batch_completed(batch_time)
    before = segment_files(tmp_path)
    clock.now_ms = 10_000

    dropped = tracker.cleanup_old_batches(3000, wait_for_completion=True)

    assert dropped == [1000, 2000]
    assert tracker.allocated_batch_times() == [3000, 4000]
    assert tracker.get_blocks_of_batch(1000) == {}
    after = segment_files(tmp_path)
    assert before == ["log-1000-2000", "log-3000-4000"]
    # Only segments that end before the threshold go; the cleanup event itself opened a new one.
    assert after == ["log-10000-11000", "log-3000-4000"]
    tracker.stop()

    restarted = tracker_on(tmp_path, clock)
    assert restarted.allocated_batch_times() == [3000, 4000]
    assert restarted.pending_batch_times() == []
    restarted.stop()


def test_cleanup_event_replayed_over_allocations_still_in_the_log(tmp_path: Path, clock: ManualClock) -> None:
    # One long segment: cleaning deletes no file, so recovery must apply the cleanup event itself.
    settings = WriteAheadLogSettings(driver_rolling_interval_s=3600, fsync=False)
    tracker = ReceivedBlockTracker.create(STREAMS, str(tmp_path), settings, now_ms=clock)
    for batch_time in (1000, 2000, 3000):
        tracker.add_block(block_info(0))
        tracker.allocate_blocks_to_batch(batch_time)
    tracker.cleanup_old_batches(2500, wait_for_completion=True)
    tracker.stop()

    restarted = ReceivedBlockTracker.create(
        STREAMS, str(tmp_path), settings, recover_from_write_ahead_log=True, now_ms=clock
    )
    assert restarted.allocated_batch_times() == [3000]
    assert restarted.pending_batch_times() == [3000]
    restarted.stop()


def test_cleanup_threshold_must_be_in_the_past(tracker: ReceivedBlockTracker, clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="not before the current time"):
        tracker.cleanup_old_batches(clock.now_ms, wait_for_completion=True)


def test_without_a_checkpoint_directory_the_metadata_log_is_off(tmp_path: Path, clock: ManualClock) -> None:
    tracker = tracker_on(None, clock)
    assert not tracker.is_write_ahead_log_enabled
    info = block_info(0)
    assert tracker.add_block(info)
    tracker.allocate_blocks_to_batch(1000)
    assert tracker.get_blocks_of_batch(1000) == {0: [info], 1: []}
    tracker.stop()
    assert list(tmp_path.iterdir()) == []


def test_the_metadata_log_lives_under_the_checkpoint_directory(
    tracker: ReceivedBlockTracker, tmp_path: Path
) -> None:
    assert tracker.is_write_ahead_log_enabled
    tracker.add_block(block_info(0))
    assert (tmp_path / "receivedBlockMetadata").is_dir()
    assert segment_files(tmp_path)


def test_concurrent_additions_through_the_batched_log_lose_nothing(tracker: ReceivedBlockTracker) -> None:
    infos = [[block_info(stream % 2) for _ in range(50)] for stream in range(8)]

    def add_all(batch: list) -> None:
        for info in batch:
            assert tracker.add_block(info)

    threads = [threading.Thread(target=add_all, args=(batch,)) for batch in infos]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tracker.allocate_blocks_to_batch(1000)
    allocated = tracker.get_blocks_of_batch(1000)
    assert sum(len(v) for v in allocated.values()) == 400


def test_events_are_msgpack_not_pickle() -> None:
    info = block_info(0, handle=RecordHandle("/cp/receivedData/0/log-1-2", 7, 99), metadata={"k": [1, "x"]})
    events = [
        BlockAdditionEvent(info),
        BatchAllocationEvent(1000, AllocatedBlocks({0: [info], 1: []})),
        BatchCompletionEvent(1000),
        BatchCleanupEvent((1000, 2000)),
    ]
    for event in events:
        data = encode_event(event)
        assert data.startswith(EVENT_MAGIC)
        assert isinstance(msgpack.unpackb(data[len(EVENT_MAGIC) :], raw=False), dict)
        assert decode_event(data) == event


def test_deallocated_batches_give_their_blocks_to_the_next_batch_also_after_recovery(
    tmp_path: Path, clock: ManualClock
) -> None:
    tracker = tracker_on(tmp_path, clock)
    pending = [block_info(0), block_info(1)]
    for info in pending:
        tracker.add_block(info)
    tracker.allocate_blocks_to_batch(1000)
    done = [block_info(0)]
    tracker.add_block(done[0])
    tracker.allocate_blocks_to_batch(2000)
    tracker.mark_batch_completed(2000)
    later = block_info(0)
    tracker.add_block(later)

    # Completed and unknown batches are not given back; the pending one goes before the queue.
    assert tracker.deallocate_batches([1000, 2000, 5000]) == [1000]
    assert tracker.pending_batch_times() == []
    assert tracker.get_unallocated_blocks(0) == [pending[0], later]
    assert tracker.get_unallocated_blocks(1) == [pending[1]]
    tracker.stop()

    restarted = tracker_on(tmp_path, clock)
    try:
        assert restarted.allocated_batch_times() == [2000]
        assert restarted.pending_batch_times() == []
        restarted.allocate_blocks_to_batch(3000)
        assert restarted.get_blocks_of_batch(3000) == {0: [pending[0], later], 1: [pending[1]]}
    finally:
        restarted.stop()


def test_a_deallocation_that_cannot_be_logged_leaves_the_batch_pending(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = FailingAllocationLog(FileBasedWriteAheadLog(str(tmp_path / "log"), fsync=False))
    tracker = ReceivedBlockTracker(STREAMS, log, now_ms=clock)
    info = block_info(0)
    tracker.add_block(info)
    tracker.allocate_blocks_to_batch(1000)
    log.wrapped.close()  # every later write fails
    try:
        assert tracker.deallocate_batches([1000]) == []
        assert tracker.pending_batch_times() == [1000]
        assert tracker.get_blocks_of_batch(1000)[0] == [info]
        assert tracker.get_unallocated_blocks(0) == []
    finally:
        tracker.stop()


def test_deallocation_events_round_trip() -> None:
    event = BatchDeallocationEvent((1000, 3000))
    assert decode_event(encode_event(event)) == event


class LandedButFailedLog(DelegatingLog):
    """A real log whose writes of the chosen event types land and then report a failure: a remote
    store's upload whose answer timed out, or whose permission change failed after it."""

    def __init__(self, wrapped: WriteAheadLog) -> None:
        super().__init__(wrapped)
        self.failing: tuple[type, ...] = ()

    def write(self, record: bytes, time_ms: int) -> RecordHandle:
        handle = self.wrapped.write(record, time_ms)
        if isinstance(decode_event(record), self.failing):
            raise WriteAheadLogError("upload answer timed out")
        return handle


def landed_but_failed_tracker(
    tmp_path: Path, clock: ManualClock
) -> tuple[ReceivedBlockTracker, LandedButFailedLog]:
    log = LandedButFailedLog(FileBasedWriteAheadLog(str(tmp_path / "log"), fsync=False))
    return ReceivedBlockTracker(STREAMS, log, now_ms=clock), log


def recovered_from(log: WriteAheadLog, clock: ManualClock) -> ReceivedBlockTracker:
    return ReceivedBlockTracker(STREAMS, log, recover_from_write_ahead_log=True, now_ms=clock)


def test_an_allocation_logged_although_its_write_failed_does_not_put_its_blocks_in_two_batches(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Batch 1000's allocation lands but fails: live, 1000 runs empty and 2000 takes the blocks.
    A driver killed before either completed must re-run them once, in 2000 only."""
    tracker, log = landed_but_failed_tracker(tmp_path, clock)
    blocks = [block_info(0), block_info(1)]
    for info in blocks:
        assert tracker.add_block(info)
    log.failing = (BatchAllocationEvent,)
    tracker.allocate_blocks_to_batch(1000)
    log.failing = ()
    clock.advance(1000)
    tracker.allocate_blocks_to_batch(2000)
    assert tracker.get_blocks_of_batch(1000) == {}
    assert tracker.get_blocks_of_batch(2000) == {0: [blocks[0]], 1: [blocks[1]]}

    recovered = recovered_from(log, clock)

    assert recovered.get_blocks_of_batch(2000) == {0: [blocks[0]], 1: [blocks[1]]}
    assert recovered.get_blocks_of_batch(1000) == {0: [], 1: []}
    assert not recovered.has_unallocated_received_blocks()


def test_a_block_reported_again_after_a_failed_report_is_allocated_once_also_after_recovery(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The receiver retries a report whose write landed but failed (same block id): the log holds
    the block's addition twice; the next batch, live or recovered, holds the block once."""
    tracker, log = landed_but_failed_tracker(tmp_path, clock)
    info = block_info(0)
    log.failing = (BlockAdditionEvent,)
    assert not tracker.add_block(info)
    log.failing = ()
    assert tracker.add_block(info)

    recovered = recovered_from(log, clock)
    assert block_ids(recovered.get_unallocated_blocks(0)) == [info.block_id]
    recovered.allocate_blocks_to_batch(1000)
    assert block_ids(recovered.get_blocks_of_batch_and_stream(1000, 0)) == [info.block_id]


def test_a_block_reported_twice_is_queued_once_and_not_logged_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The receiver's second report of a block the tracker has (its first answer was lost) is
    accepted without a second event, also once the block is in a batch."""
    tracker, log = landed_but_failed_tracker(tmp_path, clock)
    info = block_info(0)
    assert tracker.add_block(info)
    assert tracker.add_block(info)
    assert block_ids(tracker.get_unallocated_blocks(0)) == [info.block_id]
    tracker.allocate_blocks_to_batch(1000)
    assert tracker.add_block(info)
    assert not tracker.has_unallocated_received_blocks()

    events = [decode_event(r) for r in log.read_all()]
    assert [type(e) for e in events] == [BlockAdditionEvent, BatchAllocationEvent]
    tracker.allocate_blocks_to_batch(2000)
    assert tracker.get_blocks_of_batch(2000) == {0: [], 1: []}


def test_a_retried_write_that_left_its_record_twice_recovers_each_block_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Every event of the log twice in a row (a write retried in a new segment after its first
    copy landed): recovery gives the same state as the log without the copies."""
    tracker = tracker_on(tmp_path, clock, batching=False)
    first, second, queued = block_info(0), block_info(1), block_info(0)
    tracker.add_block(first)
    tracker.allocate_blocks_to_batch(1000)
    tracker.add_block(second)
    clock.advance(1000)
    tracker.allocate_blocks_to_batch(2000)
    tracker.add_block(queued)
    tracker.stop()
    written = FileBasedWriteAheadLog(checkpoint_dir_to_log_dir(str(tmp_path)), fsync=False)
    log = FileBasedWriteAheadLog(str(tmp_path / "doubled"), fsync=False)
    for record in written.read_all():
        log.write(record, clock())
        log.write(record, clock())

    recovered = recovered_from(log, clock)

    assert recovered.get_blocks_of_batch(1000) == {0: [first], 1: []}
    assert recovered.get_blocks_of_batch(2000) == {0: [], 1: [second]}
    recovered.allocate_blocks_to_batch(3000)
    assert recovered.get_blocks_of_batch(3000) == {0: [queued], 1: []}
    log.close()


class _RefusingFence:
    """A lease past its bound whose lapse the lease has reported (it marks its refusals so)."""

    def check(self) -> int:
        refused = CheckpointLeaseLostError("The lease on checkpoint c was last renewed 23.9 s ago")
        mark_reported(refused)
        raise refused


def test_a_refusal_the_lease_reported_is_one_warning_then_debug_lines(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Seen on an HDFS outage: each retry of the tracker's write said "failed again" at WARNING,
    although the lease had said why, once."""
    caplog.set_level(logging.DEBUG, "reliable_kafka.scheduler.received_block_tracker")
    tracker = ReceivedBlockTracker.create(
        STREAMS,
        str(tmp_path),
        wal_settings(),
        recover_from_write_ahead_log=False,
        now_ms=clock,
        fence=_RefusingFence(),
    )
    try:
        for _ in range(3):
            assert not tracker.add_block(block_info(0))
    finally:
        tracker.stop()
    lines = [(r.levelno, r.exc_info) for r in caplog.records if "metadata log failed" in r.getMessage()]
    assert lines == [(logging.WARNING, None), (logging.DEBUG, None), (logging.DEBUG, None)]
