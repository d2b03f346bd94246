"""Spark's ``UnionDStream``: each batch's RDD is the union of the parents' RDDs of that batch."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pyspark import RDD

from reliable_kafka.dstream.dstream import DStream

logger = logging.getLogger(__name__)


class UnionDStream(DStream):
    def __init__(self, parents: Sequence[DStream]) -> None:
        if not parents:
            raise ValueError("List of DStreams to union is empty")
        ssc = parents[0].ssc
        if any(parent.ssc is not ssc for parent in parents):
            raise ValueError("Some of the DStreams have different contexts")
        if len({parent.slide_duration_ms for parent in parents}) != 1:
            raise ValueError("Some of the DStreams have different slide durations")
        super().__init__(ssc)
        self.parents = list(parents)

    @property
    def slide_duration_ms(self) -> int:
        return self.parents[0].slide_duration_ms

    @property
    def dependencies(self) -> list[DStream]:
        return self.parents

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        rdds = []
        for parent in self.parents:
            rdd = parent.get_or_compute(valid_time_ms)
            if rdd is None:
                raise RuntimeError(
                    f"Could not generate RDD from a parent for unifying at time {valid_time_ms} ms"
                )
            rdds.append(rdd)
        return self._sc.union(rdds)
