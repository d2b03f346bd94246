"""Spark's ``KafkaRDD``: the records of exact offset ranges, one partition per range.

Each partition is a small msgpack descriptor (the range and the kafkaParams, plain data: never
pickled) read on an executor by a consumer assigned to exactly that range, the same reader that
reads a damaged write-ahead log block again (``block_reread``): records Kafka no longer has fail
the task with ``records lost: <ranges>``, never a silent gap, and a failed task read again by
Spark's retry reads the same records. A range is read in pieces so that a task holds one piece's
raw records at a time, not its whole range. Decoders and the ``messageHandler`` run as records
are read; for a ``messageHandler`` each record also carries its timestamp and headers, read
straight from the consumer's messages (the batched path packs key, value and offset only).

A partition prefers the host of its leader when ``leaders`` name one (as Spark's ``KafkaRDD``
did); librdkafka finds and follows the leader itself either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import msgpack
from pyspark import RDD, SparkContext
from pyspark.rdd import PipelinedRDD

from reliable_kafka.dstream.batch_rdd import SKIP_RECORD
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.range_reader import (
    DEFAULT_REREAD_TIMEOUT_S,
    range_consumer,
    range_messages,
    read_range,
)
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct.broker import Broker
from reliable_kafka.kafka.direct.message_and_metadata import record_metadata
from reliable_kafka.storage.block_format import decode_block, encode_chunks
from reliable_kafka.util.located_rdd import located_rdd


class Decoder(Protocol):
    """A record ``(key, value, topic, partition, offset)`` -> an RDD element; with
    ``wants_metadata``, records get ``timestamp, timestampType, headers`` after those five."""

    @property
    def wants_metadata(self) -> bool: ...

    def __call__(self, record: tuple[Any, ...], /) -> Any: ...


# Offsets per piece of a range: what a task holds in raw records at once.
PIECE_OFFSETS = 20_000


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


def read_records(
    kafka_params: Mapping[str, Any], offset_range: OffsetRange, *, with_metadata: bool = False
) -> Iterator[tuple[Any, ...]]:
    """``(key, value, topic, partition, offset)`` of every record in ``offset_range``; with
    ``with_metadata``, followed by its ``timestamp, timestampType, headers``."""
    if offset_range.count() <= 0:
        return
    consumer = range_consumer(kafka_params)
    try:
        for piece in pieces(offset_range):
            if with_metadata:
                topic, partition = piece.topic, piece.partition
                for m in range_messages(consumer, piece, DEFAULT_REREAD_TIMEOUT_S):
                    yield (m.key(), m.value(), topic, partition, m.offset(), *record_metadata(m))
                continue
            chunks = read_range(consumer, piece, DEFAULT_REREAD_TIMEOUT_S)
            if chunks:
                yield from decode_block(encode_chunks(chunks))
    finally:
        consumer.close()


class _ReadRanges:
    """The executor-side function of a Kafka RDD: descriptors in, decoded records out."""

    def __init__(self, decoder: Decoder | None) -> None:
        self.decoder = decoder

    def __call__(self, _split: int, descriptors: Iterable[bytes]) -> Iterator[Any]:
        decoder = self.decoder
        with_metadata = decoder is not None and decoder.wants_metadata
        for raw in descriptors:
            records = read_records(*decode_range_partition(raw), with_metadata=with_metadata)
            if decoder is None:
                yield from records
                continue
            for item in map(decoder, records):
                if item is not SKIP_RECORD:
                    yield item


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
