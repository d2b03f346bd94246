"""Spark's ``DStream``: a sequence of RDDs, one per batch time, computed lazily from its parents.

The bookkeeping follows Spark's ``DStream`` (zero time, slide duration, remember duration,
``generatedRDDs`` by batch time, ``getOrCompute``, ``clearMetadata``); the operations are
pyspark's, with pyspark's camelCase names and signatures (durations in seconds). Every RDD is a
plain pyspark RDD, so closures reach the executors through pyspark's own machinery.

Checkpointing a DStream (``checkpoint(interval)``, and the stateful operations, which require
it) truncates lineage with ``RDD.localCheckpoint()`` at every checkpoint time. With a checkpoint
directory, the RDD of each checkpoint time is also written there once its batch completed
(``state_checkpoint.py``, driven by the job generator through the graph) and named by the driver
checkpoint, so that ``getOrCreate`` restores it (:meth:`DStream.restore_state`) and a restarted
run continues from it: the state of ``updateStateByKey`` and the windows of
``reduceByKeyAndWindow`` survive a driver restart, as in Spark.
"""

from __future__ import annotations

import itertools
import logging
import operator
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark import RDD, StorageLevel
from pyspark.rdd import portable_hash

from reliable_kafka.dstream.cached_take import take_first
from reliable_kafka.dstream.functions import (
    batch_datetime,
    creation_site,
    duration_ms,
    rdd_to_file_name,
    time_ms_of,
    with_time,
)
from reliable_kafka.scheduler.job import Job
from reliable_kafka.state_checkpoint import StateSnapshot
from reliable_kafka.util.spark_internals import unpersist_quietly

if TYPE_CHECKING:
    from pyspark import SparkContext

    from reliable_kafka.dstream.dstream_graph import DStreamGraph
    from reliable_kafka.dstream.streaming_context import StreamingContextLike

logger = logging.getLogger(__name__)

# Spark's default checkpoint interval for stateful streams: the slide, rounded up to >= 10 s.
_MIN_DEFAULT_CHECKPOINT_MS = 10_000
# Python RDD data is always serialized, so pyspark's MEMORY_ONLY is Spark's MEMORY_ONLY_SER.
DEFAULT_PERSIST_LEVEL = StorageLevel.MEMORY_ONLY


