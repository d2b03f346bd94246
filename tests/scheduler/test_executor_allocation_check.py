"""Streaming dynamic allocation refuses to start as configured wrong, with an error naming the
keys (``scheduler/executor_allocation_check.py``); and what the receiver tracker tells it of the
blocks not yet processed."""

from __future__ import annotations

import pytest
from pyspark import SparkContext

from reliable_kafka.context import StreamingContext, StreamingContextState
from reliable_kafka.receiver.tracker_endpoint import (
    BlockLocation,
    ReceivedBlockInfo,
    ReceivedBlockStoreResult,
)
from reliable_kafka.scheduler.executor_allocation_check import (
    DynamicAllocationError,
    check_dynamic_allocation,
)
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker
from reliable_kafka.settings import DynamicAllocationSettings, StreamingSettings
from reliable_kafka.storage.block_id import StreamBlockId

CLUSTER = "spark://master:7077"
KEY = "spark.streaming.dynamicAllocation"


def refusal(master: str = CLUSTER, conf: dict[str, str] | None = None, **settings: object) -> str:
    with pytest.raises(DynamicAllocationError) as raised:
        check_dynamic_allocation(
            DynamicAllocationSettings(enabled=True, **settings),  # type: ignore[arg-type]
            conf or {},
            master,
        )
    return str(raised.value)


def test_good_settings_and_disabled_allocation_pass() -> None:
    check_dynamic_allocation(
        DynamicAllocationSettings(enabled=True, min_executors=1, max_executors=4), {}, CLUSTER
    )
    check_dynamic_allocation(DynamicAllocationSettings(enabled=True), {}, "local-cluster[2,2,1024]")
    # Off: nothing is checked, as in Spark.
    check_dynamic_allocation(DynamicAllocationSettings(scaling_up_ratio=7), {}, "local[2]")


def test_a_local_master_is_refused() -> None:
    assert "the master is local[4], a local master" in refusal("local[4]")
    assert "local master" in refusal("local")


def test_core_dynamic_allocation_on_too_is_refused() -> None:
    message = refusal(conf={"spark.dynamicAllocation.enabled": "true"})
    assert "spark.dynamicAllocation.enabled (core dynamic allocation) is true too" in message
    assert message.startswith(f"{KEY}.enabled is true, but ")


def test_a_fixed_executor_count_is_refused_as_spark_does() -> None:
    assert "spark.executor.instances is set" in refusal(conf={"spark.executor.instances": "3"})


def test_min_executors_above_max_is_refused() -> None:
    assert f"{KEY}.minExecutors (5) is more than {KEY}.maxExecutors (2)" in refusal(
        min_executors=5, max_executors=2
    )
    assert f"{KEY}.maxExecutors is 0, must be at least 1" in refusal(max_executors=0)


@pytest.mark.parametrize(
    ("up", "down", "expected"),
    [
        (1.5, 0.3, f"{KEY}.scalingUpRatio is 1.5, must be between 0 and 1 (exclusive)"),
        (0.9, 0.0, f"{KEY}.scalingDownRatio is 0.0, must be between 0 and 1 (exclusive)"),
        (0.5, 0.6, f"{KEY}.scalingDownRatio (0.6) must be less than {KEY}.scalingUpRatio (0.5)"),
        (0.5, 0.5, f"{KEY}.scalingDownRatio (0.5) must be less than {KEY}.scalingUpRatio (0.5)"),
    ],
)
def test_ratios_outside_0_1_or_out_of_order_are_refused(up: float, down: float, expected: str) -> None:
    assert expected in refusal(scaling_up_ratio=up, scaling_down_ratio=down)


def test_start_raises_the_error_and_the_context_stops(spark_context: SparkContext) -> None:
    settings = StreamingSettings(dynamic_allocation={"enabled": True, "min_executors": 3, "max_executors": 1})
    ssc = StreamingContext(spark_context, 1, settings)
    ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
    with pytest.raises(DynamicAllocationError) as raised:
        ssc.start()
    assert "a local master" in str(raised.value)
    assert f"{KEY}.minExecutors (3) is more than {KEY}.maxExecutors (1)" in str(raised.value)
    assert ssc.getState() is StreamingContextState.STOPPED
    assert StreamingContext.getActive() is None


def test_spark_keys_reach_the_settings() -> None:
    settings = StreamingSettings.from_spark_conf(
        {
            f"{KEY}.enabled": "true",
            f"{KEY}.scalingInterval": "5s",
            f"{KEY}.minExecutors": "2",
            f"{KEY}.maxExecutors": "6",
            f"{KEY}.scalingUpRatio": "0.8",
            f"{KEY}.scalingDownRatio": "0.2",
        }
    ).dynamic_allocation
    assert settings == DynamicAllocationSettings(
        enabled=True,
        scaling_interval_ms=5000,
        min_executors=2,
        max_executors=6,
        scaling_up_ratio=0.8,
        scaling_down_ratio=0.2,
    )
    # Spark's defaults; a bare number of seconds, as Spark's getTimeAsSeconds reads it.
    assert StreamingSettings().dynamic_allocation.scaling_interval_ms == 60_000
    assert StreamingSettings.from_spark_conf({f"{KEY}.scalingInterval": "30"}).dynamic_allocation == (
        DynamicAllocationSettings(scaling_interval_ms=30_000)
    )


def _block(sequence: int, executor: str, replica: str | None = None) -> ReceivedBlockInfo:
    location = BlockLocation("host", executor)
    copy = None if replica is None else BlockLocation("other", replica)
    result = ReceivedBlockStoreResult(StreamBlockId(0, sequence), 1, None, location, copy)
    return ReceivedBlockInfo(0, 1, None, result)


def test_unprocessed_blocks_are_the_queued_and_those_of_batches_not_completed() -> None:
    tracker = ReceivedBlockTracker([0], None)
    done, running, queued = _block(1, "1"), _block(2, "2", replica="3"), _block(3, "4")
    tracker.add_block(done)
    tracker.allocate_blocks_to_batch(1000)
    tracker.add_block(running)
    tracker.allocate_blocks_to_batch(2000)
    tracker.add_block(queued)
    tracker.mark_batch_completed(1000)
    assert tracker.unprocessed_blocks() == [queued, running]
