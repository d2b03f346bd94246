"""``pprint``'s take (``dstream.cached_take.take_first``): pyspark's records, and over a cached
batch no Python worker lost (pyspark's take leaves one with unread input, which then exits)."""

from __future__ import annotations

import operator
import os
from typing import Any

import pytest
from pyspark import RDD, SparkContext

from reliable_kafka.context import StreamingContext
from reliable_kafka.dstream.cached_take import take_first
from reliable_kafka.util.clock import ManualClock
from reliable_kafka.util.raw_bytes_rdd import raw_bytes_rdd
from tests.e2e.processes import live_children
from tests.support import wait_until

pytestmark = pytest.mark.timeout(120)


def _rdds(sc: SparkContext) -> dict[str, RDD[Any]]:
    words = sc.parallelize([f"w{i % 7}" for i in range(200)], 4)
    return {
        # A reduceByKey's output: a first partition shorter than the take, read on into the next.
        "reduced, cached": words.map(lambda w: (w, 1)).reduceByKey(lambda a, b: a + b, 2).cache(),
        "mapped, cached": sc.parallelize(range(5000), 3).map(lambda x: x * 3).cache(),
        "empty, cached": sc.parallelize([], 2).map(lambda x: x).cache(),
        "raw bytes, cached": raw_bytes_rdd(sc, [b"a", b"bc", b"def"]).cache(),
        # Pair deserializer: two JVM elements per batch, so pyspark's own take.
        "zipped, cached": sc.parallelize(range(30), 2).zip(sc.parallelize(range(30, 60), 2)).cache(),
        "not cached": sc.parallelize(range(100), 4).map(lambda x: -x),
    }


@pytest.mark.parametrize("num", [0, 1, 11, 10_000])
def test_take_first_gives_what_pysparks_take_gives(spark_context: SparkContext, num: int) -> None:
    for name, rdd in _rdds(spark_context).items():
        try:
            assert take_first(rdd, num) == rdd.take(num), name
        finally:
            rdd.unpersist()


def _python_workers() -> set[int]:
    """The live Python workers of this process's Spark: this process -> the JVM -> the worker
    daemon -> the workers it forked."""
    level = [os.getpid()]
    for _ in range(3):
        level = [child for pid in level for child in live_children(pid)]
    return set(level)


def test_pprint_of_a_cached_stream_loses_no_python_worker(spark_context: SparkContext, capsys: Any) -> None:
    sc = spark_context
    ssc = StreamingContext(sc, 1, clock=ManualClock(0))
    try:
        # The README's word count: its counts cached, printed, then collected. Each partition
        # holds more than pprint's 11 records: pyspark's take would leave input unread.
        words = [sc.parallelize([f"w{i % 40}" for i in range(400)], 4) for _ in range(3)]
        counts = ssc.queueStream(words).map(lambda w: (w, 1)).reduceByKey(operator.add, 2)
        counts.cache()
        counts.pprint()
        totals: list[int] = []
        counts.foreachRDD(lambda rdd: totals.append(sum(n for _, n in rdd.collect())))
        ssc.start()
        _advance(ssc, 1)  # the first batch starts the workers its tasks need at once
        # Every idle worker used just now: none is old enough for Spark's idle-worker reaper.
        sc.parallelize(range(16), 16).map(lambda x: x).collect()
        workers = _python_workers()
        _advance(ssc, 2)
        assert totals == [400, 400, 400]
        assert capsys.readouterr().out.count("...") == 3  # each batch printed, more than 10 records
        assert workers <= _python_workers(), "a Python worker exited"
    finally:
        ssc.stop(stopSparkContext=False)


def _advance(ssc: StreamingContext, batches: int) -> None:
    """Move the manual clock over the next ``batches`` boundaries; return once they ran."""
    clock = ssc.clock
    assert isinstance(clock, ManualClock)
    generator = ssc.scheduler.job_generator
    for _ in range(batches):
        target = clock.get_time_ms() + ssc.batch_duration_ms
        clock.set_time(target)
        wait_until(
            lambda t=target: (generator.last_processed_batch_ms or 0) >= t,
            timeout_s=120,
            what=f"batch {target} to be processed",
        )
