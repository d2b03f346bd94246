"""ReceiverTracker (BEHAVIOURS.md, "Driver: trackers and jobs"): receivers launched in-process
through the real ReceiverSupervisor, restarted when they stop, stopped gracefully, rate updates,
and cleanup of old blocks and receiver WAL segments."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from pathlib import Path

import pytest

from reliable_kafka.receiver.fatal_error import FatalReceiverError
from reliable_kafka.receiver.tracker_endpoint import BlockLocation, ReceivedBlockInfo
from reliable_kafka.receiver.wal_block_handler import receiver_log_directory
from reliable_kafka.scheduler.driver_receiver_runner import DriverReceiverRunner
from reliable_kafka.scheduler.listener import (
    BatchInfo,
    StreamingListenerBatchCompleted,
    StreamingListenerReceiverError,
    StreamingListenerReceiverStarted,
    StreamingListenerReceiverStopped,
    StreamInputInfo,
)
from reliable_kafka.scheduler.rate_controller import ReceiverRateController
from reliable_kafka.scheduler.rate_estimator import PIDRateEstimator
from reliable_kafka.scheduler.receiver_scheduling_policy import ExecutorCacheTaskLocation, ReceiverState
from reliable_kafka.scheduler.receiver_tracker import (
    RECEIVER_WAL_WITHOUT_CHECKPOINT,
    ReceiverTracker,
    TrackerState,
    WriteAheadLogConfigError,
)
from reliable_kafka.storage.block_format import decode_block, encode_block
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.ui.status_store import StreamingStatusStore
from tests.support import ManualClock, wait_until
from tests.support.scheduler_fakes import (
    CounterReceiver,
    FakeStream,
    FakeStreamingContext,
    block_info,
    quick_settings,
)
from wal import RecordHandle


def counter_streams(n: int = 2, **receiver_args: object) -> list[FakeStream]:
    return [FakeStream(i, lambda: CounterReceiver(**receiver_args)) for i in range(n)]


def records_of(tracker: ReceiverTracker, stream_id: int, batch_times: list[int]) -> list[object]:
    records: list[object] = []
    for batch_time in batch_times:
        for info in tracker.get_blocks_of_batch_and_stream(batch_time, stream_id):
            data = tracker.block_store.get(info.block_id)
            assert data is not None, f"block {info.block_id} not in the block manager"
            records.extend(decode_block(data))
    return records


@pytest.fixture
def started() -> list[ReceiverTracker]:
    """Trackers a test started; stopped (not gracefully) if the test did not stop them."""
    trackers: list[ReceiverTracker] = []
    yield trackers
    for tracker in trackers:
        tracker.stop(graceful=False)


def test_receiver_wal_without_checkpoint_directory_is_an_error_that_says_so() -> None:
    ssc = FakeStreamingContext(counter_streams(1), quick_settings(wal={"enable": True}))
    with pytest.raises(WriteAheadLogConfigError) as raised:
        ssc.receiver_tracker()
    assert str(raised.value) == RECEIVER_WAL_WITHOUT_CHECKPOINT
    assert "streamingContext.checkpoint()" in str(raised.value)


def test_without_checkpoint_directory_the_tracker_keeps_metadata_in_memory() -> None:
    tracker = FakeStreamingContext(counter_streams(1), quick_settings()).receiver_tracker(
        skip_receiver_launch=True
    )
    assert not tracker.received_block_tracker.is_write_ahead_log_enabled


def test_receivers_run_and_a_graceful_stop_adds_every_record_received(started: list) -> None:
    streams = counter_streams(2)
    ssc = FakeStreamingContext(streams, quick_settings())
    tracker = ssc.receiver_tracker()
    started.append(tracker)
    tracker.start()
    wait_until(lambda: tracker.active_receiver_ids() == [0, 1], what="both receivers registered")
    wait_until(tracker.has_unallocated_blocks, what="blocks")
    tracker.allocate_blocks_to_batch(1000)

    tracker.stop(graceful=True)

    assert tracker.state is TrackerState.STOPPED
    assert tracker.all_receivers_stopped()
    tracker.allocate_blocks_to_batch(2000)
    for stream in streams:
        (receiver,) = stream.receivers
        assert receiver.next_value > 0
        assert records_of(tracker, stream.id, [1000, 2000]) == list(range(receiver.next_value))
        counted = sum(tracker.num_records_of_batch(t)[stream.id] for t in (1000, 2000))
        assert counted == receiver.next_value
    started_ids = sorted(e.receiver_info.stream_id for e in ssc.bus.of_type(StreamingListenerReceiverStarted))
    stopped = ssc.bus.of_type(StreamingListenerReceiverStopped)
    assert started_ids == [0, 1]
    assert sorted(e.receiver_info.stream_id for e in stopped) == [0, 1]
    assert not any(e.receiver_info.active for e in stopped)
    assert {e.receiver_info.name for e in stopped} == {"CounterReceiver-0", "CounterReceiver-1"}


def test_a_receiver_that_stops_is_restarted(started: list) -> None:
    (stream,) = counter_streams(1, stop_after=30)
    ssc = FakeStreamingContext([stream], quick_settings())
    tracker = ssc.receiver_tracker()
    started.append(tracker)
    tracker.start()

    wait_until(lambda: len(ssc.bus.of_type(StreamingListenerReceiverStarted)) >= 3, what="two restarts")
    tracker.stop(graceful=False)

    assert tracker.launch_count(0) >= 3
    assert len(stream.receivers) >= 3
    assert len(ssc.bus.of_type(StreamingListenerReceiverStopped)) >= 3
    # Nothing a stopped incarnation received is lost to the restart.
    tracker.allocate_blocks_to_batch(1000)
    assert tracker.num_records_of_batch(1000)[0] >= 60


def test_a_stopping_tracker_restarts_nothing_and_refuses_registration(started: list) -> None:
    (stream,) = counter_streams(1, stop_after=5)
    ssc = FakeStreamingContext([stream], quick_settings(receiver={"restart_delay_ms": 60_000}))
    tracker = ssc.receiver_tracker()
    started.append(tracker)
    tracker.start()
    wait_until(lambda: len(ssc.bus.of_type(StreamingListenerReceiverStopped)) == 1, what="self stop")

    began = time.monotonic()
    tracker.stop(graceful=True)

    assert time.monotonic() - began < 5, "a receiver waiting out its restart delay holds up stop"
    assert tracker.launch_count(0) == 1
    assert not tracker.register_receiver(0, "CounterReceiver", "host", "driver", object())


def test_registration_checks_stream_and_scheduled_executor() -> None:
    ssc = FakeStreamingContext(counter_streams(1), quick_settings())
    here = ExecutorCacheTaskLocation("host-a", "1")
    tracker = ssc.receiver_tracker(skip_receiver_launch=True, executors=[here])
    tracker.start()
    with pytest.raises(ValueError, match="unexpected id 7"):
        tracker.register_receiver(7, "CounterReceiver", "host-a", "1", object())
    assert not tracker.register_receiver(0, "CounterReceiver", "host-b", "9", object())
    assert tracker.register_receiver(0, "CounterReceiver", "host-a", "1", object())
    assert tracker.receiver_tracking_infos()[0].state is ReceiverState.ACTIVE
    tracker.stop(graceful=False)


def test_receiver_errors_reach_the_listener_bus() -> None:
    ssc = FakeStreamingContext(counter_streams(1), quick_settings(), clock=ManualClock(5000))
    tracker = ssc.receiver_tracker(skip_receiver_launch=True)
    tracker.report_error(0, "connection lost", "Traceback: boom")
    (event,) = ssc.bus.of_type(StreamingListenerReceiverError)
    assert event.receiver_info.last_error_message == "connection lost"
    assert event.receiver_info.last_error == "Traceback: boom"
    assert event.receiver_info.last_error_time_ms == 5000


def test_rate_updates_reach_the_receivers_rate_limiters(started: list) -> None:
    streams = counter_streams(2)
    ssc = FakeStreamingContext(streams, quick_settings())
    tracker = ssc.receiver_tracker()
    started.append(tracker)
    tracker.start()
    wait_until(lambda: tracker.active_receiver_ids() == [0, 1], what="receivers registered")

    tracker.send_rate_update(1, 250)

    assert streams[1].receivers[0].supervisor.get_current_rate_limit() == 250
    assert streams[0].receivers[0].supervisor.get_current_rate_limit() is None


def completed(
    batch_time: int, records: int, processing_ms: int, scheduling_ms: int
) -> StreamingListenerBatchCompleted:
    start = batch_time + scheduling_ms
    info = BatchInfo(batch_time, {0: StreamInputInfo(0, records)}, batch_time, start, start + processing_ms)
    return StreamingListenerBatchCompleted(info)


def test_backpressure_updates_from_completed_batches_reach_the_rate_limiter(started: list) -> None:
    (stream,) = counter_streams(1)
    ssc = FakeStreamingContext([stream], quick_settings())
    tracker = ssc.receiver_tracker()
    started.append(tracker)
    tracker.start()
    wait_until(lambda: tracker.active_receiver_ids() == [0], what="receiver registered")
    controller = ReceiverRateController(0, PIDRateEstimator(1000, min_rate=10), tracker.send_rate_update)
    try:
        controller.onBatchCompleted(completed(1000, 5000, 1000, 0))  # first batch: calibration only
        controller.onBatchCompleted(completed(2000, 2000, 1000, 0))
        wait_until(lambda: controller.get_latest_rate() == 2000, what="new rate")
        wait_until(lambda: stream.receivers[0].supervisor.get_current_rate_limit() == 2000, what="rate limit")
    finally:
        controller.stop()


def test_rate_controller_skips_batches_without_figures_for_its_stream() -> None:
    published: list[tuple[int, int]] = []
    controller = ReceiverRateController(
        3, PIDRateEstimator(1000), lambda stream_id, rate: published.append((stream_id, rate))
    )
    unfinished = BatchInfo(1000, {3: StreamInputInfo(3, 10)}, 1000, None, None)
    controller.on_batch_completed(StreamingListenerBatchCompleted(unfinished))
    controller.on_batch_completed(completed(2000, 10, 10, 0))  # stream 0, not 3
    controller.stop()
    assert controller.get_latest_rate() == -1
    assert published == []


def test_metadata_of_a_batch_still_running_is_never_cleared() -> None:
    clock = ManualClock(100_000)
    ssc = FakeStreamingContext(counter_streams(1), quick_settings(), clock=clock)
    tracker = ssc.receiver_tracker(skip_receiver_launch=True)
    batches = {}
    for batch_time in (1000, 2000, 3000, 4000):
        info = block_info(0)
        tracker.block_store.put(info.block_id, encode_block([]), StorageLevel.MEMORY_ONLY)
        tracker.add_block(info)
        tracker.allocate_blocks_to_batch(batch_time)
        batches[batch_time] = info
    for batch_time in (1000, 3000, 4000):  # batch 2000 is still running
        tracker.on_batch_completed(batch_time)

    tracker.cleanup_old_blocks_and_batches(4000)

    assert tracker.received_block_tracker.allocated_batch_times() == [2000, 3000, 4000]
    assert tracker.pending_batch_times() == [2000]
    assert not tracker.block_store.contains(batches[1000].block_id)
    assert all(tracker.block_store.contains(batches[t].block_id) for t in (2000, 3000, 4000))

    tracker.on_batch_completed(2000)
    tracker.cleanup_old_blocks_and_batches(4000)
    assert tracker.received_block_tracker.allocated_batch_times() == [4000]


class RecordingControl:
    def __init__(self) -> None:
        self.cleanups: list[int] = []

    def update_rate_limit(self, rate: int) -> None:
        pass

    def stop_receiver(self, message: str) -> None:
        pass

    def cleanup_old_blocks(self, thresh_time_ms: int) -> None:
        self.cleanups.append(thresh_time_ms)

    def remove_blocks(self, block_ids: list[str]) -> None:
        pass


def test_receivers_keep_every_block_a_pending_or_future_batch_may_read(tmp_path: Path, started: list) -> None:
    settings = quick_settings(wal={"enable": True})
    ssc = FakeStreamingContext(
        counter_streams(1), settings, checkpoint_dir=str(tmp_path), clock=ManualClock(100_000)
    )
    tracker = ssc.receiver_tracker(skip_receiver_launch=True)
    started.append(tracker)
    tracker.start()
    control = RecordingControl()
    assert tracker.register_receiver(0, "Counter", tracker.runner.local_executor.host, "driver", control)

    def stored_in(segment: str) -> ReceivedBlockInfo:
        return block_info(0, handle=RecordHandle(str(tmp_path / "receivedData" / "0" / segment), 0, 1))

    for batch_time, segment in ((9000, "log-8000-9000"), (10_000, "log-9500-10500")):
        tracker.add_block(stored_in(segment))
        tracker.allocate_blocks_to_batch(batch_time)
    tracker.on_batch_completed(9000)  # 10 000 still runs

    # Its blocks were stored during the batch before it and are remembered for one more batch.
    tracker.cleanup_old_blocks_and_batches(12_000)
    assert control.cleanups[-1] == 10_000 - 1000 - 1000

    # A block queued long ago (recovered, or returned by a batch that never ran) keeps its segment.
    tracker.add_block(stored_in("log-3000-4000"))
    tracker.cleanup_old_blocks_and_batches(12_000)
    assert control.cleanups[-1] == 3000

    tracker.allocate_blocks_to_batch(11_000)
    for batch_time in (10_000, 11_000):
        tracker.on_batch_completed(batch_time)
    tracker.cleanup_old_blocks_and_batches(12_000)
    assert control.cleanups[-1] == 12_000


def wal_segments(checkpoint: Path, stream_id: int) -> list[str]:
    directory = Path(receiver_log_directory(str(checkpoint), stream_id))
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("log-"))


def test_old_blocks_and_wal_segments_are_cleaned_after_batches_complete_and_remember_duration(
    tmp_path: Path, started: list
) -> None:
    (stream,) = counter_streams(1)
    settings = quick_settings(wal={"enable": True, "rolling_interval_s": 1})
    clock = ManualClock(int(time.time() * 1000) + 3_600_000)  # batch times far ahead of the WAL's clock
    ssc = FakeStreamingContext([stream], settings, checkpoint_dir=str(tmp_path), clock=clock)
    tracker = ssc.receiver_tracker()
    started.append(tracker)
    tracker.start()
    wait_until(tracker.has_unallocated_blocks, what="blocks")
    tracker.allocate_blocks_to_batch(clock.now_ms - 2000)
    old_blocks = [info.block_id for info in tracker.get_blocks_of_batch_and_stream(clock.now_ms - 2000, 0)]
    assert all(
        info.block_store_result.wal_record_handle
        for info in tracker.get_blocks_of_batch(clock.now_ms - 2000)[0]
    )
    wait_until(lambda: len(wal_segments(tmp_path, 0)) >= 2, timeout_s=5, what="a second WAL segment")
    wait_until(tracker.has_unallocated_blocks, what="more blocks")
    tracker.allocate_blocks_to_batch(clock.now_ms - 1000)
    tracker.on_batch_completed(clock.now_ms - 2000)
    tracker.on_batch_completed(clock.now_ms - 1000)
    segments_before = wal_segments(tmp_path, 0)

    remember_ms = 1000
    tracker.cleanup_old_blocks_and_batches(clock.now_ms - 1000 - remember_ms + 1)  # batch 2 s ago only

    assert tracker.received_block_tracker.allocated_batch_times() == [clock.now_ms - 1000]
    assert old_blocks and not any(tracker.block_store.contains(block_id) for block_id in old_blocks)
    # The receiver's handler drops WAL segments older than the threshold; the open one stays.
    wait_until(lambda: len(wal_segments(tmp_path, 0)) < len(segments_before), timeout_s=5, what="WAL clean")
    assert wal_segments(tmp_path, 0)


def test_events_after_a_graceful_stop_are_still_logged_and_no_thread_is_left(tmp_path: Path) -> None:
    threads_before = set(threading.enumerate())
    ssc = FakeStreamingContext(counter_streams(1), quick_settings(), checkpoint_dir=str(tmp_path))
    tracker = ssc.receiver_tracker(skip_receiver_launch=True)
    tracker.start()
    tracker.add_block(last := block_info(0))
    tracker.stop(graceful=True)
    # The job generator drains after the tracker stopped: the allocation must still be logged.
    tracker.allocate_blocks_to_batch(1000)
    tracker.on_batch_completed(1000)
    tracker.allocate_blocks_to_batch(2000)
    assert not (set(threading.enumerate()) - threads_before)

    restarted = ssc.receiver_tracker(skip_receiver_launch=True)
    assert restarted.get_blocks_of_batch(1000) == {0: [last]}
    assert restarted.pending_batch_times() == [2000]
    restarted.stop(graceful=False)


def test_a_receiver_failing_at_every_start_is_logged_in_full_once_and_told_to_the_listeners_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ssc = FakeStreamingContext(counter_streams(1), quick_settings(), clock=ManualClock(5000))
    here = ExecutorCacheTaskLocation("host-a", "1")
    tracker = ssc.receiver_tracker(skip_receiver_launch=True, executors=[here])
    tracker.start()
    error = "Traceback (most recent call last):\n  ...\nNoBrokersError: broker 0 unreachable\n"
    caplog.set_level(logging.INFO, logger="reliable_kafka.scheduler.receiver_tracker")

    def failed_start() -> None:
        assert tracker.register_receiver(0, "CounterReceiver", "host-a", "1", object())
        tracker.deregister_receiver(0, "Error starting receiver 0", error)

    for _ in range(4):
        failed_start()
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert lines == [
        "Receiver 0 failed (deregistered: Error starting receiver 0): NoBrokersError: broker 0 unreachable",
        *(
            f"Receiver 0 failed again (deregistered: Error starting receiver 0), {n} failures in a row: "
            "the same error"
            for n in (2, 3, 4)
        ),
    ]
    (reported,) = ssc.bus.of_type(StreamingListenerReceiverError)
    assert reported.receiver_info.last_error == error
    # The status page keeps the error while the receiver registers for its next failing start.
    assert tracker.register_receiver(0, "CounterReceiver", "host-a", "1", object())
    store = StreamingStatusStore(1000)
    for event in ssc.bus.events:
        getattr(store, event.listener_method)(event)
    (status,) = store.snapshot().receivers
    assert status.info.active
    assert (status.info.last_error_message, status.info.last_error) == ("Error starting receiver 0", error)

    caplog.clear()
    tracker.add_block(block_info(0))
    (recovered,) = caplog.records
    assert recovered.getMessage().startswith("Receiver 0 succeeded again after 4 failure(s)")
    assert tracker.failure_streak(0) == 0
    tracker.deregister_receiver(0, "Error starting receiver 0", error)  # a new streak: told again
    assert len(ssc.bus.of_type(StreamingListenerReceiverError)) == 2
    assert caplog.records[-1].getMessage().startswith("Receiver 0 failed (")
    tracker.stop(graceful=False)


class GivesUpReceiver(CounterReceiver):
    """Counts to five, then its receiving thread fails with an error no restart can mend."""

    def _receive(self) -> None:
        for value in range(5):
            self.store(value)
        raise FatalReceiverError("topic 'gone' does not exist in Kafka")


def test_a_fatal_receiver_error_ends_the_stream_once_and_reaches_await_termination(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Through ``start_receiving_thread``'s restart, which a FatalReceiverError turns into a stop;
    the other stream goes on."""
    streams = [FakeStream(0, GivesUpReceiver), FakeStream(1, CounterReceiver)]
    ssc = FakeStreamingContext(streams, quick_settings())
    tracker = ssc.receiver_tracker()
    caplog.set_level(logging.INFO, logger="reliable_kafka.scheduler.receiver_tracker")
    tracker.start()
    try:
        wait_until(lambda: ssc.errors, what="the error to reach awaitTermination")
        wait_until(lambda: tracker.active_receiver_ids() == [1], what="stream 0's receiver to deregister")
        assert tracker.stream_ended(0) and not tracker.stream_ended(1)
        assert tracker.launch_count(0) == 1
        # Stream 1 is still received: blocks keep coming after stream 0 ended.
        tracker.allocate_blocks_to_batch(1000)
        wait_until(tracker.has_unallocated_blocks, what="a block of stream 1 after stream 0 ended")
    finally:
        tracker.stop(graceful=False)
    (error,) = ssc.errors
    assert isinstance(error, FatalReceiverError)
    assert str(error) == (
        "Receiver 0 ended its stream: "
        "reliable_kafka.receiver.fatal_error.FatalReceiverError: topic 'gone' does not exist in Kafka"
    )
    assert tracker.launch_count(0) == 1
    events = ssc.bus.of_type(StreamingListenerReceiverError)
    (reported,) = [e for e in events if e.receiver_info.stream_id == 0]
    assert "topic 'gone' does not exist" in reported.receiver_info.last_error
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [f"{error} (Error in receiving thread counter-0); it is not launched again"]


