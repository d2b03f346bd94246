"""What both Kafka receivers share: a consumer group (in ZooKeeper, or kept by Kafka's group
coordinator when there is no ZooKeeper), one consumer per owned
partition, and each consumer's packed chunks buffered in the receiver's block generator with
the offsets they hold, so every block knows its offset ranges."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from reliable_kafka.kafka.client.fetch_stall import FetchStallMonitor
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.params import KafkaParams, parse_kafka_params
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.receiver.block_offsets import BlockOffsetTracker
from reliable_kafka.kafka.receiver.consumer_connector import ConsumerConnector, StoredOffsets
from reliable_kafka.kafka.receiver.partition_consumer import DEFAULT_BATCH_SIZE, DEFAULT_POLL_TIMEOUT_S
from reliable_kafka.receiver.block_generator import BlockGenerator, BlockGeneratorListener
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.storage.block_format import EncodedBlock, PackedChunk
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.storage_level import StorageLevel

ReleaseHook = Callable[[dict[TopicAndPartition, int | None]], None]


def validate_topics(topics: Mapping[str, int]) -> dict[str, int]:
    if not topics:
        raise ValueError("topics: at least one topic is needed")
    for topic, threads in topics.items():
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(
                f"topics: {topic!r} needs a positive number of consumer threads, got {threads!r}"
            )
    return dict(topics)


class ConsumerGroupReceiver(Receiver):
    """Base of :class:`KafkaReceiver` and :class:`ReliableKafkaReceiver`.

    ``zookeeper_connect`` None or empty: no ZooKeeper; ``kafka_params`` then needs
    ``bootstrap.servers``, and the group coordinator splits the partitions among the group's
    receivers (``partition.assignment.strategy``: range, roundrobin or cooperative-sticky).
    ``topics`` maps topic -> number of consumer threads, which (as in Spark and Kafka 0.8)
    counts in a ZooKeeper group's range assignment; each owned partition gets its own consumer
    thread. ``kafka_params`` takes 0.8 consumer keys (``zookeeper.*``, ``auto.offset.reset``,
    ``rebalance.*``...) and any librdkafka key.
    """

    def __init__(
        self,
        zookeeper_connect: str | None,
        group_id: str,
        topics: Mapping[str, int],
        kafka_params: Mapping[str, Any] | None,
        storage_level: StorageLevel | str,
        *,
        consume_batch_size: int = DEFAULT_BATCH_SIZE,
        poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
    ) -> None:
        super().__init__(storage_level)
        self.params: KafkaParams = parse_kafka_params(
            kafka_params or {}, zookeeper_connect=zookeeper_connect, group_id=group_id
        )
        self.topics = validate_topics(topics)
        self._batch_size = consume_batch_size
        self._poll_timeout_s = poll_timeout_s
        self._connector: ConsumerConnector | None = None
        self._block_generator: BlockGenerator | None = None
        # Whether a start of this receiver reached ZooKeeper (kept across restarts).
        self._zookeeper_reached = False

    @property
    def connector(self) -> ConsumerConnector:
        if self._connector is None:
            raise RuntimeError("the receiver is not started")
        return self._connector

    def _start_consuming(
        self,
        listener: OffsetTrackingListener,
        *,
        on_failure: Callable[[str, BaseException], None],
        before_release: ReleaseHook | None,
        stored_offsets: StoredOffsets | None = None,
    ) -> None:
        """Start the block generator, then join the group: consumers start as partitions are owned."""
        self._block_generator = self.supervisor.create_block_generator(listener)
        self._block_generator.start()
        self._connector = ConsumerConnector(
            self.params,
            self.topics,
            sink=self._add_chunk,
            on_failure=on_failure,
            before_release=before_release,
            stored_offsets=stored_offsets,
            batch_size=self._batch_size,
            poll_timeout_s=self._poll_timeout_s,
            stall_monitor=FetchStallMonitor(self.params.fetch_stall_timeout_ms, self.report_error),
            # A quorum the stream never reached is a mistake (the stream ends); later, an outage.
            first_contact=self.launch == 1 and not self._zookeeper_reached,
        )
        try:
            self._connector.start()
        finally:
            self._zookeeper_reached |= self._connector.zookeeper_reached

    def _add_chunk(self, tp: TopicAndPartition, chunk: PackedChunk, first: int, last: int) -> None:
        generator = self._block_generator
        assert generator is not None
        generator.add_data_with_callback(chunk, (tp, first, last), chunk.num_records, len(chunk.data))


class OffsetTrackingListener(BlockGeneratorListener):
    """Records which offsets each block holds (Spark's ``topicPartitionOffsetMap`` and
    ``blockOffsetMap``) and leaves storing each block to the receiver's own policy."""

    def __init__(self, receiver: Receiver, offsets: BlockOffsetTracker) -> None:
        self._receiver = receiver
        self._offsets = offsets

    def on_add_data(self, data: Any, metadata: Any) -> None:
        tp, first, last = metadata
        self._offsets.add(tp, first, last)

    def on_generate_block(self, block_id: StreamBlockId) -> None:
        self._offsets.cut(block_id)

    def prepare_block(self, block_id: StreamBlockId, records: list[Any]) -> EncodedBlock:
        # The block's items are what the consumers added: packed chunks. Joined here, on the
        # thread that cut the block, while the push thread stores the one before (receiver_bench,
        # 6M records: 3.74M against 3.22M records/s joined on the push thread).
        return EncodedBlock.of(records)

    def on_push_block(self, block_id: StreamBlockId, records: EncodedBlock | list[PackedChunk]) -> None:
        # A list when prepare_block failed (the generator reported it); encoding is all it did.
        block = records if isinstance(records, EncodedBlock) else EncodedBlock.of(records)
        try:
            self.store(block_id, block, self._offsets.ranges(block_id))
        finally:
            self._offsets.done(block_id)

    @abstractmethod
    def store(self, block_id: StreamBlockId, block: EncodedBlock, ranges: list[OffsetRange]) -> None:
        """Store one block of chunks holding ``ranges`` (its ``OffsetRange``s)."""

    def on_error(self, message: str, error: BaseException) -> None:
        self._receiver.report_error(message, error)
