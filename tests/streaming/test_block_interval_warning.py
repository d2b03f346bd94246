"""A block interval longer than the batch interval is accepted with Spark's warning (issue 10,
item 7), and a usual one without it."""

from __future__ import annotations

import logging

import pytest
from pyspark import SparkContext

from reliable_kafka.context import StreamingContext
from reliable_kafka.dstream.receiver_input_dstream import ReceiverInputDStream
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.settings import ReceiverSettings, StreamingSettings
from tests.support.scheduler_fakes import CounterReceiver


class CountingStream(ReceiverInputDStream):
    def get_receiver(self) -> Receiver:
        return CounterReceiver()


@pytest.mark.parametrize(("block_interval_ms", "warned"), [(3000, True), (200, False)])
def test_a_block_interval_longer_than_the_batch_is_warned_about(
    spark_context: SparkContext, caplog: pytest.LogCaptureFixture, block_interval_ms: int, warned: bool
) -> None:
    # Driver placement: the stream of this test is a class of its own, with no descriptor.
    settings = StreamingSettings(
        receiver=ReceiverSettings(block_interval_ms=block_interval_ms, placement="driver")
    )
    ssc = StreamingContext(spark_context, 1, settings)
    CountingStream(ssc).foreachRDD(lambda rdd: None)
    caplog.set_level(logging.WARNING, logger="reliable_kafka.context")
    ssc.start()
    ssc.stop(stopSparkContext=False)
    lines = [r.getMessage() for r in caplog.records if "Block interval" in r.getMessage()]
    if warned:
        assert len(lines) == 1
        assert "Block interval 3000 ms (spark.streaming.blockInterval) is longer than" in lines[0]
        assert "the batch interval 1000 ms" in lines[0]
    else:
        assert lines == []
