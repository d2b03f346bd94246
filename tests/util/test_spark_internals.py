"""The Spark internals behind util/spark_internals.py exist on this pyspark (CI runs this file
on both pyspark lines): no fallback is taken."""

from __future__ import annotations

import logging

import pytest
from pyspark import SparkContext

from reliable_kafka.util.spark_internals import set_driver_conf, stop_console_progress, unpersist_quietly


def test_unpersist_quietly_forgets_a_locally_checkpointed_rdd(
    spark_context: SparkContext, caplog: pytest.LogCaptureFixture
) -> None:
    rdd = spark_context.parallelize(range(10), 2)
    rdd.localCheckpoint()
    assert rdd.count() == 10
    persistent = spark_context._jsc.sc().getPersistentRDDs()
    assert persistent.contains(rdd.id())
    with caplog.at_level(logging.DEBUG, logger="reliable_kafka.util.spark_internals"):
        unpersist_quietly(rdd)
    assert not caplog.records  # the private method answered: no fallback
    assert not rdd.is_cached
    assert not spark_context._jsc.sc().getPersistentRDDs().contains(rdd.id())


def test_stop_console_progress_stops_the_shells_progress_bar(
    spark_context: SparkContext, caplog: pytest.LogCaptureFixture
) -> None:
    # pyspark starts the tests' context as a shell, which shows the bar (the README example's
    # test shows that its output then has none).
    with caplog.at_level(logging.DEBUG, logger="reliable_kafka.util.spark_internals"):
        assert stop_console_progress(spark_context) is True
    assert not caplog.records


def test_set_driver_conf_sets_the_live_conf_not_a_copy(
    spark_context: SparkContext, caplog: pytest.LogCaptureFixture
) -> None:
    key = "spark.reliable_kafka.test.setDriverConf"
    with caplog.at_level(logging.DEBUG, logger="reliable_kafka.util.spark_internals"):
        assert set_driver_conf(spark_context, key, "yes") is True
    assert not caplog.records
    assert spark_context.getConf().get(key) == "yes"  # getConf copies the live conf
    spark_context._jsc.sc().conf().remove(key)
