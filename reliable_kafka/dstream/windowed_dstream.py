"""Spark's ``WindowedDStream``: each RDD is the union of the parent's RDDs over a sliding window."""

from __future__ import annotations

import logging
from typing import Any

from pyspark import RDD, StorageLevel

from reliable_kafka.dstream.dstream import DEFAULT_PERSIST_LEVEL, DStream
from reliable_kafka.dstream.window import WindowOverParent

logger = logging.getLogger(__name__)


class WindowedDStream(WindowOverParent):
    def __init__(self, parent: DStream, window_duration_ms: int, slide_duration_ms: int) -> None:
        super().__init__(parent, window_duration_ms, slide_duration_ms)
        # Every parent RDD is read by several windows: keep it, unless the user chose a level.
        if parent.storage_level is None:
            parent.persist(DEFAULT_PERSIST_LEVEL)

    def persist(self, storageLevel: StorageLevel = DEFAULT_PERSIST_LEVEL) -> DStream:
        # Windows share the parent's RDDs; persisting each union would store every batch many
        # times over, so the level goes to the parent (as in Spark).
        self.parent.persist(storageLevel)
        return self

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        window_begin = valid_time_ms - self.window_duration_ms + self.parent.slide_duration_ms
        rdds = self.parent.slice_ms(window_begin, valid_time_ms)
        if not rdds:
            return self._sc.emptyRDD()
        return self._sc.union(rdds)