class DStream:
    """Base of every DStream. Subclasses give ``slide_duration_ms``, ``dependencies`` and ``compute``."""

    # Stateful streams (state, inverse-reduced windows) must truncate their lineage periodically.
    must_checkpoint: ClassVar[bool] = False

    def __init__(self, ssc: StreamingContextLike) -> None:
        ssc.check_accepts_new_streams()
        self._ssc = ssc
        self._sc: SparkContext = ssc.sparkContext
        self.generated_rdds: dict[int, RDD[Any]] = {}
        self.zero_time_ms: int | None = None
        self.remember_duration_ms: int | None = None
        self.storage_level: StorageLevel | None = None
        self.checkpoint_duration_ms: int | None = None
        self.graph: DStreamGraph | None = None
        # pyspark's flags, kept under their names for code that reads them.
        self.is_cached = False
        self.is_checkpointed = False
        # Written state checkpoints, oldest first (at most state_checkpoint.KEPT_SNAPSHOTS), and the
        # time of the one a restart restored (or the zero time, to recompute from): earlier times
        # are not available in this run.
        self.state_snapshots: list[StateSnapshot] = []
        self.restored_state_time_ms: int | None = None

    # ------------------------------------------------------------ structure

    @property
    def ssc(self) -> StreamingContextLike:
        return self._ssc

    def context(self) -> StreamingContextLike:
        """pyspark's ``DStream.context()``."""
        return self._ssc

    @property
    def slide_duration_ms(self) -> int:
        raise NotImplementedError

    @property
    def dependencies(self) -> list[DStream]:
        raise NotImplementedError

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        """The RDD of this batch time, or ``None`` when this stream has none then."""
        raise NotImplementedError

    @property
    def parent_remember_duration_ms(self) -> int | None:
        """How long the parents must remember their RDDs for this stream (windows add their width)."""
        return self.remember_duration_ms

    @property
    def is_initialized(self) -> bool:
        return self.zero_time_ms is not None

    def set_graph(self, graph: DStreamGraph) -> None:
        if self.graph is not None and self.graph is not graph:
            raise ValueError(f"{self} already belongs to another DStreamGraph")
        self.graph = graph
        for parent in self.dependencies:
            parent.set_graph(graph)

    def initialize(self, zero_time_ms: int) -> None:
        """Fix the zero time, the default checkpoint interval and the minimum remember duration."""
        if self.zero_time_ms is not None and self.zero_time_ms != zero_time_ms:
            raise ValueError(
                f"{self} is already initialized with zero time {self.zero_time_ms}, not {zero_time_ms}"
            )
        self.zero_time_ms = zero_time_ms
        slide = self.slide_duration_ms
        if self.must_checkpoint and self.checkpoint_duration_ms is None:
            self.checkpoint_duration_ms = slide * -(-_MIN_DEFAULT_CHECKPOINT_MS // slide)
        min_remember = slide
        if self.checkpoint_duration_ms is not None and min_remember <= self.checkpoint_duration_ms:
            # Keep two checkpoints' worth, so the RDD a newer one depends on is still there.
            min_remember = self.checkpoint_duration_ms * 2
        if self.remember_duration_ms is None or self.remember_duration_ms < min_remember:
            self.remember_duration_ms = min_remember
        for parent in self.dependencies:
            parent.initialize(zero_time_ms)

    def remember(self, duration: int | None) -> None:
        """Keep RDDs at least ``duration`` ms (``None``: no demand); parents keep what this needs."""
        if duration is not None and (
            self.remember_duration_ms is None or duration > self.remember_duration_ms
        ):
            self.remember_duration_ms = duration
        for parent in self.dependencies:
            parent.remember(self.parent_remember_duration_ms)

    def validate_at_start(self) -> None:
        name = type(self).__name__
        if not self.is_initialized or self.remember_duration_ms is None:
            raise ValueError(f"{name} has not been initialized")
        if self.must_checkpoint and self.checkpoint_duration_ms is None:
            raise ValueError(
                f"The checkpoint interval for {name} has not been set. Please use DStream.checkpoint()."
            )
        if self.checkpoint_duration_ms is not None:
            slide = self.slide_duration_ms
            if self.checkpoint_duration_ms < slide or self.checkpoint_duration_ms % slide:
                raise ValueError(
                    f"The checkpoint interval for {name} has been set to {self.checkpoint_duration_ms} ms, "
                    f"which is not a multiple of its slide time ({slide} ms)."
                )
            if self.storage_level is None:
                raise ValueError(
                    f"{name} has been marked for checkpointing but the storage level is not set."
                )
            if self.remember_duration_ms <= self.checkpoint_duration_ms:
                raise ValueError(
                    f"The remember duration for {name} has been set to {self.remember_duration_ms} ms, "
                    f"which is not more than the checkpoint interval ({self.checkpoint_duration_ms} ms)."
                )
        for parent in self.dependencies:
            parent.validate_at_start()

    # ------------------------------------------------------------ generating RDDs

    def is_time_valid(self, time_ms: int) -> bool:
        if self.zero_time_ms is None:
            raise RuntimeError(f"{self} has not been initialized")
        return time_ms > self.zero_time_ms and (time_ms - self.zero_time_ms) % self.slide_duration_ms == 0

    def get_or_compute(self, time_ms: int) -> RDD[Any] | None:
        """The RDD of ``time_ms``: remembered, else computed (then persisted and checkpointed as asked)."""
        rdd = self.generated_rdds.get(time_ms)
        if rdd is not None or not self.is_time_valid(time_ms):
            return rdd
        rdd = self.compute(time_ms)
        if rdd is None:
            return None
        if self.storage_level is not None and not rdd.is_cached:
            rdd.persist(self.storage_level)
        assert self.zero_time_ms is not None
        if (
            self.checkpoint_duration_ms is not None
            and (time_ms - self.zero_time_ms) % self.checkpoint_duration_ms == 0
        ):
            rdd.localCheckpoint()
        self.generated_rdds[time_ms] = rdd
        return rdd

    def slice_ms(self, from_time_ms: int, to_time_ms: int) -> list[RDD[Any]]:
        """The RDDs of every batch time in ``[from, to]``, both aligned down to this stream's slide."""
        if self.zero_time_ms is None:
            raise RuntimeError(f"{self} has not been initialized")
        zero, slide = self.zero_time_ms, self.slide_duration_ms
        aligned_to = zero + (to_time_ms - zero) // slide * slide
        aligned_from = zero + (from_time_ms - zero) // slide * slide
        rdds: list[RDD[Any]] = []
        for time_ms in range(aligned_from, aligned_to + 1, slide):
            if time_ms >= zero:
                rdd = self.get_or_compute(time_ms)
                if rdd is not None:
                    rdds.append(rdd)
        return rdds

    def earlier_rdd(self, time_ms: int) -> RDD[Any] | None:
        """The RDD of an earlier time that a stateful stream builds on (its previous state or window).

        Before this run's first batch there is nothing on a fresh start; after a restart there is
        the restored state checkpoint and, recomputed from it, the times after it (their input read
        back from the write-ahead logs). Anything older would recurse to the zero time."""
        graph = self.graph
        if graph is not None and graph.start_time_ms is not None and time_ms <= graph.start_time_ms:
            restored = self.restored_state_time_ms
            if restored is None or time_ms < restored:
                return None
        return self.get_or_compute(time_ms)

    def restore_state(self, snapshot: StateSnapshot, rdd: RDD[Any]) -> None:
        """Make ``rdd`` (read back from ``snapshot``) this stream's RDD of the snapshot's time."""
        if self.is_initialized:
            raise ValueError("state can only be restored before the streaming context starts")
        rdd.persist(self.storage_level or DEFAULT_PERSIST_LEVEL)
        self.generated_rdds[snapshot.time_ms] = rdd
        self.restored_state_time_ms = snapshot.time_ms
        self.state_snapshots = [snapshot]

    def recompute_state_from(self, time_ms: int) -> None:
        """After a restart without a state checkpoint to restore: recompute back to ``time_ms``
        (the zero time, where the state is empty) instead of starting empty."""
        if self.is_initialized:
            raise ValueError("state can only be restored before the streaming context starts")
        self.restored_state_time_ms = time_ms

    def checkpoint_signature(self) -> str:
        """What a state checkpoint of this stream is of: a restart refuses one of another stream."""
        return f"{type(self).__name__}(slide={self.slide_duration_ms}ms)"

    def clear_metadata(self, time_ms: int) -> None:
        """Forget (and unpersist, unless ``spark.streaming.unpersist`` is off) RDDs older than the
        remember duration, then ask the parents to do the same."""
        assert self.remember_duration_ms is not None
        threshold = time_ms - self.remember_duration_ms
        old = [t for t in self.generated_rdds if t <= threshold]
        unpersist = self._ssc.settings.jobs.unpersist
        for old_time in old:
            rdd = self.generated_rdds.pop(old_time)
            if unpersist:
                self.release_rdd(old_time, rdd)
        if old:
            logger.debug("Cleared %d RDDs of %s up to %d ms", len(old), self, threshold)
        for parent in self.dependencies:
            parent.clear_metadata(time_ms)

    def release_rdd(self, time_ms: int, rdd: RDD[Any]) -> None:
        """Free what a forgotten RDD holds; input streams whose RDDs own blocks override this."""
        if rdd.is_cached:
            if rdd.isLocallyCheckpointed():
                unpersist_quietly(rdd)  # Spark warns for each one, every checkpoint interval
            else:
                rdd.unpersist(blocking=False)

    def register(self) -> DStream:
        """Make this an output stream of the graph."""
        self._ssc.graph.add_output_stream(self)
        return self

    def generate_job(self, time_ms: int, output_op_id: int) -> Job | None:
        raise TypeError(f"{type(self).__name__} is not an output stream")

    def __repr__(self) -> str:
        return f"{type(self).__name__}@{id(self):x}"

    # ------------------------------------------------------------ persistence

    def cache(self) -> DStream:
        """Persist every RDD of this stream in memory (pyspark's ``MEMORY_ONLY``)."""
        return self.persist(DEFAULT_PERSIST_LEVEL)

    def persist(self, storageLevel: StorageLevel = DEFAULT_PERSIST_LEVEL) -> DStream:
        if self.is_initialized:
            raise ValueError("Cannot change storage level of a DStream after streaming context has started")
        self.storage_level = storageLevel
        self.is_cached = True
        return self

    def checkpoint(self, interval: float) -> DStream:
        """Truncate the lineage of this stream's RDDs every ``interval`` seconds (local checkpoint)."""
        if self.is_initialized:
            raise ValueError(
                "Cannot change checkpoint interval of a DStream after streaming context has started"
            )
        if self.storage_level is None:
            self.persist()
        self.checkpoint_duration_ms = duration_ms(interval, "checkpoint interval")
        self.is_checkpointed = True
        return self

    # ------------------------------------------------------------ element-wise operations

    def map(self, f: Callable[[Any], Any], preservesPartitioning: bool = False) -> DStream:
        def func(iterator: Iterable[Any]) -> Iterator[Any]:
            return map(f, iterator)

        return self.mapPartitions(func, preservesPartitioning)

    def flatMap(self, f: Callable[[Any], Iterable[Any]], preservesPartitioning: bool = False) -> DStream:
        def func(_split: int, iterator: Iterable[Any]) -> Iterator[Any]:
            return itertools.chain.from_iterable(map(f, iterator))

        return self.mapPartitionsWithIndex(func, preservesPartitioning)

    def filter(self, f: Callable[[Any], bool]) -> DStream:
        def func(iterator: Iterable[Any]) -> Iterator[Any]:
            return filter(f, iterator)

        return self.mapPartitions(func, True)

    def mapPartitions(
        self, f: Callable[[Iterable[Any]], Iterable[Any]], preservesPartitioning: bool = False
    ) -> DStream:
        def func(_split: int, iterator: Iterable[Any]) -> Iterable[Any]:
            return f(iterator)

        return self.mapPartitionsWithIndex(func, preservesPartitioning)

    def mapPartitionsWithIndex(
        self, f: Callable[[int, Iterable[Any]], Iterable[Any]], preservesPartitioning: bool = False
    ) -> DStream:
        return self._transform_rdd(lambda rdd: rdd.mapPartitionsWithIndex(f, preservesPartitioning))

    def glom(self) -> DStream:
        def func(iterator: Iterable[Any]) -> Iterator[list[Any]]:
            yield list(iterator)

        return self.mapPartitions(func)

    def repartition(self, numPartitions: int) -> DStream:
        return self._transform_rdd(lambda rdd: rdd.repartition(numPartitions))

    def count(self) -> DStream:
        """One element per batch: the number of records (0 for an empty batch, as in Spark)."""

        def count_partition(iterator: Iterable[Any]) -> list[int]:
            return [sum(1 for _ in iterator)]

        def with_zero(rdd: RDD[int]) -> RDD[int]:
            # An RDD without partitions counts nothing; the zero keeps one element per batch.
            return rdd.union(rdd.context.parallelize([0], 1))

        return self.mapPartitions(count_partition)._transform_rdd(with_zero).reduce(operator.add)

    def reduce(self, func: Callable[[Any, Any], Any]) -> DStream:
        return self.map(lambda x: (None, x)).reduceByKey(func, 1).map(lambda kv: kv[1])

    def countByValue(self) -> DStream:
        return self.map(lambda x: (x, 1)).reduceByKey(operator.add)

    # ------------------------------------------------------------ key-value operations

    def mapValues(self, f: Callable[[Any], Any]) -> DStream:
        def map_values(kv: tuple[Any, Any]) -> tuple[Any, Any]:
            return kv[0], f(kv[1])

        return self.map(map_values, preservesPartitioning=True)

    def flatMapValues(self, f: Callable[[Any], Iterable[Any]]) -> DStream:
        def flat_map_values(kv: tuple[Any, Any]) -> Iterator[tuple[Any, Any]]:
            return ((kv[0], x) for x in f(kv[1]))

        return self.flatMap(flat_map_values, preservesPartitioning=True)

    def reduceByKey(self, func: Callable[[Any, Any], Any], numPartitions: int | None = None) -> DStream:
        return self.combineByKey(lambda x: x, func, func, numPartitions)

    def combineByKey(
        self,
        createCombiner: Callable[[Any], Any],
        mergeValue: Callable[[Any, Any], Any],
        mergeCombiners: Callable[[Any, Any], Any],
        numPartitions: int | None = None,
    ) -> DStream:
        partitions = self._num_partitions(numPartitions)
        return self._transform_rdd(
            lambda rdd: rdd.combineByKey(createCombiner, mergeValue, mergeCombiners, partitions)
        )

    def partitionBy(self, numPartitions: int, partitionFunc: Callable[[Any], int] = portable_hash) -> DStream:
        return self._transform_rdd(lambda rdd: rdd.partitionBy(numPartitions, partitionFunc))

    def groupByKey(self, numPartitions: int | None = None) -> DStream:
        partitions = self._num_partitions(numPartitions)
        return self._transform_rdd(lambda rdd: rdd.groupByKey(partitions))

    def cogroup(self, other: DStream, numPartitions: int | None = None) -> DStream:
        partitions = self._num_partitions(numPartitions)
        return self._transform_with_rdd(lambda a, b: a.cogroup(b, partitions), other)

    def join(self, other: DStream, numPartitions: int | None = None) -> DStream:
        partitions = self._num_partitions(numPartitions)
        return self._transform_with_rdd(lambda a, b: a.join(b, partitions), other)

    def leftOuterJoin(self, other: DStream, numPartitions: int | None = None) -> DStream:
        partitions = self._num_partitions(numPartitions)
        return self._transform_with_rdd(lambda a, b: a.leftOuterJoin(b, partitions), other)

    def rightOuterJoin(self, other: DStream, numPartitions: int | None = None) -> DStream:
        partitions = self._num_partitions(numPartitions)
        return self._transform_with_rdd(lambda a, b: a.rightOuterJoin(b, partitions), other)

    def fullOuterJoin(self, other: DStream, numPartitions: int | None = None) -> DStream:
        partitions = self._num_partitions(numPartitions)
        return self._transform_with_rdd(lambda a, b: a.fullOuterJoin(b, partitions), other)

    # ------------------------------------------------------------ combining streams

    def union(self, other: DStream) -> DStream:
        if self.slide_duration_ms != other.slide_duration_ms:
            raise ValueError("the two DStream should have same slide duration")
        return _union.UnionDStream([self, other])

    def transform(self, func: Callable[..., RDD[Any] | None]) -> DStream:
        """``func(rdd)`` or ``func(time, rdd)`` (time a ``datetime``) returns this batch's new RDD."""
        user = with_time(func, 1, "transform")
        return _transformed.TransformedDStream([self], lambda t, rdd: user(batch_datetime(t), rdd))

    def transformWith(
        self, func: Callable[..., RDD[Any] | None], other: DStream, keepSerializer: bool = False
    ) -> DStream:
        """``func(a, b)`` or ``func(time, a, b)`` over this and ``other``'s RDDs of each batch.

        ``keepSerializer`` is accepted for pyspark compatibility; RDDs keep their own serializer here.
        """
        user = with_time(func, 2, "transformWith")
        return _transformed.TransformedDStream([self, other], lambda t, a, b: user(batch_datetime(t), a, b))

    # ------------------------------------------------------------ windows

    def window(self, windowDuration: float, slideDuration: float | None = None) -> DStream:
        window_ms, slide_ms = self._window_params(windowDuration, slideDuration)
        return _windowed.WindowedDStream(self, window_ms, slide_ms)

    def reduceByWindow(
        self,
        reduceFunc: Callable[[Any, Any], Any],
        invReduceFunc: Callable[[Any, Any], Any] | None,
        windowDuration: float,
        slideDuration: float | None = None,
    ) -> DStream:
        keyed = self.map(lambda x: (1, x))
        reduced = keyed.reduceByKeyAndWindow(reduceFunc, invReduceFunc, windowDuration, slideDuration, 1)
        return reduced.map(lambda kv: kv[1])

    def countByWindow(self, windowDuration: float, slideDuration: float | None = None) -> DStream:
        return self.map(lambda _: 1).reduceByWindow(operator.add, operator.sub, windowDuration, slideDuration)

    def countByValueAndWindow(
        self, windowDuration: float, slideDuration: float | None = None, numPartitions: int | None = None
    ) -> DStream:
        keyed = self.map(lambda x: (x, 1))
        counted = keyed.reduceByKeyAndWindow(
            operator.add, operator.sub, windowDuration, slideDuration, numPartitions
        )
        return counted.filter(lambda kv: kv[1] > 0)

    def groupByKeyAndWindow(
        self, windowDuration: float, slideDuration: float | None = None, numPartitions: int | None = None
    ) -> DStream:
        lists = self.mapValues(lambda x: [x])
        grouped = lists.reduceByKeyAndWindow(operator.add, None, windowDuration, slideDuration, numPartitions)
        return grouped.mapValues(iter)

    def reduceByKeyAndWindow(  # noqa: PLR0917 - pyspark's positional signature
        self,
        func: Callable[[Any, Any], Any],
        invFunc: Callable[[Any, Any], Any] | None,
        windowDuration: float,
        slideDuration: float | None = None,
        numPartitions: int | None = None,
        filterFunc: Callable[[tuple[Any, Any]], bool] | None = None,
    ) -> DStream:
        """Reduce by key over a sliding window; with ``invFunc``, incrementally (new values
        reduced in, values that left the window inverse-reduced out)."""
        window_ms, slide_ms = self._window_params(windowDuration, slideDuration)
        partitions = self._num_partitions(numPartitions)
        reduced = self.reduceByKey(func, partitions)
        if invFunc is None:
            return reduced.window(windowDuration, slideDuration).reduceByKey(func, partitions)
        return _reduced_windowed.ReducedWindowedDStream(
            reduced, func, invFunc, window_ms, slide_ms, num_partitions=partitions, filter_func=filterFunc
        )

    # ------------------------------------------------------------ state

    def updateStateByKey(
        self,
        updateFunc: Callable[[list[Any], Any], Any],
        numPartitions: int | None = None,
        initialRDD: RDD[tuple[Any, Any]] | Iterable[tuple[Any, Any]] | None = None,
    ) -> DStream:
        """``updateFunc(new_values, old_state)`` gives the new state; ``None`` drops the key."""
        partitions = self._num_partitions(numPartitions)
        if initialRDD is not None and not isinstance(initialRDD, RDD):
            initialRDD = self._sc.parallelize(list(initialRDD))
        return _state.StateDStream(self, updateFunc, partitions, initialRDD)

    # ------------------------------------------------------------ output operations

    def foreachRDD(self, func: Callable[..., Any]) -> None:
        """Run ``func(rdd)`` or ``func(time, rdd)`` (time a ``datetime``) on the driver every batch."""
        user = with_time(func, 1, "foreachRDD")
        _foreach.ForEachDStream(
            self, lambda t, rdd: user(batch_datetime(t), rdd), name=creation_site("foreachRDD")
        ).register()

    def pprint(self, num: int = 10) -> None:
        """Print the first ``num`` elements of every batch, under pyspark's time banner."""

        def take_and_print(time: datetime, rdd: RDD[Any]) -> None:
            # A cached batch is read from the cache by the JVM: pyspark's take would lose the
            # Python worker that stops reading it, and the next batch would fork another.
            taken = take_first(rdd, num + 1)
            print("-------------------------------------------")
            print(f"Time: {time}")
            print("-------------------------------------------")
            for record in taken[:num]:
                print(record)
            if len(taken) > num:
                print("...")
            print("")

        _foreach.ForEachDStream(
            self, lambda t, rdd: take_and_print(batch_datetime(t), rdd), name=creation_site("pprint")
        ).register()

    def saveAsTextFiles(self, prefix: str, suffix: str | None = None) -> None:
        """Save every batch as text files in ``prefix-<time ms>[.suffix]``."""

        def save(time_ms: int, rdd: RDD[Any]) -> None:
            path = rdd_to_file_name(prefix, suffix, time_ms)
            try:
                rdd.saveAsTextFile(path)
            except Exception as exc:
                # A batch run again after a driver restart finds its output already there.
                if "FileAlreadyExistsException" not in str(exc):
                    raise
                logger.info("Output of batch %d already exists at %s", time_ms, path)

        _foreach.ForEachDStream(self, save, name=creation_site("saveAsTextFiles")).register()

    # ------------------------------------------------------------ inspection

    def slice(self, begin: datetime | float, end: datetime | float) -> list[RDD[Any]]:
        """All RDDs between ``begin`` and ``end`` (both included): ``datetime``s or Unix seconds."""
        with self._ssc.graph.lock:
            return self.slice_ms(time_ms_of(begin), time_ms_of(end))

    # ------------------------------------------------------------ helpers

    def _transform_rdd(self, func: Callable[[RDD[Any]], RDD[Any]]) -> DStream:
        return _transformed.TransformedDStream([self], lambda _t, rdd: func(rdd))

    def _transform_with_rdd(self, func: Callable[[RDD[Any], RDD[Any]], RDD[Any]], other: DStream) -> DStream:
        return _transformed.TransformedDStream([self, other], lambda _t, a, b: func(a, b))

    def _num_partitions(self, num_partitions: int | None) -> int:
        # pyspark fixes the count up front so that every batch (and any state) partitions alike.
        return self._sc.defaultParallelism if num_partitions is None else num_partitions

    def _window_params(self, window_duration: float, slide_duration: float | None) -> tuple[int, int]:
        window_ms = duration_ms(window_duration, "windowDuration")
        slide_ms = (
            self.slide_duration_ms if slide_duration is None else duration_ms(slide_duration, "slideDuration")
        )
        parent_slide = self.slide_duration_ms
        if window_ms % parent_slide:
            raise ValueError(
                "windowDuration must be multiple of the parent dstream's slide (batch) duration "
                f"({parent_slide} ms)"
            )
        if slide_ms % parent_slide:
            raise ValueError(
                "slideDuration must be multiple of the parent dstream's slide (batch) duration "
                f"({parent_slide} ms)"
            )
        return window_ms, slide_ms


# The operations above construct these subclasses, which themselves import DStream: importing the
# modules (not their names) here, after DStream exists, resolves the cycle whichever side loads first.
from reliable_kafka.dstream import foreach_dstream as _foreach  # noqa: E402
from reliable_kafka.dstream import reduced_windowed_dstream as _reduced_windowed  # noqa: E402
from reliable_kafka.dstream import state_dstream as _state  # noqa: E402
from reliable_kafka.dstream import transformed_dstream as _transformed  # noqa: E402
from reliable_kafka.dstream import union_dstream as _union  # noqa: E402
from reliable_kafka.dstream import windowed_dstream as _windowed  # noqa: E402
