"""A local master with more receivers than spare task slots runs some as tasks and the others in
the driver process (``SplitReceiverRunner``); both register from the executor "driver", so the
tracker tells the listeners (and the status page) which runs how."""

from __future__ import annotations

from pyspark import SparkContext

from reliable_kafka.scheduler.executor_receiver_runner import ExecutorReceiverRunner
from reliable_kafka.scheduler.listener import (
    StreamingListenerReceiverStarted,
    StreamingListenerReceiverStopped,
)
from reliable_kafka.scheduler.listener_events import RUNS_AS_DRIVER_PROCESS, RUNS_AS_TASK
from reliable_kafka.scheduler.split_receiver_runner import SplitReceiverRunner
from tests.support import ManualClock
from tests.support.scheduler_fakes import CounterReceiver, FakeStream, FakeStreamingContext, quick_settings


def test_the_tracker_reports_a_task_and_a_receiver_in_the_driver_process(spark_context: SparkContext) -> None:
    streams = [FakeStream(i, CounterReceiver) for i in range(2)]
    ssc = FakeStreamingContext(streams, quick_settings(), clock=ManualClock(1000))
    tracker = ssc.receiver_tracker(skip_receiver_launch=True)
    as_tasks = ExecutorReceiverRunner(tracker, spark_context, tracker.settings, None, lambda: 1000)
    try:
        tracker.runner = SplitReceiverRunner(as_tasks, tracker.runner, in_driver_ids={1})  # type: ignore[arg-type]
        tracker.start()
        # The local master's one executor, as Spark names it: both receivers register from it.
        (executor,) = tracker.runner.executors()
        assert executor.executor_id == "driver"
        for stream_id in (0, 1):
            assert tracker.register_receiver(stream_id, "Counter", executor.host, "driver", object())
        tracker.deregister_receiver(1, "stopped", "")

        started = [event.receiver_info for event in ssc.bus.of_type(StreamingListenerReceiverStarted)]
        assert [(r.stream_id, r.executor_id, r.runs_as) for r in started] == [
            (0, "driver", RUNS_AS_TASK),
            (1, "driver", RUNS_AS_DRIVER_PROCESS),
        ]
        (stopped,) = [event.receiver_info for event in ssc.bus.of_type(StreamingListenerReceiverStopped)]
        assert (stopped.stream_id, stopped.runs_as) == (1, RUNS_AS_DRIVER_PROCESS)
    finally:
        tracker.stop(graceful=False)
        as_tasks.release()
