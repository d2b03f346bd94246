"""Spark's ``DirectKafkaInputDStream``: no receiver; each batch is a range per Kafka partition.

At each batch time the driver takes, per partition, the range from where the last batch ended
to the partition's latest offset, at most the partition's limit for one batch
(``spark.streaming.kafka.maxRatePerPartition`` x the batch's seconds, or backpressure's rate
shared out by lag: :mod:`reliable_kafka.kafka.direct.rate_limit`), and the batch is a
:class:`KafkaRDD` of those ranges (one partition per Kafka partition, read on the executors).
Nothing is stored on the way: Kafka's log is the copy.

A restart from a checkpoint runs the batches the old run left pending with exactly their old
ranges, then goes on from the end of the last batch it generated: every checkpoint holds, as
plain data, the ranges of the batches this stream remembers (pending ones among them) and the
offsets the next batch starts from. ``compute`` and ``checkpoint_data`` both run on the job
generator's thread, so a checkpoint never sees a batch half made.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from reliable_kafka.dstream.functions import with_time
from reliable_kafka.dstream.input_dstream import InputDStream
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct.kafka_cluster import KafkaCluster
from reliable_kafka.kafka.direct.kafka_rdd import Decoder, KafkaRDD, with_offset_ranges
from reliable_kafka.kafka.direct.offset_commit import DirectOffsetCommitter
from reliable_kafka.kafka.direct.rate_limit import DirectKafkaRateController, max_messages_per_partition
from reliable_kafka.kafka.offsets.watched_group import WatchedGroup
from reliable_kafka.scheduler.listener_events import BatchInfo, StreamInputInfo
from reliable_kafka.scheduler.rate_controller import RateController
from reliable_kafka.scheduler.rate_estimator import RateEstimator

if TYPE_CHECKING:
    from pyspark import RDD

    from reliable_kafka.dstream.dstream import DStream
    from reliable_kafka.dstream.streaming_context import StreamingContextLike

logger = logging.getLogger(__name__)


class DirectKafkaInputDStream(InputDStream):
    """``from_offsets``: the first offset to read of every partition the stream reads.

    With backpressure on (``spark.streaming.backpressure.enabled``) the stream has a
    :class:`DirectKafkaRateController` as ``rate_controller``: the context puts it on the
    listener bus, and each batch's ranges follow its latest rate."""

    def __init__(
        self,
        ssc: StreamingContextLike,
        kafka_params: Mapping[str, Any],
        from_offsets: Mapping[TopicAndPartition, int],
        decoder: Decoder | None,
        cluster: KafkaCluster,
        *,
        committer: DirectOffsetCommitter | None = None,
    ) -> None:
        self.kafka_params = dict(kafka_params)
        self.current_offsets: dict[TopicAndPartition, int] = dict(sorted(from_offsets.items()))
        self._decoder = decoder
        self._cluster = cluster
        self._committer = committer
        settings = ssc.settings.kafka
        self.max_rate_per_partition = settings.max_rate_per_partition
        self.min_rate_per_partition = settings.min_rate_per_partition
        self._initial_rate = ssc.settings.backpressure.initial_rate
        # Batches of the checkpointed run still to be run again, by time: their ranges exactly.
        self._restored_batches: dict[int, list[OffsetRange]] = {}
        super().__init__(ssc)
        if RateController.is_back_pressure_enabled(ssc.settings):
            estimator = RateEstimator.create(ssc.settings.backpressure, ssc.batch_duration_ms)
            self.rate_controller = DirectKafkaRateController(self.id, estimator)

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        ranges = self._restored_batches.pop(valid_time_ms, None)
        if ranges is None:
            ranges = self._next_ranges()
        else:
            logger.info("%s: batch %d ms runs again with its checkpointed ranges", self.name, valid_time_ms)
        return KafkaRDD(self._sc, self.kafka_params, ranges, decoder=self._decoder)

    def _next_ranges(self) -> list[OffsetRange]:
        latest = self._cluster.latest_offsets(self.current_offsets)
        for tp, start in self.current_offsets.items():
            if latest[tp] < start:
                # The log lost records it had handed out (an unclean leader election): wait for it
                # to grow back rather than read offsets twice or fail every batch.
                logger.warning(
                    "%s: %s ends at %d, before the next offset to read %d", self.name, tp, latest[tp], start
                )
                latest[tp] = start
        limits = max_messages_per_partition(
            {tp: latest[tp] - start for tp, start in self.current_offsets.items()},
            batch_ms=self.slide_duration_ms,
            estimated_rate=self._estimated_rate(),
            max_rate_per_partition=self.max_rate_per_partition,
            min_rate_per_partition=self.min_rate_per_partition,
        )
        ranges = []
        for tp, start in self.current_offsets.items():
            end = latest[tp] if limits is None else min(latest[tp], start + limits[tp])
            ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
        self.current_offsets = {TopicAndPartition(r.topic, r.partition): r.untilOffset for r in ranges}
        return ranges

    def _estimated_rate(self) -> float | None:
        """Backpressure's rate for the next batch: the controller's latest, else the initial rate."""
        if self.rate_controller is None:
            return None
        latest = self.rate_controller.get_latest_rate()
        return float(latest) if latest > 0 else self._initial_rate

    def input_info(self, time_ms: int) -> tuple[int, dict[str, Any]] | None:
        """Spark's report of a direct batch: its ranges under ``offsets`` and as the description.
        The count is the ranges' (a compacted topic's batch holds fewer records)."""
        rdd = self.generated_rdds.get(time_ms)
        if not isinstance(rdd, KafkaRDD):
            return None
        ranges = rdd.offsetRanges()
        description = "\n".join(
            f"topic: {r.topic}\tpartition: {r.partition}\toffsets: {r.fromOffset} to {r.untilOffset}"
            for r in ranges
            if r.count()
        )
        metadata = {
            "offsets": [r.to_dict() for r in ranges],
            StreamInputInfo.METADATA_KEY_DESCRIPTION: description,
        }
        return sum(r.count() for r in ranges), metadata

    def transform(self, func: Callable[..., RDD[Any] | None]) -> DStream:
        """pyspark 2.4's ``KafkaDStream.transform``: what ``func`` returns keeps ``offsetRanges()``
        when it is the batch's RDD or made from it by pipelined steps (``rdd.map(...)``...)."""
        user = with_time(func, 1, "transform")
        return super().transform(lambda time, rdd: with_offset_ranges(user(time, rdd)))

    # ------------------------------------------------------------ checkpoint

    def checkpoint_data(self) -> dict[str, Any]:
        batches: dict[int, list[OffsetRange]] = dict(self._restored_batches)
        for time_ms, rdd in self.generated_rdds.items():
            if isinstance(rdd, KafkaRDD):
                batches[time_ms] = rdd.offsetRanges()
        return {
            "current_offsets": [
                [tp.topic, tp.partition, offset] for tp, offset in self.current_offsets.items()
            ],
            "batches": {
                str(time_ms): [[r.topic, r.partition, r.fromOffset, r.untilOffset] for r in ranges]
                for time_ms, ranges in sorted(batches.items())
            },
        }

    def restore_checkpoint_data(self, data: dict[str, Any]) -> None:
        try:
            current = {TopicAndPartition(str(t), int(p)): int(o) for t, p, o in data["current_offsets"]}
            batches = {
                int(time_ms): [OffsetRange.from_metadata(r) for r in ranges]
                for time_ms, ranges in data["batches"].items()
            }
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{self}: unreadable checkpoint data ({exc!r})") from exc
        if set(current) != set(self.current_offsets):
            logger.warning(
                "%s: the checkpoint reads partitions %s, setupFunc asked for %s: the checkpoint's go on",
                self.name,
                sorted(current),
                sorted(self.current_offsets),
            )
        self.current_offsets = dict(sorted(current.items()))
        self._restored_batches = batches
        logger.info(
            "%s: restored from the checkpoint: %d batch(es) with their ranges, next offsets %s",
            self.name,
            len(batches),
            {str(tp): offset for tp, offset in self.current_offsets.items()},
        )

    # ------------------------------------------------------------ life cycle

    def clear_metadata(self, time_ms: int) -> None:
        super().clear_metadata(time_ms)
        # A restored batch at or before a cleared time was never asked for again (off this grid).
        for old in [t for t in self._restored_batches if t <= time_ms - (self.remember_duration_ms or 0)]:
            del self._restored_batches[old]

    @property
    def committer(self) -> DirectOffsetCommitter | None:
        """The group commit of completed batches, if on (the status page reads its group's lag)."""
        return self._committer

    def watched_group(self) -> WatchedGroup | None:
        """The group completed batches are committed to (the status page's lag); None without the
        group commit: then no group holds this stream's position."""
        committer = self._committer
        if committer is None or committer.params is None:
            return None
        topics = tuple(sorted({tp.topic for tp in self.current_offsets}))
        return WatchedGroup(committer.params, topics, committer.client_config)

    def on_batch_completed(self, batch_info: BatchInfo) -> None:
        """With the group commit on: the batch's ranges, or its failure, to the committer."""
        if self._committer is None:
            return
        info = batch_info.stream_id_to_input_info.get(self.id)
        ranges = [OffsetRange.from_metadata(r) for r in (info.metadata.get("offsets", []) if info else [])]
        failures = [o.failure_reason for o in batch_info.output_operation_infos.values() if o.failure_reason]
        self._committer.batch_completed(batch_info.batch_time_ms, ranges, failures[0] if failures else None)

    def stop(self) -> None:
        if self.rate_controller is not None:
            self.rate_controller.stop()
        if self._committer is not None:
            self._committer.stop(self._ssc.settings.jobs.stop_timeout_ms / 1000)
        self._cluster.close()
