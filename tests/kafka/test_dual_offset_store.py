"""DualOffsetStore: ZooKeeper first and Kafka only for what ZooKeeper allowed; the larger offset at start."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.offsets.dual import DualOffsetStore
from reliable_kafka.kafka.offsets.store import CommitResult

TP0 = TopicAndPartition("t", 0)
TP1 = TopicAndPartition("t", 1)
TP2 = TopicAndPartition("t", 2)


class RecordingStore:
    """An offset store that answers as scripted and records every call, in a shared log."""

    def __init__(self, name: str, log: list[tuple[str, str, object]]) -> None:
        self.name = name
        self.log = log
        self.held: dict[TopicAndPartition, int | None] = {}
        self.answers: dict[TopicAndPartition, CommitResult] = {}
        self.closed = False

    def fetch(self, partitions: Iterable[TopicAndPartition]) -> dict[TopicAndPartition, int | None]:
        tps = list(partitions)
        self.log.append((self.name, "fetch", tps))
        return {tp: self.held.get(tp) for tp in tps}

    def commit(self, offsets: Mapping[TopicAndPartition, int]) -> dict[TopicAndPartition, CommitResult]:
        self.log.append((self.name, "commit", dict(offsets)))
        return {tp: self.answers.get(tp, CommitResult.COMMITTED) for tp in offsets}

    def repair(self, tp: TopicAndPartition, rejected: int, reset_to: int) -> CommitResult:
        self.log.append((self.name, "repair", (tp, rejected, reset_to)))
        return CommitResult.COMMITTED if self.held.get(tp) == rejected else CommitResult.CONFLICT

    def close(self) -> None:
        self.closed = True


def stores() -> tuple[RecordingStore, RecordingStore, DualOffsetStore, list[tuple[str, str, object]]]:
    log: list[tuple[str, str, object]] = []
    zookeeper, kafka = RecordingStore("zk", log), RecordingStore("kafka", log)
    return zookeeper, kafka, DualOffsetStore(zookeeper, kafka), log  # type: ignore[arg-type]


def test_fetch_takes_the_larger_of_the_two_and_none_only_where_both_have_none() -> None:
    zookeeper, kafka, dual, _ = stores()
    zookeeper.held = {TP0: 40, TP1: 7}
    kafka.held = {TP0: 30, TP1: 9}
    assert dual.fetch([TP0, TP1, TP2]) == {TP0: 40, TP1: 9, TP2: None}
    kafka.held = {TP2: 3}
    assert dual.fetch([TP2]) == {TP2: 3}


def test_commit_goes_to_zookeeper_first_and_kafka_gets_only_what_zookeeper_allowed() -> None:
    zookeeper, _, dual, log = stores()
    zookeeper.answers = {TP1: CommitResult.NOT_OWNER, TP2: CommitResult.CONFLICT}
    results = dual.commit({TP0: 5, TP1: 6, TP2: 7})
    assert results == {TP0: CommitResult.COMMITTED, TP1: CommitResult.NOT_OWNER, TP2: CommitResult.CONFLICT}
    assert log == [("zk", "commit", {TP0: 5, TP1: 6, TP2: 7}), ("kafka", "commit", {TP0: 5})]


def test_nothing_goes_to_kafka_when_zookeeper_refused_every_partition() -> None:
    zookeeper, _, dual, log = stores()
    zookeeper.answers = {TP0: CommitResult.NOT_OWNER}
    assert dual.commit({TP0: 5}) == {TP0: CommitResult.NOT_OWNER}
    assert [entry[0] for entry in log] == ["zk"]


def test_one_answer_per_partition_a_refusal_by_kafka_shows_and_a_catch_up_counts_as_committed() -> None:
    zookeeper, kafka, dual, _ = stores()
    zookeeper.answers = {TP0: CommitResult.UNCHANGED, TP1: CommitResult.UNCHANGED}
    kafka.answers = {TP0: CommitResult.COMMITTED, TP1: CommitResult.BACKWARDS}
    assert dual.commit({TP0: 5, TP1: 5}) == {TP0: CommitResult.COMMITTED, TP1: CommitResult.BACKWARDS}
    kafka.answers = {TP0: CommitResult.UNCHANGED}
    assert dual.commit({TP0: 5}) == {TP0: CommitResult.UNCHANGED}


def test_repair_goes_only_to_the_stores_that_hold_the_rejected_offset() -> None:
    zookeeper, kafka, dual, log = stores()
    zookeeper.held, kafka.held = {TP0: 500}, {TP0: None}
    assert dual.repair(TP0, 500, 0) is CommitResult.COMMITTED
    assert [entry[:2] for entry in log if entry[1] == "repair"] == [("zk", "repair")]
    zookeeper.held, kafka.held = {TP0: 500}, {TP0: 500}
    log.clear()
    assert dual.repair(TP0, 500, 0) is CommitResult.COMMITTED
    assert [entry[:2] for entry in log if entry[1] == "repair"] == [("zk", "repair"), ("kafka", "repair")]
    zookeeper.held, kafka.held = {TP0: 20}, {TP0: 21}
    assert dual.repair(TP0, 500, 0) is CommitResult.CONFLICT


def test_close_closes_both() -> None:
    zookeeper, kafka, dual, _ = stores()
    dual.close()
    assert zookeeper.closed and kafka.closed
