"""Exact offset ranges read from Kafka: every record of ``[fromOffset, untilOffset)`` of a
partition, or :class:`LostOffsetsError` naming what Kafka no longer has.

What KafkaRDD's partitions read, and what a receiver's block is read again from when its
write-ahead log record is unreadable (:mod:`reliable_kafka.kafka.receiver.block_reread`). Runs on
the executors. The client configuration in it may hold credentials: it is never logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from reliable_kafka.kafka.client.access_refusal import AccessRefusals, refusal_error
from reliable_kafka.kafka.client.error_log import ClientErrorLog
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.params import KafkaParams, parse_kafka_params
from reliable_kafka.kafka.client.zk.broker_discovery import discover_bootstrap_servers, legacy_protocol_config
from reliable_kafka.kafka.client.zk.client import close_zookeeper, connect_zookeeper
from reliable_kafka.storage.block_format import PackedChunk, pack_chunk
from reliable_kafka.storage.block_recovery import BlockRecoveryError
from reliable_kafka.util.librdkafka_log import LibrdkafkaLog

logger = logging.getLogger(__name__)

# Without a record for this long (a broker down, a partition gone), the block counts as lost.
DEFAULT_REREAD_TIMEOUT_S = 60.0
POLL_S = 0.5


class LostOffsetsError(BlockRecoveryError):
    """Kafka no longer holds (part of) the records of a block whose WAL record is unreadable."""

    def __init__(self, lost: Sequence[OffsetRange], reason: str) -> None:
        self.lost = list(lost)
        self.reason = reason
        listed = ", ".join(f"{r.topic}/{r.partition} [{r.fromOffset}, {r.untilOffset})" for r in self.lost)
        super().__init__(f"records lost: {listed}: {reason}")


def broker_client_config(params: KafkaParams) -> dict[str, Any]:
    """``bootstrap.servers`` (as given, else from ZooKeeper's ``/brokers/ids``) and, when there is a
    ZooKeeper, the protocol settings its registered brokers need (pre-0.10 brokers, see
    ``legacy_protocol_config``). Without ZooKeeper the given servers are all there is."""
    if params.zookeeper is None:
        if params.bootstrap_servers is None:
            raise ValueError("kafka params: neither bootstrap.servers nor zookeeper.connect is given")
        return {"bootstrap.servers": params.bootstrap_servers}
    zk = connect_zookeeper(params.zookeeper)
    try:
        servers = params.bootstrap_servers
        if servers is None:
            protocol = str(params.client_config.get("security.protocol", "PLAINTEXT"))
            servers = discover_bootstrap_servers(zk, protocol, params.listener_name)
        return {"bootstrap.servers": servers, **legacy_protocol_config(zk, params.client_config)}
    finally:
        close_zookeeper(zk)


class RangeConsumer(Consumer):
    """A librdkafka consumer with the streak of refusals its error callback reported: a read
    that Kafka refuses ends with the refusal, not as records lost."""

    refusals: AccessRefusals


def range_consumer_config(kafka_params: Mapping[str, Any]) -> tuple[dict[str, Any], AccessRefusals]:
    """The configuration of a consumer that reads exact ranges, and the streak of refusals its
    error callback reports to: it fails on an offset Kafka no longer has instead of jumping to
    another, and sees where a partition's log ends."""
    params = parse_kafka_params(kafka_params)
    brokers = broker_client_config(params)
    config = {**params.consumer_config(brokers["bootstrap.servers"]), **brokers}
    # An offset Kafka no longer has is an error here, never a silent jump to another offset.
    config["auto.offset.reset"] = "error"
    config["enable.partition.eof"] = True
    refusals = AccessRefusals.of(config, timeout_ms=params.access_refusal_timeout_ms)
    config["error_cb"] = ClientErrorLog("range reader", refusals)
    config["logger"] = LibrdkafkaLog()
    return config, refusals


def range_consumer(kafka_params: Mapping[str, Any]) -> RangeConsumer:
    """A consumer that reads exact ranges with :func:`read_range` (see
    :func:`range_consumer_config`)."""
    config, refusals = range_consumer_config(kafka_params)
    consumer = RangeConsumer(config)
    consumer.refusals = refusals
    return consumer


def read_range(consumer: RangeConsumer, wanted: OffsetRange, timeout_s: float) -> list[PackedChunk]:
    """The records of ``wanted`` (by a :func:`range_consumer`); compacted-away offsets are simply
    absent, as in the log. ``LostOffsetsError`` names what Kafka no longer has."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    for message in range_messages(consumer, wanted, timeout_s):
        keys.append(message.key())
        values.append(message.value())
        offsets.append(message.offset())
    return [pack_chunk(wanted.topic, wanted.partition, keys, values, offsets)] if offsets else []


def read_ends(
    refusals: AccessRefusals, deadline: float, timeout_s: float, missing: OffsetRange
) -> BaseException | None:
    """Why a read ends now, before ``missing`` came: Kafka refused the client for
    ``access.refusal.timeout.ms``, or the quiet time passed (refused meanwhile, or the records
    are lost); None: read on."""
    refused = refusals.verdict
    if refused is not None or time.monotonic() <= deadline:
        return refused
    return refusals.error() or LostOffsetsError([missing], f"no record from Kafka within {timeout_s:.0f} s")


def read_fails(error: KafkaError, refusals: AccessRefusals, missing: OffsetRange) -> BaseException | None:
    """Whether an error among the messages ends the read before ``missing`` came."""
    if error.code() == KafkaError._PARTITION_EOF:
        return LostOffsetsError([missing], "the log ends before them")
    if error.fatal() or error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        return LostOffsetsError([missing], f"Kafka no longer has them ({error.str()})")
    return refusal_error(error, refusals.identity)  # an ACL: Kafka's answer to this read


def range_messages(consumer: RangeConsumer, wanted: OffsetRange, timeout_s: float) -> Iterator[Message]:
    """The messages of ``wanted`` in offset order, as :func:`read_range` reads them. The quiet
    time that counts as loss runs only while waiting on Kafka, not while the caller works on a
    message. Kafka refusing the client (``access.refusal.timeout.ms`` of refusals, or a refusal
    when the quiet time ends) raises :class:`AccessRefusedError`: nothing is lost then."""
    topic, partition = wanted.topic, wanted.partition
    refusals = consumer.refusals
    consumer.assign([TopicPartition(topic, partition, wanted.fromOffset)])
    next_offset = wanted.fromOffset
    deadline = time.monotonic() + timeout_s
    try:
        while next_offset < wanted.untilOffset:
            ended = read_ends(
                refusals, deadline, timeout_s, OffsetRange(topic, partition, next_offset, wanted.untilOffset)
            )
            if ended is not None:
                raise ended
            for message in consumer.consume(500, POLL_S):
                if next_offset >= wanted.untilOffset:
                    # Complete: a range that ends at the log's end gets the end-of-partition event
                    # in the same batch as its last record, which is no loss.
                    break
                error = message.error()
                if error is not None:
                    failed = read_fails(
                        error, refusals, OffsetRange(topic, partition, next_offset, wanted.untilOffset)
                    )
                    if failed is not None:
                        raise failed
                    continue  # transport errors: librdkafka retries
                offset = message.offset()
                if offset >= wanted.untilOffset:
                    next_offset = wanted.untilOffset
                    break
                next_offset = offset + 1
                yield message
                deadline = time.monotonic() + timeout_s
    except KafkaException as exc:
        missing = OffsetRange(topic, partition, next_offset, wanted.untilOffset)
        raise LostOffsetsError([missing], f"reading them failed: {exc}") from exc
    finally:
        consumer.unassign()
