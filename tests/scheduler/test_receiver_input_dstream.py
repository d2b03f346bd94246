"""ReceiverInputDStream on real Spark: batches built from the tracker's blocks, after a graceful
stop and after a driver restart (blocks then come from the WAL), block release, backpressure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark import SparkContext

from reliable_kafka.context import StreamingContext
from reliable_kafka.dstream.batch_rdd import BlockRDD
from reliable_kafka.dstream.receiver_input_dstream import ReceiverInputDStream
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.scheduler.listener import BatchInfo, StreamingListenerBatchCompleted, StreamInputInfo
from reliable_kafka.scheduler.rate_controller import ReceiverRateController
from reliable_kafka.scheduler.receiver_tracker import ReceiverTracker
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.storage.block_manager import BlockManager
from tests.support import wait_until
from tests.support.scheduler_fakes import CounterReceiver, FakeStreamingContext, quick_settings


class CounterInputDStream(ReceiverInputDStream):
    def __init__(self, ssc: FakeStreamingContext, **kwargs: object) -> None:
        super().__init__(ssc, **kwargs)  # type: ignore[arg-type]
        self.receivers: list[CounterReceiver] = []

    def get_receiver(self) -> Receiver:
        self.receivers.append(CounterReceiver())
        return self.receivers[-1]


def context(
    sc: SparkContext, settings: StreamingSettings, checkpoint: Path | None = None
) -> FakeStreamingContext:
    return FakeStreamingContext(
        None, settings, spark_context=sc, checkpoint_dir=None if checkpoint is None else str(checkpoint)
    )


def start_tracker(ssc: FakeStreamingContext, **kwargs: object) -> ReceiverTracker:
    tracker = ssc.receiver_tracker(**kwargs)
    tracker.start()
    return tracker


@pytest.fixture
def trackers() -> Iterator[list[ReceiverTracker]]:
    started: list[ReceiverTracker] = []
    yield started
    for tracker in started:
        tracker.stop(graceful=False)


def test_the_tracker_finds_receiver_streams_in_the_graph(spark_context: SparkContext) -> None:
    ssc = context(spark_context, quick_settings())
    stream = CounterInputDStream(ssc)
    assert ssc.graph.get_receiver_input_streams() == [stream]
    assert stream.rate_controller is None


def test_batches_hold_every_record_received_in_order(spark_context: SparkContext, trackers: list) -> None:
    ssc = context(spark_context, quick_settings())
    stream = CounterInputDStream(ssc, decoder=lambda n: n * 2)
    tracker = start_tracker(ssc)
    trackers.append(tracker)
    unallocated = tracker.received_block_tracker.get_unallocated_blocks
    wait_until(lambda: len(unallocated(stream.id)) >= 2, what="two blocks")
    tracker.allocate_blocks_to_batch(1000)
    first = stream.compute(1000)
    tracker.stop(graceful=True)
    tracker.allocate_blocks_to_batch(2000)
    second = stream.compute(2000)

    assert isinstance(first, BlockRDD)
    # The blocks of a batch, all kept by the driver here, are read by one task (by default).
    assert len(first.block_ids) == len(tracker.get_blocks_of_batch_and_stream(1000, stream.id)) >= 2
    assert first.getNumPartitions() == 1
    received = stream.receivers[0].next_value
    assert first.collect() + second.collect() == [2 * n for n in range(received)]
    assert tracker.num_records_of_batch(1000)[stream.id] == first.count()


def test_after_a_driver_restart_pending_batches_are_read_from_the_wal(
    spark_context: SparkContext, tmp_path: Path, trackers: list
) -> None:
    settings = quick_settings(wal={"enable": True})
    ssc = context(spark_context, settings, tmp_path)
    stream = CounterInputDStream(ssc)
    tracker = start_tracker(ssc)
    trackers.append(tracker)
    wait_until(tracker.has_unallocated_blocks, what="blocks")
    tracker.allocate_blocks_to_batch(1000)
    expected = stream.compute(1000).collect()
    assert expected
    # The driver dies: its block manager goes with it; only the checkpoint directory survives.
    tracker.stop(graceful=False)

    restarted_ssc = context(spark_context, settings, tmp_path)
    restarted_stream = CounterInputDStream(restarted_ssc)
    restarted = start_tracker(restarted_ssc, skip_receiver_launch=True, block_store=BlockManager())
    trackers.append(restarted)
    assert restarted.pending_batch_times() == [1000]
    rdd = restarted_stream.compute(1000)

    assert isinstance(rdd, BlockRDD)
    assert rdd.num_from_block_manager == 0
    assert rdd.collect() == expected


def test_batches_before_the_graph_start_time_are_empty(spark_context: SparkContext, trackers: list) -> None:
    ssc = context(spark_context, quick_settings())
    stream = CounterInputDStream(ssc)
    tracker = start_tracker(ssc, skip_receiver_launch=True)
    trackers.append(tracker)
    ssc.graph.start_time_ms = 5000
    rdd = stream.compute(4000)
    assert rdd is not None
    assert rdd.collect() == []


def test_released_batches_take_their_blocks_out_of_the_block_manager(
    spark_context: SparkContext, trackers: list
) -> None:
    ssc = context(spark_context, quick_settings())
    stream = CounterInputDStream(ssc)
    tracker = start_tracker(ssc)
    trackers.append(tracker)
    wait_until(tracker.has_unallocated_blocks, what="blocks")
    tracker.allocate_blocks_to_batch(1000)
    rdd = stream.compute(1000)
    block_ids = [info.block_id for info in tracker.get_blocks_of_batch_and_stream(1000, stream.id)]
    assert all(tracker.block_store.contains(block_id) for block_id in block_ids)

    stream.release_rdd(1000, rdd)

    assert not any(tracker.block_store.contains(block_id) for block_id in block_ids)


def test_with_backpressure_completed_batches_set_the_receivers_rate(
    spark_context: SparkContext, trackers: list
) -> None:
    settings = quick_settings(backpressure={"enabled": True, "pid_min_rate": 10})
    ssc = context(spark_context, settings)
    stream = CounterInputDStream(ssc)
    assert isinstance(stream.rate_controller, ReceiverRateController)
    tracker = start_tracker(ssc)
    trackers.append(tracker)
    wait_until(lambda: tracker.active_receiver_ids() == [stream.id], what="receiver registered")

    for batch_time, records in ((1000, 4000), (2000, 3000)):
        info = BatchInfo(
            batch_time,
            {stream.id: StreamInputInfo(stream.id, records)},
            batch_time,
            batch_time,
            batch_time + 1000,
        )
        stream.rate_controller.onBatchCompleted(StreamingListenerBatchCompleted(info))

    supervisor = stream.receivers[0].supervisor
    wait_until(lambda: supervisor.get_current_rate_limit() == 3000, what="rate limit from the PID estimator")
    stream.stop()


def test_through_a_streaming_context_a_graceful_stop_processes_every_record(
    spark_context: SparkContext, tmp_path: Path
) -> None:
    settings = quick_settings(wal={"enable": True}, backpressure={"enabled": True})
    ssc = StreamingContext(spark_context, 0.2, settings)
    ssc.checkpoint(str(tmp_path))
    stream = CounterInputDStream(ssc)  # type: ignore[arg-type]
    processed: list[int] = []
    stream.foreachRDD(lambda rdd: processed.extend(rdd.collect()))
    ssc.start()
    try:
        wait_until(lambda: len(processed) > 100, what="batches processed")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)

    received = sum(receiver.next_value for receiver in stream.receivers)
    assert stream.receivers[0].next_value > 0
    assert sorted(processed) == list(range(received))
    assert processed == sorted(processed)
