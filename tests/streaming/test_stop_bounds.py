"""The context's stop is bounded, and a SIGTERM during it waits for it (in process, fake tracker)."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import pytest

from reliable_kafka.context import StreamingContextState
from reliable_kafka.settings import StreamingSettings
from tests.streaming.conftest import ManualRun
from tests.streaming.fakes import FakeReceiverTracker


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
        assert "spark.streaming.stopTimeout 50 ms" in caplog.text
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
        # Spark's default (no stopGracefullyOnShutdown): no handler of ours until the stop.
        signal.signal(signal.SIGTERM, lambda signum, frame: states_when_passed_on.append(run.ssc.getState()))
        run.ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        run.ssc.start()
        run.ssc.stop(stopSparkContext=False)
        assert states_when_passed_on == [StreamingContextState.STOPPED]
        assert tracker.call_names()[-1] == "release"  # the stop ran to its end first
    finally:
        signal.signal(signal.SIGTERM, original)