class RemovalsControl(RecordingControl):
    def __init__(self) -> None:
        super().__init__()
        self.removed: list[str] = []

    def remove_blocks(self, block_ids: list[str]) -> None:
        self.removed.extend(block_ids)


class ExecutorsKeepBlocks(DriverReceiverRunner):
    """As in executor placement (and SplitReceiverRunner): receivers keep their blocks, so the
    tracker tells them which to remove."""

    keeps_blocks_after_stop = True


def test_a_removed_blocks_second_copy_is_removed_by_the_receivers_on_the_executor_keeping_it(
    started: list,
) -> None:
    executors = [ExecutorCacheTaskLocation("h1", "1"), ExecutorCacheTaskLocation("h2", "2")]
    ssc = FakeStreamingContext(counter_streams(3), quick_settings(), clock=ManualClock(100_000))
    tracker = ssc.receiver_tracker(skip_receiver_launch=True, executors=executors)
    tracker.runner = ExecutorsKeepBlocks(tracker, tracker.block_store, tracker.settings, None, executors)
    started.append(tracker)
    tracker.start()
    controls = {sid: RemovalsControl() for sid in range(3)}
    for sid, executor in ((0, executors[0]), (1, executors[1]), (2, executors[0])):
        assert tracker.register_receiver(sid, "Counter", executor.host, executor.executor_id, controls[sid])
    replicated = block_info(0)
    replica = BlockLocation("h2", "2", "/copies/input-0", 4040)
    replicated = dataclasses.replace(
        replicated, block_store_result=dataclasses.replace(replicated.block_store_result, replica=replica)
    )
    single = block_info(0)
    for info in (replicated, single):
        tracker.add_block(info)

    tracker.remove_blocks([replicated.block_id, single.block_id])

    assert controls[0].removed == [replicated.block_id.name, single.block_id.name]
    # Receiver 1 runs on the executor keeping the second copy (h2/2); receiver 2 shares no executor.
    assert controls[1].removed == [replicated.block_id.name]
    assert controls[2].removed == []
    # Removed once: a second removal of the same block asks nothing of the replica's executor.
    tracker.remove_blocks([replicated.block_id])
    assert controls[1].removed == [replicated.block_id.name]


