"""Spark's ``ForEachDStream``: the output stream behind ``foreachRDD``, ``pprint`` and ``saveAsTextFiles``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pyspark import RDD

from reliable_kafka.dstream.dstream import DStream
from reliable_kafka.dstream.functions import format_batch_time
from reliable_kafka.scheduler.job import Job

logger = logging.getLogger(__name__)


class ForEachDStream(DStream):
    """Each batch with a parent RDD becomes one ``Job`` calling ``func(time_ms, rdd)``."""

    def __init__(
        self, parent: DStream, func: Callable[[int, RDD[Any]], Any], name: str = "foreachRDD"
    ) -> None:
        super().__init__(parent.ssc)
        self.parent = parent
        self.func = func
        self.name = name

    @property
    def slide_duration_ms(self) -> int:
        return self.parent.slide_duration_ms

    @property
    def dependencies(self) -> list[DStream]:
        return [self.parent]

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        return None

    def generate_job(self, time_ms: int, output_op_id: int) -> Job | None:
        rdd = self.parent.get_or_compute(time_ms)
        if rdd is None:
            return None
        func = self.func
        return Job(
            time_ms,
            output_op_id,
            lambda: func(time_ms, rdd),
            name=self.name,
            description=f"[output operation {output_op_id}, batch time {format_batch_time(time_ms)}]",
        )
