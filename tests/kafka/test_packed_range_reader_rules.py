"""``PackedRangeReader.read`` against a scripted packed fetch: the loss and refusal rules of
``range_messages``, for what librdkafka may hand it in one fetch (records and errors apart)."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import KafkaError

from reliable_kafka.kafka.client.access_refusal import AccessRefusedError
from reliable_kafka.kafka.client.offset_range import OffsetRange
from reliable_kafka.kafka.client.packed_fetch import FetchedColumns
from reliable_kafka.kafka.client.packed_range_reader import PackedRangeReader
from reliable_kafka.kafka.client.range_reader import LostOffsetsError
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from tests.support.range_fakes import ScriptedConsumer, alice_refusals, eof


def fetched(offsets: list[int], *errors: KafkaError) -> FetchedColumns:
    """Records at ``offsets`` (only the offsets column matters to the reader) and ``errors``."""
    if not offsets:
        return FetchedColumns(None, 0, -1, -1, list(errors))
    columns = (None, b"", b"", None, b"", b"", struct.pack(f"{len(offsets)}q", *offsets), b"", b"")
    return FetchedColumns(columns, len(offsets), offsets[0], offsets[-1], list(errors))


class ScriptedFetch:
    def __init__(self, *batches: FetchedColumns) -> None:
        self._batches = list(batches)

    def fetch_columns(self, _max_messages: int, _timeout_s: float) -> FetchedColumns:
        return self._batches.pop(0) if self._batches else fetched([])

    def serve_events(self) -> list[KafkaError]:
        return []


def reader(*batches: FetchedColumns) -> PackedRangeReader:
    refusals = alice_refusals()
    return PackedRangeReader(ScriptedConsumer(), refusals, ScriptedFetch(*batches), TopicAndPartition("t", 0))  # type: ignore[arg-type]


def offsets_read(packed: PackedRangeReader, wanted: OffsetRange, timeout_s: float = 5) -> list[int]:
    kept = []
    for batch in packed.read(wanted, timeout_s, 100):
        kept += list(memoryview(batch.columns[6] or b"").cast("q"))[: batch.records]
    return kept


def test_a_range_ending_at_the_log_end_is_complete_despite_the_eof_in_its_last_fetch() -> None:
    assert offsets_read(reader(fetched([3, 4], eof())), OffsetRange("t", 0, 3, 5)) == [3, 4]


def test_records_past_the_range_in_the_same_fetch_are_left_out() -> None:
    assert offsets_read(reader(fetched([3]), fetched([4, 5, 6])), OffsetRange("t", 0, 3, 5)) == [3, 4]


def test_the_log_ending_inside_the_range_is_records_lost() -> None:
    with pytest.raises(LostOffsetsError, match=r"records lost: t/0 \[4, 6\): the log ends before them"):
        offsets_read(reader(fetched([3], eof())), OffsetRange("t", 0, 3, 6))


def test_a_topic_acl_refusal_ends_the_read_with_the_refusal_not_records_lost() -> None:
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Broker: Topic authorization failed")
    with pytest.raises(
        AccessRefusedError, match=r"Grant it: kafka-acls .* --operation Read --operation Describe"
    ):
        offsets_read(reader(fetched([3], refused)), OffsetRange("t", 0, 3, 6), timeout_s=60)


def test_a_read_that_waited_while_kafka_refused_the_client_fails_with_the_refusal() -> None:
    packed = reader()
    packed._refusals.observe(
        KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed")
    )
    with pytest.raises(AccessRefusedError, match="Kafka refused the credentials"):
        offsets_read(packed, OffsetRange("t", 0, 3, 6), timeout_s=0)


def test_quiet_time_without_a_record_is_records_lost() -> None:
    with pytest.raises(LostOffsetsError, match=r"t/0 \[3, 6\): no record from Kafka within 0 s"):
        offsets_read(reader(), OffsetRange("t", 0, 3, 6), timeout_s=0)
