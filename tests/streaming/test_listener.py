"""The listener bus on its own, and the events a running context sends through it."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from reliable_kafka.scheduler.listener import (
    BatchInfo,
    ReceiverInfo,
    StreamingListener,
    StreamingListenerBatchCompleted,
    StreamingListenerReceiverStarted,
    StreamingListenerStreamingStarted,
    StreamInputInfo,
)
from reliable_kafka.scheduler.listener_bus import StreamingListenerBus
from tests.streaming.conftest import ManualRun
from tests.support import wait_until


class Recorder(StreamingListener):
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.threads: set[str] = set()

    def _record(self, event: Any) -> None:
        self.events.append(event)
        self.threads.add(threading.current_thread().name)

    onStreamingStarted = _record
    onReceiverStarted = _record
    onBatchSubmitted = _record
    onBatchStarted = _record
    onBatchCompleted = _record
    onOutputOperationStarted = _record
    onOutputOperationCompleted = _record

    def names(self) -> list[str]:
        return [type(e).__name__.removeprefix("StreamingListener") for e in self.events]


def started(time_ms: int) -> StreamingListenerStreamingStarted:
    return StreamingListenerStreamingStarted(time_ms)


def test_bus_delivers_in_order_on_its_own_thread_including_events_posted_before_start() -> None:
    bus = StreamingListenerBus()
    recorder = Recorder()
    bus.add_listener(recorder)
    bus.post(started(1))
    bus.start()
    bus.post(started(2))
    assert bus.wait_until_empty(5)
    assert [e.time for e in recorder.events] == [1, 2]
    assert recorder.threads == {"StreamingListenerBus"}
    bus.stop()
    bus.post(started(3))  # dropped after stop
    assert [e.time for e in recorder.events] == [1, 2]


def test_a_failing_listener_is_logged_and_neither_stops_the_bus_nor_the_others(caplog) -> None:
    class Broken(StreamingListener):
        def onStreamingStarted(self, streamingStarted: Any) -> None:
            raise RuntimeError("listener failed on purpose")

    bus = StreamingListenerBus()
    recorder = Recorder()
    bus.add_listener(Broken())
    bus.add_listener(recorder)
    bus.start()
    with caplog.at_level(logging.ERROR):
        for i in range(3):
            bus.post(started(i))
        assert bus.wait_until_empty(5)
    assert [e.time for e in recorder.events] == [0, 1, 2]
    assert caplog.text.count("Listener Broken threw an exception") == 3
    bus.stop()


def test_stop_delivers_everything_already_posted() -> None:
    bus = StreamingListenerBus()
    delivered: list[int] = []

    class Slow(StreamingListener):
        def onStreamingStarted(self, streamingStarted: Any) -> None:
            time.sleep(0.01)
            delivered.append(streamingStarted.time)

    bus.add_listener(Slow())
    bus.start()
    for i in range(20):
        bus.post(started(i))
    bus.stop()
    assert delivered == list(range(20))


def test_camel_case_aliases_and_snake_case_listeners() -> None:
    info = BatchInfo(5000, {0: StreamInputInfo(0, 7), 1: StreamInputInfo(1, 3)}, 5010, 5030, 5100)
    assert (info.batchTime, info.submissionTime, info.processingStartTime, info.processingEndTime) == (
        5000,
        5010,
        5030,
        5100,
    )
    assert (info.schedulingDelay, info.processingDelay, info.totalDelay, info.numRecords) == (20, 70, 90, 10)
    assert BatchInfo(1, {}, 2, None, None).totalDelay is None
    receiver = ReceiverInfo(stream_id=4, name="r", active=True, location="host", executor_id="driver")
    assert (receiver.streamId, receiver.executorId, receiver.lastErrorTime) == (4, "driver", -1)

    class SnakeCase(StreamingListener):
        def __init__(self) -> None:
            self.got: list[Any] = []

        def on_receiver_started(self, event: StreamingListenerReceiverStarted) -> None:
            self.got.append(event.receiverInfo.streamId)

    bus = StreamingListenerBus()
    listener = SnakeCase()
    bus.add_listener(listener)
    bus.start()
    bus.post(StreamingListenerReceiverStarted(receiver))
    bus.stop()
    assert listener.got == [4]


def test_batch_and_output_operation_events_and_delays(make_run) -> None:
    run: ManualRun = make_run()
    recorder = Recorder()
    run.ssc.addStreamingListener(recorder)
    stream = run.ssc.queueStream([[1, 2]])

    def slow(rdd: Any) -> None:
        rdd.count()
        time.sleep(0.2)

    stream.foreachRDD(slow)
    stream.foreachRDD(lambda rdd: None)
    run.advance(1)
    assert run.ssc.scheduler.listener_bus.wait_until_empty(10)

    assert recorder.names() == [
        "StreamingStarted",
        "BatchSubmitted",
        "BatchStarted",
        "OutputOperationStarted",
        "OutputOperationCompleted",
        "OutputOperationStarted",
        "OutputOperationCompleted",
        "BatchCompleted",
    ]
    submitted, started_, completed = (
        recorder.events[1].batchInfo,
        recorder.events[2].batchInfo,
        recorder.events[-1].batchInfo,
    )
    assert submitted.batchTime == completed.batchTime == 1000
    assert submitted.processingStartTime is None and submitted.schedulingDelay is None
    assert started_.processingStartTime is not None and started_.processingEndTime is None
    assert completed.processingStartTime >= completed.submissionTime
    assert completed.schedulingDelay == completed.processingStartTime - completed.submissionTime
    assert completed.processingDelay >= 200
    assert completed.totalDelay == completed.schedulingDelay + completed.processingDelay
    ops = completed.outputOperationInfos
    assert sorted(ops) == [0, 1]
    assert ops[0].duration >= 200 and ops[0].failureReason is None
    assert ops[0].name.startswith("foreachRDD at test_listener.py:")
    assert "output operation 0, batch time" in ops[0].description


def test_jobs_run_with_sparks_local_properties(make_run) -> None:
    run: ManualRun = make_run()
    seen: dict[str, Any] = {}

    def capture(rdd: Any) -> None:
        sc = rdd.context
        for key in (
            "spark.streaming.internal.batchTime",
            "spark.streaming.internal.outputOpId",
            "spark.job.description",
            "spark.jobGroup.id",
            "spark.scheduler.pool",
        ):
            seen[key] = sc.getLocalProperty(key)

    run.ssc.sparkContext.setLocalProperty("spark.scheduler.pool", "streaming-pool")
    try:
        run.ssc.queueStream([[1]]).foreachRDD(capture)
        run.advance(1)
    finally:
        run.ssc.sparkContext.setLocalProperty("spark.scheduler.pool", None)
    assert seen["spark.streaming.internal.batchTime"] == "1000"
    assert seen["spark.streaming.internal.outputOpId"] == "0"
    assert seen["spark.job.description"].startswith("Streaming job from [output operation 0, batch time ")
    assert seen["spark.jobGroup.id"] == run.ssc.scheduler.job_group_id
    # Properties set where the context was started reach the jobs (Spark's savedProperties).
    assert seen["spark.scheduler.pool"] == "streaming-pool"


def test_errors_in_foreach_rdd_reach_await_termination_and_listeners(make_run) -> None:
    run: ManualRun = make_run()
    recorder = Recorder()
    run.ssc.addStreamingListener(recorder)

    def fail(rdd: Any) -> None:
        raise ValueError("output failed on purpose")

    run.ssc.queueStream([[1], [2]]).foreachRDD(fail)
    run.ssc.start()
    run.clock.set_time(1000)
    with pytest.raises(ValueError, match="output failed on purpose"):
        run.ssc.awaitTermination(20)
    # Like Spark, the context keeps running and the failed batch still completes.
    assert run.ssc.getState().value == "ACTIVE"
    assert run.ssc.scheduler.listener_bus.wait_until_empty(10)
    wait_until(lambda: any(isinstance(e, StreamingListenerBatchCompleted) for e in recorder.events))
    completed = next(e for e in recorder.events if isinstance(e, StreamingListenerBatchCompleted))
    assert "output failed on purpose" in completed.batchInfo.outputOperationInfos[0].failureReason
    assert run.tracker.completed == {1000}
