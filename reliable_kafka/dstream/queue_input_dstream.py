"""Spark's ``QueueInputDStream`` (``ssc.queueStream``): each batch takes RDDs from a queue."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pyspark import RDD

from reliable_kafka.dstream.input_dstream import InputDStream

if TYPE_CHECKING:
    from reliable_kafka.dstream.streaming_context import StreamingContextLike

logger = logging.getLogger(__name__)


class QueueInputDStream(InputDStream):
    """One RDD per batch (``one_at_a_time``) or the union of all queued ones; when the queue is
    empty, ``default`` or an empty RDD.

    A ``collections.deque`` is used as given, so items appended later are seen (Spark's mutable
    queue); any other iterable is copied, as pyspark does. Items that are not RDDs are
    parallelized when they are taken.
    """

    def __init__(
        self,
        ssc: StreamingContextLike,
        queue: Iterable[RDD[Any] | Iterable[Any]],
        one_at_a_time: bool = True,
        default: RDD[Any] | Iterable[Any] | None = None,
    ) -> None:
        super().__init__(ssc)
        self.queue: deque[RDD[Any] | Iterable[Any]] = queue if isinstance(queue, deque) else deque(queue)
        self.one_at_a_time = one_at_a_time
        self.default = (
            default if default is None or isinstance(default, RDD) else self._sc.parallelize(list(default))
        )

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        taken: list[RDD[Any] | Iterable[Any]] = []
        try:
            if self.one_at_a_time:
                taken.append(self.queue.popleft())
            else:
                while True:
                    taken.append(self.queue.popleft())
        except IndexError:
            pass  # popleft is atomic; emptiness is only known by trying, as producers may append
        rdds = [item if isinstance(item, RDD) else self._sc.parallelize(list(item)) for item in taken]
        if len(rdds) == 1:
            return rdds[0]
        if rdds:
            return self._sc.union(rdds)
        return self.default if self.default is not None else self._sc.emptyRDD()
