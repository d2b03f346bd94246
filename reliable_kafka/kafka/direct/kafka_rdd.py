"""Spark's ``KafkaRDD``: the records of exact offset ranges, one partition per range.

Each partition is a small msgpack descriptor (the range and the kafkaParams, plain data: never
pickled) read on an executor by a consumer assigned to exactly that range, by the rules of the
reader that reads a damaged write-ahead log block again (``block_reread``): records Kafka no
longer has fail the task with ``records lost: <ranges>``, never a silent gap, and a failed task
read again by Spark's retry reads the same records.

The range is read by packed fetch (``client/chunk_range_reader``) into the chunks a receiver's
blocks hold, a chunk of up to :data:`CHUNK_RECORDS` records at a time, and each chunk goes
through the stream's decoder as a batch's blocks do (``dstream/chunk_decoding``): the default
UTF-8 decoders decode its key and value columns without a Python call per record; other decoders
and a ``messageHandler`` see each record, the handler's ``KafkaMessageAndMetadata`` built from the
chunk's columns, with the timestamp and headers packed beside them. Where packed fetch is off
(no C extension, an unverified confluent-kafka) the same chunks are built from confluent-kafka's
messages, a piece of :data:`PIECE_OFFSETS` offsets at a time.

A partition prefers the host of its leader when ``leaders`` name one (as Spark's ``KafkaRDD``
did); librdkafka finds and follows the leader itself either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Protocol

import msgpack
from confluent_kafka import Message
from pyspark import RDD, SparkContext
from pyspark.rdd import PipelinedRDD

from reliable_kafka.dstream.batch_rdd import SKIP_RECORD
from reliable_kafka.dstream.chunk_decoding import decoded_chunks
from reliable_kafka.kafka.client.chunk_range_reader import ChunkColumns, ChunkRangeReader
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.range_reader import DEFAULT_REREAD_TIMEOUT_S, range_consumer, range_messages
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct.broker import Broker
from reliable_kafka.kafka.direct.message_and_metadata import record_metadata
from reliable_kafka.storage.block_format import rows_of_chunk
from reliable_kafka.util.located_rdd import located_rdd


class Decoder(Protocol):
    """A record ``(key, value, topic, partition, offset)`` -> an RDD element; with
    ``wants_metadata``, records get ``timestamp, timestampType, headers`` after those five."""

    @property
    def wants_metadata(self) -> bool: ...

    def __call__(self, record: tuple[Any, ...], /) -> Any: ...


# Offsets per piece of a range read record by record (packed fetch off): what a task holds in
# raw records at once.
PIECE_OFFSETS = 20_000
# Records per chunk of a range read by packed fetch: what a task holds, raw and decoded, at once.
CHUNK_RECORDS = 10_000


def encode_range_partition(kafka_params: Mapping[str, Any], offset_range: OffsetRange) -> bytes:
    return msgpack.packb(
        {"kafka_params": dict(kafka_params), "range": offset_range.to_dict()}, use_bin_type=True
    )


def decode_range_partition(raw: bytes) -> tuple[dict[str, Any], OffsetRange]:
    d = msgpack.unpackb(raw, raw=False)
    return d["kafka_params"], OffsetRange.from_metadata(d["range"])


def pieces(offset_range: OffsetRange, size: int = PIECE_OFFSETS) -> Iterator[OffsetRange]:
    r = offset_range
    for start in range(r.fromOffset, r.untilOffset, size):
        yield OffsetRange(r.topic, r.partition, start, min(start + size, r.untilOffset))


def read_chunks(
    kafka_params: Mapping[str, Any], offset_range: OffsetRange, *, with_metadata: bool = False
) -> Iterator[ChunkColumns]:
    """The records of ``offset_range`` as chunk columns ``(topic, partition, keys, values,
    offsets)``, in offset order; with ``with_metadata``, followed by the columns ``timestamps,
    timestamp types, headers``. Read by packed fetch where this process has it, else from
    confluent-kafka's messages."""
    if offset_range.count() <= 0:
        return
    tp = TopicAndPartition(offset_range.topic, offset_range.partition)
    reader = ChunkRangeReader.open(kafka_params, tp, with_metadata=with_metadata)
    if isinstance(reader, str):
        yield from _message_chunks(kafka_params, offset_range, with_metadata)
        return
    try:
        yield from reader.read(
            offset_range, DEFAULT_REREAD_TIMEOUT_S, CHUNK_RECORDS, with_metadata=with_metadata
        )
    finally:
        reader.close()


