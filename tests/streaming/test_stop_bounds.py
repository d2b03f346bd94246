"""The context's stop is bounded, and a SIGTERM during it waits for it (in process, fake tracker)."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import pytest
from pyspark import SparkContext

from reliable_kafka.context import StreamingContext, StreamingContextState
from reliable_kafka.settings import StreamingSettings
from tests.streaming.conftest import ManualRun
from tests.streaming.fakes import FakeReceiverTracker
from tests.support import wait_until


class StuckTracker(FakeReceiverTracker):
    """A tracker whose stop hangs, as one waiting on a ZooKeeper that is gone, until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def stop(self, graceful: bool) -> None:
        super().stop(graceful)
        self.release.wait()


def test_a_scheduler_that_never_stops_is_abandoned_after_the_stop_timeout(
    make_run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tracker = StuckTracker()
    run: ManualRun = make_run(settings=StreamingSettings(jobs={"stop_timeout_ms": 50}), tracker=tracker)
    run.ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
    run.ssc.start()
    try:
        with caplog.at_level(logging.WARNING):
            run.ssc.stop(stopSparkContext=False)
        assert run.ssc.getState() is StreamingContextState.STOPPED
        assert run.ssc.awaitTerminationOrTimeout(0) is True
        assert "Abandoned waiting for thread stop the job scheduler" in caplog.text
        assert "in stop\n    self.release.wait()" in caplog.text  # where it was stuck
        # The bound it gave up after, named as the one it announced.
        assert "Abandoned waiting for thread stop the job scheduler after 0.05 s" in caplog.text
        assert "did not stop within 0.05 s (spark.streaming.stopTimeout)" in caplog.text
    finally:
        tracker.release.set()


class SignallingTracker(FakeReceiverTracker):
    """Sends SIGTERM twice while the context stops. From the stop's helper thread: Python runs the
    handler on the main thread only once that wakes from its wait for the helper, a delay a real
    SIGTERM landing on another thread has too."""

    def stop(self, graceful: bool) -> None:
        super().stop(graceful)
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)


def test_sigterms_during_a_stop_on_the_main_thread_are_passed_on_once_after_it(make_run: Any) -> None:
    original = signal.getsignal(signal.SIGTERM)
    states_when_passed_on: list[StreamingContextState] = []
    tracker = SignallingTracker()
    run: ManualRun = make_run(tracker=tracker)
    try:
        # The application's handler, which ours chains to.
        signal.signal(signal.SIGTERM, lambda signum, frame: states_when_passed_on.append(run.ssc.getState()))
        run.ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        run.ssc.start()
        run.ssc.stop(stopSparkContext=False)
        assert states_when_passed_on == [StreamingContextState.STOPPED]
        assert tracker.call_names()[-1] == "release"  # the stop ran to its end first
    finally:
        signal.signal(signal.SIGTERM, original)


def test_a_graceful_stop_with_a_backlog_says_so_and_keeps_to_the_bound_it_named(
    sc: SparkContext, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch's output hangs and batches queue behind it. The graceful stop says at once, at
    WARNING, what is queued and its bound; the queue runs on past gracefulStopTimeout (as Spark's
    job executor does) and is given up in time to end within that bound, named the same way.
    Before, the stop said nothing until the context abandoned its scheduler at the bound, with
    its stack, and named stopTimeout alone."""
    tracker = FakeReceiverTracker()
    settings = StreamingSettings(jobs={"graceful_stop_timeout_ms": 200, "stop_timeout_ms": 3_000})
    ssc = StreamingContext(sc, 0.05, settings, receiver_tracker_factory=lambda _ssc: tracker)
    release = threading.Event()
    ssc.queueStream([]).foreachRDD(lambda rdd: release.wait(60))  # the first batch's sink hangs
    ssc.start()
    try:
        wait_until(lambda: len(ssc.scheduler.get_pending_times()) >= 4, what="a backlog of batches")
        with caplog.at_level(logging.INFO, logger="reliable_kafka"):
            ssc.stop(stopSparkContext=False, stopGraceFully=True)
    finally:
        release.set()
    bound = "3.2 s (spark.streaming.gracefulStopTimeout 0.2 s + spark.streaming.stopTimeout 3 s)"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings  # leaving the running job behind is the stop's doing: INFO
    assert warnings[0].startswith("Stopping gracefully with ")
    assert f"queued and 1 running: processing what was received, within {bound} at most" in warnings[0]
    assert warnings[1].startswith("Graceful stop: ")
    assert f"not processed, to stop within {bound}" in warnings[1]
    assert ssc.getState() is StreamingContextState.STOPPED
    assert not tracker.completed  # nothing behind the hung batch ran: each runs again after a restart
