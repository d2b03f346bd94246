"""``block_reread.read_range`` (the exact-range reader of WAL healing, createRDD and the direct
stream) against a scripted consumer: what librdkafka may hand it in one batch."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from reliable_kafka.kafka.client.access_refusal import AccessRefusals, AccessRefusedError, ClientIdentity
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.range_reader import LostOffsetsError, read_range
from reliable_kafka.storage.block_format import decode_block, encode_chunks


class Message:
    def __init__(self, offset: int, error: KafkaError | None = None) -> None:
        self._offset, self._error = offset, error

    def error(self) -> KafkaError | None:
        return self._error

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return str(self._offset).encode()


class ScriptedConsumer:
    def __init__(self, *batches: list[Message]) -> None:
        self._batches = list(batches)
        self.refusals = AccessRefusals(ClientIdentity.of({"sasl.username": "alice"}))

    def assign(self, _partitions: Any) -> None:
        pass

    def unassign(self) -> None:
        pass

    def consume(self, _n: int, _timeout: float) -> list[Message]:
        return self._batches.pop(0) if self._batches else []


def eof(offset: int) -> Message:
    return Message(offset, KafkaError(KafkaError._PARTITION_EOF))


def offsets_read(consumer: ScriptedConsumer, wanted: OffsetRange) -> list[int]:
    chunks = read_range(consumer, wanted, timeout_s=5)  # type: ignore[arg-type]
    return [record[4] for record in decode_block(encode_chunks(chunks))] if chunks else []


def test_a_range_ending_at_the_log_end_is_complete_despite_the_eof_beside_its_last_record() -> None:
    consumer = ScriptedConsumer([Message(3), Message(4), eof(5)])
    assert offsets_read(consumer, OffsetRange("t", 0, 3, 5)) == [3, 4]


def test_the_log_ending_inside_the_range_is_records_lost() -> None:
    consumer = ScriptedConsumer([Message(3), eof(4)])
    with pytest.raises(LostOffsetsError, match=r"records lost: t/0 \[4, 6\): the log ends before them"):
        offsets_read(consumer, OffsetRange("t", 0, 3, 6))


def test_a_topic_acl_refusal_ends_the_read_with_the_refusal_not_records_lost() -> None:
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Broker: Topic authorization failed")
    consumer = ScriptedConsumer([Message(3), Message(4, refused)])

    with pytest.raises(
        AccessRefusedError, match=r"Grant it: kafka-acls .* --operation Read --operation Describe"
    ):
        read_range(consumer, OffsetRange("t", 0, 3, 6), timeout_s=60)  # type: ignore[arg-type]


def test_a_read_that_waited_while_kafka_refused_the_client_fails_with_the_refusal() -> None:
    consumer = ScriptedConsumer()
    consumer.refusals.observe(
        KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed")
    )

    with pytest.raises(AccessRefusedError, match="Kafka refused the credentials"):
        read_range(consumer, OffsetRange("t", 0, 3, 6), timeout_s=0)  # type: ignore[arg-type]