def _message_chunks(
    kafka_params: Mapping[str, Any], offset_range: OffsetRange, with_metadata: bool
) -> Iterator[ChunkColumns]:
    """:func:`read_chunks` from confluent-kafka's messages, a piece of the range at a time."""
    consumer = range_consumer(kafka_params)
    try:
        for piece in pieces(offset_range):
            messages = list(range_messages(consumer, piece, DEFAULT_REREAD_TIMEOUT_S))
            if not messages:
                continue
            columns = (
                tuple(map(Message.key, messages)),
                tuple(map(Message.value, messages)),
                tuple(map(Message.offset, messages)),
            )
            if with_metadata:
                columns += tuple(zip(*map(record_metadata, messages), strict=True))
            yield (piece.topic, piece.partition, *columns)
    finally:
        consumer.close()


def read_records(
    kafka_params: Mapping[str, Any], offset_range: OffsetRange, *, with_metadata: bool = False
) -> Iterator[tuple[Any, ...]]:
    """``(key, value, topic, partition, offset)`` of every record in ``offset_range``; with
    ``with_metadata``, followed by its ``timestamp, timestampType, headers``."""
    return chain.from_iterable(
        map(rows_of_chunk, read_chunks(kafka_params, offset_range, with_metadata=with_metadata))
    )


class _ReadRanges:
    """The executor-side function of a Kafka RDD: descriptors in, decoded records out, a chunk
    of a range at a time (``dstream.chunk_decoding``: the default decoders decode a chunk's
    columns without a Python call per record)."""

    def __init__(self, decoder: Decoder | None) -> None:
        self.decoder = decoder

    def __call__(self, _split: int, descriptors: Iterable[bytes]) -> Iterator[Any]:
        decoder = self.decoder
        if decoder is None:
            return chain.from_iterable(read_records(*decode_range_partition(raw)) for raw in descriptors)
        with_metadata = decoder.wants_metadata
        chunks = chain.from_iterable(
            read_chunks(*decode_range_partition(raw), with_metadata=with_metadata) for raw in descriptors
        )
        return decoded_chunks(chunks, decoder, SKIP_RECORD)


class KafkaRDD(PipelinedRDD):
    """The records of ``offset_ranges``, in range order; a plain PySpark RDD downstream, with
    pyspark 2.4's ``offsetRanges()``."""

    def __init__(
        self,
        sc: SparkContext,
        kafka_params: Mapping[str, Any],
        offset_ranges: Sequence[OffsetRange],
        *,
        decoder: Decoder | None = None,
        leaders: Mapping[TopicAndPartition, Broker] | None = None,
    ) -> None:
        leaders = leaders or {}
        located = []
        for r in offset_ranges:
            leader = leaders.get(TopicAndPartition(r.topic, r.partition))
            located.append((encode_range_partition(kafka_params, r), [leader.host] if leader else []))
        super().__init__(located_rdd(sc, located), _ReadRanges(decoder), preservesPartitioning=False)
        self._offset_ranges = list(offset_ranges)

    def offsetRanges(self) -> list[OffsetRange]:
        """The ranges this RDD holds, one per partition, in partition order."""
        return list(self._offset_ranges)


def with_offset_ranges(rdd: RDD[Any] | None) -> RDD[Any] | None:
    """``rdd`` with the ``offsetRanges()`` of the :class:`KafkaRDD` it derives from by pipelined
    steps (``map``, ``filter``...), as pyspark 2.4's ``KafkaRDD.offsetRanges`` found it among
    its narrow ancestors; unchanged if it derives from none (a shuffle, a union)."""
    if rdd is None or hasattr(rdd, "offsetRanges"):
        return rdd
    ancestor: Any = rdd
    while isinstance(ancestor, PipelinedRDD):
        ancestor = ancestor.prev  # the RDD it was made from, each pipelined step keeping one
        if isinstance(ancestor, KafkaRDD):
            rdd.offsetRanges = ancestor.offsetRanges  # type: ignore[attr-defined]
            break
    return rdd
