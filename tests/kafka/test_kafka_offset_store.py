"""KafkaOffsetStore rules on librdkafka's mock cluster: next offset to read, never backwards, never
for a partition not owned, per-partition answers, and who closes the consumer."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.offsets.group.offset_store import KafkaOffsetStore
from reliable_kafka.kafka.offsets.store import CommitResult
from tests.kafka.mock_cluster import MockCluster, mock_cluster

GROUP = "g"
TOPIC = "t"
TP0 = TopicAndPartition(TOPIC, 0)
TP1 = TopicAndPartition(TOPIC, 1)


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with mock_cluster(1) as running:
        running.create_topic(TOPIC, 2)
        yield running


def config(cluster: MockCluster) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap_servers, "logger": logging.getLogger("librdkafka")}


class Owned:
    """The ownership predicate a membership would give, switched by the test."""

    def __init__(self, *tps: TopicAndPartition) -> None:
        self.tps = set(tps)

    def __call__(self, tp: TopicAndPartition) -> bool:
        return tp in self.tps


@pytest.fixture
def owned() -> Owned:
    return Owned(TP0, TP1)


@pytest.fixture
def store(cluster: MockCluster, owned: Owned) -> Iterator[KafkaOffsetStore]:
    offsets = KafkaOffsetStore.standalone(config(cluster), GROUP, owns=owned, retry_for_s=10.0)
    yield offsets
    offsets.close()


def coordinator_view(cluster: MockCluster, *tps: TopicAndPartition) -> dict[TopicAndPartition, int | None]:
    """What another client of the group reads back."""
    with_other = KafkaOffsetStore.standalone(config(cluster), GROUP, owns=lambda _: False)
    try:
        return with_other.fetch(tps)
    finally:
        with_other.close()


def test_a_group_that_never_committed_fetches_none(store: KafkaOffsetStore) -> None:
    assert store.fetch([TP0, TP1]) == {TP0: None, TP1: None}
    assert store.fetch([]) == {}


def test_committed_offsets_are_what_the_coordinator_holds(
    cluster: MockCluster, store: KafkaOffsetStore
) -> None:
    assert store.commit({TP0: 30, TP1: 7}) == {TP0: CommitResult.COMMITTED, TP1: CommitResult.COMMITTED}
    assert coordinator_view(cluster, TP0, TP1) == {TP0: 30, TP1: 7}


def test_never_backwards_and_equal_is_unchanged(cluster: MockCluster, store: KafkaOffsetStore) -> None:
    assert store.commit({TP0: 50})[TP0] is CommitResult.COMMITTED
    assert store.commit({TP0: 40})[TP0] is CommitResult.BACKWARDS
    assert store.commit({TP0: 50})[TP0] is CommitResult.UNCHANGED
    assert coordinator_view(cluster, TP0) == {TP0: 50}


def test_an_offset_committed_before_this_store_started_is_not_moved_back(
    cluster: MockCluster, owned: Owned
) -> None:
    first = KafkaOffsetStore.standalone(config(cluster), GROUP, owns=owned)
    assert first.commit({TP0: 100})[TP0] is CommitResult.COMMITTED
    first.close()
    second = KafkaOffsetStore.standalone(config(cluster), GROUP, owns=owned)
    try:
        assert second.commit({TP0: 20})[TP0] is CommitResult.BACKWARDS
        assert second.commit({TP0: 120})[TP0] is CommitResult.COMMITTED
    finally:
        second.close()
    assert coordinator_view(cluster, TP0) == {TP0: 120}


def test_a_partition_not_owned_is_never_committed(
    cluster: MockCluster, owned: Owned, store: KafkaOffsetStore
) -> None:
    owned.tps = {TP1}
    assert store.commit({TP0: 5, TP1: 6}) == {TP0: CommitResult.NOT_OWNER, TP1: CommitResult.COMMITTED}
    assert coordinator_view(cluster, TP0, TP1) == {TP0: None, TP1: 6}


def test_a_partition_that_comes_back_is_checked_against_what_another_member_committed(
    cluster: MockCluster, owned: Owned, store: KafkaOffsetStore
) -> None:
    assert store.commit({TP0: 10})[TP0] is CommitResult.COMMITTED
    owned.tps = set()
    assert store.commit({TP0: 11})[TP0] is CommitResult.NOT_OWNER
    other = KafkaOffsetStore.standalone(config(cluster), GROUP, owns=lambda _: True)
    assert other.commit({TP0: 40})[TP0] is CommitResult.COMMITTED
    other.close()
    owned.tps = {TP0}
    assert store.commit({TP0: 25})[TP0] is CommitResult.BACKWARDS
    assert coordinator_view(cluster, TP0) == {TP0: 40}


def test_repair_replaces_only_the_rejected_offset(cluster: MockCluster, store: KafkaOffsetStore) -> None:
    assert store.commit({TP0: 500})[TP0] is CommitResult.COMMITTED
    assert store.repair(TP0, rejected=400, reset_to=0) is CommitResult.CONFLICT
    assert store.repair(TP0, rejected=500, reset_to=3) is CommitResult.COMMITTED
    assert store.repair(TP0, rejected=500, reset_to=3) is CommitResult.UNCHANGED
    assert coordinator_view(cluster, TP0) == {TP0: 3}
    assert store.commit({TP0: 4})[TP0] is CommitResult.COMMITTED


def test_repair_is_refused_for_a_partition_not_owned(owned: Owned, store: KafkaOffsetStore) -> None:
    owned.tps = set()
    assert store.repair(TP0, rejected=5, reset_to=0) is CommitResult.NOT_OWNER


def test_negative_offsets_are_a_caller_error(store: KafkaOffsetStore) -> None:
    with pytest.raises(ValueError, match="negative"):
        store.commit({TP0: -1})


def test_a_given_consumer_is_borrowed_and_a_standalone_one_owned(cluster: MockCluster) -> None:
    consumer = Consumer({**config(cluster), "group.id": GROUP})
    borrowing = KafkaOffsetStore(consumer, GROUP, owns=lambda _: True)
    assert borrowing.commit({TP0: 1})[TP0] is CommitResult.COMMITTED
    borrowing.close()
    assert consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset == 1  # still open
    consumer.close()

    standalone = KafkaOffsetStore.standalone(config(cluster), GROUP, owns=lambda _: True)
    standalone.close()
    standalone.close()  # idempotent
    with pytest.raises(RuntimeError):
        standalone.commit({TP0: 2})


@dataclass
class Answer:
    """A TopicPartition as commit() returns it (confluent-kafka's is read-only)."""

    topic: str
    partition: int
    offset: int
    error: KafkaError | None


class AnsweringConsumer:
    """Only for the per-partition answers the mock cluster cannot give on cue: each commit call
    takes the next scripted answer, a list of (partition, error code or None)."""

    def __init__(self, *answers: list[tuple[int, int | None]] | KafkaError) -> None:
        self.answers = list(answers)
        self.committed_calls: list[list[tuple[int, int]]] = []

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> list[Answer]:
        assert asynchronous is False
        self.committed_calls.append([(tp.partition, tp.offset) for tp in offsets])
        answer = self.answers.pop(0)
        if isinstance(answer, KafkaError):
            raise KafkaException(answer)
        offset_of = {tp.partition: tp.offset for tp in offsets}
        return [
            Answer(TOPIC, partition, offset_of[partition], KafkaError(code) if code is not None else None)
            for partition, code in answer
        ]


def scripted(consumer: AnsweringConsumer) -> KafkaOffsetStore:
    return KafkaOffsetStore(consumer, GROUP, owns=lambda _: True, retry_for_s=5.0)  # type: ignore[arg-type]


def test_only_the_partitions_with_a_retriable_error_are_sent_again() -> None:
    consumer = AnsweringConsumer([(0, None), (1, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)], [(1, None)])
    results = scripted(consumer).commit({TP0: 3, TP1: 4})
    assert results == {TP0: CommitResult.COMMITTED, TP1: CommitResult.COMMITTED}
    assert consumer.committed_calls == [[(0, 3), (1, 4)], [(1, 4)]]


def test_a_generation_that_is_over_refuses_the_partitions_without_retrying() -> None:
    consumer = AnsweringConsumer([(0, KafkaError.ILLEGAL_GENERATION), (1, None)])
    offsets = scripted(consumer)
    assert offsets.commit({TP0: 3, TP1: 4}) == {TP0: CommitResult.NOT_OWNER, TP1: CommitResult.COMMITTED}
    consumer.answers.append(KafkaError(KafkaError.UNKNOWN_MEMBER_ID))
    assert offsets.commit({TP1: 5}) == {TP1: CommitResult.NOT_OWNER}
    assert len(consumer.committed_calls) == 2


def test_a_permanent_partition_error_is_raised() -> None:
    consumer = AnsweringConsumer([(0, KafkaError.OFFSET_METADATA_TOO_LARGE)])
    with pytest.raises(KafkaException) as raised:
        scripted(consumer).commit({TP0: 3})
    assert raised.value.args[0].code() == KafkaError.OFFSET_METADATA_TOO_LARGE