def test_executors_holding_either_copy_of_a_block_are_kept_until_its_batch_completes(
    started: list,
) -> None:
    """What streaming dynamic allocation asks before removing an executor (its rule's other half,
    the choice, is tests/scheduler/test_executor_allocation_manager.py's)."""
    ssc = FakeStreamingContext(counter_streams(2), quick_settings(), clock=ManualClock(100_000))
    tracker = ssc.receiver_tracker(skip_receiver_launch=True)
    started.append(tracker)
    tracker.start()

    def kept(stream_id: int, executor: str, replica: str | None) -> ReceivedBlockInfo:
        info = block_info(stream_id)
        result = dataclasses.replace(
            info.block_store_result,
            location=BlockLocation("h1", executor, f"/blocks/{info.block_id.name}", 4040),
            replica=None if replica is None else BlockLocation("h2", replica, "/copies", 4041),
        )
        return dataclasses.replace(info, block_store_result=result)

    tracker.add_block(kept(0, "1", replica="2"))
    tracker.add_block(kept(1, "2", replica=None))
    assert tracker.executors_with_unprocessed_blocks() == {"1", "2"}  # queued
    tracker.allocate_blocks_to_batch(101_000)
    tracker.add_block(kept(0, "1", replica="3"))  # for the next batch
    assert tracker.executors_with_unprocessed_blocks() == {"1", "2", "3"}  # in a batch not completed
    tracker.on_batch_completed(101_000)
    assert tracker.executors_with_unprocessed_blocks() == {"1", "3"}
    tracker.allocate_blocks_to_batch(102_000)
    tracker.on_batch_completed(102_000)
    assert tracker.executors_with_unprocessed_blocks() == set()


