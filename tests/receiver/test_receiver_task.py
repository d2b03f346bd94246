"""The executor side of a receiver job, run in this process against a real tracker socket."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from reliable_kafka.receiver import receiver_task
from reliable_kafka.receiver.descriptor import ReceiverDescriptor
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.receiver.receiver_task import ReceiverTaskDescription
from reliable_kafka.rpc import new_secret
from reliable_kafka.scheduler.listener import StreamingListenerReceiverError
from reliable_kafka.scheduler.receiver_scheduling_policy import ExecutorCacheTaskLocation
from reliable_kafka.scheduler.receiver_tracker import ReceiverTracker
from reliable_kafka.scheduler.tracker_server import ReceiverTrackerServer
from tests.support.scheduler_fakes import CounterReceiver, FakeStream, FakeStreamingContext, quick_settings

HOST, EXECUTOR = "127.0.0.1", "7"
SECRET = new_secret()


def unbuildable_receiver() -> Receiver:
    raise RuntimeError("no such receiver configuration")


@pytest.fixture
def on_an_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Spark's TaskContext would tell a first task attempt on executor 7."""
    monkeypatch.setattr(receiver_task, "task_attempt_number", lambda: 0)
    monkeypatch.setattr(receiver_task, "current_executor", lambda: (HOST, EXECUTOR))
    monkeypatch.setattr(receiver_task, "current_executor_bind_address", lambda: HOST)


@pytest.fixture
def served_tracker() -> Iterator[tuple[ReceiverTracker, FakeStreamingContext, ReceiverTrackerServer]]:
    """A tracker that launches nothing itself, behind a tracker socket with secret ``SECRET``."""
    ssc = FakeStreamingContext([FakeStream(0, CounterReceiver)], quick_settings())
    tracker = ssc.receiver_tracker(
        skip_receiver_launch=True, executors=[ExecutorCacheTaskLocation(HOST, EXECUTOR)]
    )
    tracker.start()
    tracker.schedule(ssc.graph.get_receiver_input_streams())  # as its launcher would
    server = ReceiverTrackerServer(tracker, SECRET)
    server.start()
    yield tracker, ssc, server
    server.stop()
    tracker.stop(graceful=False)


def test_a_receiver_that_cannot_be_created_at_each_launch_is_logged_and_reported_once(
    on_an_executor: None,
    served_tracker: tuple[ReceiverTracker, FakeStreamingContext, ReceiverTrackerServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    tracker, ssc, server = served_tracker
    description = ReceiverTaskDescription(
        stream_id=0,
        receiver=ReceiverDescriptor(f"{__name__}:unbuildable_receiver"),
        settings=quick_settings().model_dump(mode="json"),
        checkpoint_dir=None,
        tracker_host=HOST,
        tracker_port=server.address[1],
        secret=SECRET,
        app_id="test-app",
        launch=1,
    )
    caplog.set_level(logging.WARNING, logger="reliable_kafka.scheduler.receiver_tracker")
    for _ in range(3):
        assert "could not be created" in receiver_task._run(description)

    (reported,) = ssc.bus.of_type(StreamingListenerReceiverError)
    assert "RuntimeError: no such receiver configuration" in reported.receiver_info.last_error
    failed = "Receiver 0 failed (deregistered: Could not create receiver 0 on executor 7)"
    assert [r.getMessage() for r in caplog.records] == [
        f"{failed}: RuntimeError: no such receiver configuration",
        *(
            "Receiver 0 failed again (deregistered: Could not create receiver 0 on executor 7), "
            f"{n} failures in a row: the same error"
            for n in (2, 3)
        ),
    ]
    assert tracker.failure_streak(0) == 1  # one launch here: the tracker launches none itself
