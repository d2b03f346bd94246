"""Spark's ``TransformedDStream``: each batch's RDD is a function of the parents' RDDs of that batch."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from pyspark import RDD

from reliable_kafka.dstream.dstream import DStream

logger = logging.getLogger(__name__)


class TransformedDStream(DStream):
    """``func(time_ms, *parent_rdds)`` returns the batch's RDD, or ``None`` for no RDD.

    With one parent, a batch where the parent has no RDD has none either (pyspark's
    ``PythonTransformedDStream``); with several, a missing parent RDD is passed as ``None``
    (pyspark's ``transformWith``).
    """

    def __init__(self, parents: Sequence[DStream], func: Callable[..., RDD[Any] | None]) -> None:
        if not parents:
            raise ValueError("a transformed DStream needs at least one parent")
        ssc = parents[0].ssc
        if any(parent.ssc is not ssc for parent in parents):
            raise ValueError("Some of the DStreams have different contexts")
        if len({parent.slide_duration_ms for parent in parents}) != 1:
            raise ValueError("Some of the DStreams have different slide durations")
        super().__init__(ssc)
        self.parents = list(parents)
        self.func = func

    @property
    def slide_duration_ms(self) -> int:
        return self.parents[0].slide_duration_ms

    @property
    def dependencies(self) -> list[DStream]:
        return self.parents

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        rdds = [parent.get_or_compute(valid_time_ms) for parent in self.parents]
        if len(rdds) == 1 and rdds[0] is None:
            return None
        result = self.func(valid_time_ms, *rdds)
        if result is not None and not isinstance(result, RDD):
            raise TypeError(
                "a transform function must return an RDD or None, "
                f"got {type(result).__name__} at {valid_time_ms} ms"
            )
        return result