class SlowExecutorsRunner(DriverReceiverRunner):
    """As in executor placement, where asking for the executors is py4j round trips: held until
    released."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.asking = threading.Event()
        self.release = threading.Event()

    def executors(self) -> list[ExecutorCacheTaskLocation]:
        self.asking.set()
        assert self.release.wait(30)
        return super().executors()


def test_a_registration_asks_for_the_executors_outside_the_trackers_lock() -> None:
    here = ExecutorCacheTaskLocation("host-a", "1")
    ssc = FakeStreamingContext(counter_streams(2), quick_settings())
    tracker = ssc.receiver_tracker(skip_receiver_launch=True, executors=[here])
    runner = SlowExecutorsRunner(tracker, tracker.block_store, tracker.settings, None, [here])
    tracker.runner = runner
    tracker.start()
    results: list[bool] = []
    registering = threading.Thread(
        target=lambda: results.append(
            tracker.register_receiver(0, "CounterReceiver", "host-a", "1", object())
        ),
        name="test-register",
    )
    registering.start()
    assert runner.asking.wait(5)
    # While the executors are asked, the tracker answers everyone else: the status page, a
    # block report, another receiver's deregistration.
    done = threading.Event()

    def others() -> None:
        tracker.receiver_tracking_infos()
        tracker.add_block(block_info(1))
        tracker.deregister_receiver(1, "stopped", "")
        done.set()

    other = threading.Thread(target=others, name="test-others")
    other.start()
    assert done.wait(5), "the tracker's lock was held across the executors' round trips"
    runner.release.set()
    registering.join(5)
    other.join(5)
    assert results == [True]
    assert tracker.receiver_tracking_infos()[0].state is ReceiverState.ACTIVE
    tracker.stop(graceful=False)


def test_a_registration_refused_after_asking_for_the_executors_is_still_refused() -> None:
    here = ExecutorCacheTaskLocation("host-a", "1")
    ssc = FakeStreamingContext(counter_streams(1), quick_settings())
    tracker = ssc.receiver_tracker(skip_receiver_launch=True, executors=[here])
    runner = SlowExecutorsRunner(tracker, tracker.block_store, tracker.settings, None, [here])
    runner.release.set()
    tracker.runner = runner
    tracker.start()
    assert not tracker.register_receiver(0, "CounterReceiver", "host-b", "9", object())
    assert tracker.register_receiver(0, "CounterReceiver", "host-a", "1", object())
    tracker.stop(graceful=False)
