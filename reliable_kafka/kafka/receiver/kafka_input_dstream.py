"""Spark's ``KafkaInputDStream``: the receiver-based Kafka stream ``KafkaUtils.createStream`` returns.

Which receiver runs is decided as Spark decides it: with the receiver write-ahead log on
(``spark.streaming.receiver.writeAheadLog.enable``, read into ``ssc.settings.wal.enable``) the
:class:`ReliableKafkaReceiver` (offsets committed only for stored blocks: no loss), otherwise the
:class:`KafkaReceiver` (periodic auto commit, as the 0.8 consumer did). Blocks hold the raw
``(key, value, topic, partition, offset)`` records; the stream's ``decoder`` turns them into what
the user sees when a batch is computed, on the executors. Each batch RDD is a ``BlockRDD`` and so
has ``offsetRanges()``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from reliable_kafka.dstream.batch_rdd import BlockRDD
from reliable_kafka.dstream.receiver_input_dstream import ReceiverInputDStream
from reliable_kafka.kafka.client.client_config import check_client_config
from reliable_kafka.kafka.client.offset_range import OffsetRange, offset_ranges_of_blocks, ranges_in_metadata
from reliable_kafka.kafka.client.params import KafkaParams, parse_kafka_params
from reliable_kafka.kafka.offsets.watched_group import WatchedGroup
from reliable_kafka.kafka.receiver.block_reread import recovery_source
from reliable_kafka.kafka.receiver.consumer_group_receiver import validate_topics
from reliable_kafka.kafka.receiver.decode_errors import DEAD_LETTERED_KEY, SKIPPED_KEY
from reliable_kafka.kafka.receiver.receiver_factory import kafka_receiver_descriptor
from reliable_kafka.settings import redacted
from reliable_kafka.storage.storage_level import StorageLevel

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext
    from pyspark.accumulators import Accumulator

    from reliable_kafka.dstream.streaming_context import StreamingContextLike
    from reliable_kafka.receiver.descriptor import ReceiverDescriptor
    from reliable_kafka.receiver.receiver import Receiver
    from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo

logger = logging.getLogger(__name__)


class DecodeErrorCounters:
    """One batch's records set aside by ``decodeErrors``: Spark accumulators, added to on the
    executors and read on the driver once the batch's jobs are done."""

    def __init__(self, sc: SparkContext) -> None:
        self.skipped: Accumulator[int] = sc.accumulator(0)
        self.dead_lettered: Accumulator[int] = sc.accumulator(0)

    def snapshot(self) -> dict[str, Any]:
        return {SKIPPED_KEY: self.skipped.value, DEAD_LETTERED_KEY: self.dead_lettered.value}


class RecordDecoder(Protocol):
    """What the stream needs of its decoder (``KafkaUtils``' record decoder is one): a record ->
    the element, and a copy counting one batch's records set aside by ``decodeErrors``."""

    decode_errors: str

    def __call__(self, record: tuple[Any, ...]) -> Any: ...

    def for_batch(self, counters: DecodeErrorCounters | None) -> RecordDecoder: ...


class KafkaInputDStream(ReceiverInputDStream):
    """A Kafka 0.8-style consumer group read by one receiver; see the module docstring.

    ``kafka_params`` must hold ``group.id`` and ``zookeeper.connect`` or, for a group kept by
    Kafka's group coordinator, ``bootstrap.servers``; they are validated here,
    when the stream is created, so that a mistake fails at ``createStream`` rather than at the
    first receiver start.
    """

    def __init__(
        self,
        ssc: StreamingContextLike,
        kafka_params: Mapping[str, Any],
        topics: Mapping[str, int],
        storage_level: StorageLevel | str | Any,
        decoder: RecordDecoder | None = None,
    ) -> None:
        # Validate before registering with the graph: a bad stream must not be left behind in it.
        self.kafka_params: dict[str, Any] = dict(kafka_params)
        self.params: KafkaParams = parse_kafka_params(self.kafka_params)
        # librdkafka's keys and values are checked here too, not at the first receiver start.
        check_client_config(self.params.consumer_config(""))
        self.topics: dict[str, int] = validate_topics(topics)
        # Not ``storage_level``: DStream uses that name for how its RDDs are persisted.
        self.receiver_storage_level = StorageLevel.of(storage_level)
        self._record_decoder = decoder
        super().__init__(ssc, decoder)

    def compute(self, valid_time_ms: int) -> RDD[Any] | None:
        record_decoder = self._record_decoder
        counters = None
        if record_decoder is not None and record_decoder.decode_errors != "fail":
            # Per batch, so that the batch info counts that batch's records only.
            counters = DecodeErrorCounters(self._sc)
            self.decoder = record_decoder.for_batch(counters)
        rdd = super().compute(valid_time_ms)
        if counters is not None and isinstance(rdd, BlockRDD):
            rdd.late_input_metadata = counters.snapshot
        return rdd

    def offset_ranges_of(self, block_infos: Sequence[ReceivedBlockInfo]) -> list[OffsetRange]:
        """The batch's offset ranges, from each block's ``metadata["offset_ranges"]``."""
        return offset_ranges_of_blocks(block_infos)

    @property
    def use_reliable_receiver(self) -> bool:
        """Spark's ``WriteAheadLogUtils.enableReceiverLog(conf)``: the WAL on means no-loss receiving;
        so does asking for it without the WAL, where the stored block (both copies with a level of
        replication 2) or Kafka's own log is what survives a lost host."""
        settings = self._ssc.settings
        return settings.wal.enable or settings.receiver.reliable_without_wal

    def receiver_descriptor(self) -> ReceiverDescriptor:
        return kafka_receiver_descriptor(
            reliable=self.use_reliable_receiver,
            zookeeper_connect=self.params.zookeeper.connect if self.params.zookeeper is not None else None,
            group_id=self.params.group.group_id,
            topics=self.topics,
            kafka_params=self.kafka_params,
            storage_level=self.receiver_storage_level,
            store_max_attempts=self._ssc.settings.receiver.store_max_attempts,
        )

    def watched_group(self) -> WatchedGroup:
        """The group the stream's receivers read for, where it keeps its offsets (the status page)."""
        return WatchedGroup(self.params, tuple(sorted(self.topics)), self.params.client_config, (self.id,))

    def block_recovery_source(self, info: ReceivedBlockInfo) -> dict[str, Any] | None:
        ranges = ranges_in_metadata(info.metadata)
        return recovery_source(self.kafka_params, ranges) if ranges else None

    def get_receiver(self) -> Receiver:
        receiver = self.receiver_descriptor().build()
        logger.info(
            "%s: %s for group %s, topics %s, storage level %s, client config %s",
            self.name,
            type(receiver).__name__,
            self.params.group.group_id,
            self.topics,
            self.receiver_storage_level,
            redacted(self.params.client_config),
        )
        return receiver
