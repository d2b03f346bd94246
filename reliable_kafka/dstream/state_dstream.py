"""pyspark's ``PythonStateDStream``: ``updateStateByKey``'s state, one RDD per batch."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pyspark import RDD

from reliable_kafka.dstream.dstream import DEFAULT_PERSIST_LEVEL, DStream
from reliable_kafka.dstream.functions import function_name

logger = logging.getLogger(__name__)

UpdateFunc = Callable[[list[Any], Any], Any]


class StateDStream(DStream):
    """State at t = update(state at t - slide, or the initial RDD; the parent's values at t)."""

    must_checkpoint = True

    def __init__(
        self,
        parent: DStream,
        update_func: UpdateFunc,
        num_partitions: int,
        initial_rdd: RDD[tuple[Any, Any]] | None = None,
    ) -> None:
        super().__init__(parent.ssc)
        self.parent = parent
        self.initial_rdd = initial_rdd
        self._update = _updater(update_func, num_partitions)
        self._update_name = function_name(update_func)
        super().persist(DEFAULT_PERSIST_LEVEL)

    @property
    def slide_duration_ms(self) -> int:
        return self.parent.slide_duration_ms

    @property
    def dependencies(self) -> list[DStream]:
        return [self.parent]

    def checkpoint_signature(self) -> str:
        return f"StateDStream(update={self._update_name}, slide={self.slide_duration_ms}ms)"

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        last_state = self.earlier_rdd(valid_time_ms - self.slide_duration_ms)
        values = self.parent.get_or_compute(valid_time_ms)
        if values is None:
            return last_state
        return self._update(last_state if last_state is not None else self.initial_rdd, values)


def _updater(update_func: UpdateFunc, num_partitions: int) -> Callable[[RDD[Any] | None, RDD[Any]], RDD[Any]]:
    # pyspark's reduceFunc; module-level so the shipped closures hold only the user function.
    def new_values_only(values: Any) -> tuple[list[Any], None]:
        return list(values), None

    def values_and_state(grouped: tuple[Any, Any]) -> tuple[list[Any], Any]:
        states, values = grouped
        states = list(states)
        return list(values), states[0] if states else None

    def apply(values_and_state: tuple[list[Any], Any]) -> Any:
        return update_func(values_and_state[0], values_and_state[1])

    def update(state: RDD[Any] | None, values: RDD[Any]) -> RDD[Any]:
        if state is None:
            grouped = values.groupByKey(num_partitions).mapValues(new_values_only)
        else:
            grouped = state.cogroup(values.partitionBy(num_partitions), num_partitions).mapValues(
                values_and_state
            )
        return grouped.mapValues(apply).filter(lambda kv: kv[1] is not None)

    return update
