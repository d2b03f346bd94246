"""Backpressure on a direct stream: each batch's ranges follow the rate controller (Spark's
``spark.streaming.backpressure.*`` with ``DirectKafkaInputDStream``), shared out by lag."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pyspark import SparkContext

from reliable_kafka import KafkaUtils, OffsetRange, StreamingContext
from reliable_kafka.settings import BackpressureSettings
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.conftest import BATCH_S, e2e_settings
from tests.e2e.direct_streams import contiguous, covered, direct_params
from tests.e2e.helpers import produce
from tests.support import wait_until

INITIAL_RATE = 200
BACKLOG = {0: 1500, 1: 500}


@pytest.mark.brokers("3.9")
def test_backpressure_bounds_each_batch_and_shares_the_rate_by_lag(
    local_cluster: ClusterUnderTest, spark_context: SparkContext
) -> None:
    topic = unique_name("direct-backpressure")
    local_cluster.create_topic(topic, partitions=2)
    produce(local_cluster, topic, [(None, b"x", p) for p, n in BACKLOG.items() for _ in range(n)])
    settings = e2e_settings(wal=False).model_copy(
        update={"backpressure": BackpressureSettings(enabled=True, initial_rate=INITIAL_RATE)}
    )
    ssc = StreamingContext(spark_context, BATCH_S, settings)
    stream = KafkaUtils.createDirectStream(
        ssc, [topic], direct_params(local_cluster, **{"auto.offset.reset": "smallest"})
    )
    # A spy on the controller's output: every rate it gave, in order (it sends them nowhere).
    published: list[int] = []
    lock = threading.Lock()
    rates_seen_by_batch: list[int] = []

    def record(rate: int) -> None:
        with lock:
            published.append(rate)

    stream.rate_controller.publish = record
    batches: list[list[OffsetRange]] = []

    def on_batch(rdd: Any) -> None:
        with lock:
            rates_seen_by_batch.append(max([INITIAL_RATE, *published]))
        # Real work: the estimator learns from how long batches take to process.
        assert rdd.count() == sum(r.count() for r in rdd.offsetRanges())
        batches.append(rdd.offsetRanges())

    stream.foreachRDD(on_batch)
    ssc.start()
    try:
        wait_until(
            lambda: sum(r.count() for batch in batches for r in batch) >= sum(BACKLOG.values()),
            timeout_s=180,
            what="the backlog read under backpressure",
        )
        # Batches can run well behind their generation on a loaded machine, so the controller
        # may learn of the batches with records only after the last of them ran.
        wait_until(lambda: bool(published), timeout_s=60, what="a rate from the rate controller")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)

    sizes = [sum(r.count() for r in batch) for batch in batches]
    first = next(batch for batch in batches if any(r.count() for r in batch))
    # Before any estimate, the initial rate, three quarters of it to the partition with three
    # quarters of the lag (without backpressure the first batch would be the whole backlog).
    by_partition = {r.partition: r.count() for r in first}
    assert sum(by_partition.values()) <= INITIAL_RATE * BATCH_S, first
    assert by_partition[0] == 3 * by_partition[1], first
    # Every batch within the highest rate the controller had given by the time it ran (one
    # record of slack per partition: the floor of the minimum rate).
    bounds = [rate * BATCH_S + len(BACKLOG) for rate in rates_seen_by_batch]
    assert all(size <= bound for size, bound in zip(sizes, bounds, strict=True)), (sizes, bounds)
    assert sum(1 for size in sizes if size) >= 3, sizes
    ranges = [r for batch in batches for r in batch]
    for partition, count in BACKLOG.items():
        spans = covered(ranges, partition)
        assert contiguous(spans) and spans[0][0] == 0 and spans[-1][1] == count, spans
