"""StreamingContext life cycle: states, one active context, stops (graceful or not), errors."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark import SparkContext

from reliable_kafka import context as context_module
from reliable_kafka.checkpoint import write_checkpoint
from reliable_kafka.context import StreamingContext, StreamingContextState
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.util.clock import ManualClock
from tests.streaming.conftest import ManualRun
from tests.streaming.fakes import FakeReceiverInputStream, FakeReceiverTracker
from tests.streaming.sample_checkpoint import CHECKPOINT
from tests.support import read_json_lines, wait_until

SMALL_BATCH_S = 0.1


def test_states_go_initialized_active_stopped_and_start_after_stop_raises(make_run) -> None:
    run: ManualRun = make_run()
    ssc = run.ssc
    ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
    assert ssc.getState() is StreamingContextState.INITIALIZED
    ssc.start()
    assert ssc.getState() is StreamingContextState.ACTIVE
    ssc.start()  # a second start only warns, as in Spark
    with pytest.raises(ValueError, match="after starting a context"):
        ssc.queueStream([[2]])
    ssc.stop(stopSparkContext=False)
    assert ssc.getState() is StreamingContextState.STOPPED
    with pytest.raises(ValueError, match="already been stopped"):
        ssc.start()
    ssc.stop(stopSparkContext=False)  # stopping twice is harmless
    assert ssc.awaitTerminationOrTimeout(0) is True


def test_stop_before_start_and_missing_outputs(make_run) -> None:
    unstarted = make_run().ssc
    unstarted.stop(stopSparkContext=False)
    assert unstarted.getState() is StreamingContextState.STOPPED
    with pytest.raises(ValueError, match="already been stopped"):
        unstarted.start()

    no_outputs = make_run().ssc
    no_outputs.queueStream([[1]])
    with pytest.raises(ValueError, match="No output operations registered"):
        no_outputs.start()
    assert no_outputs.getState() is StreamingContextState.STOPPED


def test_only_one_context_is_active(make_run) -> None:
    first, second = make_run().ssc, make_run().ssc
    for ssc in (first, second):
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
    assert StreamingContext.getActive() is None
    first.start()
    assert StreamingContext.getActive() is first
    assert StreamingContext.getActiveOrCreate(None, lambda: second) is first
    with pytest.raises(ValueError, match="Only one StreamingContext"):
        second.start()
    first.stop(stopSparkContext=False)
    assert StreamingContext.getActive() is None
    second.start()
    assert StreamingContext.getActive() is second


def test_receiver_tracker_starts_before_the_job_generator(make_run) -> None:
    class OrderCheckingTracker(FakeReceiverTracker):
        generator_running_at_start: bool | None = None

        def start(self) -> None:
            self.generator_running_at_start = self.ssc.scheduler.job_generator._thread is not None
            super().start()

    tracker = OrderCheckingTracker()
    run: ManualRun = make_run(tracker=tracker)
    tracker.ssc = run.ssc
    run.ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
    run.ssc.start()
    assert tracker.generator_running_at_start is False
    run.ssc.stop(stopSparkContext=False)
    assert tracker.stopped_graceful is False


def test_await_termination_or_timeout(make_run) -> None:
    run: ManualRun = make_run()
    run.ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
    run.ssc.start()
    assert run.ssc.awaitTerminationOrTimeout(0.05) is False
    threading.Timer(0.1, run.ssc.stop, kwargs={"stopSparkContext": False}).start()
    run.ssc.awaitTermination()
    assert run.ssc.getState() is StreamingContextState.STOPPED


class FlushingTracker(FakeReceiverTracker):
    """Like real receivers, pushes one last block while being stopped."""

    def __init__(self, stream_id: int = 0, last_block: int = 7) -> None:
        super().__init__()
        self.stream_id = stream_id
        self.last_block = last_block

    def stop(self, graceful: bool) -> None:
        if graceful:
            self.add_block(self.stream_id, self.last_block)
        super().stop(graceful)


def test_graceful_stop_processes_every_received_record(sc) -> None:
    tracker = FlushingTracker()
    ssc = StreamingContext(sc, SMALL_BATCH_S, receiver_tracker_factory=lambda _ssc: tracker)
    stream = FakeReceiverInputStream(ssc)
    counted: list[int] = []

    def slow_count(rdd: Any) -> None:
        counted.append(rdd.count())
        time.sleep(0.15)  # slower than a batch: job sets queue up behind this one

    stream.foreachRDD(slow_count)
    received = 0
    ssc.start()
    try:
        for i in range(1, 6):
            tracker.add_block(stream.id, i)
            received += i
            time.sleep(0.05)
        wait_until(lambda: len(ssc.scheduler.get_pending_times()) >= 2, what="a backlog of batches")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    received += tracker.last_block

    assert sum(counted) == received
    assert not tracker.has_unallocated_blocks()
    assert ssc.scheduler.get_pending_times() == []
    # Receivers were stopped first; batches were still allocated afterwards.
    names = tracker.call_names()
    assert names.index("stop") < len(names) - 1 - names[::-1].index("allocate")
    allocated = {time_ms for name, time_ms in tracker.calls if name == "allocate"}
    assert allocated <= tracker.completed


def test_non_graceful_stop_drops_queued_batches_and_leaves_them_incomplete(sc) -> None:
    tracker = FakeReceiverTracker()
    ssc = StreamingContext(sc, 0.05, receiver_tracker_factory=lambda _ssc: tracker)
    ran: list[int] = []

    def slow(rdd: Any) -> None:
        time.sleep(0.3)
        ran.append(1)

    ssc.queueStream([]).foreachRDD(slow)
    ssc.start()
    wait_until(lambda: len(ssc.scheduler.get_pending_times()) >= 4, what="a backlog of batches")
    stopped_at = time.monotonic()
    ssc.stop(stopSparkContext=False, stopGraceFully=False)
    assert time.monotonic() - stopped_at < 3
    generated = {time_ms for name, time_ms in tracker.calls if name == "allocate"}
    # Queued batches were dropped: not run, and not reported complete (a restart runs them again).
    assert len(ran) < len(generated)
    assert len(tracker.completed) <= len(ran)
    assert generated - tracker.completed
    assert tracker.stopped_graceful is False


def test_stop_from_inside_a_job(make_run) -> None:
    run: ManualRun = make_run()
    run.ssc.queueStream([[1]]).foreachRDD(lambda rdd: run.ssc.stop(stopSparkContext=False))
    run.ssc.start()
    run.clock.set_time(1000)
    assert run.ssc.awaitTerminationOrTimeout(20) is True
    wait_until(lambda: run.ssc.getState() is StreamingContextState.STOPPED)


def test_get_or_create_stops_the_console_progress_bar_before_recovering(sc, tmp_path, monkeypatch) -> None:
    """getOrCreate's recovery runs Spark jobs before start() (it reads state checkpoints back):
    Spark's progress bar (``[Stage 0:> ...]``) was drawn over the recovery's log. Stopped once."""
    stopped: list[SparkContext] = []

    def stop_console_progress(spark_context: SparkContext) -> bool:
        stopped.append(spark_context)
        return False  # the session's SparkContext keeps its bar: only when it is asked matters

    monkeypatch.setattr(context_module, "stop_console_progress", stop_console_progress)
    write_checkpoint(tmp_path, CHECKPOINT)

    def setup() -> StreamingContext:
        ssc = StreamingContext(sc, 1, clock=ManualClock(CHECKPOINT.checkpoint_time_ms))
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        return ssc

    ssc = StreamingContext.getOrCreate(str(tmp_path), setup)
    assert stopped == [sc]  # before start(), where the checkpoint's state is read
    ssc.start()
    ssc.stop(stopSparkContext=False)
    assert stopped == [sc]


def test_default_tracker_is_the_real_receiver_tracker(sc, tmp_path) -> None:
    from reliable_kafka.scheduler.receiver_tracker import ReceiverTracker

    settings = StreamingSettings.from_spark_conf({})
    ssc = StreamingContext(sc, SMALL_BATCH_S, settings)
    ssc.checkpoint(str(tmp_path / "checkpoint"))
    seen: list[int] = []
    ssc.queueStream([[1, 2], [3]]).foreachRDD(lambda rdd: seen.extend(rdd.collect()))
    ssc.start()
    try:
        assert isinstance(ssc.scheduler.receiver_tracker, ReceiverTracker)
        wait_until(lambda: sorted(seen) == [1, 2, 3], what="both batches")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    assert (tmp_path / "checkpoint" / "metadata").exists()


@pytest.mark.parametrize("graceful", [True, False])
def test_the_sigterm_handler_is_installed_on_start_and_restored_on_stop(make_run, graceful: bool) -> None:
    previous = signal.getsignal(signal.SIGTERM)
    run: ManualRun = make_run(settings=StreamingSettings(jobs={"stop_gracefully_on_shutdown": graceful}))
    run.ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
    run.ssc.start()
    assert signal.getsignal(signal.SIGTERM) is not previous
    run.ssc.stop(stopSparkContext=False)
    assert signal.getsignal(signal.SIGTERM) is previous


def test_sigterm_without_graceful_shutdown_goes_to_the_applications_own_handler(
    make_run, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark's default (no stopGracefullyOnShutdown) with a handler of the application's: that
    handler owns SIGTERM, as in pyspark 2.4, and may stop gracefully itself; an immediate stop
    first would drop the batches it means to finish. (Without one, the immediate stop:
    tests/e2e/test_bounded_stop.py, since SIGTERM's default action then ends the process.)"""
    original = signal.getsignal(signal.SIGTERM)
    run: ManualRun = make_run()
    passed_on: list[StreamingContextState] = []
    try:
        signal.signal(signal.SIGTERM, lambda signum, frame: passed_on.append(run.ssc.getState()))
        run.ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        run.ssc.start()
        with caplog.at_level(logging.INFO, logger="reliable_kafka"):
            signal.raise_signal(signal.SIGTERM)
        assert passed_on == [StreamingContextState.ACTIVE]  # the application's handler decides
        said = [r.getMessage() for r in caplog.records if "application's own handler" in r.getMessage()]
        assert len(said) == 1, said
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
        run.stop_gracefully()
    finally:
        signal.signal(signal.SIGTERM, original)


