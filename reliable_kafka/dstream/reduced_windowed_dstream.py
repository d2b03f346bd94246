"""pyspark's ``PythonReducedWindowedDStream``: reduce by key over a window, incrementally.

The window at time t is the previous window's value with the batches that left the window
inverse-reduced out and the batches that entered reduced in. As in pyspark, a small window (fewer
than five slides) is cheaper to reduce whole, and so is any window whose previous value is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pyspark import RDD

from reliable_kafka.dstream.dstream import DEFAULT_PERSIST_LEVEL, DStream
from reliable_kafka.dstream.functions import function_name
from reliable_kafka.dstream.window import WindowOverParent

logger = logging.getLogger(__name__)

# pyspark: "for small window, reduce once will be better than twice".
_INCREMENTAL_MIN_SLIDES = 5

ReduceFunc = Callable[[Any, Any], Any]


class ReducedWindowedDStream(WindowOverParent):
    must_checkpoint = True

    def __init__(
        self,
        parent: DStream,
        reduce_func: ReduceFunc,
        inv_reduce_func: ReduceFunc,
        window_duration_ms: int,
        slide_duration_ms: int,
        *,
        num_partitions: int,
        filter_func: Callable[[tuple[Any, Any]], bool] | None = None,
    ) -> None:
        super().__init__(parent, window_duration_ms, slide_duration_ms)
        self._reduce = _reducer(reduce_func, num_partitions, filter_func)
        self._inv_reduce = _inverse_reducer(reduce_func, inv_reduce_func, num_partitions)
        self._filter_func = filter_func
        self._function_names = f"func={function_name(reduce_func)}, invFunc={function_name(inv_reduce_func)}"
        # Each window reads the previous one and each parent RDD twice (entering, leaving).
        super().persist(DEFAULT_PERSIST_LEVEL)
        if parent.storage_level is None:
            parent.persist(DEFAULT_PERSIST_LEVEL)

    def checkpoint_signature(self) -> str:
        return (
            f"ReducedWindowedDStream({self._function_names}, window={self.window_duration_ms}ms, "
            f"slide={self.slide_duration_ms}ms)"
        )

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        parent_slide = self.parent.slide_duration_ms
        current_begin = valid_time_ms - self.window_duration_ms  # exclusive
        previous_end = valid_time_ms - self.slide_duration_ms
        previous_begin = current_begin - self.slide_duration_ms  # exclusive
        previous = self.earlier_rdd(previous_end)
        if (
            previous is not None
            and self.window_duration_ms >= self.slide_duration_ms * _INCREMENTAL_MIN_SLIDES
        ):
            old_rdds = self.parent.slice_ms(previous_begin + parent_slide, current_begin)
            result = self._inv_reduce(previous, self._sc.union(old_rdds)) if old_rdds else previous
            new_rdds = self.parent.slice_ms(previous_end + parent_slide, valid_time_ms)
            if new_rdds:
                return self._reduce(result, self._sc.union(new_rdds))
            return result.filter(self._filter_func) if self._filter_func is not None else result
        current_rdds = self.parent.slice_ms(current_begin + parent_slide, valid_time_ms)
        if not current_rdds:
            return None
        return self._reduce(None, self._sc.union(current_rdds))


def _reducer(
    func: ReduceFunc, num_partitions: int, filter_func: Callable[[tuple[Any, Any]], bool] | None
) -> Callable[[RDD[Any] | None, RDD[Any]], RDD[Any]]:
    # Module-level so that the closures shipped to executors hold the user functions only.
    def reduce(accumulated: RDD[Any] | None, new: RDD[Any]) -> RDD[Any]:
        reduced = new.reduceByKey(func, num_partitions)
        if accumulated is not None:
            reduced = accumulated.union(reduced).reduceByKey(func, num_partitions)
        return reduced.filter(filter_func) if filter_func is not None else reduced

    return reduce


def _inverse_reducer(
    func: ReduceFunc, inv_func: ReduceFunc, num_partitions: int
) -> Callable[[RDD[Any], RDD[Any]], RDD[Any]]:
    def subtract(old_value_and_leaving: tuple[Any, Any]) -> Any:
        old_value, leaving = old_value_and_leaving
        return old_value if leaving is None else inv_func(old_value, leaving)

    def inverse_reduce(accumulated: RDD[Any], leaving: RDD[Any]) -> RDD[Any]:
        reduced = leaving.reduceByKey(func, num_partitions)
        return accumulated.leftOuterJoin(reduced, num_partitions).mapValues(subtract)

    return inverse_reduce