def test_a_sigterm_handler_chained_over_ours_is_called_once_then_the_one_before_ours(make_run) -> None:
    original = signal.getsignal(signal.SIGTERM)
    calls: list[str] = []
    try:
        signal.signal(signal.SIGTERM, lambda signum, frame: calls.append("before"))
        graceful = StreamingSettings(jobs={"stop_gracefully_on_shutdown": True})
        run: ManualRun = make_run(settings=graceful)
        run.ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        run.ssc.start()
        ours = signal.getsignal(signal.SIGTERM)
        assert callable(ours)

        def over(signum: int, frame: Any) -> None:
            calls.append("over")
            ours(signum, frame)

        signal.signal(signal.SIGTERM, over)  # a library's handler, installed later, chaining to ours
        # Stopped first (a graceful stop would wait for the manual clock): ours only chains now.
        run.ssc.stop(stopSparkContext=False)
        assert signal.getsignal(signal.SIGTERM) is over  # not ours to restore any more
        signal.raise_signal(signal.SIGTERM)
        # Once each: ours calls the handler before it, instead of raising the signal into `over` again.
        assert calls == ["over", "before"]
    finally:
        signal.signal(signal.SIGTERM, original)


def test_sigterm_stops_gracefully_processing_every_record_received(tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.streaming.sigterm_child", str(output)],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:

        def entries() -> list[dict[str, int]]:
            return read_json_lines(output)

        wait_until(
            lambda: sum(e.get("count", 0) for e in entries()) > 0, timeout_s=120, what="a non-empty batch"
        )
        child.send_signal(signal.SIGTERM)
        # The previous (default) SIGTERM action still ends the process, after the graceful stop.
        assert child.wait(timeout=120) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    done = entries()
    received = [e["received"] for e in done if "received" in e]
    assert len(received) == 1, done
    batches = [e for e in done if "count" in e]
    assert sum(e["count"] for e in batches) == received[0]
    assert sum(e["sum"] for e in batches) == received[0] * (received[0] - 1) // 2


def test_settings_given_to_the_context_override_only_their_fields_of_the_spark_conf(sc) -> None:
    """``settings=`` used to replace the SparkConf's streaming keys: the WAL asked for in the
    SparkConf was silently off once any setting was given."""
    live_conf = sc._jsc.sc().conf()  # what sc.getConf() copies
    live_conf.set("spark.streaming.receiver.writeAheadLog.enable", "true")
    live_conf.set("spark.streaming.ui.port", "4070")
    try:
        ssc = StreamingContext(sc, 2, settings=StreamingSettings(ui={"port": 4061}))
    finally:
        live_conf.remove("spark.streaming.receiver.writeAheadLog.enable")
        live_conf.remove("spark.streaming.ui.port")
    assert ssc.settings.wal.enable is True  # from the SparkConf
    assert ssc.settings.ui.port == 4061  # given: over the SparkConf's 4070
    assert ssc.settings.receiver.block_interval_ms == 200  # neither: Spark's default


def test_a_second_stop_meanwhile_leaves_the_stopping_mark_with_the_first(make_run, monkeypatch) -> None:
    # What a SIGTERM waits for: the stop under way, marked once, until that stop is over.
    ssc = make_run().ssc
    ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
    ssc.start()
    in_scheduler_stop, release = threading.Event(), threading.Event()
    scheduler_stop = ssc.scheduler.stop

    def held_stop(graceful: bool) -> None:
        in_scheduler_stop.set()
        assert release.wait(30)
        scheduler_stop(graceful)

    monkeypatch.setattr(ssc.scheduler, "stop", held_stop)
    first = threading.Thread(target=ssc.stop, kwargs={"stopSparkContext": False}, name="test-first-stop")
    first.start()
    assert in_scheduler_stop.wait(5)
    second = threading.Thread(target=ssc.stop, kwargs={"stopSparkContext": False}, name="test-second-stop")
    second.start()
    assert ssc._stopping_thread is first
    assert not ssc._mark_stopping()  # a stop under way: nobody else takes the mark
    assert not ssc._stop_finished.is_set()
    release.set()
    first.join(10)
    second.join(10)
    assert ssc._stopping_thread is None and ssc._stop_finished.is_set()
    assert ssc.getState() is StreamingContextState.STOPPED
